"""How a failed command says so, and with which exit code.

Without ``--json``: one line on stderr, ``delayqueue: error: ...`` (argparse's usage line
first, for a bad argument). With ``--json``: one JSON object on stdout, ``{"error": {...}}``,
so that a script reads one stream and one shape whatever happened; stderr stays for progress.
The exit code is the same either way.

Exit codes: 0 success, 1 server unreachable or failing (code 500, a refused token), 2 bad
arguments (ours or the server's code 400), 3 no such message or topic (code 404), 4 stale
receipt (code 409), 5 the topic's backlog is full (code 429 answering a send), 130
interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, NoReturn, Sequence

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_STALE, EXIT_BACKLOG = 0, 1, 2, 3, 4, 5
EXIT_INTERRUPTED = 130  # as a shell reports a command stopped by SIGINT

# The error's kind when the caller names none: by exit code.
KINDS = {EXIT_FAILURE: "failure", EXIT_USAGE: "usage", EXIT_NOT_FOUND: "not_found",
         EXIT_STALE: "stale_receipt", EXIT_BACKLOG: "backlog_full",
         EXIT_INTERRUPTED: "interrupted"}

_as_json = [False]  # this process's one command: whether it prints its errors as JSON


def set_json(on: bool) -> None:
    _as_json[0] = bool(on)


def wants_json(argv: Sequence[str]) -> bool:
    """Whether ``--json`` is among the options (not after ``--``, which starts consume's
    command): known before parsing, so a bad argument is reported as JSON too."""
    options = list(argv)
    if "--" in options:
        options = options[:options.index("--")]
    return "--json" in options


def error_object(message: str, exit_code: int, kind: str | None = None,
                 code: int | None = None) -> dict[str, Any]:
    """The ``error`` of a JSON failure: ``kind`` (a word for scripts), ``message`` (as the
    text line says it), ``code`` (the server's envelope code, null when none answered) and
    ``exitCode``."""
    return {"kind": kind or KINDS.get(exit_code, "failure"), "message": message,
            "code": code, "exitCode": exit_code}


def fail(message: str, exit_code: int, *, kind: str | None = None, code: int | None = None,
         text: str | None = None) -> int:
    """Report a failed command and return its exit code. ``text`` is the line without
    --json when it differs from ``message`` (a server's error adds its code there)."""
    if _as_json[0]:
        print(json.dumps({"error": error_object(message, exit_code, kind, code)},
                         ensure_ascii=False, indent=2))
    else:
        print(f"delayqueue: error: {text or message}", file=sys.stderr)
    return exit_code


class UsageError(Exception):
    """argparse refused the arguments: raised instead of its exit, so that main reports it
    as every other failure (text as argparse does, or JSON)."""

    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser = parser
        self.message = message

    def report(self) -> int:
        if _as_json[0]:
            return fail(f"{self.parser.prog}: {self.message}", EXIT_USAGE)
        self.parser.print_usage(sys.stderr)
        print(f"{self.parser.prog}: error: {self.message}", file=sys.stderr)
        return EXIT_USAGE


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors raise UsageError (its subparsers are of its class)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(self, message)


# Our own top-level packages: a module of theirs missing is a broken install, not an extra.
OWN_PACKAGES = ("delayqueue", "spark_jobs")


def extra_line(what: str, extra: str, error: ModuleNotFoundError) -> str:
    """``what`` needs ``extra``, in one line naming the missing module: what a command (below)
    and the testing helpers (delayqueue/testing.py) say when an extra is not installed.

    Raises:
        ModuleNotFoundError: ``error`` itself, when the missing module is one of our own (a
        broken install, not a missing extra).
    """
    if (error.name or "").split(".")[0] in OWN_PACKAGES:
        raise error
    return f"{what} needs `pip install 'delayqueue[{extra}]'` (no module named {error.name!r})"


def missing_extra(what: str, extra: str, error: ModuleNotFoundError) -> int:
    """A command whose extra is not installed says which one in one line (exit 1): the
    client commands come with ``pip install delayqueue``, ``serve`` and ``migrate-storage``
    with the ``server`` extra, ``report`` with the ``report`` extra (``extra_line``)."""
    return fail(extra_line(what, extra, error), EXIT_FAILURE, kind="missing_extra")
