"""Monitor: per-process buffers flushed into Redis, summed over the fleet."""

from __future__ import annotations

import logging

import pytest
import redis

from delayqueue.core.clock import ManualClock
from delayqueue.core.histogram import bucket_index
from delayqueue.core.keys import NamespaceKeys
from delayqueue.core.monitor import MAX_BUFFERED_INTERVALS, Monitor
from delayqueue.core.monitor_hash import COUNTERS
from delayqueue.core.outcome import Outcome
from delayqueue.core.scripts import Scripts

from support.ports import refused_port

INTERVAL_S = 60
START_MS = 1_763_596_800_000  # an interval boundary for 60 s intervals


@pytest.fixture
def dead_client():
    """A client to a loopback port that refuses connections: every command fails fast."""
    with refused_port() as port:
        client = redis.Redis(port=port, socket_connect_timeout=0.2, retry=None)
        yield client
        client.close()


@pytest.fixture
def keys():
    return NamespaceKeys("dq", "default")


@pytest.fixture
def clock():
    return ManualClock(START_MS + 5_000)


def make_monitor(client, keys, clock):
    return Monitor(client, keys, clock, INTERVAL_S, Scripts(client))


def test_two_processes_sum_up_in_read_interval(redis_client, keys, clock):
    a = make_monitor(redis_client, keys, clock)
    b = make_monitor(redis_client, keys, clock)
    a.incr("t1", "sendMsg", 3)
    b.incr("t1", "sendMsg", 2)
    b.incr("t2", "pullMsg")
    a.observe("t1", "pullMsgTimeGap", [3, 40])
    b.observe("t1", "pullMsgTimeGap", [7, 0.4])
    a.flush()
    b.flush()

    stats = a.read_interval(START_MS)
    assert set(stats) == {"t1", "t2"}
    assert stats["t1"]["sendMsg"] == 5
    assert stats["t1"]["pullMsg"] == 0
    assert stats["t2"]["pullMsg"] == 1
    hist = stats["t1"]["pullMsgTimeGap"]
    assert hist["count"] == 4
    assert hist["sum"] == 3 + 40 + 7 + 0
    assert hist["max"] == 40
    expected = [0] * 16
    for gap in (3, 40, 7, 0):
        expected[bucket_index(gap)] += 1
    assert hist["counts"] == expected
    assert stats["t1"]["readyQueueTimeGap"] == {"count": 0, "sum": 0, "max": 0,
                                               "counts": [0] * 16}


def test_interval_hash_has_ttl_and_total_has_none(redis_client, keys, clock):
    monitor = make_monitor(redis_client, keys, clock)
    monitor.incr("t1", "sendMsg")
    monitor.flush()
    assert redis_client.pttl(keys.monitor(START_MS)) > 3_500_000
    assert redis_client.pttl(keys.monitor_total) == -1
    assert redis_client.hgetall(keys.monitor(START_MS)) == {"t1\tsendMsg": "1"}


def test_samples_after_a_boundary_land_in_the_next_interval_even_with_one_flush(
        redis_client, keys, clock):
    monitor = make_monitor(redis_client, keys, clock)
    monitor.incr("t1", "sendMsg")
    monitor.observe("t1", "readyQueueTimeGap", [12])
    clock.advance(INTERVAL_S * 1000)
    monitor.incr("t1", "sendMsg", 4)
    monitor.observe("t1", "readyQueueTimeGap", [900])
    monitor.flush()  # covers both intervals

    first = monitor.read_interval(START_MS)["t1"]
    second = monitor.read_interval(START_MS + 60_000)["t1"]
    assert (first["sendMsg"], second["sendMsg"]) == (1, 4)
    assert first["readyQueueTimeGap"]["max"] == 12
    assert second["readyQueueTimeGap"]["max"] == 900
    assert monitor.totals()["topics"]["t1"]["sendMsg"] == 5


def test_max_is_the_max_across_processes_whichever_flushes_first(redis_client, keys, clock):
    a = make_monitor(redis_client, keys, clock)
    b = make_monitor(redis_client, keys, clock)
    a.observe("t1", "pullMsgTimeGap", [500])
    b.observe("t1", "pullMsgTimeGap", [20])
    a.flush()
    b.flush()
    assert a.read_interval(START_MS)["t1"]["pullMsgTimeGap"]["max"] == 500
    a.observe("t1", "pullMsgTimeGap", [501])
    a.flush()
    assert b.read_interval(START_MS)["t1"]["pullMsgTimeGap"]["max"] == 501


def test_monitor_data_reports_the_last_complete_interval_in_camellia_shape(
        redis_client, keys, clock):
    a = make_monitor(redis_client, keys, clock)
    b = make_monitor(redis_client, keys, clock)
    a.incr("t2", "sendMsg", 2)
    a.incr("t1", "ackMsg", 5)
    b.incr("t1", "nackMsg", 2)
    b.incr("t1", "pullMsg", 7)
    for counter in ("replaced", "deduplicated", "scheduleSent", "scheduleMissed"):
        a.incr("t1", counter, 3)                 # ours: left out of camellia's shape
    # 100 gaps: 98 of 3 ms (bucket <=5), 2 of 1500 ms (bucket <=2000)
    a.observe("t1", "pullMsgTimeGap", [3] * 50)
    b.observe("t1", "pullMsgTimeGap", [3] * 48 + [1500, 1500])
    a.observe("t1", "readyQueueTimeGap", [0.2])
    a.flush()
    b.flush()

    # The interval is still running: the previous one (empty) is reported.
    assert a.monitor_data() == {"requestStatsList": [], "pullMsgTimeGapStatsList": [],
                                "readyQueueTimeGapStatsList": []}
    clock.advance(INTERVAL_S * 1000)
    assert b.monitor_data() == {
        "requestStatsList": [
            {"topic": "t1", "sendMsg": 0, "pullMsg": 7, "deleteMsg": 0, "ackMsg": 7,
             "getMsg": 0, "triggerMsgReady": 0, "triggerMsgEndLife": 0,
             "triggerMsgTimeout": 0},
            {"topic": "t2", "sendMsg": 2, "pullMsg": 0, "deleteMsg": 0, "ackMsg": 0,
             "getMsg": 0, "triggerMsgReady": 0, "triggerMsgEndLife": 0,
             "triggerMsgTimeout": 0},
        ],
        "pullMsgTimeGapStatsList": [
            {"topic": "t1", "count": 100, "avg": (98 * 3 + 3000) / 100, "max": 1500,
             "p50": 5, "p99": 1500},
        ],
        "readyQueueTimeGapStatsList": [
            {"topic": "t1", "count": 1, "avg": 0.0, "max": 0, "p50": 0, "p99": 0},
        ],
    }


def test_percentiles_come_from_bucket_bounds(redis_client, keys, clock):
    monitor = make_monitor(redis_client, keys, clock)
    monitor.observe("t1", "readyQueueTimeGap", [15] * 60 + [150] * 39 + [40_000])
    monitor.flush()
    clock.advance(INTERVAL_S * 1000)
    (entry,) = monitor.monitor_data()["readyQueueTimeGapStatsList"]
    assert (entry["p50"], entry["p99"], entry["max"]) == (20, 200, 40_000)


def test_flush_during_an_outage_keeps_the_data_for_a_later_flush(
        redis_client, redis_server, keys, clock, caplog, dead_client):
    monitor = make_monitor(redis_client, keys, clock)
    monitor.client = dead_client
    monitor.incr("t1", "sendMsg", 2)
    with caplog.at_level(logging.ERROR, logger="delayqueue.core.monitor"):
        monitor.flush()  # must not raise
        clock.advance(INTERVAL_S * 1000)
        monitor.incr("t1", "sendMsg", 3)
        monitor.flush()
    assert len([r for r in caplog.records if r.levelno >= logging.ERROR]) == 1
    assert redis_client.exists(keys.monitor(START_MS)) == 0

    monitor.client = redis.Redis.from_url(redis_server.url)  # bytes replies, as in production
    monitor.incr("t1", "sendMsg", 1)
    monitor.flush()
    assert monitor.read_interval(START_MS)["t1"]["sendMsg"] == 2
    assert monitor.read_interval(START_MS + 60_000)["t1"]["sendMsg"] == 4
    assert monitor.totals()["topics"]["t1"]["sendMsg"] == 6
    monitor.flush()  # nothing left to send twice
    assert monitor.totals()["topics"]["t1"]["sendMsg"] == 6


def test_buffer_keeps_only_the_newest_intervals_during_a_long_outage(redis_client, keys, clock,
                                                                   dead_client):
    monitor = make_monitor(redis_client, keys, clock)
    good = monitor.client
    monitor.client = dead_client
    for _ in range(MAX_BUFFERED_INTERVALS + 3):
        monitor.incr("t1", "getMsg")
        monitor.flush()
        clock.advance(INTERVAL_S * 1000)
    monitor.client = good
    monitor.flush()
    assert monitor.totals()["topics"]["t1"]["getMsg"] == MAX_BUFFERED_INTERVALS
    assert monitor.read_interval(START_MS) == {}


def test_loop_timings_are_kept_apart_from_topics(redis_client, keys, clock):
    monitor = make_monitor(redis_client, keys, clock)
    monitor.observe_loop("promote", 0.25)
    monitor.observe_loop("promote", 12.5)
    monitor.incr("t1", "triggerMsgReady")
    monitor.flush()
    totals = monitor.totals()
    assert set(totals["topics"]) == {"t1"}
    assert set(monitor.read_interval(START_MS)) == {"t1"}
    loop = totals["loops"]["promote"]
    assert loop["count"] == 2
    assert loop["sum"] == pytest.approx(12.75)
    assert loop["max"] == 12.5
    assert loop["counts"][0] == 1 and loop["counts"][bucket_index(12.5)] == 1


def test_unknown_counter_is_refused(redis_client, keys, clock):
    monitor = make_monitor(redis_client, keys, clock)
    with pytest.raises(ValueError):
        monitor.incr("t1", "sendMsgs")
    with pytest.raises(ValueError):
        monitor.observe("t1", "pullGap", [1])


def test_flush_script_rejects_malformed_groups_before_writing(redis_client, keys):
    scripts = Scripts(redis_client)

    def flush(*groups: str) -> int:
        return scripts.monitor_flush(keys, START_MS, 60000, groups)

    assert flush("a\tsendMsg", "i") == Outcome.BAD_ARGUMENT                  # not a triple
    assert flush("a\tsendMsg", "i", "1", "a\tx", "z", "1") == Outcome.BAD_ARGUMENT  # op z
    assert flush("a\tsendMsg", "i", "x") == Outcome.BAD_ARGUMENT             # not a number
    assert redis_client.exists(keys.monitor(START_MS), keys.monitor_total) == 0
    assert flush("a\tsendMsg", "i", "2", "a\tp:max", "m", "5") == 2


def test_counters_constant_matches_camellia_plus_ours():
    assert set(COUNTERS) == {"sendMsg", "pullMsg", "ackMsg", "nackMsg", "getMsg", "deleteMsg",
                             "triggerMsgReady", "triggerMsgEndLife", "triggerMsgTimeout",
                             "deadLettered", "redriven", "purged", "backlogRefused",
                             "replaced", "deduplicated", "scheduleSent", "scheduleMissed"}


def test_each_worker_flushes_at_least_twice_per_monitoring_interval(redis_url):
    """getMonitorData reads the last complete interval: a sample must reach Redis before
    that window closes, even with the shortest interval (1 s)."""
    import redis as redis_py

    from delayqueue.background.runtime import Runtime
    from delayqueue.settings.config import load_settings

    for seconds, expected in ((1, 0.5), (60, 1.0)):
        settings = load_settings(overrides={"redis_url": redis_url, "snapshot_dir": "",
                                            "monitor_interval_seconds": seconds})
        rt = Runtime(settings, client=redis_py.Redis.from_url(redis_url))
        loops = {loop.name: loop for loop in rt.build_loops()}
        assert loops["monitor-flush"].interval_s == expected
