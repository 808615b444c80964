"""Subcommands of the delayqueue CLI."""
