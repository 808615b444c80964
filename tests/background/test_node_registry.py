"""The node registry: each process's heartbeat is one HSET, a silent process reads as lost
and is dropped later, a clean stop leaves, and the held long polls are the hub's count.

A real Redis, a hand-driven clock; long polls are held in threads as the server holds them.
"""

from __future__ import annotations

import threading

import redis

from delayqueue import __version__
from delayqueue.background.longpoll import long_poll
from delayqueue.background.node_registry import (
    DROP_AFTER_MS,
    HEARTBEAT_S,
    LOST_AFTER_MS,
    PRUNE_EVERY,
    NodeRegistry,
    ProcessBeat,
)
from delayqueue.background.runtime import Runtime
from delayqueue.core.clock import ManualClock
from delayqueue.core.keys import NamespaceKeys
from delayqueue.settings.config import load_settings

from support import wait_until

KEYS = NamespaceKeys("dq", "default")


def registry(client, clock, node="host-a:8080", pid=100, held=lambda: 0) -> NodeRegistry:
    return NodeRegistry(client, KEYS, clock, node, held, pid=pid)


def test_a_heartbeat_is_one_hset_of_the_process_record(redis_client):
    clock = ManualClock()
    beat = registry(redis_client, clock, held=lambda: 3)
    redis_client.config_resetstat()
    beat.tick()
    stats = redis_client.info("commandstats")
    assert {n for n in stats if not n.startswith("cmdstat_config")} == {"cmdstat_hset"}
    assert stats["cmdstat_hset"]["calls"] == 1
    record = ProcessBeat.from_json(redis_client.hget(KEYS.nodes, "host-a:8080/100"))
    assert record == ProcessBeat("host-a:8080", 100, __version__, clock.now_ms(),
                                 clock.now_ms(), 3)
    clock.advance(5_000)
    beat.tick()
    record = ProcessBeat.from_json(redis_client.hget(KEYS.nodes, "host-a:8080/100"))
    assert (record.started_ms, record.seen_ms) == (clock.now_ms() - 5_000, clock.now_ms())
    assert HEARTBEAT_S * 1000 * 3 == LOST_AFTER_MS       # lost: three missed beats


def test_processes_group_by_node_and_a_silent_one_reads_as_lost_then_is_dropped(redis_client):
    clock = ManualClock()
    a1 = registry(redis_client, clock, pid=1, held=lambda: 2)
    a2 = registry(redis_client, clock, pid=2, held=lambda: 5)
    b = registry(redis_client, clock, node="host-b:8080", pid=9, held=lambda: 7)
    for r in (a1, a2, b):
        r.tick()
    redis_client.set(KEYS.offline("host-b:8080"), "1")
    nodes = {n.node: n for n in a1.nodes()}
    assert nodes["host-a:8080"].held_long_polls == 7 and not nodes["host-a:8080"].lost
    assert [p.pid for p in nodes["host-a:8080"].processes] == [1, 2]
    assert nodes["host-a:8080"].online and not nodes["host-b:8080"].online
    assert a1.long_polls() == {"host-a:8080": 7, "host-b:8080": 7}   # offline still counts
    # a2 and b fall silent: a2's polls no longer count, b is lost.
    clock.advance(LOST_AFTER_MS + 1)
    a1.tick()
    nodes = {n.node: n for n in a1.nodes()}
    assert nodes["host-a:8080"].held_long_polls == 2
    assert [p.pid for p in nodes["host-a:8080"].live] == [1]
    assert nodes["host-b:8080"].lost and nodes["host-b:8080"].held_long_polls == 0
    # What /metrics exports: the live nodes' counts, the lost one absent, in one HGETALL.
    redis_client.config_resetstat()
    assert a1.long_polls() == {"host-a:8080": 2}
    stats = redis_client.info("commandstats")
    assert {n for n in stats if not n.startswith("cmdstat_config")} == {"cmdstat_hgetall"}
    assert stats["cmdstat_hgetall"]["calls"] == 1
    # Past DROP_AFTER_MS they are not shown, and a beating process's prune deletes them.
    clock.advance(DROP_AFTER_MS)
    for _ in range(PRUNE_EVERY):
        a1.tick()
    assert [n.node for n in a1.nodes()] == ["host-a:8080"]
    assert sorted(redis_client.hkeys(KEYS.nodes)) == ["host-a:8080/1"]


def test_a_broken_record_is_skipped_and_pruned(redis_client):
    clock = ManualClock()
    beat = registry(redis_client, clock)
    beat.tick()
    redis_client.hset(KEYS.nodes, "junk", "{not json")
    assert [n.node for n in beat.nodes()] == ["host-a:8080"]
    assert beat.prune() == 1 and redis_client.hkeys(KEYS.nodes) == ["host-a:8080/100"]


def test_a_clean_stop_leaves_the_registry(redis_url, redis_client):
    settings = load_settings(overrides={"redis_url": redis_url, "snapshot_dir": "",
                                        "monitor_interval_seconds": 1})
    rt = Runtime(settings, client=redis.Redis.from_url(redis_url, decode_responses=True))
    rt.start()
    try:
        wait_until(lambda: redis_client.hkeys(rt.keys.nodes) == [rt.nodes.field], 10,
                   message="the heartbeat loop did not write this process's record")
    finally:
        rt.stop()
    assert redis_client.hkeys(rt.keys.nodes) == []


def test_held_long_polls_is_the_count_of_polls_the_process_holds(redis_url, redis_client):
    settings = load_settings(overrides={"redis_url": redis_url, "snapshot_dir": ""})
    rt = Runtime(settings, client=redis.Redis.from_url(redis_url, decode_responses=True))
    assert rt.hub.held() == 0
    threads = [threading.Thread(target=long_poll, daemon=True, args=(
        rt.queue, rt.hub, rt.clock, "held-topic", 1, None, 3000, 5.0)) for _ in range(3)]
    for thread in threads:
        thread.start()
    wait_until(lambda: rt.hub.held() == 3, 5, message="three polls not held")
    rt.nodes.tick()
    node = rt.nodes.nodes()[0]
    assert (node.node, node.held_long_polls) == (rt.node_id, 3)
    rt.hub.release_held()
    for thread in threads:
        thread.join(5)
    assert rt.hub.held() == 0
