"""The namespace's bookkeeping shards: how many, the mark that keeps a fleet on one count, and
the reads that span every shard (the registry's topics, the stale ones for the recycle sweep).

On one Redis the registry and the due index are one key each, ``{<ns>}:topics`` and
``{<ns>}:due`` (one shard), and the topic scripts lower the due index themselves. On a Cluster
they are split into ``bookkeeping-shards`` shards by topic (keys.py ``shard_of``, ``shard_tag``),
each in its own slot, so their load spreads over the masters instead of all landing on the
master of ``{<ns>}``. A node must agree with the fleet on the count (a topic's shard depends on
it): the namespace carries it (``NamespaceKeys.shards_mark``) and a node configured with
another one refuses to start. Changing it means draining the namespace, not a migration.
"""

from __future__ import annotations

from typing import NamedTuple

import redis

from delayqueue.settings.config import ConfigError

from .keys import MAX_SHARDS, NamespaceKeys

CLUSTER_SHARDS = 16    # bookkeeping-shards 0 (auto) on a Cluster: any balanced 3..16 masters


class ShardCountError(RuntimeError):
    """The namespace's bookkeeping is laid out in another number of shards."""


def shard_count(configured: int, cluster: bool) -> int:
    """``bookkeeping-shards`` as it applies: 0 (auto) is 1 on one Redis, CLUSTER_SHARDS on a
    Cluster. More than one needs a Cluster: on one Redis the topic scripts write the due
    index in the same call (TopicKeys.direct_queues), which names the one-shard key."""
    if configured == 0:
        return CLUSTER_SHARDS if cluster else 1
    if configured > 1 and not cluster:
        raise ConfigError(f"bookkeeping-shards: {configured} needs a Redis Cluster "
                         "(redis-cluster://); on one Redis it must be 0 or 1")
    return min(configured, MAX_SHARDS)


def namespace_keys(settings, cluster: bool) -> NamespaceKeys:
    """The namespace's keys with the shard count the settings give for this topology."""
    return NamespaceKeys(settings.redis_key_prefix, settings.namespace,
                         shard_count(settings.bookkeeping_shards, cluster))


def check_shards(client: redis.Redis, keys: NamespaceKeys) -> None:
    """Raise ``ShardCountError`` when the namespace is laid out in another shard count than
    ``keys.shards``; otherwise make sure it carries the mark. An unmarked namespace whose
    one-shard registry holds topics (written before the mark existed) counts as one shard."""
    mark = client.get(keys.shards_mark)
    if mark is None:
        legacy = NamespaceKeys(keys.prefix, keys.namespace, 1)
        stored = 1 if client.exists(legacy.topics) else keys.shards
        if stored == keys.shards:
            client.set(keys.shards_mark, str(keys.shards), nx=True)
            mark = client.get(keys.shards_mark)
        else:
            mark = str(stored)
    if int(mark) != keys.shards:
        raise ShardCountError(
            f"bookkeeping-shards: namespace '{keys.namespace}' keeps its registry and due "
            f"index in {int(mark)} shard(s), this node is configured for {keys.shards}: set "
            f"bookkeeping-shards: {int(mark)} (the count cannot change while the namespace "
            "holds topics)")


def _members(client: redis.Redis, keys: tuple[str, ...], low: float | str = "-inf",
             high: float | str = "+inf") -> list[str]:
    """The members of every shard's zset ``keys`` scored in [low, high], shard after shard:
    one ZRANGEBYSCORE each, in one pipelined round trip (on a Cluster, one per master)."""
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.zrangebyscore(key, low, high)
    return [member for part in pipe.execute() for member in part]


def registered_topics(client: redis.Redis, keys: NamespaceKeys) -> list[str]:
    """Every registered topic, sorted."""
    return sorted(_members(client, keys.registries))


def used_since(client: redis.Redis, keys: NamespaceKeys, since_ms: float) -> list[str]:
    """The registered topics last used at or after ``since_ms``."""
    return _members(client, keys.registries, since_ms)


def claimed(client: redis.Redis, keys: NamespaceKeys, claimed_ms: int) -> list[str]:
    """The topics a tick claimed (their due score ``claimed_ms``) and did not write back."""
    return _members(client, keys.due_indexes, claimed_ms, claimed_ms)


class RecycleCursor(NamedTuple):
    """Where a sweep's walk over the stale topics stopped (the recycle sweep's, and on a
    Cluster the repair sweep's over the topics unused since its mark): after ``topic``, last
    used at ``seen``, in shard ``shard`` (registry order: by score, then by name)."""
    shard: int = 0
    seen: float = float("-inf")
    topic: str = ""

    def dump(self) -> str:
        return f"{self.shard} {self.seen!r} {self.topic}"

    @classmethod
    def load(cls, raw: str | None, shards: int) -> "RecycleCursor":
        try:
            shard, seen, topic = raw.split(" ", 2)
            cursor = cls(int(shard), float(seen), topic)
        except (AttributeError, ValueError):
            return cls()
        return cursor if 0 <= cursor.shard < shards else cls()


def stale_page(client: redis.Redis, keys: NamespaceKeys, cursor: RecycleCursor,
               cutoff: float, limit: int) -> tuple[list[tuple[int, str, float]], RecycleCursor]:
    """Up to ``limit`` registered topics last used before ``cutoff``, after ``cursor``,
    walking the shards in turn from the cursor's; and the cursor after them (back to the
    start once the last shard was walked to its end). Returns (shard, topic, seen) each."""
    found: list[tuple[int, str, float]] = []
    at = cursor
    for _ in range(keys.shards):
        page, complete = _stale_in_shard(client, keys.registry(at.shard), at, cutoff,
                                         limit - len(found))
        found.extend((at.shard, topic, seen) for topic, seen in page)
        if not complete:
            _, topic, seen = found[-1]
            return found, RecycleCursor(at.shard, seen, topic)
        at = RecycleCursor(at.shard + 1)
        if at.shard == keys.shards:
            return found, RecycleCursor()      # every shard walked: start over next run
        if len(found) >= limit:
            break
    return found, at


def _stale_in_shard(client: redis.Redis, key: str, after: RecycleCursor, cutoff: float,
                    want: int) -> tuple[list[tuple[str, float]], bool]:
    """Up to ``want`` topics of one registry shard last used before ``cutoff`` and after
    ``after`` (by score, then name); and whether they are all the shard has left. Read from
    the cursor's score on, so topics recycled since cost nothing; topics sharing that score
    are skipped by name, a page at a time."""
    got: list[tuple[str, float]] = []
    offset = 0
    while want > 0:
        page = client.zrangebyscore(key, after.seen, f"({cutoff}", start=offset, num=want,
                                    withscores=True)
        fresh = [(topic, seen) for topic, seen in page if (seen, topic) > (after.seen,
                                                                           after.topic)]
        take = fresh[:want - len(got)]
        got.extend(take)
        if len(page) < want:
            return got, len(take) == len(fresh)
        if len(got) == want:
            return got, False
        offset += len(page)
    return got, False
