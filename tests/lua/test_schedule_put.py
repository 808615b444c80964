"""lua/schedule_put.lua: create or replace a schedule and write its first occurrence."""

from __future__ import annotations

import json

from delayqueue.core.outcome import Outcome
from delayqueue.core.scripts import SchedulePlan

from support.lua import CHANNEL, DEFAULTS, END_LIFE, T0, assert_one_place, status_of

DEFINITION = {"scheduleId": "s", "topic": "topic-a", "cron": None, "timezone": None,
              "everyMillis": 1000, "msg": "tick", "attributes": '{"k":"v"}', "groupId": None,
              "ttlMillis": 5000, "maxRetry": 2, "startTime": T0, "endTime": None,
              "limit": None, "misfire": "once", "createdTime": T0}


def put(scripts, tk, now, first, sid="s", **changes):
    definition = json.dumps({**DEFINITION, **changes})
    plan = SchedulePlan(((first, first),), first, first) if first >= 0 else \
        SchedulePlan((), now - 1, -1)
    return scripts.schedule_put(tk, now, CHANNEL, sid, END_LIFE, definition, plan, DEFAULTS)


def test_put_writes_the_first_occurrence_and_the_record(scripts, tk, redis_client):
    reply = put(scripts, tk, T0, T0 + 1000)
    assert reply == [Outcome.OK, 1, 1, 0, T0 + 1000]
    assert_one_place(redis_client, tk, f"s:{T0 + 1000}", 1, scripts)
    stored = json.loads(redis_client.hget(tk.schedules, "s"))
    assert {k: stored[k] for k in ("gen", "cursor", "pending", "paused", "sentCount",
                                   "missedCount", "msg", "lastFireTime")} == {
        "gen": 1, "cursor": T0 + 1000, "pending": T0 + 1000, "paused": False, "sentCount": 1,
        "missedCount": 0, "msg": "tick", "lastFireTime": None}


def test_put_again_replaces_ends_the_waiting_occurrence_and_bumps_the_generation(
        scripts, tk, redis_client):
    put(scripts, tk, T0, T0 + 1000)
    reply = put(scripts, tk, T0 + 10, T0 + 3000, msg="new")
    assert reply == [Outcome.OK, 2, 1, 1, -1]
    assert status_of(redis_client, tk, f"s:{T0 + 1000}") == 7
    assert_one_place(redis_client, tk, f"s:{T0 + 1000}", 7, scripts)
    assert_one_place(redis_client, tk, f"s:{T0 + 3000}", 1, scripts)
    assert json.loads(redis_client.hget(tk.schedules, "s"))["msg"] == "new"


def test_put_finished_at_once_writes_no_occurrence(scripts, tk, redis_client):
    assert put(scripts, tk, T0, -1) == [Outcome.OK, 1, 0, 0, -1]
    assert redis_client.exists(tk.msgs) == 0
    assert json.loads(redis_client.hget(tk.schedules, "s"))["pending"] is None


def test_an_occurrence_due_at_once_is_ready_and_announced(scripts, tk, redis_client):
    pubsub = redis_client.pubsub()
    pubsub.subscribe(CHANNEL)
    pubsub.get_message(timeout=1)
    put(scripts, tk, T0, T0)
    assert_one_place(redis_client, tk, f"s:{T0}", 2, scripts)
    assert pubsub.get_message(timeout=1)["data"] == "1 topic-a"
