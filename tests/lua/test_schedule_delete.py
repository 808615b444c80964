"""lua/schedule_delete.lua: the schedule goes, its id, and its waiting occurrence with it."""

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


def test_put_and_delete_keep_the_ids_equal_to_the_schedules(scripts, tk, redis_client):
    for sid in ("b", "a", "c", "a"):                           # "a" again: a replace
        put(scripts, tk, T0, T0 + 1000, sid=sid)
    assert redis_client.zrange(tk.schedule_ids, 0, -1, withscores=True) == [
        ("a", 0), ("b", 0), ("c", 0)]
    assert scripts.schedule_delete(tk, T0 + 1, "b", END_LIFE)[0] == Outcome.OK
    assert scripts.schedule_delete(tk, T0 + 1, "b", END_LIFE)[0] == Outcome.NO_MESSAGE
    assert redis_client.zrange(tk.schedule_ids, 0, -1) == ["a", "c"]
    assert sorted(redis_client.hkeys(tk.schedules)) == ["a", "c"]
    for sid in ("a", "c"):
        scripts.schedule_delete(tk, T0 + 2, sid, END_LIFE)
    assert redis_client.exists(tk.schedules, tk.schedule_ids) == 0   # nothing left behind
