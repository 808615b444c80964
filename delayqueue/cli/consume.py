"""``delayqueue consume``: run a command per message, body on stdin; exit 0 acks it.

The command runs in a Consumer of the SDK (``CommandHandler``); consume itself only starts
it, waits, and on SIGINT or SIGTERM stops it gracefully.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import signal
import sys
import threading
from typing import Any

from delayqueue.client import DelayQueueClient

from .client_command import (
    EXIT_OK,
    EXIT_USAGE,
    add,
    duration,
    fail,
    positive,
    print_json,
    run,
    subscription_opt,
    topic_arg,
)
from .command import CommandHandler


def register(subparsers: Any) -> None:
    p = add(subparsers, "consume", cmd_consume, "run COMMAND per message with the body on "
            "stdin; exit 0 acks, anything else nacks (Ctrl-C stops gracefully)")
    topic_arg(p)
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND ...",
                   help="the command and its arguments, after --")
    p.add_argument("--pull-threads", type=int, default=1, metavar="N",
                   help="threads pulling messages (default 1)")
    p.add_argument("--consume-threads", type=int, default=1, metavar="N",
                   help="commands run at once (default 1)")
    p.add_argument("--batch", type=positive, metavar="N",
                   help="most messages per pull (default: as many as idle consume threads)")
    p.add_argument("--ack-timeout", type=duration, default=30_000, metavar="DUR",
                   help="ack timeout of each delivery (default 30s); a command running "
                        "longer has it extended every half ack timeout until it exits")
    p.add_argument("--command-timeout", type=duration, metavar="DUR",
                   help="kill and nack a command running longer (default: never)")
    p.add_argument("--short-polling", action="store_true", help="pull every 100ms instead "
                   "of long polling")
    p.add_argument("--max-messages", type=int, metavar="N",
                   help="exit after handling N messages")
    p.add_argument("--grace", type=duration, default=30_000, metavar="DUR",
                   help="on stop, how long running commands may finish (default 30s)")
    subscription_opt(p, "consume this named subscription, which gets its own copy of every "
                        "message (default: the topic's default subscription)")
    p.add_argument("-v", "--verbose", action="store_true", help="log every ack and nack")
    p.set_defaults(func=lambda args: run(cmd_consume, _command_after_dashes(p, args)))


def _command_after_dashes(parser: argparse.ArgumentParser,
                          args: argparse.Namespace) -> argparse.Namespace:
    """``consume TOPIC --opt ... -- COMMAND``: argparse put ``--opt ...`` into the command
    too (it is REMAINDER); parse them as consume's options and keep what follows ``--``."""
    if "--" in args.command:
        given = args.command
        cut = given.index("--")
        if cut:
            parser.parse_args([*given[:cut], args.topic], namespace=args)
        args.command = given[cut + 1:]
    return args


def cmd_consume(client: DelayQueueClient, args: argparse.Namespace) -> int:
    command = args.command
    if command and command[0].startswith("-"):
        return fail(f"unknown option {command[0]}; the command goes after --", EXIT_USAGE)
    if not command:
        return fail("consume needs a command: delayqueue consume TOPIC -- COMMAND ...",
                    EXIT_USAGE)
    if shutil.which(command[0]) is None:
        return fail(f"command not found: {command[0]}", EXIT_USAGE)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="delayqueue consume: %(message)s", stream=sys.stderr)
    client.topic_info(args.topic)  # fail fast, with one line, when the server is unreachable
    if args.subscription:  # and when the subscription is unknown (exit 3), not retry for ever
        config = client.get_subscription_config(args.topic, args.subscription)
        if config.is_push:  # the server refuses its pulls (400): say so once, not for ever
            return fail(f"subscription {args.subscription} is a push subscription: its "
                        f"deliveries are POSTed to {config.push_url}", EXIT_USAGE)
    handler = CommandHandler(command, None if args.command_timeout is None
                             else args.command_timeout / 1000, subscription=args.subscription)
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set())
                for sig in (signal.SIGINT, signal.SIGTERM)}
    consumer = client.listen(args.topic, handler, subscription=args.subscription,
                             pull_threads=args.pull_threads,
                             consume_threads=args.consume_threads, batch=args.batch,
                             ack_timeout_ms=args.ack_timeout,
                             long_polling=not args.short_polling, limit=args.max_messages)
    try:
        while not stop.is_set() and not consumer.wait(0.2):
            pass
    finally:
        consumer.stop(grace_s=args.grace / 1000)
        for sig, old in previous.items():
            signal.signal(sig, old)
    if not args.json:
        print(f"consumed {consumer.acked + consumer.nacked} message(s): "
              f"{consumer.acked} acked, {consumer.nacked} nacked", file=sys.stderr)
    else:
        print_json({"acked": consumer.acked, "nacked": consumer.nacked})
    return EXIT_OK
