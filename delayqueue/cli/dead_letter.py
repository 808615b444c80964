"""``delayqueue dlq list|redrive|purge``: a topic's dead letters.

Dead letters are the messages that ran out of deliveries or life on a topic with deadLetter
on; redrive puts them back to ready, purge deletes them for good. Each subscription keeps its
own: ``--subscription`` names a named one's.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from delayqueue.client import DelayQueueClient

from . import display
from .client_command import EXIT_OK, add, positive, print_json, subscription_opt, topic_arg

REDRIVE_CHUNK = 1000  # dead letters one redriveDeadMsg call moves, at most (the server's limit)
_HELP = "the dead letters of this named subscription (default: the default subscription's)"


def register(subparsers: Any) -> None:
    dlq = subparsers.add_parser("dlq", help="dead letters: list, redrive, purge",
                                description="a topic's dead-letter queue: messages that ran "
                                            "out of deliveries or life")
    actions = dlq.add_subparsers(dest="dlq_action", metavar="ACTION", required=True)
    p = add(actions, "list", cmd_dlq_list, "list dead letters, oldest death first")
    subscription_opt(topic_arg(p), _HELP)
    p.add_argument("--limit", type=positive, default=100, metavar="N",
                   help="page size (default 100, at most 1000)")
    p.add_argument("--cursor", metavar="CURSOR", help="the next page, from a previous list")
    p.add_argument("--all", action="store_true", help="every page")
    p = add(actions, "redrive", cmd_dlq_redrive,
            "put dead letters back to ready (retry 0, due now)")
    subscription_opt(topic_arg(p), _HELP)
    p.add_argument("--msg-id", metavar="MSG_ID", help="only this message")
    p.add_argument("--limit", type=positive, metavar="N",
                   help="at most the N oldest (default: all of them)")
    p = add(actions, "purge", cmd_dlq_purge, "delete dead letters for good")
    subscription_opt(topic_arg(p), _HELP)
    p.add_argument("--msg-id", metavar="MSG_ID", help="only this message (default: all)")


def cmd_dlq_list(client: DelayQueueClient, args: argparse.Namespace) -> int:
    if args.all:
        messages, cursor = [], args.cursor
        while True:
            page, cursor = client.list_dead(args.topic, args.limit, cursor,
                                            subscription=args.subscription)
            messages += page
            if not cursor:
                break
    else:
        messages, cursor = client.list_dead(args.topic, args.limit, args.cursor,
                                            subscription=args.subscription)
    if args.json:
        print_json({"delayMsgList": [m.to_json() for m in messages], "nextCursor": cursor})
    else:
        print(display.dead_table(messages))
        if cursor:
            print(f"(more: --cursor {cursor})")
    return EXIT_OK


def cmd_dlq_redrive(client: DelayQueueClient, args: argparse.Namespace) -> int:
    if args.msg_id is not None:
        count = client.redrive_dead(args.topic, msg_id=args.msg_id,
                                    subscription=args.subscription)
    else:
        def progress(total: int) -> None:
            if not args.json:
                print(f"redriven so far: {total}", file=sys.stderr, flush=True)

        count = client.redrive_all_dead(args.topic, REDRIVE_CHUNK, max_count=args.limit,
                                        progress=progress, subscription=args.subscription)
    return _done(args, "redrove", count)


def cmd_dlq_purge(client: DelayQueueClient, args: argparse.Namespace) -> int:
    return _done(args, "purged", client.purge_dead(args.topic, msg_id=args.msg_id,
                                                   subscription=args.subscription))


def _done(args: argparse.Namespace, verb: str, count: int) -> int:
    """Print what redrive or purge did: to the one message (--msg-id) or to ``count``."""
    where = f" in subscription {args.subscription}" if args.subscription else ""
    if args.json:
        print_json({"topic": args.topic, "count": count,
                    **({"subscription": args.subscription} if args.subscription else {})})
    elif args.msg_id is not None:
        print(f"{verb} {args.topic}/{args.msg_id}{where}")
    else:
        print(f"{verb} {count} dead letter(s) of {args.topic}{where}")
    return EXIT_OK
