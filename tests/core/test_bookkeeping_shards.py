"""The bookkeeping shards (core/keys.py, core/bookkeeping.py): the topic -> shard map, the
shards' tags spread over the slot space, the count a namespace keeps, and the recycle
sweep's cursor walking every stale topic over successive runs."""

from __future__ import annotations

import zlib
from collections import Counter

import pytest
from redis.cluster import key_slot
from test_bounded_work import fill_waiting, make_runtime

from delayqueue.core.bookkeeping import (
    CLUSTER_SHARDS,
    RecycleCursor,
    ShardCountError,
    check_shards,
    shard_count,
    stale_page,
)
from delayqueue.core.clock import ManualClock
from delayqueue.core.keys import NamespaceKeys, shard_of, shard_tag
from delayqueue.settings.config import ConfigError, Settings

SLOTS = 16384
HALF_HOUR_MS = 1_800_000


def test_one_shard_keeps_the_namespace_keys_of_before():
    keys = NamespaceKeys("dq", "default")
    assert keys.shards == 1
    assert keys.topics == keys.registry_of("any") == "dq:{default}:topics"
    assert keys.due == keys.due_of("any") == "dq:{default}:due"
    assert keys.topic("t").direct_queues[-1] == keys.due     # the scripts' own index write


@pytest.mark.parametrize("shards", [2, 3, 16, 100, 256])
def test_shard_i_has_its_own_tag_in_the_ith_slot_range(shards):
    keys = NamespaceKeys("dq", "orders-ns", shards)
    for i in range(shards):
        slot = key_slot(keys.registry(i).encode())
        assert i * SLOTS // shards <= slot < (i + 1) * SLOTS // shards
        assert key_slot(keys.due_index(i).encode()) == slot
    assert len(set(keys.registries)) == shards


def test_sixteen_shards_fall_evenly_on_three_balanced_masters():
    keys = NamespaceKeys("dq", "default", CLUSTER_SHARDS)
    # redis-cli --cluster create gives 3 masters 0-5460, 5461-10922, 10923-16383
    masters = Counter(min(key_slot(k.encode()) // 5461, 2) for k in keys.registries)
    assert sorted(masters.values()) == [5, 5, 6]


def test_a_shard_tag_is_no_topic_tag_and_no_namespace_tag():
    tag = shard_tag("default", 3, 16)
    assert tag.startswith("default:{")        # a topic holds no '{', a namespace no ':'
    assert NamespaceKeys("dq", "default", 16).registry(3) == f"dq:{{{tag}}}:topics"


def test_the_topic_map_is_crc32_of_the_topic_and_spreads_topics():
    keys = NamespaceKeys("dq", "default", 16)
    topics = [f"topic-{n}" for n in range(1600)]
    assert all(keys.shard_of(t) == zlib.crc32(t.encode()) % 16 for t in topics)
    assert shard_of("orders", 1) == 0
    counts = Counter(keys.shard_of(t) for t in topics)
    assert len(counts) == 16 and min(counts.values()) > 60 and max(counts.values()) < 140
    with pytest.raises(ValueError, match="registry_of"):
        _ = keys.topics


def test_the_count_is_auto_by_topology_and_more_than_one_needs_a_cluster():
    assert shard_count(0, cluster=False) == 1
    assert shard_count(0, cluster=True) == CLUSTER_SHARDS
    assert shard_count(4, cluster=True) == 4
    with pytest.raises(ConfigError, match="bookkeeping-shards: 4 needs a Redis Cluster"):
        shard_count(4, cluster=False)
    with pytest.raises(ConfigError, match="bookkeeping-shards: 4 needs a Redis Cluster"):
        Settings(redis_url="redis://localhost:6379", bookkeeping_shards=4)
    assert Settings(redis_url="redis-cluster://h1:7000", bookkeeping_shards=4)
    with pytest.raises(ConfigError, match="bookkeeping-shards"):
        Settings(redis_url="redis-cluster://h1:7000", bookkeeping_shards=257)


def test_a_namespace_keeps_the_count_it_was_first_used_with(redis_client):
    check_shards(redis_client, NamespaceKeys("dq", "fresh", 16))
    assert redis_client.get("dq:{fresh}:bookkeeping-shards") == "16"
    check_shards(redis_client, NamespaceKeys("dq", "fresh", 16))
    with pytest.raises(ShardCountError, match="in 16 shard.*configured for 4"):
        check_shards(redis_client, NamespaceKeys("dq", "fresh", 4))


def test_an_unmarked_namespace_with_a_one_shard_registry_counts_as_one_shard(redis_client):
    redis_client.zadd(NamespaceKeys("dq", "old").topics, {"t": 1})
    with pytest.raises(ShardCountError, match="in 1 shard.*configured for 16"):
        check_shards(redis_client, NamespaceKeys("dq", "old", 16))
    assert redis_client.get("dq:{old}:bookkeeping-shards") is None
    check_shards(redis_client, NamespaceKeys("dq", "old", 1))
    assert redis_client.get("dq:{old}:bookkeeping-shards") == "1"


def test_the_stale_walk_visits_every_stale_topic_of_every_shard_once_per_pass(redis_client):
    """On one Redis any key is reachable, so the shards' walk is driven here directly."""
    keys = NamespaceKeys("dq", "walk", 4)
    stale = {f"t{n:04d}": 1000 + n % 7 for n in range(1300)}     # many share a score
    for topic, seen in stale.items():
        redis_client.zadd(keys.registry_of(topic), {topic: seen})
    redis_client.zadd(keys.registry_of("fresh"), {"fresh": 5000})
    cursor, seen_topics, pages = RecycleCursor(), [], 0
    while True:
        page, cursor = stale_page(redis_client, keys, cursor, 5000, 100)
        pages += 1
        assert len(page) <= 100 and pages < 30
        seen_topics += [topic for _, topic, _ in page]
        if cursor == RecycleCursor():
            break
    assert sorted(seen_topics) == sorted(stale)      # each once, "fresh" never
    page, _ = stale_page(redis_client, keys, cursor, 5000, 100)    # the next pass starts over
    assert len(page) == 100


def test_the_recycle_cursor_reaches_an_empty_topic_behind_500_idle_ones(redis_url,
                                                                        redis_client):
    clock = ManualClock()
    rt = make_runtime(redis_url, clock)
    idle = [f"idle-{n:03d}" for n in range(600)]
    week = clock.now_ms() + 7 * 24 * 3_600_000
    for topic in idle:
        fill_waiting(redis_client, rt, topic, 1, week)        # holds a message: never recycled
    redis_client.zadd(rt.keys.topics, {topic: clock.now_ms() for topic in idle})
    clock.advance(1)
    rt.queue.pull("zz-empty")      # registered later than every idle topic, holds nothing
    clock.advance(HALF_HOUR_MS + 1)
    runs = [rt.scheduler.recycle_topics() for _ in range(2)]
    assert runs == [[], ["zz-empty"]]
    assert "zz-empty" not in rt.queue.topics() and len(rt.queue.topics()) == 600
    # the walk starts over: the idle topics are looked at again, one page per run
    assert redis_client.get(rt.keys.recycle_cursor) is not None
    assert rt.scheduler.recycle_topics() == []
