"""The bookkeeping shards on a real Cluster (3 masters, 3 replicas): the registry and the due
index split into 16 shards over the masters, and the scheduler's tick, the repair sweep and
the recycle sweep serving topics of every shard."""

from __future__ import annotations

import pytest
from redis.cluster import key_slot

from delayqueue.background.runtime import Runtime
from delayqueue.core.bookkeeping import ShardCountError, check_shards
from delayqueue.core.clock import ManualClock
from delayqueue.core.keys import NamespaceKeys
from delayqueue.settings.config import Settings

from support.topologies import unique_namespace

HALF_HOUR_MS = 1_800_000


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture
def rt(redis_cluster, clock):
    runtime = Runtime(Settings(redis_url=redis_cluster.url, snapshot_dir="",
                               namespace=unique_namespace("shard")), clock=clock)
    yield runtime
    runtime.client.close()


def one_topic_per_shard(keys: NamespaceKeys) -> list[str]:
    topics: dict[int, str] = {}
    n = 0
    while len(topics) < keys.shards:
        topics.setdefault(keys.shard_of(f"topic-{n}"), f"topic-{n}")
        n += 1
    return [topics[i] for i in range(keys.shards)]


def sizes(rt: Runtime, topic: str) -> tuple[int, int, int]:
    tk = rt.keys.topic(topic)
    return rt.client.zcard(tk.waiting), rt.client.zcard(tk.ready), rt.client.zcard(tk.ack)


def test_a_cluster_splits_the_bookkeeping_over_every_master(rt, redis_cluster):
    assert rt.keys.shards == rt.queue.keys.shards == 16
    masters = {redis_cluster.master_of_slot(key_slot(key.encode()))
               for key in (*rt.keys.registries, *rt.keys.due_indexes)}
    assert masters == set(redis_cluster.masters())


def test_the_scheduler_promotes_and_times_out_messages_in_every_shard(rt, clock):
    topics = one_topic_per_shard(rt.keys)
    for topic in topics:
        rt.queue.send(topic, "x", delay_ms=1000)
    assert sorted(rt.queue.topics()) == sorted(topics)
    assert rt.scheduler.run_due() == clock.now_ms() + 1000     # every shard's head read
    clock.advance(999)
    assert rt.scheduler.run_due() == clock.now_ms() + 1
    assert {sizes(rt, t) for t in topics} == {(1, 0, 0)}       # never early
    clock.advance(1)
    rt.scheduler.run_due()
    assert {sizes(rt, t) for t in topics} == {(0, 1, 0)}
    for topic in topics:      # delivered without promoting anything: the due index alone
        [message] = rt.queue.pull(topic, 1, ack_timeout_ms=2000).messages
        assert message.msg_id
    assert {sizes(rt, t) for t in topics} == {(0, 0, 1)}
    assert rt.scheduler.run_due() == clock.now_ms() + 2000     # the pulls' ack deadlines
    clock.advance(2000)
    rt.scheduler.run_due()
    assert {sizes(rt, t) for t in topics} == {(0, 1, 0)}       # timed out, ready again
    later = rt.scheduler.run_due()
    assert later is None or later > clock.now_ms()


def test_the_repair_sweep_lowers_a_lost_due_time_in_the_topics_shard(rt, clock):
    topics = one_topic_per_shard(rt.keys)
    for topic in topics:
        rt.queue.send(topic, "x", delay_ms=5000)
    for topic in topics:
        rt.client.zrem(rt.keys.due_of(topic), topic)       # a process killed before it
    assert rt.scheduler.run_due() is None
    assert rt.scheduler.repair_due_index() == len(topics)
    assert {rt.client.zscore(rt.keys.due_of(t), t) for t in topics} == {clock.now_ms() + 5000}


def test_the_recycle_sweep_forgets_empty_topics_of_every_shard(rt, clock):
    topics = one_topic_per_shard(rt.keys)
    for topic in topics:
        rt.queue.pull(topic)           # registered, holds nothing
    rt.queue.send(topics[0] + "-kept", "x", delay_ms=7 * 24 * 3_600_000)
    clock.advance(HALF_HOUR_MS + 1)
    assert sorted(rt.scheduler.recycle_topics()) == sorted(topics)
    assert rt.queue.topics() == [topics[0] + "-kept"]


def test_a_node_configured_for_another_count_is_refused(rt):
    check_shards(rt.client, rt.keys)
    with pytest.raises(ShardCountError, match="in 16 shard.*configured for 4"):
        check_shards(rt.client, NamespaceKeys(rt.keys.prefix, rt.keys.namespace, 4))
