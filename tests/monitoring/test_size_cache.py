"""Idle topics cost Redis nothing (issue 32): /metrics and the snapshot writer read again only
the topics that changed, and their figures still match a fresh full read.

Redis commands are counted with INFO commandstats on a real redis-server; the clock is a
ManualClock, so a scrape's window and the time-dependent sizes are exact.
"""

from __future__ import annotations

import pytest
import redis

from delayqueue.background.runtime import Runtime
from delayqueue.core.clock import ManualClock
from delayqueue.monitoring.metrics import named_subscription_sizes
from delayqueue.monitoring.size_cache import MetricsSizes, SnapshotSizes
from delayqueue.settings.config import load_settings

START_MS = 1_763_596_800_000
INTERVAL_MS = 60_000
GRACE_MS = 2_000
HOUR_MS = 3_600_000
SCRAPE_MS = 15_000


def runtime(redis_url: str, clock: ManualClock, snapshot_dir: str = "") -> Runtime:
    settings = load_settings(overrides={"redis_url": redis_url, "snapshot_dir": snapshot_dir,
                                        "monitor_interval_seconds": INTERVAL_MS // 1000})
    return Runtime(settings, client=redis.Redis.from_url(redis_url, decode_responses=True),
                   clock=clock)


def add_idle(rt: Runtime, first: int, count: int) -> None:
    """Topics holding one message due in 6 h each."""
    for i in range(first, first + count):
        rt.queue.send(f"idle-{i:04d}", "b", msg_id="m", delay_ms=6 * HOUR_MS)


def commands(client: redis.Redis, action) -> int:
    """Redis commands ``action`` sends (INFO and CONFIG, the counting's own, left out)."""
    client.config_resetstat()
    action()
    stats = client.info("commandstats")
    return sum(int(v["calls"]) for k, v in stats.items()
               if k not in ("cmdstat_info", "cmdstat_config|resetstat"))


def scrape(sizes: MetricsSizes) -> None:
    topics = sizes.queue_sizes()
    sizes.subscription_sizes(sorted(topics))
    sizes.totals()


def test_a_scrape_reads_no_more_with_ten_times_the_idle_topics(redis_url):
    clock = ManualClock(START_MS)
    rt = runtime(redis_url, clock)
    sizes = MetricsSizes(rt.queue, rt.monitor, named_subscription_sizes)
    counted = {}
    for total, added in ((20, 20), (200, 180)):
        add_idle(rt, total - added, added)
        rt.monitor.flush()
        clock.advance(SCRAPE_MS)
        scrape(sizes)                         # reads the new topics
        read_before = sizes.cache.topics_read
        clock.advance(SCRAPE_MS)
        counted[total] = commands(rt.client, lambda: scrape(sizes))
        assert sizes.cache.topics_read == read_before     # no topic read again
        assert len(sizes.queue_sizes()) == total
    assert counted[200] == counted[20]


def test_a_snapshot_interval_reads_no_more_with_ten_times_the_idle_topics(redis_url, tmp_path):
    clock = ManualClock(START_MS + 5_000)
    rt = runtime(redis_url, clock, str(tmp_path))
    counted, lines = {}, {}
    for total, added in ((20, 20), (200, 180)):
        add_idle(rt, total - added, added)
        rt.monitor.flush()
        clock.advance(INTERVAL_MS)
        rt.snapshots.tick()                   # the interval of the sends: the new topics read
        clock.advance(INTERVAL_MS)
        counted[total] = commands(rt.client, lambda: lines.__setitem__(total,
                                                                       rt.snapshots.tick()))
    assert lines == {20: 20, 200: 200}        # a line per topic and interval, as before
    assert counted[200] == counted[20]


def fresh_infos(rt: Runtime, topics: list[str]) -> list[dict]:
    infos = rt.queue.topic_infos(topics)
    for info in infos:
        if rt.client.hlen(rt.queue.topic_keys(info["topic"]).subs):
            info["subscriptions"] = rt.queue.subscription_infos(info["topic"])
    return infos


def assert_like_a_fresh_read(rt: Runtime, sizes: MetricsSizes, snap: SnapshotSizes,
                             clock: ManualClock, step: str) -> None:
    rt.monitor.flush()
    clock.advance(SCRAPE_MS)
    cached = sizes.queue_sizes()
    assert cached == rt.queue.queue_sizes(), step
    topics = sorted(cached)
    assert sizes.subscription_sizes(topics) == named_subscription_sizes(rt.queue, topics), step
    assert sizes.totals() == rt.monitor.totals(), step
    snap.refresh()
    assert snap.topics() == rt.queue.topics(), step
    assert snap.infos(topics) == fresh_infos(rt, topics), step


def test_cached_figures_match_a_fresh_read_after_every_kind_of_event(redis_url):
    clock = ManualClock(START_MS)
    rt = runtime(redis_url, clock)
    q = rt.queue
    sizes = MetricsSizes(q, rt.monitor, named_subscription_sizes)
    snap = SnapshotSizes(q, rt.monitor)
    add_idle(rt, 0, 3)
    q.send("work", "b", msg_id="w1")
    q.send("work", "b", msg_id="w2")
    q.send("later", "b", msg_id="l1", delay_ms=HOUR_MS + 90_000)   # crosses 1 h in 2 min
    q.send("group", "b", msg_id="g1", group_id="g")
    q.send("group", "b", msg_id="g2", group_id="g", delay_ms=30_000)   # held, due in 30 s
    rt.admin.set_config("fragile", {"maxRetry": "0"})
    q.send("fragile", "b", msg_id="f1")
    q.send("short", "b", msg_id="s1", ttl_ms=20_000)
    check = lambda step: assert_like_a_fresh_read(rt, sizes, snap, clock, step)  # noqa: E731
    check("sends")

    (w1,) = q.pull("work", ack_timeout_ms=5_000).messages
    check("pull")
    q.ack("work", "w1", w1.receipt)
    check("ack")
    q.pull("work", ack_timeout_ms=5_000)
    check("second pull")
    assert q.pull("group").messages[0].msg_id == "g1"
    check("group head pulled")
    clock.advance(20_000)                     # g2 falls due behind g1: waiting -> blocked
    check("time alone: a held message falls due")
    rt.scheduler.tick()                       # w2's ack deadline passed: back to ready
    check("timeout")
    clock.advance(30_000)
    rt.scheduler.tick()                       # s1's ttl ran out
    check("expiry")
    (f1,) = q.pull("fragile").messages
    q.nack("fragile", "f1", f1.receipt)       # retries exhausted: a dead letter
    rt.scheduler.tick()
    check("dead letter")
    assert rt.admin.redrive("fragile") == 1
    check("redrive")
    (f1,) = q.pull("fragile").messages
    q.nack("fragile", "f1", f1.receipt)
    rt.scheduler.tick()
    assert rt.admin.purge("fragile") == 1
    check("dead-letter purge")
    assert rt.controls.pause("idle-0001") is True
    check("pause")
    assert rt.controls.resume("idle-0001") is True
    check("resume")
    assert rt.controls.purge("idle-0002").count == 1
    check("purge")
    rt.subscriptions.create("work", "billing")
    q.send("work", "b", msg_id="w3")
    check("subscription created, a send reaches it")
    q.pull("work", subscription="billing")
    check("pull of the subscription")
    rt.controls.pause("work", subscription="billing")
    check("subscription paused")
    rt.subscriptions.delete("work", "billing")
    check("subscription deleted")
    q.reschedule("work", "w3", delay_ms=HOUR_MS)
    check("reschedule")
    clock.advance(2 * 60_000)                 # l1 comes within the hour: its bucket moves
    check("time alone: a waiting message changes bucket")


def test_a_change_flushed_after_a_scrape_is_read_by_the_next(redis_url):
    """A sample reaches Redis up to about a second after its change: the scrape in between
    shows the size before it, the next one the size after."""
    clock = ManualClock(START_MS)
    rt = runtime(redis_url, clock)
    sizes = MetricsSizes(rt.queue, rt.monitor, named_subscription_sizes)
    rt.queue.send("a", "b", msg_id="1")
    rt.monitor.flush()
    assert sizes.queue_sizes()["a"].ready == 1
    rt.queue.send("a", "b", msg_id="2")          # its sample still in this process
    clock.advance(1_000)
    assert sizes.queue_sizes()["a"].ready == 1
    clock.advance(1_000)
    rt.monitor.flush()                            # recorded in the interval read before
    clock.advance(SCRAPE_MS)
    assert sizes.queue_sizes() == rt.queue.queue_sizes()


def test_a_read_that_fails_after_the_poll_reads_everything_next_time(redis_url):
    clock = ManualClock(START_MS)
    rt = runtime(redis_url, clock)
    sizes = MetricsSizes(rt.queue, rt.monitor, named_subscription_sizes)
    add_idle(rt, 0, 3)
    rt.monitor.flush()
    sizes.queue_sizes()
    rt.queue.send("idle-0001", "b", msg_id="now")
    rt.monitor.flush()
    clock.advance(SCRAPE_MS)
    read = sizes.cache.read

    def fail(topics, now_ms):
        raise redis.ConnectionError("lost after the poll")
    sizes.cache.read = fail
    with pytest.raises(redis.ConnectionError):
        sizes.queue_sizes()
    sizes.cache.read = read
    clock.advance(SCRAPE_MS)
    assert sizes.queue_sizes() == rt.queue.queue_sizes()
    assert sizes.queue_sizes()["idle-0001"].ready == 1
