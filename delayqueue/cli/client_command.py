"""What every client command shares: its options, the client built from them, exit codes.

A client command talks to a server over HTTP (``--url`` or ``$DELAYQUEUE_URL``, ``--token``
or ``$DELAYQUEUE_TOKEN``). ``add`` gives each one the same four options and runs it through
``run``, so every command fails the same way: one line on stderr and an exit code.

Exit codes: 0 success, 1 server unreachable or failing (code 500), 2 bad arguments (ours or
the server's code 400), 3 no such message (code 404, or ``get`` of an absent message),
4 stale receipt (code 409: the message was delivered again since that receipt), 5 the
topic's backlog is full (code 429 answering a send: nothing written, try again later), 130
interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Callable

from delayqueue.client import (
    BacklogExceededError,
    BadRequestError,
    DelayMsg,
    DelayQueueClient,
    DelayQueueError,
    NotFoundError,
    StaleReceiptError,
)

from . import display

URL_ENV_VAR = "DELAYQUEUE_URL"
TOKEN_ENV_VAR = "DELAYQUEUE_TOKEN"
DEFAULT_URL = "http://127.0.0.1:8080"
EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_STALE, EXIT_BACKLOG = 0, 1, 2, 3, 4, 5
EXIT_INTERRUPTED = 130  # as a shell reports a command stopped by SIGINT

Command = Callable[[DelayQueueClient, argparse.Namespace], int]


def duration(text: str) -> int:
    """An argument type: ``1500`` (ms), ``500ms``, ``10s``, ``1h30m`` -> milliseconds."""
    try:
        return display.parse_duration_ms(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def timestamp(text: str) -> int:
    """An argument type: epoch milliseconds or an ISO date-time -> epoch milliseconds."""
    try:
        return display.parse_time_ms(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def key_value(text: str) -> tuple[str, str]:
    """An argument type: ``KEY=VALUE`` -> (KEY, VALUE); the value may be empty, the key not."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"not key=value: {text!r}")
    return key, value


def positive(text: str) -> int:
    """An argument type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _options() -> argparse.ArgumentParser:
    """The options of every client command (a parent parser: defaults read the environment)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", default=os.environ.get(URL_ENV_VAR) or DEFAULT_URL,
                        help=f"server URL(s), comma-separated (default: ${URL_ENV_VAR} or "
                             f"{DEFAULT_URL})")
    common.add_argument("--token", default=os.environ.get(TOKEN_ENV_VAR) or None,
                        help=f"API token where the server has authentication on (default: "
                             f"${TOKEN_ENV_VAR}; prefer the variable: arguments show in ps)")
    common.add_argument("--json", action="store_true", help="print JSON for scripts")
    common.add_argument("--timeout", type=float, default=10.0, metavar="S",
                        help="HTTP read timeout in seconds (default 10)")
    return common


def add(where: Any, name: str, func: Command, help_: str,
        aliases: tuple[str, ...] = ()) -> argparse.ArgumentParser:
    """Add client command ``name`` to the subparsers ``where``; it runs ``func`` by ``run``."""
    parser: argparse.ArgumentParser = where.add_parser(
        name, parents=[_options()], help=help_, description=help_, aliases=list(aliases))
    parser.set_defaults(func=lambda args: run(func, args))
    return parser


def msg_ref(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The TOPIC MSG_ID arguments of a command on one message."""
    parser.add_argument("topic")
    parser.add_argument("msg_id", metavar="MSG_ID")
    return parser


def run(func: Command, args: argparse.Namespace) -> int:
    """Call a command; turn expected failures into one line on stderr and an exit code."""
    try:
        with DelayQueueClient(args.url, timeout=args.timeout, token=args.token) as client:
            return func(client, args)
    except NotFoundError as exc:
        return fail(f"not found: {exc}", EXIT_NOT_FOUND)
    except StaleReceiptError as exc:
        return fail(f"stale receipt: {exc}", EXIT_STALE)
    except BadRequestError as exc:
        return fail(f"rejected: {exc}", EXIT_USAGE)
    except BacklogExceededError as exc:
        return fail(f"backlog full: {exc}", EXIT_BACKLOG)
    except DelayQueueError as exc:
        return fail(str(exc), EXIT_FAILURE)
    except ValueError as exc:
        return fail(str(exc), EXIT_USAGE)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def fail(message: str, code: int) -> int:
    """Print the one line of a failed command and return its exit code."""
    print(f"delayqueue: error: {message}", file=sys.stderr)
    return code


def print_json(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False, indent=2))


def show(args: argparse.Namespace, m: DelayMsg) -> int:
    """Print a message, in detail or as JSON."""
    if args.json:
        print_json(m.to_json())
    else:
        print(display.message_detail(m))
    return EXIT_OK


def settled(args: argparse.Namespace, verb: str) -> int:
    """Print what became of message TOPIC/MSG_ID: ``acked``, ``deleted``..."""
    if args.json:
        print_json({"topic": args.topic, "msgId": args.msg_id, "result": verb})
    else:
        print(f"{verb} {args.topic}/{args.msg_id}")
    return EXIT_OK
