"""``delayqueue subscription list|create|delete|config`` (alias ``subscriptions``): a topic's
named subscriptions.

A named subscription receives its own copy of every message sent to its topic after it was
created (its own status, retries, receipts and dead letters), so several services each
consume every message; the topic's default subscription is the one a command without
``--subscription`` consumes from. ``--set`` takes the settings a subscription may have of its
own (ack timeout, maxRetry, redelivery backoff, dead letters), as ``topic-config`` does.
"""

from __future__ import annotations

import argparse
from typing import Any

from delayqueue.client import DelayQueueClient, SubscriptionConfig

from . import display
from .client_command import EXIT_OK, add, key_value, print_json, topic_arg
from .topic import setting_arg

SETTINGS_HELP = ("a setting of the subscription's own (repeatable): ackTimeoutMillis, maxRetry, "
                 "redeliveryDelayMillis, redeliveryBackoffMultiplier, redeliveryMaxDelayMillis, "
                 "deadLetter, deadLetterRetentionMillis, deadLetterMaxSize; durations as 1500, "
                 "10s, 1h; also snake_case (ack_timeout_ms)")


def subscription_ref(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The TOPIC NAME arguments of a command on one named subscription."""
    topic_arg(parser)
    parser.add_argument("name", metavar="NAME",
                        help="the subscription's name: 1 to 64 of A-Z a-z 0-9 . _ -")
    return parser


def _set_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--set", dest="settings", type=key_value, action="append", default=[],
                        metavar="KEY=VALUE", help=SETTINGS_HELP)


def register(subparsers: Any) -> None:
    group = subparsers.add_parser(
        "subscription", aliases=["subscriptions"],
        help="named subscriptions: each receives its own copy of every message of its topic",
        description="a topic's named subscriptions: list, create (or change), delete, and "
                    "their settings")
    actions = group.add_subparsers(dest="subscription_action", metavar="ACTION", required=True)
    topic_arg(add(actions, "list", cmd_list, "list a topic's subscriptions (the default one "
                  "first) with their queue sizes"))
    p = subscription_ref(add(actions, "create", cmd_create, "create a named subscription: it "
                             "receives every message sent from now on (again: changes only "
                             "the settings given)"))
    _set_option(p)
    subscription_ref(add(actions, "delete", cmd_delete, "delete a named subscription and its "
                         "state of every message"))
    p = add(actions, "config", cmd_config, "show or change a subscription's settings (value "
            "and source: subscription, topic or server default)")
    topic_arg(p)
    p.add_argument("name", metavar="NAME", nargs="?", default="default",
                   help="the subscription's name (default: the default subscription)")
    _set_option(p)
    p.add_argument("--reset", action="store_true",
                   help="first drop every value set on the subscription (back to the topic's)")


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    return dict(setting_arg(k, v) for k, v in args.settings)


def cmd_list(client: DelayQueueClient, args: argparse.Namespace) -> int:
    infos = client.list_subscriptions(args.topic)
    if args.json:
        print_json([i.raw for i in infos])
    else:
        print(display.subscriptions_table(infos))
    return EXIT_OK


def cmd_create(client: DelayQueueClient, args: argparse.Namespace) -> int:
    info = client.create_subscription(args.topic, args.name, **_settings(args))
    if args.json:
        print_json(info.raw)
    else:
        print(display.subscription_detail(args.topic, info))
    return EXIT_OK


def cmd_delete(client: DelayQueueClient, args: argparse.Namespace) -> int:
    client.delete_subscription(args.topic, args.name)
    if args.json:
        print_json({"topic": args.topic, "subscription": args.name, "result": "deleted"})
    else:
        print(f"deleted subscription {args.name} of {args.topic}")
    return EXIT_OK


def cmd_config(client: DelayQueueClient, args: argparse.Namespace) -> int:
    config: SubscriptionConfig
    if args.settings or args.reset:
        config = client.set_subscription_config(args.topic, args.name, reset=args.reset,
                                                **_settings(args))
    else:
        config = client.get_subscription_config(args.topic, args.name)
    if args.json:
        print_json({"topic": config.topic, "subscription": config.subscription, **config.raw})
    else:
        print(display.subscription_config_table(config))
    return EXIT_OK
