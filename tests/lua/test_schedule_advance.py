"""lua/schedule_advance.lua: the compare-and-set that writes a schedule's occurrences, and
its repair of a waiting occurrence deleted before its fire time."""

from __future__ import annotations

import json

from test_schedule_put import put

from delayqueue.core.outcome import Outcome
from delayqueue.core.scripts import SchedulePlan

from support.lua import CHANNEL, DEFAULTS, T0, assert_one_place, settle_due, status_of


def advance(scripts, tk, now, gen, cursor, plan):
    return scripts.schedule_advance(tk, now, CHANNEL, "s", gen, cursor, plan, DEFAULTS)


def test_advance_writes_the_plan_and_moves_the_cursor_once(scripts, tk, redis_client):
    put(scripts, tk, T0, T0 + 1000)
    plan = SchedulePlan(((T0 + 1000, T0 + 1500), (T0 + 2000, T0 + 2000)), T0 + 2000,
                        T0 + 2000, missed=1, last_fire=T0 + 1000)
    assert advance(scripts, tk, T0 + 1500, 1, T0 + 1000, plan) == [
        Outcome.OK, T0 + 2000, 1, 0, -1]           # T0 + 1000 is live already: not again
    assert_one_place(redis_client, tk, f"s:{T0 + 2000}", 1, scripts)
    stored = json.loads(redis_client.hget(tk.schedules, "s"))
    assert (stored["cursor"], stored["pending"], stored["sentCount"], stored["missedCount"],
            stored["lastFireTime"]) == (T0 + 2000, T0 + 2000, 2, 1, T0 + 1000)
    # The same plan again (a retry, another node): the cursor moved, nothing is written.
    assert advance(scripts, tk, T0 + 1500, 1, T0 + 1000, plan) == [
        Outcome.KEPT, T0 + 2000, 0, 0, -1]
    assert json.loads(redis_client.hget(tk.schedules, "s"))["sentCount"] == 2


def test_advance_of_another_generation_or_a_gone_schedule_writes_nothing(scripts, tk,
                                                                         redis_client):
    put(scripts, tk, T0, T0 + 1000)
    plan = SchedulePlan(((T0 + 2000, T0 + 2000),), T0 + 2000, T0 + 2000)
    assert advance(scripts, tk, T0 + 1000, 2, T0 + 1000, plan)[0] == Outcome.KEPT
    assert advance(scripts, tk, T0 + 1000, 1, T0 + 1000, plan)[0] == Outcome.OK
    redis_client.hdel(tk.schedules, "s")
    assert advance(scripts, tk, T0 + 2000, 1, T0 + 2000, plan) == [
        Outcome.NO_MESSAGE, -1, 0, 0, -1]


def test_repair_writes_the_deleted_waiting_occurrence_again_never_a_delivered_one(
        scripts, tk, redis_client):
    put(scripts, tk, T0, T0 + 1000)
    scripts.delete(tk, f"s:{T0 + 1000}", T0 + 1, 60_000, False)
    settle_due(redis_client, tk)   # the scheduler saw the occurrence go
    assert advance(scripts, tk, T0 + 2, 1, T0 + 1000, None) == [
        Outcome.OK, T0 + 1000, 1, 0, T0 + 1000]
    assert_one_place(redis_client, tk, f"s:{T0 + 1000}", 1, scripts)
    assert advance(scripts, tk, T0 + 3, 1, T0 + 1000, None)[2] == 0     # live: left alone
    # Delivered early (rescheduled to now, pulled) and acked: never written again.
    scripts.reschedule(tk, f"s:{T0 + 1000}", T0 + 4, T0 + 4, CHANNEL)
    scripts.pull(tk, T0 + 4, 1, 30_000, 60_000, 1000, CHANNEL, DEFAULTS)
    scripts.ack(tk, f"s:{T0 + 1000}", T0 + 5, 60_000)
    assert advance(scripts, tk, T0 + 6, 1, T0 + 1000, None)[2] == 0
    assert status_of(redis_client, tk, f"s:{T0 + 1000}") == 4
