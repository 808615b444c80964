"""A tick's claim of its due topics in the namespace due index, lua/due_claim.lua."""

from __future__ import annotations

from delayqueue.background.scheduler import CLAIMED_MS
from delayqueue.core.outcome import Outcome

from support.lua import NS


def test_due_claim_takes_the_due_topics_earliest_first_and_scores_them_with_the_claim(
        scripts, redis_client):
    redis_client.zadd(NS.due, {"b": 90, "a": 80, "now": 100, "later": 101})
    assert scripts.due_claim(NS, 100, 200, CLAIMED_MS) == [["a", "b", "now"], -1]
    assert redis_client.zrange(NS.due, 0, -1, withscores=True) == [
        ("later", 101), ("a", CLAIMED_MS), ("b", CLAIMED_MS), ("now", CLAIMED_MS)]
    assert int(redis_client.zscore(NS.due, "a")) == 2**53 - 1        # exact, not rounded


def test_due_claim_takes_at_most_limit_topics(scripts, redis_client):
    redis_client.zadd(NS.due, {"a": 1, "b": 2, "c": 3})
    claim = scripts.due_claim(NS, 100, 2, CLAIMED_MS)
    assert claim.topics == ["a", "b"]
    assert redis_client.zscore(NS.due, "c") == 3
    assert scripts.due_claim(NS, 100, 2, CLAIMED_MS).topics == ["c"]


def test_a_claimed_topic_is_due_for_no_other_tick(scripts, redis_client):
    redis_client.zadd(NS.due, {"t": 100})
    assert scripts.due_claim(NS, 100, 200, CLAIMED_MS).topics == ["t"]
    assert scripts.due_claim(NS, 10**13, 200, CLAIMED_MS) == [[], -1]   # only claimed: no head
    assert redis_client.zscore(NS.due, "t") == CLAIMED_MS


def test_due_claim_with_none_due_answers_the_earliest_unclaimed_due_time(scripts,
                                                                       redis_client):
    assert scripts.due_claim(NS, 100, 200, CLAIMED_MS) == [[], -1]      # an empty index
    redis_client.zadd(NS.due, {"claimed": CLAIMED_MS, "later": 250, "soon": 150})
    claim = scripts.due_claim(NS, 100, 200, CLAIMED_MS)
    assert (claim.topics, claim.head) == ([], 150)
    assert redis_client.zrange(NS.due, 0, -1, withscores=True) == [
        ("soon", 150), ("later", 250), ("claimed", CLAIMED_MS)]           # nothing written


def test_a_due_time_lowered_while_claimed_survives_the_ticks_write_back(scripts,
                                                                       redis_client):
    """The race the claim closes: a pull's ack deadline (ZADD LT) lands between the visit and
    the write-back, whose answer (computed before the pull) must not replace it."""
    redis_client.zadd(NS.due, {"t": 100, "u": 100})
    scripts.due_claim(NS, 100, 200, CLAIMED_MS)
    redis_client.zadd(NS.due, {"t": 400}, lt=True)                      # the pull's deadline
    assert scripts.due_set(NS, "t", CLAIMED_MS, 3_600_000) == Outcome.KEPT
    assert scripts.due_set(NS, "u", CLAIMED_MS, 3_600_000) == Outcome.OK  # nobody lowered u
    assert redis_client.zrange(NS.due, 0, -1, withscores=True) == [("t", 400), ("u", 3_600_000)]
