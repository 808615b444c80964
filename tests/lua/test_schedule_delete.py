"""lua/schedule_delete.lua: the schedule goes, and its waiting occurrence with it."""

from __future__ import annotations

from test_schedule_put import put

from delayqueue.core.outcome import Outcome

from support.lua import END_LIFE, T0, assert_one_place


def test_delete_ends_the_waiting_occurrence(scripts, tk, redis_client):
    put(scripts, tk, T0, T0 + 1000)
    assert scripts.schedule_delete(tk, T0 + 1, "s", END_LIFE) == [Outcome.OK, 1]
    assert redis_client.hexists(tk.schedules, "s") == 0
    assert_one_place(redis_client, tk, f"s:{T0 + 1000}", 7, scripts)
    assert scripts.schedule_delete(tk, T0 + 2, "s", END_LIFE) == [Outcome.NO_MESSAGE, 0]


def test_delete_leaves_a_due_occurrence(scripts, tk, redis_client):
    put(scripts, tk, T0, T0)
    assert scripts.schedule_delete(tk, T0 + 1, "s", END_LIFE) == [Outcome.OK, 0]
    assert_one_place(redis_client, tk, f"s:{T0}", 2, scripts)
