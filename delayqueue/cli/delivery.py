"""Take deliveries and settle them: ``pull``, ``long-poll``, ``ack``, ``nack`` and
``change-visibility`` (alias ``extend``).

A pulled message is consuming until it is acked, nacked or its ack timeout passes; the
settling commands may name the delivery by its ``--receipt``, so they never act on a later one.
With ``--subscription`` each acts in that named subscription: a delivery pulled there is
settled there.
"""

from __future__ import annotations

import argparse
from typing import Any

from delayqueue.client import DelayQueueClient

from . import display
from .client_command import (
    EXIT_OK,
    add,
    duration,
    msg_ref,
    print_json,
    settled,
    show,
    subscription_opt,
    topic_arg,
)


def register(subparsers: Any) -> None:
    for name, help_ in (("pull", "take ready messages now (they must then be acked)"),
                        ("long-poll", "wait for ready messages (they must then be acked)")):
        p = add(subparsers, name, cmd_pull, help_)
        subscription_opt(topic_arg(p), "the named subscription to take them from (default: "
                                       "the topic's default subscription)")
        p.add_argument("--batch", type=int, default=1, metavar="N",
                       help="most messages to take (default 1, at most the server's "
                            "max-batch)")
        p.add_argument("--ack-timeout", type=duration, metavar="DUR",
                       help="ack deadline of these deliveries, e.g. 30s, 5m (default: the "
                            "topic's, then the server's)")
        if name == "long-poll":
            p.add_argument("--wait", type=duration, metavar="DUR",
                           help="longest hold (server default 10s, at most 60s)")
        p.set_defaults(long_poll=name == "long-poll")

    subscription_opt(_receipt(msg_ref(add(subparsers, "ack", cmd_ack,
                                          "acknowledge a delivered message"))),
                     _SETTLE_HELP)
    p = subscription_opt(_receipt(msg_ref(add(subparsers, "nack", cmd_nack,
                                              "hand a delivered message back for "
                                              "redelivery"))), _SETTLE_HELP)
    p.add_argument("--delay", type=duration, metavar="DUR",
                   help="redeliver no earlier than this (default: the topic's backoff)")
    p = _receipt(msg_ref(add(subparsers, "change-visibility", cmd_change_visibility,
                             "set a delivered message's ack deadline to now + ACK_TIMEOUT "
                             "(0 gives it back at once)", aliases=("extend",))))
    subscription_opt(p, _SETTLE_HELP)
    p.add_argument("ack_timeout", type=duration, metavar="ACK_TIMEOUT",
                   help="e.g. 30s, 5m, 0")


_SETTLE_HELP = ("the named subscription the message was pulled from (default: the topic's "
                "default subscription)")


def _receipt(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--receipt", metavar="RECEIPT",
                        help="the delivery's receipt (from pull); refused with exit 4 "
                             "when the message was delivered again since")
    return parser


def cmd_pull(client: DelayQueueClient, args: argparse.Namespace) -> int:
    if args.long_poll:
        messages = client.long_poll(args.topic, args.batch, timeout_ms=args.wait,
                                    ack_timeout_ms=args.ack_timeout,
                                    subscription=args.subscription)
    else:
        messages = client.pull(args.topic, args.batch, ack_timeout_ms=args.ack_timeout,
                               subscription=args.subscription)
    if args.json:
        print_json([m.to_json() for m in messages])
    else:
        print(display.message_table(messages))
    return EXIT_OK


def cmd_ack(client: DelayQueueClient, args: argparse.Namespace) -> int:
    client.ack(args.topic, args.msg_id, receipt=args.receipt, subscription=args.subscription)
    return settled(args, "acked")


def cmd_nack(client: DelayQueueClient, args: argparse.Namespace) -> int:
    client.nack(args.topic, args.msg_id, receipt=args.receipt, delay_ms=args.delay,
                subscription=args.subscription)
    if args.delay is None:
        return settled(args, "nacked")
    where = f" in subscription {args.subscription}" if args.subscription else ""
    if args.json:
        print_json({"topic": args.topic, "msgId": args.msg_id, "result": "nacked",
                    "delayMillis": args.delay,
                    **({"subscription": args.subscription} if args.subscription else {})})
    else:
        print(f"nacked {args.topic}/{args.msg_id}{where}, redelivered in "
              f"{display.span(args.delay)} at the earliest")
    return EXIT_OK


def cmd_change_visibility(client: DelayQueueClient, args: argparse.Namespace) -> int:
    return show(args, client.change_visibility(args.topic, args.msg_id, args.ack_timeout,
                                               receipt=args.receipt,
                                               subscription=args.subscription))
