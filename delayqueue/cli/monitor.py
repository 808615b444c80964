"""``delayqueue monitor``: the server's request counts and delays of its last interval."""

from __future__ import annotations

import argparse
from typing import Any

from delayqueue.client import DelayQueueClient

from . import display
from .client_command import EXIT_OK, add, print_json


def register(subparsers: Any) -> None:
    add(subparsers, "monitor", cmd_monitor,
        "request counts and delays of the last monitoring interval")


def cmd_monitor(client: DelayQueueClient, args: argparse.Namespace) -> int:
    data = client.monitor_data()
    if args.json:
        print_json(data.raw)
    else:
        print(display.monitor_text(data))
    return EXIT_OK
