"""The ``delayqueue`` command: ``serve``, ``report``, ``migrate-storage`` and the client commands.

Each module named in COMMAND_MODULES holds one command or one area of client commands and
exposes ``register(subparsers)``, which adds their parsers and sets ``func`` to a callable
taking the parsed namespace and returning an exit code. The client commands share their
options, their client and their exit codes through ``client_command``; every command fails
as failure.py says (a bad argument too: the parsers raise instead of exiting).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

from delayqueue import __version__

from . import failure

# Modules under delayqueue.cli, each providing register(subparsers), in the order of --help.
COMMAND_MODULES = ("serve", "report", "send", "delivery", "message", "topic", "topic_control",
                   "subscription", "schedule", "dead_letter", "monitor", "consume", "migrate")


def build_parser() -> argparse.ArgumentParser:
    parser = failure.Parser(
        prog="delayqueue", description="HTTP delay-queue server speaking camellia's API."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}",
                        help="print the version of this delayqueue and exit")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        module = importlib.import_module(f"delayqueue.cli.{name}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    failure.set_json(failure.wants_json(argv))
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "func", None):
            parser.print_help()
            return 2
        return int(args.func(args) or 0)
    except failure.UsageError as exc:  # also raised by consume, re-parsing its options
        return exc.report()
