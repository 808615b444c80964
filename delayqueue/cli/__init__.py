"""The ``delayqueue`` command: ``serve``, ``report`` and the client commands.

Each subcommand lives in its own module under ``delayqueue.cli`` and exposes
``register(subparsers)``, which adds its parser and sets ``func`` to a callable taking the
parsed namespace and returning an exit code.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Sequence

# Modules under delayqueue.cli, each providing register(subparsers).
COMMAND_MODULES = ("serve", "report", "messages", "migrate")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="delayqueue", description="HTTP delay-queue server speaking camellia's API."
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        module = importlib.import_module(f"delayqueue.cli.{name}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return int(args.func(args) or 0)

