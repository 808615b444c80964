"""lua/schedule_pause.lua: pause ends the waiting occurrence; resume writes the plan made
from the expected generation."""

from __future__ import annotations

import json

from test_schedule_put import put

from delayqueue.core.outcome import Outcome
from delayqueue.core.scripts import SchedulePlan

from support.lua import CHANNEL, DEFAULTS, END_LIFE, T0, assert_one_place


def pause(scripts, tk, now, paused, gen=0, plan=None):
    return scripts.schedule_pause(tk, now, CHANNEL, "s", END_LIFE, paused, gen, plan, DEFAULTS)


def test_pause_then_resume(scripts, tk, redis_client):
    put(scripts, tk, T0, T0 + 1000)
    assert pause(scripts, tk, T0 + 1, True) == [Outcome.OK, 2, 1, 0, -1]
    assert_one_place(redis_client, tk, f"s:{T0 + 1000}", 7, scripts)
    assert pause(scripts, tk, T0 + 2, True) == [Outcome.OK, 2, 0, 0, -1]
    stored = json.loads(redis_client.hget(tk.schedules, "s"))
    assert (stored["paused"], stored["pending"]) == (True, None)
    plan = SchedulePlan(((T0 + 5000, T0 + 5000),), T0 + 5000, T0 + 5000)
    assert pause(scripts, tk, T0 + 4500, False, 1, plan)[0] == Outcome.KEPT   # stale gen
    assert pause(scripts, tk, T0 + 4500, False, 2, plan) == [Outcome.OK, 3, 1, 1, T0 + 5000]
    assert_one_place(redis_client, tk, f"s:{T0 + 5000}", 1, scripts)
    stored = json.loads(redis_client.hget(tk.schedules, "s"))
    assert (stored["paused"], stored["pending"], stored["sentCount"]) == (False, T0 + 5000, 2)


def test_pause_leaves_an_occurrence_that_is_due_already(scripts, tk, redis_client):
    put(scripts, tk, T0, T0 + 1000)
    assert pause(scripts, tk, T0 + 1000, True)[0] == Outcome.OK
    assert_one_place(redis_client, tk, f"s:{T0 + 1000}", 1, scripts)   # due: it goes on


def test_no_such_schedule(scripts, tk):
    assert pause(scripts, tk, T0, True) == [Outcome.NO_MESSAGE, 0, 0, 0, -1]
