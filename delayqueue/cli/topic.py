"""Topics: ``topics`` (every topic's queue sizes), ``topic-info`` and ``topic-config``."""

from __future__ import annotations

import argparse
from typing import Any

from delayqueue.client import DelayQueueClient, TopicConfig
from delayqueue.client.model import TOPIC_SETTINGS, setting_name
from delayqueue.settings.topic_setting import BY_NAME
from delayqueue.settings.value import ValueProblem, parse_bool

from . import display
from .client_command import EXIT_OK, add, key_value, print_json, topic_arg


def register(subparsers: Any) -> None:
    add(subparsers, "topics", cmd_topics, "list topics with their queue sizes")
    topic_arg(add(subparsers, "topic-info", cmd_topic_info, "queue sizes of one topic"))
    p = add(subparsers, "topic-config", cmd_topic_config, "show or change a topic's settings "
            "(value and source: topic or server default)")
    topic_arg(p)
    p.add_argument("--set", dest="settings", type=key_value, action="append", default=[],
                   metavar="KEY=VALUE", help="set a setting (repeatable): "
                   + ", ".join(TOPIC_SETTINGS.values())
                   + "; durations as 1500, 10s, 1h; also snake_case (ttl_ms)")
    p.add_argument("--reset", action="store_true",
                   help="first drop every value set on the topic (back to server defaults)")


def setting_arg(key: str, text: str) -> tuple[str, Any]:
    """``--set key=value``: the SDK name and the value of the setting's kind (durations as for
    --delay; text as given); the server checks the bounds."""
    name = setting_name(key.strip())
    kind = BY_NAME[TOPIC_SETTINGS[name]].kind
    if kind is str:
        return name, text
    text = text.strip()
    if kind is bool:
        try:
            return name, parse_bool(text)
        except ValueProblem:
            raise ValueError(f"{key}: not a boolean: {text!r} (use on/off, true/false)") from None
    if kind is float:
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
        settings = dict(setting_arg(k, v) for k, v in args.settings)
        config = client.set_topic_config(args.topic, reset=args.reset, **settings)
    else:
        config = client.get_topic_config(args.topic)
    if args.json:
        print_json(_config_json(config))
    else:
        print(display.topic_config_table(config))
    return EXIT_OK
