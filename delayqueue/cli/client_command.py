"""What every client command shares: its options, the client built from them, exit codes.

A client command talks to a server over HTTP (``--url`` or ``$DELAYQUEUE_URL``, ``--token``
or ``$DELAYQUEUE_TOKEN``). ``add`` gives each one the same four options and runs it through
``run``, so every command fails the same way: one line on stderr (with ``--json``, one JSON
object on stdout) and an exit code (failure.py lists them).
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any, Callable
from urllib.parse import urlsplit

from delayqueue.client import (
    AccessDeniedError,
    BacklogExceededError,
    BadRequestError,
    DelayMsg,
    DelayQueueClient,
    DelayQueueError,
    MessageConsumingError,
    NotFoundError,
    RateLimitedError,
    ServerError,
    StaleReceiptError,
    UnavailableError,
    UnsupportedError,
)
from delayqueue.client.delay_queue_client import split_urls

from . import display, failure
from .failure import (  # noqa: F401 - the commands import them from here
    EXIT_BACKLOG,
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_STALE,
    EXIT_USAGE,
    fail,
)

URL_ENV_VAR = "DELAYQUEUE_URL"
TOKEN_ENV_VAR = "DELAYQUEUE_TOKEN"
DEFAULT_URL = "http://127.0.0.1:8080"
# A server's error: (exit code, kind for --json, the label the text line starts with).
# Most specific first: BacklogExceededError is no RateLimitedError, but check it first anyway.
SERVER_ERRORS: tuple[tuple[type[DelayQueueError], int, str, str], ...] = (
    (NotFoundError, EXIT_NOT_FOUND, "not_found", "not found"),
    (StaleReceiptError, EXIT_STALE, "stale_receipt", "stale receipt"),
    (MessageConsumingError, EXIT_STALE, "consuming", "being consumed"),
    (BadRequestError, EXIT_USAGE, "bad_request", "rejected"),
    (BacklogExceededError, EXIT_BACKLOG, "backlog_full", "backlog full"),
    (UnavailableError, EXIT_FAILURE, "unreachable", ""),
    (AccessDeniedError, EXIT_FAILURE, "access_denied", ""),
    (RateLimitedError, EXIT_FAILURE, "rate_limited", ""),
    (UnsupportedError, EXIT_FAILURE, "unsupported", ""),
    (ServerError, EXIT_FAILURE, "server_error", ""),
)

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
    common.add_argument("--url", help=f"server URL(s), comma-separated (default: ${URL_ENV_VAR} or "
                             f"{DEFAULT_URL})")
    common.add_argument("--token", default=os.environ.get(TOKEN_ENV_VAR) or None,
                        help=f"API token where the server has authentication on (default: "
                             f"${TOKEN_ENV_VAR}; prefer the variable: arguments show in ps)")
    common.add_argument("--json", action="store_true",
                        help="print JSON for scripts: the answer, or on failure "
                             "{\"error\": {...}}, on stdout (same exit codes)")
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


def topic_arg(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The TOPIC argument of a command on one topic."""
    parser.add_argument("topic", help="the topic's name")
    return parser


def msg_ref(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The TOPIC MSG_ID arguments of a command on one message."""
    topic_arg(parser)
    parser.add_argument("msg_id", metavar="MSG_ID", help="the message's msgId")
    return parser


def subscription_opt(parser: argparse.ArgumentParser,
                     help_: str = "the named subscription to act in (default: the topic's "
                                  "default subscription)") -> argparse.ArgumentParser:
    """The ``--subscription NAME`` option of a command that consumes or inspects deliveries."""
    parser.add_argument("--subscription", metavar="NAME", help=help_)
    return parser


def server_urls(given: str | None) -> list[str]:
    """The server URLs of ``--url``, else of $DELAYQUEUE_URL, else the default: each must be
    http:// or https:// with a host. A URL without its scheme is refused, not completed: a
    guessed http:// would send the token in clear to a server that speaks https.

    Raises:
        ValueError: naming where the URL came from and what is wrong with it.
    """
    source, text = ("--url", given) if given is not None else \
        (f"${URL_ENV_VAR}", os.environ.get(URL_ENV_VAR)) if os.environ.get(URL_ENV_VAR) else \
        ("the default URL", DEFAULT_URL)
    urls = split_urls(text)
    if not urls:
        raise ValueError(f"{source}: no server URL given (e.g. {DEFAULT_URL})")
    for url in urls:
        if "://" not in url:
            raise ValueError(f"{source}: {url!r} has no scheme: write http://{url} "
                             "(or https://)")
        parts = urlsplit(url)
        if parts.scheme.lower() not in ("http", "https"):
            raise ValueError(f"{source}: {url!r}: the scheme must be http or https, got "
                             f"{parts.scheme!r}")
        try:
            parts.port  # noqa: B018 - raises on a port that is not a number in range
        except ValueError:
            raise ValueError(f"{source}: {url!r}: the port is not a number from 0 to "
                             "65535") from None
        if not parts.hostname:
            raise ValueError(f"{source}: {url!r} names no host")
    return urls


def run(func: Command, args: argparse.Namespace) -> int:
    """Call a command; turn expected failures into one line on stderr (with --json, one
    JSON object on stdout) and an exit code."""
    failure.set_json(args.json)
    try:
        urls = server_urls(args.url)
        with DelayQueueClient(urls, timeout=args.timeout, token=args.token) as client:
            return func(client, args)
    except DelayQueueError as exc:
        return server_failure(exc)
    except ValueError as exc:
        return fail(str(exc), EXIT_USAGE)
    except KeyboardInterrupt:
        return fail("interrupted", EXIT_INTERRUPTED) if args.json else EXIT_INTERRUPTED


def server_failure(exc: DelayQueueError) -> int:
    """Report a server's error (or its absence) with its exit code. The text line starts
    with a label ("stale receipt: ...") unless the server's message already says it."""
    exit_code, kind, label = next(((e, k, label) for cls, e, k, label in SERVER_ERRORS
                                   if isinstance(exc, cls)), (EXIT_FAILURE, "failure", ""))
    text = str(exc) if not label or label in exc.msg else f"{label}: {exc}"
    return fail(exc.msg, exit_code, kind=kind, code=exc.code, text=text)


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
    """Print what became of message TOPIC/MSG_ID: ``acked``, ``deleted``... (in the
    ``--subscription`` given, if any)."""
    subscription = getattr(args, "subscription", None)
    if args.json:
        print_json({"topic": args.topic, "msgId": args.msg_id, "result": verb,
                    **({"subscription": subscription} if subscription else {})})
    else:
        print(f"{verb} {args.topic}/{args.msg_id}"
              + (f" in subscription {subscription}" if subscription else ""))
    return EXIT_OK
