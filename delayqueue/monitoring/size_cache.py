"""What a process last read of every topic's sizes, re-read only where something changed, so
that idle topics cost Redis nothing (issue 32): /metrics and the snapshot writer each keep one.

The signal is the monitor's interval hashes (core/monitor.py): every transition that changes a
size leaves a sample of its topic there (a counter, or ``Monitor.touch`` where no counter
records it: a pause, a dead-letter purge, a subscription created...). ``FleetActivity.poll``
reads the hashes of the intervals a sample could still be flushed into (``LATE_MS`` back from
the previous poll) and answers the topics they name that changed since it last looked; it
keeps the cumulative totals in memory too, adding what each interval hash gained, instead of
reading the whole cumulative hash (a field per topic and counter) on every scrape.

Sizes that move with time alone are re-read when they would: each cached entry holds the
first time one of its time-dependent figures changes (``valid_until``): a waiting message
crossing into a nearer delay bucket, a group-blocked message reaching its trigger time (from
waiting to blocked), an ended record's retention running out (a dead letter leaving). The
oldest ready age is computed from the cached read. The registry's topics are cached too:
re-read when its size changes or an unknown topic shows activity.

Bounded staleness: a sample flushed more than ``LATE_MS`` after it was recorded (its process
could not reach Redis for that long: the monitor keeps it and flushes it later) is missed;
every ``FULL_READ_MS`` the whole state is read again, which bounds that case.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import redis

from delayqueue.core.monitor import Monitor
from delayqueue.core.monitor_hash import FIELD_SEPARATOR, field_number, field_text
from delayqueue.core.queue import WAITING_BUCKETS, DelayQueue
from delayqueue.core.requests import TopicSizes

# How long after a sample is recorded it may still be flushed and be seen (the monitor flushes
# about every second); later samples are caught by the next full read.
LATE_MS = 30_000
# Everything is read again this often (and on a process's first read).
FULL_READ_MS = 6 * 3_600_000
NEVER = 2**62
# Topics read per round trip when many are stale (a process's first read): between two
# chunks the process yields (under gevent a read of 100,000 topics in one pipeline would hold
# the worker's loop past gunicorn's timeout, and the worker would be killed mid-scrape).
READ_CHUNK = 1000
# The lower bounds of the delay buckets past the first: a waiting message crosses one when
# its trigger time comes within it.
BUCKET_FLOORS = tuple(lo for _, lo, _ in WAITING_BUCKETS if lo is not None)

# One zset and the boundaries (ms from now) whose crossing changes a figure.
Probe = tuple[str, tuple[int, ...]]


class FleetActivity:
    """Which topics had samples since the last poll, and the cumulative totals, from the
    interval hashes; see the module docstring."""

    def __init__(self, monitor: Monitor, late_ms: int = LATE_MS,
                 full_every_ms: int = FULL_READ_MS) -> None:
        self.monitor = monitor
        self.late_ms = late_ms
        self.full_every_ms = full_every_ms
        self._raw: dict[str, int | float] | None = None   # the cumulative hash, as known
        self._seen: dict[int, dict[str, int | float]] = {}   # interval -> its fields, as added
        self._last = 0
        self._next_full = 0

    def _starts(self, since_ms: int, now_ms: int) -> list[int]:
        step = self.monitor.interval_ms
        first = self.monitor.interval_start(since_ms)
        return list(range(first, self.monitor.interval_start(now_ms) + 1, step))

    def poll(self) -> set[str] | None:
        """The topics named by samples flushed since the last poll; None after a full read
        (the first, and every ``full_every_ms``): every topic may have changed."""
        client, keys = self.monitor.client, self.monitor.keys
        now = self.monitor.clock.now_ms()
        if self._raw is None or now >= self._next_full:
            starts = self._starts(now - self.late_ms, now)
            pipe = client.pipeline(transaction=True)   # one instant: totals and intervals agree
            pipe.hgetall(keys.monitor_total)
            for start in starts:
                pipe.hgetall(keys.monitor(start))
            total, *hashes = pipe.execute()
            self._raw = _numbers(total)
            self._seen = {start: _numbers(raw) for start, raw in zip(starts, hashes)}
            self._last, self._next_full = now, now + self.full_every_ms
            return None
        starts = self._starts(self._last - self.late_ms, now)
        pipe = client.pipeline(transaction=False)
        for start in starts:
            pipe.hgetall(keys.monitor(start))
        changed: set[str] = set()
        for start, raw in zip(starts, pipe.execute()):
            fields = _numbers(raw)
            changed |= self._add(self._seen.get(start, {}), fields)
            self._seen[start] = fields
        for start in [s for s in self._seen if s < starts[0]]:
            del self._seen[start]
        self._last = now
        return changed

    def reset(self) -> None:
        """Read everything again next time: a read that failed after a poll lost the topics
        that poll named."""
        self._raw = None

    def _add(self, before: dict[str, int | float], after: dict[str, int | float]) -> set[str]:
        """Add to the totals what one interval hash gained since it was last read; the topics
        whose fields moved."""
        raw = self._raw
        assert raw is not None
        changed = set()
        for name, value in after.items():
            old = before.get(name, 0)
            if value == old:
                continue
            if name.endswith(":max"):
                raw[name] = max(raw.get(name, value), value)
            else:
                raw[name] = raw.get(name, 0) + value - old
            topic = name.partition(FIELD_SEPARATOR)[0]
            if topic:      # pseudo-topics (loops, requests, events, audit) start with a tab
                changed.add(topic)
        return changed

    def totals(self) -> dict:
        """``Monitor.totals()`` from the totals kept in memory (poll first)."""
        return self.monitor.totals(dict(self._raw or {}))


def _numbers(raw: dict) -> dict[str, int | float]:
    return {field_text(name): field_number(value) for name, value in raw.items()}


class TopicRegistry:
    """The registry's topics, re-read only when its size changes or a topic it does not know
    shows activity (checked one ZSCORE each)."""

    def __init__(self, queue: DelayQueue) -> None:
        self.queue = queue
        self._topics: set[str] | None = None

    def topics(self, changed: set[str] | None) -> list[str]:
        client, keys = self.queue.client, self.queue.keys
        if changed is None or self._topics is None:
            self._topics = set(self.queue.topics())
            return sorted(self._topics)
        unknown = sorted(changed - self._topics)
        pipe = client.pipeline(transaction=False)
        for topic in unknown:
            pipe.zscore(keys.registry_of(topic), topic)    # its bookkeeping shard's registry
        for registry in keys.registries:
            pipe.zcard(registry)
        answers = pipe.execute()
        scores, size = answers[:len(unknown)], sum(answers[len(unknown):])
        self._topics.update(t for t, score in zip(unknown, scores) if score is not None)
        if size != len(self._topics):       # some left (recycled), or joined unseen
            self._topics = set(self.queue.topics())
        return sorted(self._topics)


class TopicCache:
    """Per topic: a value and the time it stops being true by time alone; ``get`` re-reads
    the changed, the unknown and the expired ones through ``read``."""

    def __init__(self, read: Callable[[list[str], int], list[tuple[Any, int]]]) -> None:
        self.read = read
        self.entries: dict[str, tuple[Any, int]] = {}
        self.topics_read = 0      # topics re-read so far (the tests count them)

    def get(self, topics: Iterable[str], changed: set[str] | None, now_ms: int
            ) -> dict[str, Any]:
        topics = list(topics)
        entries = self.entries
        stale = [t for t in topics if changed is None or t in changed or t not in entries
                 or entries[t][1] <= now_ms]
        for first in range(0, len(stale), READ_CHUNK):
            if first:
                time.sleep(0)   # let the worker's other greenlets (its heartbeat) run
            chunk = stale[first:first + READ_CHUNK]
            entries.update(zip(chunk, self.read(chunk, now_ms)))
            self.topics_read += len(chunk)
        return {topic: entries[topic][0] for topic in topics}

    def keep(self, topics: Iterable[str]) -> None:
        """Forget the topics not in ``topics`` (gone from the registry)."""
        keep = set(topics)
        for topic in [t for t in self.entries if t not in keep]:
            del self.entries[topic]


def next_changes(client: redis.Redis, probes: list[list[Probe]], now_ms: int) -> list[int]:
    """Per entry, the first time (ms) one of its probes' zsets has a member cross one of its
    boundaries (its score comes within ``boundary`` of now), or ``NEVER``: one round trip, one
    ZRANGEBYSCORE ... LIMIT 0 1 per boundary."""
    pipe = client.pipeline(transaction=False)
    flat = [(i, key, bound) for i, entry in enumerate(probes) for key, bounds in entry
            for bound in bounds]
    for _, key, bound in flat:
        # boundary 0 (a held message falling due, an ended record's retention running out):
        # the change comes when the score is reached; a delay bucket's floor b: a message is
        # in it while its score >= now + b, so it leaves at score - b + 1
        low = f"({now_ms}" if bound == 0 else now_ms + bound
        pipe.zrangebyscore(key, low, "+inf", start=0, num=1, withscores=True)
    until = [NEVER] * len(probes)
    for (i, _, bound), first in zip(flat, pipe.execute() if flat else []):
        if first:
            score = int(first[0][1])
            until[i] = min(until[i], score if bound == 0 else score - bound + 1)
    return until


class MetricsSizes:
    """/metrics' reads, cached per process: ``queue_sizes()`` (call it first in a scrape: it
    polls the activity), ``subscription_sizes(topics)`` and ``totals()``."""

    def __init__(self, queue: DelayQueue, monitor: Monitor,
                 named: Callable[[DelayQueue, list[str]], dict[tuple[str, str], TopicSizes]]
                 | None = None, activity: FleetActivity | None = None) -> None:
        self.queue = queue
        self.named = named
        self.activity = activity or FleetActivity(monitor)
        self.registry = TopicRegistry(queue)
        self.cache = TopicCache(self._read)
        self._lock = threading.Lock()
        self._sizes: dict[str, tuple[TopicSizes, dict[str, TopicSizes]]] = {}

    def _read(self, topics: list[str], now_ms: int) -> list[tuple[Any, int]]:
        sizes = self.queue.queue_sizes(topics=topics)
        named = self.named(self.queue, topics) if self.named else {}
        by_topic: dict[str, dict[str, TopicSizes]] = {t: {} for t in topics}
        for (topic, name), value in named.items():
            by_topic[topic][name] = value
        probes = []
        for topic in topics:
            tk = self.queue.topic_keys(topic)
            entry: list[Probe] = [(tk.held, (0,)), (tk.ended, (0,))]
            for name in by_topic[topic]:
                sk = tk.subscription(name)
                entry += [(sk.held, (0,)), (sk.ended, (0,))]
            probes.append(entry)
        until = next_changes(self.queue.client, probes, now_ms)
        return [((now_ms, sizes[t], by_topic[t]), u) for t, u in zip(topics, until)]

    def queue_sizes(self) -> dict[str, TopicSizes]:
        with self._lock:
            changed = self.activity.poll()
            try:
                topics = self.registry.topics(changed)
                now = self.queue.clock.now_ms()
                cached = self.cache.get(topics, changed, now)
            except Exception:
                self.activity.reset()
                raise
            self.cache.keep(topics)
            self._sizes = {t: (_aged(sizes, read, now),
                               {n: _aged(v, read, now) for n, v in named.items()})
                           for t, (read, sizes, named) in cached.items()}
            return {t: value[0] for t, value in self._sizes.items()}

    def subscription_sizes(self, topics: list[str]) -> dict[tuple[str, str], TopicSizes]:
        return {(t, name): value for t in topics if t in self._sizes
                for name, value in self._sizes[t][1].items()}

    def totals(self) -> dict:
        return self.activity.totals()


def _aged(sizes: TopicSizes, read_ms: int, now_ms: int) -> TopicSizes:
    """The sizes read at ``read_ms`` as of ``now_ms``: only the oldest ready age moves."""
    if not sizes.ready:
        return sizes
    return sizes._replace(oldest_ready_age_ms=sizes.oldest_ready_age_ms + max(0, now_ms - read_ms))


class SnapshotSizes:
    """The snapshot writer's reads, cached in the process holding its lease: ``refresh()``
    once per tick that writes, then ``topics()`` and ``infos(topics)`` (each topic's
    ``topic_infos`` entry, with its ``subscriptions`` when it has named ones)."""

    def __init__(self, queue: DelayQueue, monitor: Monitor,
                 activity: FleetActivity | None = None) -> None:
        self.queue = queue
        self.activity = activity or FleetActivity(monitor)
        self.registry = TopicRegistry(queue)
        self.cache = TopicCache(self._read)
        self._changed: set[str] | None = None
        self._topics: list[str] = []

    def refresh(self) -> None:
        self._changed = self.activity.poll()
        try:
            self._topics = self.registry.topics(self._changed)
        except Exception:
            self.activity.reset()
            raise
        if self._changed is None or len(self.cache.entries) > 2 * len(self._topics) + 1000:
            self.cache.keep(self._topics)

    def topics(self) -> list[str]:
        return self._topics

    def infos(self, topics: list[str]) -> list[dict]:
        try:
            cached = self.cache.get(topics, self._changed, self.queue.clock.now_ms())
        except Exception:
            self.activity.reset()
            raise
        return [_unpack(t, cached[t]) for t in topics]

    def _read(self, topics: list[str], now_ms: int) -> list[tuple[Any, int]]:
        infos = self.queue.topic_infos(topics)
        pipe = self.queue.client.pipeline(transaction=False)
        for topic in topics:
            pipe.hlen(self.queue.topic_keys(topic).subs)
        for info, named in zip(infos, pipe.execute()):
            if named:
                info["subscriptions"] = self.queue.subscription_infos(info["topic"])
        probes = []
        for topic, info in zip(topics, infos):
            tk = self.queue.topic_keys(topic)
            counts = list(info["waitingQueueInfo"].values())[1:]
            floors = tuple(lo for lo, n in zip(BUCKET_FLOORS, counts) if n)
            entry: list[Probe] = [(tk.waiting, floors), (tk.held, (0, *floors))]
            for sub in info.get("subscriptions") or ():
                if sub.get("createdTime") is not None:      # a named one
                    entry.append((tk.subscription(sub["subscription"]).held, (0,)))
            probes.append(entry)
        return list(zip(map(_pack, infos), next_changes(self.queue.client, probes, now_ms)))


# A topic_infos entry kept as tuples (a dict each would cost a 100,000-topic fleet ~150 MB).
INFO_FIELDS = ("waitingQueueSize", "readyQueueSize", "ackQueueSize", "deadQueueSize",
               "groupBlockedSize", "paused")
BUCKET_NAMES = tuple(name for name, _, _ in WAITING_BUCKETS)


def _pack(info: dict) -> tuple:
    return (tuple(info[name] for name in INFO_FIELDS),
            tuple(info["waitingQueueInfo"][name] for name in BUCKET_NAMES),
            info.get("subscriptions"))


def _unpack(topic: str, packed: tuple) -> dict:
    values, buckets, subscriptions = packed
    info = {"topic": topic, **dict(zip(INFO_FIELDS, values)),
            "waitingQueueInfo": dict(zip(BUCKET_NAMES, buckets))}
    if subscriptions is not None:
        info["subscriptions"] = subscriptions
    return info
