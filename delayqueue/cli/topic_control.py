"""``delayqueue topic pause|resume|purge`` and ``delayqueue list``: a topic's controls.

Pause stops the topic's deliveries (sends go on); purge ends its live messages (status 7),
asking first when a person runs it; list shows its live messages of one status, a page at a
time, or the ones blocked behind their group's head. ``--subscription`` pauses, resumes or
lists one named subscription (or ``default``) instead of the whole topic.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from delayqueue.client import DelayQueueClient, PurgeResult, Status

from . import display
from .client_command import (
    EXIT_FAILURE,
    EXIT_OK,
    add,
    fail,
    positive,
    print_json,
    subscription_opt,
    topic_arg,
)

STATUSES = {"waiting": Status.WAITING, "ready": Status.READY, "consuming": Status.CONSUMING}


def status(text: str) -> Status:
    """An argument type: ``waiting``, ``ready``, ``consuming`` or 1, 2, 3 -> the Status."""
    key = text.strip().lower()
    if key in STATUSES:
        return STATUSES[key]
    if key in ("1", "2", "3"):
        return Status(int(key))
    raise argparse.ArgumentTypeError(f"not a status: {text!r} (waiting, ready, consuming or "
                                     "1, 2, 3)")


def register(subparsers: Any) -> None:
    topic = subparsers.add_parser("topic", help="pause, resume or purge a topic",
                                  description="a topic's controls: pause and resume its "
                                              "deliveries, purge its live messages")
    actions = topic.add_subparsers(dest="topic_action", metavar="ACTION", required=True)
    subscription_opt(topic_arg(add(actions, "pause", cmd_pause, "stop handing the topic's "
                                   "messages out (pulls answer empty, long polls wait; sends "
                                   "go on)")),
                     "pause only this subscription (a name, or default; without it the whole "
                     "topic, every subscription)")
    subscription_opt(topic_arg(add(actions, "resume", cmd_resume,
                                   "hand the topic's messages out again")),
                     "resume only this subscription (as paused with --subscription)")
    p = add(actions, "purge", cmd_purge, "end every live message of the topic (status 7, as "
            "delete); dead letters stay (dlq purge)")
    topic_arg(p)
    p.add_argument("--limit", type=positive, metavar="N",
                   help="at most N messages (default: all of them)")
    p.add_argument("--yes", "-y", action="store_true",
                   help="do not ask first (it never asks when stdin is not a terminal)")

    p = add(subparsers, "list", cmd_list, "list a topic's live messages of one status, or "
            "those blocked behind their group's head")
    topic_arg(p)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--status", type=status, metavar="STATUS",
                       help="waiting (1, by trigger time), ready (2, in delivery order) or "
                            "consuming (3, by ack deadline)")
    which.add_argument("--group-blocked", action="store_true",
                       help="the due messages waiting behind their group's head, each group "
                            "in its order")
    p.add_argument("--limit", type=positive, default=100, metavar="N",
                   help="page size (default 100, at most the server's max-batch)")
    p.add_argument("--cursor", metavar="CURSOR", help="the next page, from a previous list")
    p.add_argument("--all", action="store_true", help="every page")
    subscription_opt(p, "the statuses in this named subscription (default: the default "
                        "subscription's)")


def cmd_pause(client: DelayQueueClient, args: argparse.Namespace) -> int:
    return _paused(args, True, client.pause_topic(args.topic, subscription=args.subscription))


def cmd_resume(client: DelayQueueClient, args: argparse.Namespace) -> int:
    return _paused(args, False, client.resume_topic(args.topic,
                                                    subscription=args.subscription))


def _paused(args: argparse.Namespace, paused: bool, changed: bool) -> int:
    if args.json:
        print_json({"topic": args.topic, "paused": paused, "changed": changed,
                    **({"subscription": args.subscription} if args.subscription else {})})
    else:
        verb = "paused" if paused else "resumed"
        what = f"subscription {args.subscription} of {args.topic}" if args.subscription \
            else args.topic
        print(f"{verb} {what}" if changed else
              f"{what} was {'already paused' if paused else 'not paused'}")
    return EXIT_OK


def cmd_purge(client: DelayQueueClient, args: argparse.Namespace) -> int:
    if not args.yes and sys.stdin.isatty():
        info = client.topic_info(args.topic)
        live = info.waiting_queue_size + info.ready_queue_size + info.ack_queue_size
        what = "every live message" if args.limit is None else f"up to {args.limit} messages"
        print(f"purge {what} of {args.topic} ({live} live now)? [y/N] ", end="",
              file=sys.stderr, flush=True)
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            return fail("not purged: not confirmed", EXIT_FAILURE)

    def progress(so_far: PurgeResult) -> None:
        if not args.json:
            print(f"purged so far: {so_far.count}, remaining: {so_far.remaining}",
                  file=sys.stderr, flush=True)

    count, remaining = client.purge_topic_all(args.topic, max_count=args.limit,
                                              progress=progress)
    if args.json:
        print_json({"topic": args.topic, "count": count, "remaining": remaining})
    else:
        left = f"; {remaining} remain" if remaining else ""
        print(f"purged {count} message(s) of {args.topic}{left}")
    return EXIT_OK


def cmd_list(client: DelayQueueClient, args: argparse.Namespace) -> int:
    view: dict[str, Any] = ({"group_blocked": True} if args.group_blocked
                            else {"status": args.status})
    view["subscription"] = args.subscription
    messages, cursor = client.list_messages(args.topic, **view, limit=args.limit,
                                            cursor=args.cursor)
    while args.all and cursor:
        page, cursor = client.list_messages(args.topic, **view, limit=args.limit,
                                            cursor=cursor)
        messages += page
    if args.json:
        print_json({"delayMsgList": [m.to_json() for m in messages], "nextCursor": cursor})
    else:
        print(display.message_table(messages))
        if cursor:
            print(f"(more: --cursor {cursor})")
    return EXIT_OK
