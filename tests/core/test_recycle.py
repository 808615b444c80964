"""Topic registry upkeep: camellia's recycling rule, without its inverted comparison."""

from __future__ import annotations

from test_bounded_work import make_runtime

from delayqueue.core.clock import ManualClock

HALF_HOUR_MS = 1_800_000


def test_empty_topic_unused_past_the_timeout_is_recycled(redis_url, redis_client):
    clock = ManualClock()
    rt = make_runtime(redis_url, clock)
    sent = rt.queue.send("gone", "x").message
    rt.queue.pull("gone")
    rt.queue.ack("gone", sent.msg_id)
    clock.advance(HALF_HOUR_MS + 1)
    # The acked message's record outlived its retention, but nothing purged it yet: kept.
    assert rt.scheduler.recycle_topics() == []
    rt.scheduler.run_due()                      # the topic's due visit purges the record
    tk = rt.queue.topic_keys("gone")
    assert redis_client.exists(*tk.holdings) == 0 and redis_client.get(tk.seq) == "1"
    assert rt.scheduler.recycle_topics() == ["gone"]
    assert redis_client.exists(*tk.queues) == 0           # its sequence went with it
    assert "gone" not in rt.queue.topics()
    assert redis_client.zscore(rt.keys.due, "gone") is None


def test_recently_used_topic_is_kept(redis_url, redis_client):
    clock = ManualClock()
    rt = make_runtime(redis_url, clock)
    rt.queue.pull("busy")  # registers the topic as used now
    clock.advance(HALF_HOUR_MS - 1)
    assert rt.scheduler.recycle_topics() == []
    assert rt.queue.topics() == ["busy"]


def test_unused_topic_that_still_holds_messages_is_kept(redis_url, redis_client):
    clock = ManualClock()
    rt = make_runtime(redis_url, clock)
    rt.queue.send("later", "x", delay_ms=7 * 24 * 3_600_000)
    clock.advance(HALF_HOUR_MS + 1)
    assert rt.scheduler.recycle_topics() == []
    assert rt.queue.topics() == ["later"]


def test_topic_used_between_the_check_and_the_removal_is_kept(redis_url, redis_client):
    """The recycle script compares the last-active score it read: a use in between wins."""
    clock = ManualClock()
    rt = make_runtime(redis_url, clock)
    rt.queue.pull("raced")
    seen = redis_client.zscore(rt.keys.topics, "raced")
    clock.advance(HALF_HOUR_MS + 1)
    redis_client.zadd(rt.keys.topics, {"raced": clock.now_ms()})  # another node used it
    assert rt.scripts.recycle(rt.keys, "raced", seen) == 0
    assert rt.queue.topics() == ["raced"]
