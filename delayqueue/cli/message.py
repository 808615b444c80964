"""One message by its id, whatever its status: ``get``, ``reschedule`` and ``delete``."""

from __future__ import annotations

import argparse
from typing import Any

from delayqueue.client import DelayQueueClient

from .client_command import (
    EXIT_NOT_FOUND,
    add,
    duration,
    fail,
    msg_ref,
    settled,
    show,
    subscription_opt,
    timestamp,
)


def register(subparsers: Any) -> None:
    p = msg_ref(add(subparsers, "reschedule", cmd_reschedule,
                    "move a waiting or ready message to a new due time"))
    when = p.add_mutually_exclusive_group(required=True)
    when.add_argument("--delay", type=duration, metavar="DUR", help="due after this long "
                      "from now (0: now)")
    when.add_argument("--at", type=timestamp, metavar="TIME", help="due at: ISO date-time or "
                      "epoch ms")
    subscription_opt(msg_ref(add(subparsers, "get", cmd_get, "show a message and its status")),
                     "show its status in this named subscription (default: the default "
                     "subscription's, with each named one's status and retry)")
    p = msg_ref(add(subparsers, "delete", cmd_delete, "delete a message"))
    p.add_argument("--release", action="store_true", help="also drop its body at once")


def cmd_reschedule(client: DelayQueueClient, args: argparse.Namespace) -> int:
    return show(args, client.reschedule(args.topic, args.msg_id, delay_ms=args.delay,
                                        trigger_time=args.at))


def cmd_get(client: DelayQueueClient, args: argparse.Namespace) -> int:
    found = client.get(args.topic, args.msg_id, subscription=args.subscription)
    if found is None:
        return fail(f"no message {args.topic}/{args.msg_id}", EXIT_NOT_FOUND)
    return show(args, found)


def cmd_delete(client: DelayQueueClient, args: argparse.Namespace) -> int:
    client.delete(args.topic, args.msg_id, release=args.release)
    return settled(args, "deleted and released" if args.release else "deleted")
