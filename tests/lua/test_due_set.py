"""The namespace due index's compare-and-set, lua/due_set.lua."""

from __future__ import annotations

from delayqueue.core.outcome import Outcome

from support.lua import NS


def test_due_set_replaces_the_score_the_tick_read(scripts, redis_client):
    redis_client.zadd(NS.due, {"t": 100})
    assert scripts.due_set(NS, "t", 100, 500) == 1
    assert redis_client.zscore(NS.due, "t") == 500
    assert scripts.due_set(NS, "t", 500, -1) == Outcome.OK
    assert redis_client.zscore(NS.due, "t") is None


def test_due_set_keeps_a_lower_score_written_meanwhile(scripts, redis_client):
    redis_client.zadd(NS.due, {"t": 50})      # a send lowered it after the tick read 100
    assert scripts.due_set(NS, "t", 100, 500) == 0
    assert redis_client.zscore(NS.due, "t") == 50
    assert scripts.due_set(NS, "t", 100, -1) == Outcome.KEPT          # nothing live: still kept
    assert redis_client.zscore(NS.due, "t") == 50
    assert scripts.due_set(NS, "t", 100, 20) == 0           # an even earlier answer wins
    assert redis_client.zscore(NS.due, "t") == 20


def test_due_set_of_missing_topic_writes_the_answer(scripts, redis_client):
    assert scripts.due_set(NS, "t", 100, 700) == 1
    assert redis_client.zscore(NS.due, "t") == 700
