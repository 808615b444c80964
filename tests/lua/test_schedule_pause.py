"""lua/schedule_pause.lua: pause ends the waiting occurrence; resume writes the plan made
from the expected generation."""

from __future__ import annotations

import json

from test_schedule_put import put

from delayqueue.core.outcome import Outcome
from delayqueue.core.scripts import SchedulePlan

from support.lua import (
    CHANNEL,
    DEFAULTS,
    END_LIFE,
    T0,
    assert_one_place,
    pull,
    pulled_ids,
    settle_due,
    status_of,
)


def pause(scripts, tk, now, paused, gen=0, plan=None):
    return scripts.schedule_pause(tk, now, CHANNEL, "s", END_LIFE, paused, gen, plan, DEFAULTS)


def test_pause_then_resume(scripts, tk, redis_client):
    put(scripts, tk, T0, T0 + 1000)
    assert pause(scripts, tk, T0 + 1, True) == [Outcome.OK, 2, 1, 0, -1]
    assert_one_place(redis_client, tk, f"s:{T0 + 1000}", 7, scripts)
    assert pause(scripts, tk, T0 + 2, True) == [Outcome.OK, 2, 0, 0, -1]
    stored = json.loads(redis_client.hget(tk.schedules, "s"))
    assert (stored["paused"], stored["pending"], stored["sentCount"]) == (True, None, 0)
    plan = SchedulePlan(((T0 + 5000, T0 + 5000),), T0 + 5000, T0 + 5000)
    assert pause(scripts, tk, T0 + 4500, False, 1, plan)[0] == Outcome.KEPT   # stale gen
    settle_due(redis_client, tk)   # the scheduler saw the paused occurrence end
    assert pause(scripts, tk, T0 + 4500, False, 2, plan) == [Outcome.OK, 3, 1, 1, T0 + 5000]
    assert_one_place(redis_client, tk, f"s:{T0 + 5000}", 1, scripts)
    stored = json.loads(redis_client.hget(tk.schedules, "s"))
    assert (stored["paused"], stored["pending"], stored["sentCount"]) == (False, T0 + 5000, 1)


def sent_count(redis_client, tk) -> int:
    return json.loads(redis_client.hget(tk.schedules, "s"))["sentCount"]


def test_pause_leaves_an_occurrence_that_is_due_already(scripts, tk, redis_client):
    put(scripts, tk, T0, T0 + 1000)
    assert pause(scripts, tk, T0 + 1000, True)[0] == Outcome.OK
    assert_one_place(redis_client, tk, f"s:{T0 + 1000}", 1, scripts)   # due: it goes on
    assert sent_count(redis_client, tk) == 1                           # and stays counted


def test_a_pause_and_resume_of_the_same_fire_time_count_it_once(scripts, tk, redis_client):
    put(scripts, tk, T0, T0 + 1000, limit=2)
    pause(scripts, tk, T0 + 1, True)
    plan = SchedulePlan(((T0 + 1000, T0 + 1000),), T0 + 1000, T0 + 1000)
    settle_due(redis_client, tk)
    assert pause(scripts, tk, T0 + 2, False, 2, plan) == [Outcome.OK, 3, 1, 1, T0 + 1000]
    assert_one_place(redis_client, tk, f"s:{T0 + 1000}", 1, scripts)   # written again
    assert sent_count(redis_client, tk) == 1                           # counted once
    for k in range(3):                                                 # as often as asked
        pause(scripts, tk, T0 + 3 + 2 * k, True)
        pause(scripts, tk, T0 + 4 + 2 * k, False, 4 + 2 * k, plan)
    assert sent_count(redis_client, tk) == 1


def test_pause_uncounts_an_occurrence_deleted_before_its_fire_time(scripts, tk, redis_client):
    put(scripts, tk, T0, T0 + 1000)
    assert scripts.delete(tk, f"s:{T0 + 1000}", T0 + 1, END_LIFE, False)[0] == Outcome.OK
    pause(scripts, tk, T0 + 2, True)                          # nothing left to end
    assert sent_count(redis_client, tk) == 0                  # never delivered: not sent


def test_pause_keeps_counting_an_occurrence_delivered_early(scripts, tk, redis_client):
    put(scripts, tk, T0, T0 + 1000)
    assert scripts.reschedule(tk, f"s:{T0 + 1000}", T0 + 1, T0 + 1, CHANNEL)[0] == Outcome.OK
    assert pulled_ids(pull(scripts, tk, T0 + 2)) == [f"s:{T0 + 1000}"]
    pause(scripts, tk, T0 + 3, True)                          # fire time ahead, delivered
    assert status_of(redis_client, tk, f"s:{T0 + 1000}") == 3
    assert sent_count(redis_client, tk) == 1


def test_no_such_schedule(scripts, tk):
    assert pause(scripts, tk, T0, True) == [Outcome.NO_MESSAGE, 0, 0, 0, -1]
