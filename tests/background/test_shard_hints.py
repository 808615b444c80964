"""Sharded hints on a Redis Cluster >= 7 (background/shard_hints.py, lua/includes/keys.lua
publish_hint): a hint is SPUBLISHed on its topic's channel and reaches the processes waiting
on the topic only, never as a classic PUBLISH; after a failover of the topic's master the
process subscribes again on the new one.

Each process is a ``Runtime`` in this test process with its hub started, on the session's
cluster; long polls run in threads. Waiters here use a long safety interval, so an answer
well before it can only come from a hint.
"""

from __future__ import annotations

import threading
import time

import redis
from redis.cluster import key_slot

from delayqueue.background.longpoll import long_poll
from delayqueue.background.runtime import Runtime
from delayqueue.settings.config import Settings

from support import wait_until
from support.topologies import unique_namespace, wait_serving

SAFETY_S = 30.0        # a hint-less wake-up comes this late: far beyond the bounds below
HINT_BOUND_S = 3.0     # a hinted long poll answers within this of the send


def runtime(cluster, namespace: str) -> Runtime:
    rt = Runtime(Settings(redis_url=cluster.url, namespace=namespace, snapshot_dir=""))
    rt.hub.start()
    wait_until(lambda: rt.hub.subscribed.is_set() and rt.hub.shards.known.is_set(), 10)
    return rt


def hold(rt: Runtime, topic: str) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def run() -> None:
        out["result"] = long_poll(rt.queue, rt.hub, rt.clock, topic, 1, None, 20_000, SAFETY_S)
        out["at"] = time.monotonic()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    # Held: its topic's channel is subscribed on the topic's master.
    wait_until(lambda: topic in rt.hub.shards.subscribed(), 5)
    return thread, out


def publish_counts(cluster) -> dict[str, int]:
    """PUBLISH and SPUBLISH calls summed over every node since its stats were reset."""
    totals = {"publish": 0, "spublish": 0}
    for server in cluster.servers:
        stats = redis.Redis(port=server.port).info("commandstats")
        for name in totals:
            totals[name] += stats.get(f"cmdstat_{name}", {}).get("calls", 0)
    return totals


def subscribers(cluster, channel: str) -> dict[int, int]:
    """port -> SSUBSCRIBErs of ``channel`` there (nodes that answer)."""
    counts = {}
    for server in cluster.servers:
        try:
            counts[server.port] = redis.Redis(port=server.port).execute_command(
                "PUBSUB", "SHARDNUMSUB", channel)[1]
        except redis.RedisError:
            continue
    return counts


def test_a_hint_reaches_the_waiting_process_only_and_never_as_a_classic_publish(
        redis_cluster):
    namespace = unique_namespace()
    waiting, idle = runtime(redis_cluster, namespace), runtime(redis_cluster, namespace)
    heard: list[str] = []
    idle.hub.shards._deliver = lambda payload: (heard.append(payload),
                                                idle.hub.dispatch(payload))
    try:
        assert waiting.hub.shards.enabled and idle.hub.shards.enabled
        idle_thread, idle_out = hold(idle, "other")     # the idle process waits elsewhere
        thread, out = hold(waiting, "hot")
        channel = waiting.keys.topic("hot").hint_channel
        master = redis_cluster.master_of_slot(key_slot(channel.encode()))
        assert subscribers(redis_cluster, channel) == {
            s.port: (1 if s.port == master else 0) for s in redis_cluster.servers}
        for server in redis_cluster.servers:
            redis.Redis(port=server.port).config_resetstat()
        sent_at = time.monotonic()
        waiting.queue.send("hot", "x", msg_id="m1")
        thread.join(HINT_BOUND_S + 1)
        assert [m.msg_id for m in out["result"].messages] == ["m1"]
        assert out["at"] - sent_at < HINT_BOUND_S
        counts = publish_counts(redis_cluster)
        assert counts["publish"] == 0 and counts["spublish"] >= 1, counts
        assert not any(p.endswith(" hot") for p in heard), heard
        # The idle process still waits, unwoken, and hears its own topic's hint.
        assert idle_thread.is_alive()
        idle.queue.send("other", "y", msg_id="m2")
        idle_thread.join(HINT_BOUND_S + 1)
        assert [m.msg_id for m in idle_out["result"].messages] == ["m2"]
        assert heard == ["1 other"]
    finally:
        waiting.hub.stop()
        idle.hub.stop()


def test_the_channel_is_kept_a_while_after_the_last_waiter_then_left(redis_cluster,
                                                                    monkeypatch):
    from delayqueue.background import shard_hints
    monkeypatch.setattr(shard_hints, "LINGER_S", 1.0)
    rt = runtime(redis_cluster, unique_namespace())
    try:
        thread, out = hold(rt, "brief")
        rt.queue.send("brief", "x", msg_id="m1")
        thread.join(HINT_BOUND_S + 1)
        assert out["result"].messages
        channel = rt.keys.topic("brief").hint_channel
        assert sum(subscribers(redis_cluster, channel).values()) == 1   # kept a while
        wait_until(lambda: sum(subscribers(redis_cluster, channel).values()) == 0, 5)
        assert "brief" not in rt.hub.shards.subscribed()
    finally:
        rt.hub.stop()


def test_after_a_failover_of_the_topics_master_hints_arrive_again(redis_cluster):
    rt = runtime(redis_cluster, unique_namespace())
    try:
        thread, out = hold(rt, "moving")
        channel = rt.keys.topic("moving").hint_channel
        old, new = redis_cluster.failover(
            redis_cluster.master_of_slot(key_slot(channel.encode())))
        redis_cluster.wait_healthy()
        wait_serving(rt.client)
        # Subscribed again, on the new master; the waiter re-checked meanwhile (nothing).
        wait_until(lambda: subscribers(redis_cluster, channel).get(new) == 1
                   and "moving" in rt.hub.shards.subscribed(), 15)
        assert subscribers(redis_cluster, channel).get(old, 0) == 0
        assert thread.is_alive()
        sent_at = time.monotonic()
        rt.queue.send("moving", "x", msg_id="m1")
        thread.join(HINT_BOUND_S + 1)
        assert [m.msg_id for m in out["result"].messages] == ["m1"]
        assert out["at"] - sent_at < HINT_BOUND_S
    finally:
        rt.hub.stop()
