"""A due time a request lowers while a scheduler tick visits the same topic must survive the
tick's write-back to the due index: the tick claims the topics it visits (lua/due_claim.lua)
and writes back with a compare-and-set against its claim (lua/due_set.lua)."""

from __future__ import annotations

import pytest
import redis

from delayqueue.background.runtime import Runtime
from delayqueue.background.scheduler import CLAIMED_MS
from delayqueue.core.clock import ManualClock
from delayqueue.settings.config import load_settings

ACK_TIMEOUT_MS = 300


def runtime(redis_url: str, clock: ManualClock) -> Runtime:
    """One process's runtime (its own connection) on the shared Redis."""
    settings = load_settings(overrides={"redis_url": redis_url, "snapshot_dir": ""})
    return Runtime(settings, client=redis.Redis.from_url(redis_url, decode_responses=True),
                   clock=clock)


def test_an_ack_deadline_a_pull_sets_during_a_tick_stays_in_the_due_index(redis_url,
                                                                         redis_client):
    """Seen under load (tests/background/test_redelivery_timing.py, 3 of 9 runs with both
    cores busy): an ack timeout processed ~5 s after its deadline, the redelivery that late.
    Here the pull comes exactly between the tick's visit and its write-back."""
    clock = ManualClock()
    rt = runtime(redis_url, clock)
    rt.queue.send("t", "x", msg_id="a", delay_ms=1000)
    clock.advance(1000)
    visit = rt.scheduler.visit
    pulled = []

    def visit_then_a_consumer_pulls(topics):
        next_due = visit(topics)             # promoted "a": nothing consuming yet
        pulled.extend(rt.queue.pull("t", ack_timeout_ms=ACK_TIMEOUT_MS).messages)
        return next_due

    rt.scheduler.visit = visit_then_a_consumer_pulls
    rt.scheduler.run_due()
    assert [m.msg_id for m in pulled] == ["a"]
    deadline = clock.now_ms() + ACK_TIMEOUT_MS
    assert redis_client.zrange(rt.queue.topic_keys("t").ack, 0, -1, withscores=True)[0][1] \
        == deadline
    assert redis_client.zscore(rt.keys.due, "t") <= deadline


def test_a_tick_beside_another_never_visits_the_topics_the_other_claimed(redis_url,
                                                                       redis_client):
    """A lease lost mid-tick lets two processes tick at once: the second finds the first's
    topics claimed, so it neither visits them nor writes their due times back."""
    clock = ManualClock()
    first, second = runtime(redis_url, clock), runtime(redis_url, clock)
    first.queue.send("t", "x", msg_id="a", delay_ms=1000)
    clock.advance(1000)
    visit, second_visit = first.scheduler.visit, second.scheduler.visit
    seen_by_second = []
    second.scheduler.visit = lambda topics: seen_by_second.extend(topics) or \
        second_visit(topics)

    def visit_while_the_other_ticks(topics):
        assert second.scheduler.run_due() is None        # only a claimed topic: no head
        return visit(topics)

    first.scheduler.visit = visit_while_the_other_ticks
    expire_at = first.queue.get("t", "a").expire_time
    assert first.scheduler.run_due() == expire_at
    assert seen_by_second == []
    assert redis_client.zscore(first.keys.due, "t") == expire_at


def test_the_next_due_time_a_tick_answers_is_never_another_ticks_claim(redis_url,
                                                                     redis_client):
    clock = ManualClock()
    rt = runtime(redis_url, clock)
    redis_client.zadd(rt.keys.due, {"claimed-elsewhere": CLAIMED_MS, "empty": clock.now_ms()})
    assert rt.scheduler.run_due() is None      # "empty" holds nothing: it leaves the index
    assert redis_client.zrange(rt.keys.due, 0, -1) == ["claimed-elsewhere"]


def test_a_tick_that_fails_after_its_claim_makes_its_topics_due_at_once(redis_url,
                                                                       redis_client):
    """A visit that fails (Redis went away mid-tick) leaves no topic claimed: the next tick
    visits it, without waiting for the repair sweep."""
    clock = ManualClock()
    rt = runtime(redis_url, clock)
    rt.queue.send("t", "x", msg_id="a", delay_ms=1000)
    clock.advance(1000)

    def fails(topics):
        raise redis.ConnectionError("connection lost mid-tick")

    rt.scheduler.visit = fails
    with pytest.raises(redis.ConnectionError):
        rt.scheduler.run_due()
    assert redis_client.zscore(rt.keys.due, "t") == clock.now_ms()
    del rt.scheduler.visit
    rt.scheduler.run_due()
    assert rt.queue.get("t", "a").status == 2


def test_a_topic_claimed_by_a_tick_that_died_is_due_again_after_the_repair_sweep(
        redis_url, redis_client):
    """A process killed between its claim and its write-back: the same bound as one killed
    between a script and its due-index write."""
    clock = ManualClock()
    rt = runtime(redis_url, clock)
    rt.queue.send("t", "x", msg_id="a", delay_ms=1000)
    redis_client.zadd(rt.keys.topics, {"t": clock.now_ms()})
    clock.advance(1000)
    assert rt.scripts.due_claim(rt.keys, clock.now_ms(), 200, CLAIMED_MS).topics == ["t"]
    assert rt.scheduler.run_due() is None                    # the dead tick's claim stands
    assert rt.queue.get("t", "a").status == 1
    assert rt.scheduler.repair_due_index() == 1
    assert redis_client.zscore(rt.keys.due, "t") == clock.now_ms()
    rt.scheduler.run_due()
    assert rt.queue.get("t", "a").status == 2
