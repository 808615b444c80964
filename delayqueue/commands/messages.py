"""Client commands: send, pull, long-poll, ack, nack, get, delete, topics, topic-info,
monitor and consume, talking to a server over HTTP (``--url`` or ``$DELAYQUEUE_URL``).

Exit codes: 0 success, 1 server unreachable or failing (code 500), 2 bad arguments (ours or
the server's code 400), 3 no such message (code 404, or ``get`` of an absent message).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import sys
import threading
from typing import Any, Callable

from delayqueue.client import (
    BadRequestError,
    DelayMsg,
    DelayQueueClient,
    DelayQueueError,
    NotFoundError,
)
from delayqueue.client import display
from delayqueue.client.command import CommandHandler

URL_ENV_VAR = "DELAYQUEUE_URL"
DEFAULT_URL = "http://127.0.0.1:8080"
EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_NOT_FOUND = 0, 1, 2, 3


def _duration(text: str) -> int:
    try:
        return display.parse_duration_ms(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _time(text: str) -> int:
    try:
        return display.parse_time_ms(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", default=os.environ.get(URL_ENV_VAR) or DEFAULT_URL,
                        help=f"server URL(s), comma-separated (default: ${URL_ENV_VAR} or "
                             f"{DEFAULT_URL})")
    common.add_argument("--json", action="store_true", help="print JSON for scripts")
    common.add_argument("--timeout", type=float, default=10.0, metavar="S",
                        help="HTTP read timeout in seconds (default 10)")
    return common


def register(subparsers: Any) -> None:
    common = [_common()]

    def add(name: str, func: Callable[..., int], help_: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = subparsers.add_parser(
            name, parents=common, help=help_, description=help_)
        parser.set_defaults(func=lambda args: _run(func, args))
        return parser

    def msg_ref(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("topic")
        parser.add_argument("msg_id", metavar="MSG_ID")

    p = add("send", cmd_send, "send a message (MSG '-' reads the body from stdin)")
    p.add_argument("topic")
    p.add_argument("msg", metavar="MSG")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--delay", type=_duration, default=0, metavar="DUR",
                      help="due after this long: 1500 (ms), 500ms, 10s, 4m, 1h30m")
    when.add_argument("--at", type=_time, metavar="TIME", help="due at: ISO date-time or epoch ms")
    p.add_argument("--id", dest="msg_id", metavar="MSG_ID", help="msgId (default generated)")
    p.add_argument("--ttl", type=_duration, metavar="DUR", help="ttl after the trigger time")
    p.add_argument("--max-retry", type=int, metavar="N", help="redeliveries allowed")

    for name, help_ in (("pull", "take ready messages now (they must then be acked)"),
                        ("long-poll", "wait for ready messages (they must then be acked)")):
        p = add(name, cmd_pull, help_)
        p.add_argument("topic")
        p.add_argument("--batch", type=int, default=1, metavar="N")
        p.add_argument("--ack-timeout", type=_duration, metavar="DUR")
        if name == "long-poll":
            p.add_argument("--wait", type=_duration, metavar="DUR",
                           help="longest hold (server default 10s, at most 60s)")
        p.set_defaults(long_poll=name == "long-poll")

    msg_ref(add("ack", cmd_ack, "acknowledge a delivered message"))
    msg_ref(add("nack", cmd_nack, "hand a delivered message back for redelivery"))
    msg_ref(add("get", cmd_get, "show a message and its status"))
    p = add("delete", cmd_delete, "delete a message")
    msg_ref(p)
    p.add_argument("--release", action="store_true", help="also drop its body at once")
    add("topics", cmd_topics, "list topics with their queue sizes")
    add("topic-info", cmd_topic_info, "queue sizes of one topic").add_argument("topic")
    add("monitor", cmd_monitor, "request counts and delays of the last monitoring interval")

    p = add("consume", cmd_consume, "run COMMAND per message with the body on stdin; exit 0 "
            "acks, anything else nacks (Ctrl-C stops gracefully)")
    p.add_argument("topic")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND ...",
                   help="the command and its arguments, after --")
    p.add_argument("--pull-threads", type=int, default=1, metavar="N")
    p.add_argument("--consume-threads", type=int, default=1, metavar="N",
                   help="commands run at once (default 1)")
    p.add_argument("--batch", type=int, default=1, metavar="N")
    p.add_argument("--ack-timeout", type=_duration, default=30_000, metavar="DUR",
                   help="ack timeout of each delivery (default 30s)")
    p.add_argument("--command-timeout", type=_duration, metavar="DUR",
                   help="kill and nack a command running longer (default: never)")
    p.add_argument("--short-polling", action="store_true", help="pull every 100ms instead "
                   "of long polling")
    p.add_argument("--max-messages", type=int, metavar="N",
                   help="exit after handling N messages")
    p.add_argument("--grace", type=_duration, default=30_000, metavar="DUR",
                   help="on stop, how long running commands may finish (default 30s)")
    p.add_argument("-v", "--verbose", action="store_true", help="log every ack and nack")
    p.set_defaults(consume_parser=p)


def _run(func: Callable[[DelayQueueClient, argparse.Namespace], int],
         args: argparse.Namespace) -> int:
    """Call a command; turn expected failures into one line on stderr and an exit code."""
    if getattr(args, "consume_parser", None) and "--" in args.command:
        # argparse puts options given after TOPIC into the command too: parse them now.
        given = args.command
        cut = given.index("--")
        if cut:
            args.consume_parser.parse_args([*given[:cut], args.topic], namespace=args)
        args.command = given[cut + 1:]
    try:
        with DelayQueueClient(args.url, timeout=args.timeout) as client:
            return func(client, args)
    except NotFoundError as exc:
        return _fail(f"not found: {exc}", EXIT_NOT_FOUND)
    except BadRequestError as exc:
        return _fail(f"rejected: {exc}", EXIT_USAGE)
    except DelayQueueError as exc:
        return _fail(str(exc), EXIT_FAILURE)
    except ValueError as exc:
        return _fail(str(exc), EXIT_USAGE)
    except KeyboardInterrupt:
        return 130


def _fail(message: str, code: int) -> int:
    print(f"delayqueue: error: {message}", file=sys.stderr)
    return code


def _print_json(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False, indent=2))


def _msg_json(m: DelayMsg) -> dict[str, Any]:
    return {**m.to_json(), "duplicate": True} if m.duplicate else m.to_json()


def cmd_send(client: DelayQueueClient, args: argparse.Namespace) -> int:
    body = sys.stdin.read() if args.msg == "-" else args.msg
    sent = client.send(args.topic, body, delay_ms=args.delay if args.at is None else 0,
                       trigger_time=args.at, msg_id=args.msg_id, ttl_ms=args.ttl,
                       max_retry=args.max_retry)
    if args.json:
        _print_json(_msg_json(sent))
    else:
        print(display.message_detail(sent))
    return EXIT_OK


def cmd_pull(client: DelayQueueClient, args: argparse.Namespace) -> int:
    if args.long_poll:
        messages = client.long_poll(args.topic, args.batch, timeout_ms=args.wait,
                                    ack_timeout_ms=args.ack_timeout)
    else:
        messages = client.pull(args.topic, args.batch, ack_timeout_ms=args.ack_timeout)
    if args.json:
        _print_json([m.to_json() for m in messages])
    else:
        print(display.message_table(messages))
    return EXIT_OK


def _settled(args: argparse.Namespace, verb: str) -> int:
    if args.json:
        _print_json({"topic": args.topic, "msgId": args.msg_id, "result": verb})
    else:
        print(f"{verb} {args.topic}/{args.msg_id}")
    return EXIT_OK


def cmd_ack(client: DelayQueueClient, args: argparse.Namespace) -> int:
    client.ack(args.topic, args.msg_id)
    return _settled(args, "acked")


def cmd_nack(client: DelayQueueClient, args: argparse.Namespace) -> int:
    client.nack(args.topic, args.msg_id)
    return _settled(args, "nacked")


def cmd_delete(client: DelayQueueClient, args: argparse.Namespace) -> int:
    client.delete(args.topic, args.msg_id, release=args.release)
    return _settled(args, "deleted and released" if args.release else "deleted")


def cmd_get(client: DelayQueueClient, args: argparse.Namespace) -> int:
    found = client.get(args.topic, args.msg_id)
    if found is None:
        return _fail(f"no message {args.topic}/{args.msg_id}", EXIT_NOT_FOUND)
    if args.json:
        _print_json(found.to_json())
    else:
        print(display.message_detail(found))
    return EXIT_OK


def cmd_topics(client: DelayQueueClient, args: argparse.Namespace) -> int:
    infos = client.topics()
    if args.json:
        _print_json([t.raw for t in infos])
    else:
        print(display.topics_table(infos))
    return EXIT_OK


def cmd_topic_info(client: DelayQueueClient, args: argparse.Namespace) -> int:
    info = client.topic_info(args.topic)
    if args.json:
        _print_json(info.raw)
    else:
        print(display.topic_detail(info))
    return EXIT_OK


def cmd_monitor(client: DelayQueueClient, args: argparse.Namespace) -> int:
    data = client.monitor_data()
    if args.json:
        _print_json(data.raw)
    else:
        print(display.monitor_text(data))
    return EXIT_OK


def cmd_consume(client: DelayQueueClient, args: argparse.Namespace) -> int:
    command = args.command
    if command and command[0].startswith("-"):
        return _fail(f"unknown option {command[0]}; the command goes after --", EXIT_USAGE)
    if not command:
        return _fail("consume needs a command: delayqueue consume TOPIC -- COMMAND ...",
                     EXIT_USAGE)
    if shutil.which(command[0]) is None:
        return _fail(f"command not found: {command[0]}", EXIT_USAGE)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="delayqueue consume: %(message)s", stream=sys.stderr)
    client.topic_info(args.topic)  # fail fast, with one line, when the server is unreachable
    handler = CommandHandler(command, None if args.command_timeout is None
                             else args.command_timeout / 1000)
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set())
                for sig in (signal.SIGINT, signal.SIGTERM)}
    consumer = client.listen(args.topic, handler, pull_threads=args.pull_threads,
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
        _print_json({"acked": consumer.acked, "nacked": consumer.nacked})
    return EXIT_OK
