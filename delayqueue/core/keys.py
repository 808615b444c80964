"""Every Redis key name, in one place.

Topic keys share the hash tag ``{<namespace>:<topic>}`` so each Lua script touches one Redis
Cluster slot. Namespace keys use ``{<namespace>}``: they are bookkeeping (registry, due index,
monitor counters, leases), never the truth about a message. The registry and the due index
may be split into ``shards`` by topic (``bookkeeping-shards``, on a Cluster): shard i's two
keys carry a tag of their own, ``<namespace>:{b<n>`` (``dq:{default:{b7}:due``: no topic's
tag, since a topic holds no '{'), whose slot lies in the middle of the i-th of ``shards``
equal slot ranges, so a balanced Cluster spreads them over its masters. With one shard
they are the namespace's own ``{<namespace>}:topics`` and ``:due``.
"""

from __future__ import annotations

import functools
import zlib
from dataclasses import dataclass

from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

MAX_SHARDS = 256   # a shard's slot range is then 64 slots: its tag is found in ~64 tries


def shard_of(topic: str, shards: int) -> int:
    """The bookkeeping shard of a topic: stable across processes and versions."""
    return zlib.crc32(topic.encode()) % shards if shards > 1 else 0


@functools.lru_cache(maxsize=1024)
def shard_tag(namespace: str, shard: int, shards: int) -> str:
    """The hash tag of shard ``shard`` of ``shards``: the namespace itself for one shard, else
    ``<namespace>:{b<n>`` with the smallest n whose slot lies near the middle of the shard's
    range [shard * 16384 / shards, (shard + 1) * 16384 / shards), within 1/16 of its width:
    deterministic, no configuration. Near the middle, not anywhere in it, so a range that
    straddles two masters' halves of a balanced Cluster falls on one of them by rule
    (16 shards on 3 masters: 5, 6, 5), not by chance (4, 6, 6)."""
    if shards <= 1:
        return namespace
    width = REDIS_CLUSTER_HASH_SLOTS / shards
    middle = (shard + 0.5) * width
    reach = max(width / 16, 1.0)
    n = 0
    while True:
        tag = f"{namespace}:{{b{n}"
        if abs(key_slot(tag.encode()) + 0.5 - middle) <= reach:
            return tag
        n += 1


@dataclass(frozen=True)
class NamespaceKeys:
    prefix: str
    namespace: str
    shards: int = 1

    @property
    def base(self) -> str:
        return f"{self.prefix}:{{{self.namespace}}}"

    def shard_base(self, shard: int) -> str:
        return f"{self.prefix}:{{{shard_tag(self.namespace, shard, self.shards)}}}"

    def shard_of(self, topic: str) -> int:
        return shard_of(topic, self.shards)

    def registry(self, shard: int) -> str:
        """ZSET topic -> last time (ms) the topic was used: shard ``shard`` of the topic
        registry."""
        return f"{self.shard_base(shard)}:topics"

    def due_index(self, shard: int) -> str:
        """ZSET topic -> earliest time (ms) the topic needs the scheduler: shard ``shard`` of
        the due index."""
        return f"{self.shard_base(shard)}:due"

    def registry_of(self, topic: str) -> str:
        """The registry shard holding ``topic``."""
        return self.registry(self.shard_of(topic))

    def due_of(self, topic: str) -> str:
        """The due index shard holding ``topic``."""
        return self.due_index(self.shard_of(topic))

    @property
    def registries(self) -> tuple[str, ...]:
        return tuple(self.registry(i) for i in range(self.shards))

    @property
    def due_indexes(self) -> tuple[str, ...]:
        return tuple(self.due_index(i) for i in range(self.shards))

    @property
    def topics(self) -> str:
        """The topic registry of a one-shard namespace (``registry_of`` names a topic's)."""
        return self._single(self.registry(0))

    @property
    def due(self) -> str:
        """The due index of a one-shard namespace (``due_of`` names a topic's)."""
        return self._single(self.due_index(0))

    def _single(self, key: str) -> str:
        if self.shards != 1:
            raise ValueError(f"namespace '{self.namespace}' has {self.shards} bookkeeping "
                             "shards: name the topic's (registry_of, due_of)")
        return key

    @property
    def shards_mark(self) -> str:
        """STRING: how many bookkeeping shards the namespace was laid out with
        (core/bookkeeping.py): a node configured with another count refuses to start."""
        return f"{self.base}:bookkeeping-shards"

    @property
    def repair_mark(self) -> str:
        """STRING: when (fleet clock, ms) the last repair sweep on a Cluster started; the next
        visits the topics used since then (background/scheduler.py repair_due_index)."""
        return f"{self.base}:repair-mark"

    @property
    def repair_cursor(self) -> str:
        """STRING "<shard> <score> <topic>": where the repair sweep's walk over the topics
        not used since its mark stopped (a Cluster only)."""
        return f"{self.base}:repair-cursor"

    @property
    def recycle_cursor(self) -> str:
        """STRING "<shard> <score> <topic>": where the recycle sweep's walk over the stale
        topics stopped (background/scheduler.py)."""
        return f"{self.base}:recycle-cursor"

    @property
    def hint_channel(self) -> str:
        """Pub/sub channel carrying "<count> <topic>" hints that messages became ready."""
        return f"{self.base}:hint"

    def lease(self, name: str) -> str:
        return f"{self.base}:lease:{name}"

    def monitor(self, interval_start_ms: int) -> str:
        """HASH of counters and histogram buckets for one monitoring interval."""
        return f"{self.base}:monitor:{interval_start_ms}"

    @property
    def monitor_total(self) -> str:
        """HASH of counters and histogram buckets since the namespace began (for /metrics)."""
        return f"{self.base}:monitor:total"

    @property
    def storage_format(self) -> str:
        """STRING: the message storage format of the namespace's topics (storage.py)."""
        return f"{self.base}:storage-format"

    @property
    def snapshot_mark(self) -> str:
        """STRING: start (ms) of the last interval whose snapshot was written."""
        return f"{self.base}:snapshot:last"

    @property
    def nodes(self) -> str:
        """HASH "<node id>/<pid>" -> JSON heartbeat of one server process (version, start,
        last seen, held long polls): the node registry (background/node_registry.py)."""
        return f"{self.base}:nodes"

    @property
    def schedule_index(self) -> str:
        """ZSET "<topic>\\n<scheduleId>" -> the time (ms) the schedules loop must look at the
        schedule: its pending fire time (core/schedules.py)."""
        return f"{self.base}:schedule-index"

    @property
    def schedule_topics(self) -> str:
        """SET of the topics that hold (or held) schedules: what the schedules' repair pass
        and an unfiltered listSchedules visit, instead of every registered topic. Added
        before a create; a topic left without schedules leaves it on the repair pass
        (core/schedules.py)."""
        return f"{self.base}:schedule-topics"

    @property
    def subscription_drops(self) -> str:
        """SET of "<topic>\n<drop id>": deleted subscriptions whose keys are still being freed
        (core/subscriptions.py; the scheduler's repair pass finishes one a node left)."""
        return f"{self.base}:subscription-drops"

    @property
    def push_subscriptions(self) -> str:
        """SET of "<topic>\n<subscription>" ("default" for the topic's own): the
        subscriptions with a pushUrl, which every node's delivery loop serves
        (background/push.py). Added before a pushUrl is written, removed after it is
        cleared or the subscription deleted; the loop drops a member whose pushUrl is gone."""
        return f"{self.base}:push"

    def offline(self, node: str) -> str:
        """STRING present while the node was taken offline by /camellia/health/offline."""
        return f"{self.base}:offline:{node}"

    def topic(self, topic: str) -> "TopicKeys":
        return topic_keys(self.prefix, self.namespace, topic)


@functools.lru_cache(maxsize=10_000)
def topic_keys(prefix: str, namespace: str, topic: str) -> "TopicKeys":
    """One TopicKeys per topic, its key names built once: every request needs them."""
    return TopicKeys(prefix, namespace, topic)


@dataclass(frozen=True)
class TopicKeys:
    prefix: str
    namespace: str
    topic: str

    @functools.cached_property
    def base(self) -> str:
        return f"{self.prefix}:{{{self.namespace}:{self.topic}}}"

    @property
    def waiting(self) -> str:
        """ZSET <seq><slot> -> triggerTime (ms): accepted, not yet due (the member starts with
        the message's acceptance sequence in 12 hex digits, as in ``ready``)."""
        return f"{self.base}:waiting"

    @property
    def ready(self) -> str:
        """ZSET <seq><slot> -> when it became ready (ms): due, waiting for a consumer, oldest
        first and, at equal times, in acceptance order (the member starts with the message's
        acceptance sequence in 12 hex digits: lua/includes/group.lua)."""
        return f"{self.base}:ready"

    @property
    def ack(self) -> str:
        """ZSET slot -> ack deadline (ms) of the current delivery."""
        return f"{self.base}:ack"

    @property
    def expire(self) -> str:
        """ZSET slot -> expireTime (ms): the expiry index. Holds ready and consuming messages
        (a waiting one enters when promoted; a consuming one leaves when its expireTime passes,
        and its ack timeout then ends it)."""
        return f"{self.base}:expire"

    @property
    def dead(self) -> str:
        """ZSET slot -> the time (ms) it entered the dead-letter queue (ended with status 6)."""
        return f"{self.base}:dead"

    @property
    def config(self) -> str:
        """HASH setting -> value: the topic's own settings (setTopicConfig)."""
        return f"{self.base}:config"

    @property
    def msgs(self) -> str:
        """HASH slot -> record: every message of the topic, live or retained after its end.
        The slot and the record's layout belong to lua/includes/message.lua alone."""
        return f"{self.base}:msgs"

    @property
    def ended(self) -> str:
        """ZSET slot -> time (ms) an ended message's retention ends (dead letters too): the
        scheduler purges the record after it."""
        return f"{self.base}:ended"

    @property
    def seq(self) -> str:
        """STRING: the last acceptance sequence given (every send takes the next)."""
        return f"{self.base}:seq"

    @property
    def groups(self) -> str:
        """HASH groupId -> slot of the group's front: its one message in waiting, ready or
        ack (lua/includes/group.lua)."""
        return f"{self.base}:groups"

    @property
    def blocked(self) -> str:
        """ZSET (scores 0) <groupId>\\0<trigger><seq><slot>: the groups' other live messages,
        each group's in its delivery order (ZRANGEBYLEX)."""
        return f"{self.base}:blocked"

    @property
    def held(self) -> str:
        """ZSET slot -> triggerTime (ms): the blocked messages, by trigger time (due ones are
        getTopicInfo's groupBlockedSize)."""
        return f"{self.base}:held"

    @property
    def schedules(self) -> str:
        """HASH scheduleId -> JSON: the topic's recurring schedules, definition and state
        (lua/includes/schedule.lua). KEYS[20] of the schedule scripts, after ``queues``."""
        return f"{self.base}:schedules"

    @property
    def schedule_ids(self) -> str:
        """ZSET (scores 0) scheduleId: the ids of ``schedules``, kept with it by schedule_put
        and schedule_delete (their KEYS[21]), so that a listSchedules page is one
        ZRANGEBYLEX of its own size, never the whole hash."""
        return f"{self.base}:schedule-ids"

    @property
    def subs(self) -> str:
        """HASH name -> "<creation seq> <createdTime>": the topic's named subscriptions. A
        subscription receives the messages whose acceptance sequence is above its creation
        sequence (lua/includes/fanout.lua)."""
        return f"{self.base}:subs"

    @property
    def fanout(self) -> str:
        """ZSET <seq><slot> -> triggerTime: messages accepted while the topic had named
        subscriptions (or without the default one), until they are due and handed to them."""
        return f"{self.base}:fanout"

    @property
    def refs(self) -> str:
        """HASH slot -> how many named subscriptions keep an entry of the message: its body
        (its record in ``msgs``) is freed only when none does."""
        return f"{self.base}:refs"

    @property
    def sexpire(self) -> str:
        """ZSET slot -> expireTime: messages ready in named subscriptions as bare entries (no
        delivery record there yet), for their expiry."""
        return f"{self.base}:sexpire"

    @functools.cached_property
    def shared(self) -> tuple[str, ...]:
        """msgs, config, subs, fanout, refs, sexpire: KEYS[13..18] of every topic script,
        whatever subscription it works in (lua/includes/keys.lua)."""
        return (self.msgs, self.config, self.subs, self.fanout, self.refs, self.sexpire)

    @property
    def hubs(self) -> str:
        """ZSET hub id -> until when (ms): the processes whose long polls wait on the topic
        and take its hints on their own channel (lua/includes/group.lua publish_ready)."""
        return f"{self.base}:hubs"

    @property
    def hint_channel(self) -> str:
        """Shard channel of the topic's hints on a Cluster of Redis >= 7: SPUBLISHed by its
        scripts, SSUBSCRIBEd by the processes with waiters on it (lua/includes/keys.lua
        publish_hint, background/shard_hints.py); in the topic's slot."""
        return f"{self.base}:hint"

    @property
    def due(self) -> str:
        """STRING: the topic's due record on a Redis Cluster, the lowest due time its scripts
        gave the namespace due index since the scheduler last wrote the exact one
        (lua/includes/message.lua due_lowered). On one Redis the scripts lower the index
        itself and this key is never written."""
        return f"{self.base}:due"

    @functools.cached_property
    def namespace_due(self) -> str:
        """The namespace due index (NamespaceKeys.due), KEYS[19] of the topic scripts on one
        Redis (standalone, Sentinel), where a script may write outside the topic's slot."""
        return f"{self.prefix}:{{{self.namespace}}}:due"

    @functools.cached_property
    def queues(self) -> tuple[str, ...]:
        """waiting, ready, ack, expire, dead, config, msgs, ended, seq, groups, blocked, held,
        then ``shared``, then ``due``: the KEYS of every topic script in the default
        subscription on a Cluster, in that order (lua/includes/keys.lua). Built once per
        topic: a tuple, so no caller can change it for the others."""
        return (self.waiting, self.ready, self.ack, self.expire, self.dead, self.config,
                self.msgs, self.ended, self.seq, self.groups, self.blocked, self.held,
                *self.shared, self.due)

    @functools.cached_property
    def direct_queues(self) -> tuple[str, ...]:
        """``queues`` with the namespace due index as KEYS[19]: on one Redis."""
        return (*self.queues[:-1], self.namespace_due)

    @functools.cached_property
    def holdings(self) -> tuple[str, ...]:
        """Every key of ``queues`` but ``seq`` and ``due``, and ``schedules``: a topic holding
        none of them holds nothing (its sequence and due record are dropped when it is
        recycled); a topic with a schedule or a named subscription is never recycled."""
        return (*dict.fromkeys(key for key in self.queues if key not in (self.seq, self.due)),
                self.schedules)

    @property
    def legacy_msg_prefix(self) -> str:
        """Prefix of the per-message HASH keys of the storage format before records (read
        only by ``delayqueue migrate-storage``)."""
        return f"{self.base}:msg:"

    @property
    def push_errors(self) -> str:
        """LIST of JSON: the default subscription's latest push failures, newest first, at
        most PUSH_ERRORS_KEPT (background/push.py), expiring a week after the last."""
        return f"{self.base}:push-errors"

    def subscription(self, name: str) -> "SubscriptionKeys":
        """The keys of the named subscription ``name`` (core/subscriptions.py checks names)."""
        return SubscriptionKeys(self, name)

    def dropping(self, drop_id: str) -> "SubscriptionKeys":
        """The keys of a deleted subscription while they are freed (subscription_drop.lua)."""
        return SubscriptionKeys(self, drop_id, part="sd")


@dataclass(frozen=True)
class SubscriptionKeys:
    """A named subscription's keys: the same names as TopicKeys' per-subscription ones
    (waiting .. held), under ``<topic base>:s:<name>:``, in the topic's Cluster slot. Its
    ``queues`` are the KEYS of a topic script that works in this subscription."""
    parent: TopicKeys
    name: str
    part: str = "s"

    @property
    def topic(self) -> str:
        return self.parent.topic

    @functools.cached_property
    def base(self) -> str:
        return f"{self.parent.base}:{self.part}:{self.name}"

    def __getattr__(self, kind: str) -> str:
        if kind in _CONTEXT_KINDS:
            return f"{self.base}:{kind}"
        raise AttributeError(kind)

    @property
    def seq(self) -> str:
        return self.parent.seq

    @property
    def push_errors(self) -> str:
        """As TopicKeys.push_errors, for this subscription."""
        return f"{self.base}:push-errors"

    @functools.cached_property
    def queues(self) -> tuple[str, ...]:
        return (*(self.seq if kind == "seq" else f"{self.base}:{kind}" for kind in _KINDS),
                *self.parent.shared, self.parent.due)

    @functools.cached_property
    def direct_queues(self) -> tuple[str, ...]:
        return (*self.queues[:-1], self.parent.namespace_due)


_KINDS = ("waiting", "ready", "ack", "expire", "dead", "config", "msgs", "ended", "seq",
          "groups", "blocked", "held")
_CONTEXT_KINDS = frozenset(_KINDS) - {"seq"}
