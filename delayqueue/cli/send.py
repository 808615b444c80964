"""``delayqueue send``: one message, or every line of a JSON Lines file in batches (--file).

``send --file`` exits 2 when lines were refused (invalid, or code 400), 5 when lines were
refused only because the topic's backlog is full (code 429), and 1 when the server failed
(code 500, or unreachable: it stops at the first request that fails as a whole). With
``--atomic`` the file is sent whole or not at all (bulk.py). With ``--json`` its summary is
the one JSON document on stdout, with an ``error`` member when it exits other than 0.
"""

from __future__ import annotations

import argparse
import sys
import time
from contextlib import nullcontext
from typing import Any, BinaryIO

from delayqueue.client import DelayMsg, DelayQueueClient
from delayqueue.client.batch import MAX_BATCH

from . import bulk, display, failure
from .client_command import (
    EXIT_BACKLOG,
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    add,
    duration,
    fail,
    key_value,
    positive,
    print_json,
    timestamp,
    topic_arg,
)

PROGRESS_EVERY_S = 1.0  # send --file: the longest between two progress lines on stderr


def register(subparsers: Any) -> None:
    p = add(subparsers, "send", cmd_send, "send a message (MSG '-' reads the body from stdin), "
            "or every line of a JSON Lines file in batches (--file)")
    topic_arg(p)
    p.add_argument("msg", metavar="MSG", nargs="?",
                   help="the message's body; '-' reads it from stdin (not with --file)")
    p.add_argument("--file", metavar="PATH",
                   help="JSON Lines: one sendMsgBatch entry per line ({\"msg\": ..., "
                        "\"msgId\": ..., \"delayMillis\": ..., \"triggerTime\": ..., "
                        "\"ttlMillis\": ..., \"maxRetry\": ..., \"attributes\": {...}, "
                        "\"groupId\": ..., \"onDuplicate\": ...}), '-' for stdin; --delay, --at, "
                        "--ttl, --max-retry, --attr, --group and --on-duplicate fill in what a "
                        "line leaves out")
    p.add_argument("--batch-size", type=positive, default=MAX_BATCH, metavar="N",
                   help=f"with --file, entries per request (default and most {MAX_BATCH})")
    p.add_argument("--atomic", action="store_true",
                   help="with --file, every line or none: one request, so at most "
                        "--batch-size lines (and 4 MiB)")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--delay", type=duration, metavar="DUR",
                      help="due after this long: 1500 (ms), 500ms, 10s, 4m, 1h30m "
                           "(default: the topic's delayMillis, 0 unless set)")
    when.add_argument("--at", type=timestamp, metavar="TIME",
                      help="due at: ISO date-time or epoch ms")
    p.add_argument("--id", dest="msg_id", metavar="MSG_ID", help="msgId (default generated)")
    p.add_argument("--ttl", type=duration, metavar="DUR", help="ttl after the trigger time")
    p.add_argument("--max-retry", type=int, metavar="N", help="redeliveries allowed")
    p.add_argument("--attr", type=key_value, action="append", default=[],
                   metavar="KEY=VALUE", help="a message attribute (repeatable)")
    p.add_argument("--group", dest="group_id", metavar="GROUP_ID",
                   help="its message group (groupId): the group's messages are delivered one "
                        "at a time, in order")
    p.add_argument("--on-duplicate", choices=("keep", "replace"), metavar="keep|replace",
                   help="what a live message with this msgId meets: keep (the default: it "
                        "is answered, nothing enqueued) or replace (debounce: a waiting or "
                        "ready one begins again with these values; a consuming one is "
                        "refused, exit 4)")


def _msg_json(m: DelayMsg) -> dict[str, Any]:
    return {**m.to_json(), **({"duplicate": True} if m.duplicate else {}),
            **({"replaced": True} if m.replaced else {})}


def cmd_send(client: DelayQueueClient, args: argparse.Namespace) -> int:
    if args.file is not None:
        return _send_file(client, args)
    if args.atomic:
        return fail("--atomic goes with --file", EXIT_USAGE)
    if args.msg is None:
        return fail("send needs MSG (or --file PATH)", EXIT_USAGE)
    body = sys.stdin.read() if args.msg == "-" else args.msg
    sent = client.send(args.topic, body, delay_ms=args.delay, trigger_time=args.at,
                       msg_id=args.msg_id, ttl_ms=args.ttl, max_retry=args.max_retry,
                       attributes=dict(args.attr) or None, group_id=args.group_id,
                       on_duplicate=args.on_duplicate or "keep")
    if args.json:
        print_json(_msg_json(sent))
    else:
        print(display.message_detail(sent))
    return EXIT_OK


def _send_file(client: DelayQueueClient, args: argparse.Namespace) -> int:
    if args.msg is not None or args.msg_id is not None:
        return fail("--file takes neither MSG nor --id: each line carries its own", EXIT_USAGE)
    if args.batch_size > MAX_BATCH:
        return fail(f"--batch-size: at most {MAX_BATCH}, got {args.batch_size}", EXIT_USAGE)
    defaults: dict[str, Any] = {}
    for key, value in (("delayMillis", args.delay), ("triggerTime", args.at),
                       ("ttlMillis", args.ttl),
                       ("maxRetry", args.max_retry), ("attributes", dict(args.attr) or None),
                       ("groupId", args.group_id), ("onDuplicate", args.on_duplicate)):
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
                                 batch_size=args.batch_size, progress=progress,
                                 atomic=args.atomic)
    for error in report.errors:
        code = "" if error.code is None else f" (code {error.code})"
        print(f"delayqueue: line {error.line}: {error.msg}{code}", file=sys.stderr)
    code = _exit_code(report)
    why = None
    if report.aborted is not None:
        why = report.aborted if args.atomic else \
            f"stopped after line {report.lines}: {report.aborted}"
    if args.json:
        summary: dict[str, Any] = {
            "topic": args.topic, "lines": report.lines, "sent": report.sent,
            "duplicates": report.duplicates, "replaced": report.replaced,
            "failed": report.failed,
            "aborted": report.aborted,
            "errors": [{"line": e.line, "code": e.code, "msg": e.msg} for e in report.errors]}
        if code != EXIT_OK:   # one JSON document: the summary carries the failure
            summary["error"] = failure.error_object(
                why or f"{report.failed} of {report.lines} line(s) refused", code,
                code=report.aborted_code if why else None)
        print_json(summary)
        return code
    notes = [f"{report.duplicates} duplicate(s), nothing enqueued"] if report.duplicates \
        else []
    if report.replaced:
        notes.append(f"{report.replaced} replaced")
    dup = f" ({'; '.join(notes)})" if notes else ""
    print(f"sent {report.sent} of {report.lines} message(s) to {args.topic}{dup}; "
          f"{report.failed} failed")
    return fail(why, code) if why is not None else code


def _exit_code(report: bulk.BulkReport) -> int:
    """1 the server failed; else 2 lines to fix; else 5 lines refused by the full backlog."""
    codes = [e.code for e in report.errors]
    if report.aborted is not None:
        codes.append(report.aborted_code)
        if report.aborted_code not in (400, 429):
            return EXIT_FAILURE      # a request failed as a whole: unreachable, 500, 413
    if any(c is not None and c >= 500 for c in codes):
        return EXIT_FAILURE
    if any(c != 429 for c in codes):
        return EXIT_USAGE
    return EXIT_BACKLOG if codes else EXIT_OK
