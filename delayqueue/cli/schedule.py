"""``delayqueue schedule create|list|get|delete|pause|resume``: recurring schedules.

A schedule sends a message to its topic at each fire time of a cron expression (in a time
zone) or every N ms; each occurrence is an ordinary message, msgId
``<scheduleId>:<fireTime>`` (docs/api.md). The human output shows fire times as dates, in
the schedule's time zone for a cron (as its cron reads them), in local time for ``--every``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from delayqueue.client import DelayQueueClient, Schedule
from delayqueue.client.model import MISFIRE_POLICIES

from . import display
from .client_command import (
    EXIT_NOT_FOUND,
    EXIT_OK,
    add,
    duration,
    fail,
    key_value,
    positive,
    print_json,
    timestamp,
    topic_arg,
)


def schedule_ref(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The TOPIC SCHEDULE_ID arguments of a command on one schedule."""
    topic_arg(parser)
    parser.add_argument("schedule_id", metavar="SCHEDULE_ID", help="the schedule's scheduleId")
    return parser


def register(subparsers: Any) -> None:
    schedule = subparsers.add_parser(
        "schedule", help="recurring schedules: a message sent at each fire time of a cron "
        "expression or every N ms", description="recurring schedules: create (or replace), "
        "list, show, delete, pause and resume")
    actions = schedule.add_subparsers(dest="schedule_action", metavar="ACTION", required=True)

    p = schedule_ref(add(actions, "create", cmd_create, "create a schedule, or replace the "
                         "one of that id (MSG '-' reads the body from stdin)"))
    p.add_argument("msg", metavar="MSG", help="the body of each occurrence; '-' reads stdin")
    rule = p.add_mutually_exclusive_group(required=True)
    rule.add_argument("--cron", metavar="EXPR",
                      help="5 fields: minute hour day-of-month month day-of-week, e.g. "
                           "'0 9 * * 1-5' (in --tz)")
    rule.add_argument("--every", type=duration, metavar="DUR",
                      help="a fixed period from --start: 1500 (ms), 10s, 5m, 1h (at least 1s)")
    p.add_argument("--tz", "--timezone", dest="timezone", metavar="ZONE",
                   help="the cron's IANA time zone, e.g. Europe/Paris (default UTC)")
    p.add_argument("--start", type=timestamp, metavar="TIME",
                   help="no fire time before: ISO date-time or epoch ms (default: now)")
    p.add_argument("--end", type=timestamp, metavar="TIME",
                   help="no fire time after (inclusive): ISO date-time or epoch ms")
    p.add_argument("--limit", type=positive, metavar="N", help="at most N occurrences in all")
    p.add_argument("--misfire", choices=MISFIRE_POLICIES, metavar="POLICY",
                   help="fire times missed while no node ran: once (default; one occurrence, "
                        "now), skip (none) or all (one each)")
    p.add_argument("--ttl", type=duration, metavar="DUR",
                   help="each occurrence's ttl (default: the topic's)")
    p.add_argument("--max-retry", type=int, metavar="N",
                   help="each occurrence's redeliveries (default: the topic's)")
    p.add_argument("--attr", type=key_value, action="append", default=[],
                   metavar="KEY=VALUE", help="an attribute of each occurrence (repeatable)")
    p.add_argument("--group", dest="group_id", metavar="GROUP_ID",
                   help="each occurrence's message group (groupId)")

    p = add(actions, "list", cmd_list, "list the schedules of a topic, or of every topic")
    p.add_argument("topic", nargs="?", help="the topic's name (default: every topic)")
    p.add_argument("--limit", type=positive, metavar="N",
                   help="page size (default: the server's)")
    p.add_argument("--cursor", metavar="CURSOR", help="the next page, from a previous list")
    p.add_argument("--all", action="store_true", help="every page")

    schedule_ref(add(actions, "get", cmd_get, "show a schedule and its next fire times"))
    schedule_ref(add(actions, "delete", cmd_delete,
                     "delete a schedule and its waiting occurrence"))
    schedule_ref(add(actions, "pause", cmd_pause, "stop a schedule: its waiting occurrence "
                     "is deleted, nothing is sent until resumed"))
    schedule_ref(add(actions, "resume", cmd_resume, "start a paused schedule again from now "
                     "(fire times of the pause are skipped)"))


def show(args: argparse.Namespace, s: Schedule) -> int:
    """Print a schedule, in detail or as JSON."""
    if args.json:
        print_json(s.to_json())
    else:
        print(display.schedule_detail(s))
    return EXIT_OK


def cmd_create(client: DelayQueueClient, args: argparse.Namespace) -> int:
    body = sys.stdin.read() if args.msg == "-" else args.msg
    return show(args, client.create_schedule(
        args.topic, args.schedule_id, body, cron=args.cron, timezone=args.timezone,
        every_ms=args.every, attributes=dict(args.attr) or None, group_id=args.group_id,
        ttl_ms=args.ttl, max_retry=args.max_retry, start_time=args.start,
        end_time=args.end, limit=args.limit, misfire=args.misfire))


def cmd_list(client: DelayQueueClient, args: argparse.Namespace) -> int:
    schedules, cursor = client.list_schedules(args.topic, args.cursor, args.limit)
    while args.all and cursor:
        page, cursor = client.list_schedules(args.topic, cursor, args.limit)
        schedules += page
    if args.json:
        print_json({"data": [s.to_json() for s in schedules], "nextCursor": cursor})
    else:
        print(display.schedule_table(schedules, with_topic=args.topic is None))
        if cursor:
            print(f"(more: --cursor {cursor})")
    return EXIT_OK


def cmd_get(client: DelayQueueClient, args: argparse.Namespace) -> int:
    found = client.get_schedule(args.topic, args.schedule_id)
    if found is None:
        return fail(f"no schedule {args.topic}/{args.schedule_id}", EXIT_NOT_FOUND)
    return show(args, found)


def cmd_delete(client: DelayQueueClient, args: argparse.Namespace) -> int:
    dropped = client.delete_schedule(args.topic, args.schedule_id)
    if args.json:
        print_json({"topic": args.topic, "scheduleId": args.schedule_id, "result": "deleted",
                    "occurrenceDeleted": dropped})
    else:
        print(f"deleted schedule {args.topic}/{args.schedule_id}")
    return EXIT_OK


def cmd_pause(client: DelayQueueClient, args: argparse.Namespace) -> int:
    return _paused(client, args, True, client.pause_schedule(args.topic, args.schedule_id))


def cmd_resume(client: DelayQueueClient, args: argparse.Namespace) -> int:
    return _paused(client, args, False, client.resume_schedule(args.topic, args.schedule_id))


def _paused(client: DelayQueueClient, args: argparse.Namespace, paused: bool,
            changed: bool) -> int:
    """As ``topic pause|resume``: what changed (a resume adds its next fire time), or the
    JSON ``{"topic", "scheduleId", "paused", "changed"}``."""
    if args.json:
        print_json({"topic": args.topic, "scheduleId": args.schedule_id, "paused": paused,
                    "changed": changed})
        return EXIT_OK
    name = f"{args.topic}/{args.schedule_id}"
    if not changed:
        print(f"schedule {name} was {'already paused' if paused else 'not paused'}")
        return EXIT_OK
    line = f"{'paused' if paused else 'resumed'} schedule {name}"
    s = None if paused else client.get_schedule(args.topic, args.schedule_id)
    if s is not None and s.next_fire_time is not None:
        zone = s.timezone if s.cron else None
        line += (f"; next fire: {display.zoned_iso(s.next_fire_time, zone)} "
                 f"({display.relative(s.next_fire_time)})")
    print(line)
    return EXIT_OK
