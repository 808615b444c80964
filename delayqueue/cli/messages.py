"""Client commands: send (one message, or a JSON Lines file in batches), pull, long-poll,
ack, nack, change-visibility (extend), reschedule, get, delete, topics, topic-info,
topic-config, dlq (list, redrive, purge), monitor and consume, talking to a server over
HTTP (``--url`` or ``$DELAYQUEUE_URL``); exit codes as in ``client_command``. ``send
--file`` exits 2 when lines were refused (invalid, or code 400) and 1 when the server failed
(code 500, or unreachable: it stops at the first request that fails as a whole).
"""

from __future__ import annotations

import argparse
import logging
import shutil
import signal
import sys
import threading
import time
from contextlib import nullcontext
from typing import Any, BinaryIO

from delayqueue.cli.command import CommandHandler
from delayqueue.client import DelayMsg, DelayQueueClient, TopicConfig
from delayqueue.client.model import TOPIC_SETTINGS, setting_name
from delayqueue.settings.value import ValueProblem, parse_bool

from . import bulk, client_command, display
from .client_command import (
    EXIT_FAILURE,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    Command,
    duration,
    fail,
    key_value,
    msg_ref,
    positive,
    print_json,
    run,
    settled,
    show,
    timestamp,
)

REDRIVE_CHUNK = 1000  # dead letters one redriveDeadMsg call moves, at most (the server's limit)
SEND_BATCH = 1000  # the server's most entries per sendMsgBatch request
PROGRESS_EVERY_S = 1.0  # send --file: the longest between two progress lines on stderr


def _setting(key: str, text: str) -> tuple[str, Any]:
    """``--set key=value``: the SDK name and the typed value (durations as for --delay)."""
    name = setting_name(key.strip())
    text = text.strip()
    if name == "dead_letter":
        try:
            return name, parse_bool(text)
        except ValueProblem:
            raise ValueError(f"{key}: not a boolean: {text!r} (use on/off, true/false)") from None
    if name == "redelivery_backoff_multiplier":
        try:
            return name, float(text)
        except ValueError:
            raise ValueError(f"{key}: not a number: {text!r}") from None
    if name.endswith("_ms"):
        return name, display.parse_duration_ms(text)
    try:
        return name, int(text)
    except ValueError:
        raise ValueError(f"{key}: not a whole number: {text!r}") from None


def register(subparsers: Any) -> None:
    def add(name: str, func: Command, help_: str, aliases: tuple[str, ...] = (),
            where: Any = subparsers) -> argparse.ArgumentParser:
        return client_command.add(where, name, func, help_, aliases)

    def receipt(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
        parser.add_argument("--receipt", metavar="RECEIPT",
                            help="the delivery's receipt (from pull); refused with exit 4 "
                                 "when the message was delivered again since")
        return parser

    p = add("send", cmd_send, "send a message (MSG '-' reads the body from stdin), or every "
            "line of a JSON Lines file in batches (--file)")
    p.add_argument("topic")
    p.add_argument("msg", metavar="MSG", nargs="?")
    p.add_argument("--file", metavar="PATH",
                   help="JSON Lines: one sendMsgBatch entry per line ({\"msg\": ..., "
                        "\"msgId\": ..., \"delayMillis\": ..., \"triggerTime\": ..., "
                        "\"ttlMillis\": ..., \"maxRetry\": ..., \"attributes\": {...}}), "
                        "'-' for stdin; --delay, --at, --ttl, --max-retry and --attr fill in "
                        "what a line leaves out")
    p.add_argument("--batch-size", type=positive, default=SEND_BATCH, metavar="N",
                   help=f"with --file, entries per request (default and most {SEND_BATCH})")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--delay", type=duration, default=0, metavar="DUR",
                      help="due after this long: 1500 (ms), 500ms, 10s, 4m, 1h30m")
    when.add_argument("--at", type=timestamp, metavar="TIME",
                      help="due at: ISO date-time or epoch ms")
    p.add_argument("--id", dest="msg_id", metavar="MSG_ID", help="msgId (default generated)")
    p.add_argument("--ttl", type=duration, metavar="DUR", help="ttl after the trigger time")
    p.add_argument("--max-retry", type=int, metavar="N", help="redeliveries allowed")
    p.add_argument("--attr", type=key_value, action="append", default=[],
                   metavar="KEY=VALUE", help="a message attribute (repeatable)")

    for name, help_ in (("pull", "take ready messages now (they must then be acked)"),
                        ("long-poll", "wait for ready messages (they must then be acked)")):
        p = add(name, cmd_pull, help_)
        p.add_argument("topic")
        p.add_argument("--batch", type=int, default=1, metavar="N")
        p.add_argument("--ack-timeout", type=duration, metavar="DUR")
        if name == "long-poll":
            p.add_argument("--wait", type=duration, metavar="DUR",
                           help="longest hold (server default 10s, at most 60s)")
        p.set_defaults(long_poll=name == "long-poll")

    receipt(msg_ref(add("ack", cmd_ack, "acknowledge a delivered message")))
    p = receipt(msg_ref(add("nack", cmd_nack, "hand a delivered message back for redelivery")))
    p.add_argument("--delay", type=duration, metavar="DUR",
                   help="redeliver no earlier than this (default: the topic's backoff)")
    p = receipt(msg_ref(add("change-visibility", cmd_change_visibility,
                            "set a delivered message's ack deadline to now + ACK_TIMEOUT "
                            "(0 gives it back at once)", aliases=("extend",))))
    p.add_argument("ack_timeout", type=duration, metavar="ACK_TIMEOUT",
                   help="e.g. 30s, 5m, 0")
    p = msg_ref(add("reschedule", cmd_reschedule,
                    "move a waiting or ready message to a new due time"))
    when = p.add_mutually_exclusive_group(required=True)
    when.add_argument("--delay", type=duration, metavar="DUR", help="due after this long "
                      "from now (0: now)")
    when.add_argument("--at", type=timestamp, metavar="TIME", help="due at: ISO date-time or "
                      "epoch ms")
    msg_ref(add("get", cmd_get, "show a message and its status"))
    p = add("delete", cmd_delete, "delete a message")
    msg_ref(p)
    p.add_argument("--release", action="store_true", help="also drop its body at once")
    add("topics", cmd_topics, "list topics with their queue sizes")
    add("topic-info", cmd_topic_info, "queue sizes of one topic").add_argument("topic")
    p = add("topic-config", cmd_topic_config, "show or change a topic's settings (value and "
            "source: topic or server default)")
    p.add_argument("topic")
    p.add_argument("--set", dest="settings", type=key_value, action="append", default=[],
                   metavar="KEY=VALUE", help="set a setting (repeatable): "
                   + ", ".join(TOPIC_SETTINGS.values())
                   + "; durations as 1500, 10s, 1h; also snake_case (ttl_ms)")
    p.add_argument("--reset", action="store_true",
                   help="first drop every value set on the topic (back to server defaults)")

    dlq = subparsers.add_parser("dlq", help="dead letters: list, redrive, purge",
                                description="a topic's dead-letter queue: messages that ran "
                                            "out of deliveries or life")
    actions = dlq.add_subparsers(dest="dlq_action", metavar="ACTION", required=True)
    p = add("list", cmd_dlq_list, "list dead letters, oldest death first", where=actions)
    p.add_argument("topic")
    p.add_argument("--limit", type=positive, default=100, metavar="N",
                   help="page size (default 100, at most 1000)")
    p.add_argument("--cursor", metavar="CURSOR", help="the next page, from a previous list")
    p.add_argument("--all", action="store_true", help="every page")
    p = add("redrive", cmd_dlq_redrive, "put dead letters back to ready (retry 0, due now)",
            where=actions)
    p.add_argument("topic")
    p.add_argument("--msg-id", metavar="MSG_ID", help="only this message")
    p.add_argument("--limit", type=positive, metavar="N",
                   help="at most the N oldest (default: all of them)")
    p = add("purge", cmd_dlq_purge, "delete dead letters for good", where=actions)
    p.add_argument("topic")
    p.add_argument("--msg-id", metavar="MSG_ID", help="only this message (default: all)")
    add("monitor", cmd_monitor, "request counts and delays of the last monitoring interval")

    p = add("consume", cmd_consume, "run COMMAND per message with the body on stdin; exit 0 "
            "acks, anything else nacks (Ctrl-C stops gracefully)")
    p.add_argument("topic")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND ...",
                   help="the command and its arguments, after --")
    p.add_argument("--pull-threads", type=int, default=1, metavar="N")
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


def _msg_json(m: DelayMsg) -> dict[str, Any]:
    return {**m.to_json(), "duplicate": True} if m.duplicate else m.to_json()


def cmd_send(client: DelayQueueClient, args: argparse.Namespace) -> int:
    if args.file is not None:
        return _send_file(client, args)
    if args.msg is None:
        return fail("send needs MSG (or --file PATH)", EXIT_USAGE)
    body = sys.stdin.read() if args.msg == "-" else args.msg
    sent = client.send(args.topic, body, delay_ms=args.delay if args.at is None else 0,
                       trigger_time=args.at, msg_id=args.msg_id, ttl_ms=args.ttl,
                       max_retry=args.max_retry, attributes=dict(args.attr) or None)
    if args.json:
        print_json(_msg_json(sent))
    else:
        print(display.message_detail(sent))
    return EXIT_OK


def _send_file(client: DelayQueueClient, args: argparse.Namespace) -> int:
    if args.msg is not None or args.msg_id is not None:
        return fail("--file takes neither MSG nor --id: each line carries its own", EXIT_USAGE)
    if args.batch_size > SEND_BATCH:
        return fail(f"--batch-size: at most {SEND_BATCH}, got {args.batch_size}", EXIT_USAGE)
    defaults: dict[str, Any] = {"delayMillis": args.delay} if args.delay else {}
    for key, value in (("triggerTime", args.at), ("ttlMillis", args.ttl),
                       ("maxRetry", args.max_retry), ("attributes", dict(args.attr) or None)):
        if value is not None:
            defaults[key] = value
    source: BinaryIO | nullcontext[BinaryIO]
    try:
        source = nullcontext(sys.stdin.buffer) if args.file == "-" else open(args.file, "rb")
    except OSError as exc:
        return fail(f"cannot read {args.file}: {exc.strerror}", EXIT_USAGE)
    shown = [-PROGRESS_EVERY_S]

    def progress(report: bulk.BulkReport) -> None:
        if time.monotonic() - shown[0] >= PROGRESS_EVERY_S:
            shown[0] = time.monotonic()
            print(f"delayqueue: {report.lines} line(s) read: {report.sent} sent, "
                  f"{report.failed} failed", file=sys.stderr, flush=True)

    with source as lines:
        report = bulk.send_lines(client, args.topic, lines, defaults=defaults,
                                 batch_size=args.batch_size, progress=progress)
    for error in report.errors:
        code = "" if error.code is None else f" (code {error.code})"
        print(f"delayqueue: line {error.line}: {error.msg}{code}", file=sys.stderr)
    if args.json:
        print_json({"topic": args.topic, "lines": report.lines, "sent": report.sent,
                     "duplicates": report.duplicates, "failed": report.failed,
                     "aborted": report.aborted,
                     "errors": [{"line": e.line, "code": e.code, "msg": e.msg}
                                for e in report.errors]})
    else:
        dup = f" ({report.duplicates} duplicate(s) of live messages)" if report.duplicates \
            else ""
        print(f"sent {report.sent} of {report.lines} message(s) to {args.topic}{dup}; "
              f"{report.failed} failed")
    if report.aborted is not None:
        return fail(f"stopped after line {report.lines}: {report.aborted}",
                     EXIT_USAGE if report.aborted_code == 400 else EXIT_FAILURE)
    if any(e.code is not None and e.code >= 500 for e in report.errors):
        return EXIT_FAILURE
    return EXIT_USAGE if report.errors else EXIT_OK


def cmd_pull(client: DelayQueueClient, args: argparse.Namespace) -> int:
    if args.long_poll:
        messages = client.long_poll(args.topic, args.batch, timeout_ms=args.wait,
                                    ack_timeout_ms=args.ack_timeout)
    else:
        messages = client.pull(args.topic, args.batch, ack_timeout_ms=args.ack_timeout)
    if args.json:
        print_json([m.to_json() for m in messages])
    else:
        print(display.message_table(messages))
    return EXIT_OK


def cmd_ack(client: DelayQueueClient, args: argparse.Namespace) -> int:
    client.ack(args.topic, args.msg_id, receipt=args.receipt)
    return settled(args, "acked")


def cmd_nack(client: DelayQueueClient, args: argparse.Namespace) -> int:
    client.nack(args.topic, args.msg_id, receipt=args.receipt, delay_ms=args.delay)
    if args.delay is None:
        return settled(args, "nacked")
    if args.json:
        print_json({"topic": args.topic, "msgId": args.msg_id, "result": "nacked",
                     "delayMillis": args.delay})
    else:
        print(f"nacked {args.topic}/{args.msg_id}, redelivered in {display.span(args.delay)} "
              "at the earliest")
    return EXIT_OK


def cmd_change_visibility(client: DelayQueueClient, args: argparse.Namespace) -> int:
    return show(args, client.change_visibility(args.topic, args.msg_id, args.ack_timeout,
                                                receipt=args.receipt))


def cmd_reschedule(client: DelayQueueClient, args: argparse.Namespace) -> int:
    return show(args, client.reschedule(args.topic, args.msg_id, delay_ms=args.delay,
                                         trigger_time=args.at))


def cmd_delete(client: DelayQueueClient, args: argparse.Namespace) -> int:
    client.delete(args.topic, args.msg_id, release=args.release)
    return settled(args, "deleted and released" if args.release else "deleted")


def cmd_get(client: DelayQueueClient, args: argparse.Namespace) -> int:
    found = client.get(args.topic, args.msg_id)
    if found is None:
        return fail(f"no message {args.topic}/{args.msg_id}", EXIT_NOT_FOUND)
    return show(args, found)


def cmd_topics(client: DelayQueueClient, args: argparse.Namespace) -> int:
    infos = client.topics()
    if args.json:
        print_json([t.raw for t in infos])
    else:
        print(display.topics_table(infos))
    return EXIT_OK


def cmd_topic_info(client: DelayQueueClient, args: argparse.Namespace) -> int:
    info = client.topic_info(args.topic)
    if args.json:
        print_json(info.raw)
    else:
        print(display.topic_detail(info))
    return EXIT_OK


def _config_json(config: TopicConfig) -> dict[str, Any]:
    return {"topic": config.topic, **config.raw}


def cmd_topic_config(client: DelayQueueClient, args: argparse.Namespace) -> int:
    if args.settings or args.reset:
        settings = dict(_setting(k, v) for k, v in args.settings)
        config = client.set_topic_config(args.topic, reset=args.reset, **settings)
    else:
        config = client.get_topic_config(args.topic)
    if args.json:
        print_json(_config_json(config))
    else:
        print(display.topic_config_table(config))
    return EXIT_OK


def cmd_dlq_list(client: DelayQueueClient, args: argparse.Namespace) -> int:
    if args.all:
        messages, cursor = [], args.cursor
        while True:
            page, cursor = client.list_dead(args.topic, args.limit, cursor)
            messages += page
            if not cursor:
                break
    else:
        messages, cursor = client.list_dead(args.topic, args.limit, args.cursor)
    if args.json:
        print_json({"delayMsgList": [m.to_json() for m in messages], "nextCursor": cursor})
    else:
        print(display.dead_table(messages))
        if cursor:
            print(f"(more: --cursor {cursor})")
    return EXIT_OK


def cmd_dlq_redrive(client: DelayQueueClient, args: argparse.Namespace) -> int:
    if args.msg_id is not None:
        count = client.redrive_dead(args.topic, msg_id=args.msg_id)
    else:
        def progress(total: int) -> None:
            if not args.json:
                print(f"redriven so far: {total}", file=sys.stderr, flush=True)

        count = client.redrive_all_dead(args.topic, REDRIVE_CHUNK, max_count=args.limit,
                                        progress=progress)
    if args.json:
        print_json({"topic": args.topic, "count": count})
    elif args.msg_id is not None:
        print(f"redrove {args.topic}/{args.msg_id}")
    else:
        print(f"redrove {count} dead letter(s) of {args.topic}")
    return EXIT_OK


def cmd_dlq_purge(client: DelayQueueClient, args: argparse.Namespace) -> int:
    count = client.purge_dead(args.topic, msg_id=args.msg_id)
    if args.json:
        print_json({"topic": args.topic, "count": count})
    elif args.msg_id is not None:
        print(f"purged {args.topic}/{args.msg_id}")
    else:
        print(f"purged {count} dead letter(s) of {args.topic}")
    return EXIT_OK


def cmd_monitor(client: DelayQueueClient, args: argparse.Namespace) -> int:
    data = client.monitor_data()
    if args.json:
        print_json(data.raw)
    else:
        print(display.monitor_text(data))
    return EXIT_OK


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
        print_json({"acked": consumer.acked, "nacked": consumer.nacked})
    return EXIT_OK
