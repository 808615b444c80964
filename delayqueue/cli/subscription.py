"""``delayqueue subscription list|create|delete|config|push-status`` (alias
``subscriptions``): a topic's named subscriptions, and push delivery.

A named subscription receives its own copy of every message sent to its topic after it was
created (its own status, retries, receipts and dead letters), so several services each
consume every message; the topic's default subscription is the one a command without
``--subscription`` consumes from. ``--set`` takes the settings a subscription may have of its
own (ack timeout, maxRetry, redelivery backoff, dead letters), as ``topic-config`` does.

``--push-url`` (and ``--push-timeout-ms``, ``--push-concurrency``, ``--push-secret``) makes a
subscription, the default one too (``config TOPIC default``), a push subscription: the
server POSTs each delivery to the URL. ``push-status`` shows how that fares. No command
prints the secret: the server never answers it, and a secret the server would refuse is
refused here without being shown.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from delayqueue.client import DelayQueueClient, SubscriptionConfig

from . import display
from .client_command import EXIT_OK, add, duration, key_value, positive, print_json, topic_arg
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


def _push_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--push-url", metavar="URL",
                        help="push each delivery: POST it to this http(s) URL, a 2xx answer "
                             "acks it, anything else retries it (\"\": pulled again)")
    parser.add_argument("--push-timeout-ms", type=duration, metavar="DURATION",
                        help="connect and read timeout of one POST: 100ms to 10m (1500, 10s; "
                             "default: the server's push-timeout-millis)")
    parser.add_argument("--push-concurrency", type=positive, metavar="N",
                        help="deliveries in flight at most, fleet-wide: 1 to 10000 (default: "
                             "the server's push-concurrency)")
    parser.add_argument("--push-secret", metavar="SECRET",
                        help="sign every delivery (X-DelayQueue-Signature, HMAC-SHA256) with "
                             "this secret; - reads it from stdin (arguments show in ps); "
                             "\"\" stops signing. Never printed")


def _push(args: argparse.Namespace) -> dict[str, Any]:
    """The push settings given, by their SDK names (None: not given)."""
    secret = args.push_secret
    if secret == "-":
        secret = sys.stdin.readline().rstrip("\r\n")
    return {"push_url": args.push_url, "push_timeout_ms": args.push_timeout_ms,
            "push_concurrency": args.push_concurrency, "push_secret": secret}


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
    _push_options(p)
    subscription_ref(add(actions, "delete", cmd_delete, "delete a named subscription and its "
                         "state of every message"))
    p = add(actions, "config", cmd_config, "show or change a subscription's settings (value "
            "and source: subscription, topic or server default); the default subscription "
            "takes the push options only (its other settings are the topic's: topic-config)")
    topic_arg(p)
    p.add_argument("name", metavar="NAME", nargs="?", default="default",
                   help="the subscription's name (default: the default subscription)")
    _set_option(p)
    _push_options(p)
    p.add_argument("--reset", action="store_true",
                   help="first drop every value set on the subscription (back to the topic's "
                        "and the server's push defaults; no longer pushed)")
    p = add(actions, "push-status", cmd_push_status, "a subscription's push delivery: URL, "
            "deliveries in flight, paused, and its last failed pushes (newest first)")
    topic_arg(p)
    p.add_argument("name", metavar="NAME", nargs="?", default=None,
                   help="the subscription's name (default: the default subscription)")


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
    info = client.create_subscription(args.topic, args.name, **_push(args), **_settings(args))
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
    push = _push(args)
    if args.settings or args.reset or any(v is not None for v in push.values()):
        config = client.set_subscription_config(args.topic, args.name, reset=args.reset,
                                                **push, **_settings(args))
    else:
        config = client.get_subscription_config(args.topic, args.name)
    if args.json:
        print_json({"topic": config.topic, "subscription": config.subscription, **config.raw})
    else:
        print(display.subscription_config_table(config))
    return EXIT_OK


def cmd_push_status(client: DelayQueueClient, args: argparse.Namespace) -> int:
    status = client.push_status(args.topic, args.name)
    if args.json:
        print_json({"topic": status.topic, **status.raw})
    else:
        print(display.push_status_text(status))
    return EXIT_OK
