"""Per-process counters and time-gap histograms, flushed into Redis so every reader sees the fleet.

Request handlers and scheduler loops call ``incr`` / ``observe`` / ``observe_loop``: no I/O, no
lock, one append to a log the flush drains, credited to the interval the sample was recorded in
(by the shared clock). The flush loop calls ``flush()`` about once a second; it adds every
buffered interval to the interval's HASH ``keys.monitor(start)`` (with a TTL) and to the
cumulative HASH ``keys.monitor_total`` in one ``lua/monitor_flush.lua`` call per interval, one
round trip. The hashes' field names, and how they are read back, are ``monitor_hash.py``'s.
"""

from __future__ import annotations

import bisect
import logging
import math
import threading
from collections import defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import redis
from redis.exceptions import RedisClusterException

from delayqueue.core.clock import Clock
from delayqueue.core.histogram import BOUNDS_MS, REQUEST_BOUNDS_MS, bucket_index
from delayqueue.core.keys import NamespaceKeys
from delayqueue.core.monitor_hash import (
    AUDIT_TOPIC,
    COUNTERS,
    DEFAULT_SUBSCRIPTION,
    EVENT_TOPIC,
    EVENTS,
    FIELD_SEPARATOR,
    HISTOGRAMS,
    LOOP_TOPIC,
    PUSH_COUNTERS,
    PUSH_HISTOGRAMS,
    REQUEST_TOPIC,
    TOUCHED,
    field_number,
    field_prefix,
    field_text,
    parse_monitor_hash,
    parse_requests,
    push_stats_list,
    time_gap_stats,
)
from delayqueue.core.scripts import Scripts

logger = logging.getLogger(__name__)

# Intervals kept in the local buffer while Redis is unreachable; older ones are dropped.
MAX_BUFFERED_INTERVALS = 10
# Interval hashes live the server's monitor-history-minutes (an hour by default: the
# console's charts read no further back), and at least 10 intervals. Each holds ~50 fields per
# topic active in its interval, so a day of history costs Redis 24 times an hour's.
MIN_RETENTION_MS = 3_600_000
RETENTION_INTERVALS = 10


@dataclass
class _Samples:
    """One interval's samples not yet in Redis: integer increments, float increments, maxima."""

    ints: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    floats: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    maxes: dict[str, float] = field(default_factory=dict)

    def set_max(self, name: str, value: float) -> None:
        current = self.maxes.get(name)
        if current is None or value > current:
            self.maxes[name] = value

    def merge(self, other: _Samples) -> None:
        for name, value in other.ints.items():
            self.ints[name] += value
        for name, value in other.floats.items():
            self.floats[name] += value
        for name, value in other.maxes.items():
            self.set_max(name, value)

    def args(self) -> list[str]:
        """The script's (field, op, value) groups."""
        out: list[str] = []
        for name, value in self.ints.items():
            if value:
                out += (name, "i", str(value))
        for name, value in self.floats.items():
            if value:
                out += (name, "f", repr(round(value, 3)))
        for name, value in self.maxes.items():
            out += (name, "m", str(value) if isinstance(value, int) else repr(round(value, 3)))
        return out




def _named(topic: str, subscription: str | None) -> str | None:
    """A named subscription, checked now (a bad name raises here, not at the flush), or None
    for the default one."""
    if subscription == DEFAULT_SUBSCRIPTION or subscription is None:
        return None
    field_prefix(topic, subscription)
    return subscription


# How a recorded sample is added (Monitor._drain), compared by identity.
_ADD, _GAPS, _LOOP, _REQUEST = "add", "gaps", "loop", "request"
_COUNTER_NAMES = frozenset(COUNTERS) | frozenset(PUSH_COUNTERS)
# Samples recorded and not yet drained into intervals, past which the recording call drains.
_MAX_LOG = 100_000
# Field names kept per process; past this many keys (topics x counters) the cache restarts.
_MAX_NAMES = 100_000


def _histogram_fields(prefix: str, bounds: tuple[float, ...]) -> tuple[str, str, str,
                                                                       tuple[str, ...]]:
    return (prefix + "count", prefix + "sum", prefix + "max",
            tuple(f"{prefix}b{i}" for i in range(len(bounds) + 1)))


def _field_names(key: tuple) -> Any:
    """A sample key's field name: a counter's (topic, subscription, name), or a histogram's
    or a request's names, keyed (how, key) (Monitor._drain)."""
    if len(key) == 3:
        topic, subscription, name = key
        return field_prefix(topic, subscription) + name
    how, inner = key
    if how is _REQUEST:
        route, code = inner
        prefix = f"{REQUEST_TOPIC}{FIELD_SEPARATOR}{route}"
        return (f"{prefix}{FIELD_SEPARATOR}{code}",
                tuple(f"{prefix}:b{i}" for i in range(len(REQUEST_BOUNDS_MS) + 1)),
                prefix + ":sum")
    if how is _GAPS:
        topic, subscription, histogram = inner
        return _histogram_fields(f"{field_prefix(topic, subscription)}{histogram}:", BOUNDS_MS)
    (loop,) = inner
    return _histogram_fields(f"{LOOP_TOPIC}{FIELD_SEPARATOR}{loop}:", BOUNDS_MS)


class Monitor:
    """Fleet-wide monitoring: local buffers per interval, flushed into Redis hashes."""

    def __init__(self, client: redis.Redis, keys: NamespaceKeys, clock: Clock, interval_s: int,
                 scripts: Scripts, history_ms: int = MIN_RETENTION_MS) -> None:
        if interval_s <= 0:
            raise ValueError("monitor interval must be positive")
        self.client = client
        self.keys = keys
        self.clock = clock
        self.interval_ms = interval_s * 1000
        self.retention_ms = max(RETENTION_INTERVALS * self.interval_ms, history_ms)
        self.scripts = scripts
        self._lock = threading.Lock()      # the flush's: recording never takes it
        self._log: deque[tuple[int, str, tuple, Any]] = deque()
        self._names: dict[tuple, Any] = {}
        self._pending: dict[int, _Samples] = {}
        self._failing = False

    # -- recording (hot path: no I/O, no lock, no string built) -------------------------------
    #
    # A sample is one append to a deque, (time, how, key, value): ``deque.append`` and
    # ``popleft`` are atomic in CPython, so threads and greenlets record without a lock (under
    # gevent a lock is a Python-level semaphore) and the flush drains exactly what was
    # appended, every sample once; one appended while it drains waits for the next flush.
    # Field names are built at the flush, once per distinct key (``_field``).

    def _record(self, how: str, key: tuple, value: Any, now_ms: int | None = None) -> None:
        now = self.clock.now_ms() if now_ms is None else now_ms
        self._log.append((now, how, key, value))
        if len(self._log) > _MAX_LOG:   # no flush loop (a bare app, a stalled loop): fold
            with self._lock:
                self._drain()

    def incr(self, topic: str, counter: str, n: int = 1, *,
             subscription: str | None = None) -> None:
        if counter not in _COUNTER_NAMES:
            raise ValueError(f"unknown monitor counter {counter!r}")
        if n == 0:
            return
        subscription = _named(topic, subscription)
        self._record(_ADD, (topic, subscription, counter), n)

    def observe(self, topic: str, histogram: str, gaps_ms: Iterable[float], *,
                subscription: str | None = None) -> None:
        if histogram not in HISTOGRAMS and histogram not in PUSH_HISTOGRAMS:
            raise ValueError(f"unknown monitor histogram {histogram!r}")
        # Whole ms keeps the sums integer (HINCRBY); "never early" makes negatives noise.
        gaps = [max(0, math.floor(gap + 0.5)) for gap in gaps_ms]
        if not gaps:
            return
        subscription = _named(topic, subscription)
        self._record(_GAPS, (topic, subscription, histogram), gaps)

    def record_promotions(self, topic: str, promoted: int, gaps_ms: Iterable[float], *,
                          subscription: str | None = None) -> None:
        """Messages a script moved waiting -> ready (of ``subscription``), with their
        promotion gaps."""
        if promoted:
            self.incr(topic, "triggerMsgReady", promoted, subscription=subscription)
            self.observe(topic, "readyQueueTimeGap", [float(g) for g in gaps_ms],
                         subscription=subscription)

    def touch(self, topic: str) -> None:
        """Name ``topic`` as changed in this interval's hash when nothing counted the change
        (a pause, a dead-letter purge, a subscription created...): the size caches
        (monitoring/size_cache.py) re-read only the topics the interval hashes name."""
        self._record(_ADD, (topic, None, TOUCHED), 1)

    def count_event(self, event: str, n: int = 1) -> None:
        if event not in EVENTS:
            raise ValueError(f"unknown monitor event {event!r}")
        self._record(_ADD, (EVENT_TOPIC, None, event), n)

    def count_audit(self, route: str) -> None:
        """One audited write (http/audit.py) through ``route``, an endpoint's name."""
        if not route.isidentifier():
            raise ValueError(f"audit route must be an endpoint's name, got {route!r}")
        self._record(_ADD, (AUDIT_TOPIC, None, route), 1)

    def observe_loop(self, loop: str, duration_ms: float) -> None:
        self._record(_LOOP, (loop,), max(0.0, float(duration_ms)))

    def record_request(self, route: str, code: str, duration_ms: float) -> None:
        """One answered HTTP request, by route and code, and its duration: one append, the
        cheapest record there is (the hot path of every request)."""
        try:
            now = self.clock.now_ms()
        except (redis.RedisError, RedisClusterException):
            return  # never reached Redis, so no clock: an answer must not fail for a count
        self._record(_REQUEST, (route, code), duration_ms, now)

    def _drain(self) -> None:
        """Move every recorded sample into its interval's ``_Samples``; the caller holds the
        lock (the flush's own, never taken by a recording call)."""
        log, pending, field_of = self._log, self._pending, self._field
        interval_ms = self.interval_ms
        while True:
            try:
                now, how, key, value = log.popleft()
            except IndexError:
                return
            start = now - now % interval_ms
            samples = pending.get(start)
            if samples is None:
                samples = pending[start] = _Samples()
            if how is _ADD:
                samples.ints[field_of(key)] += value
            elif how is _REQUEST:
                count, bucket, total = field_of((_REQUEST, key))
                samples.ints[count] += 1
                samples.ints[bucket[bisect.bisect_left(REQUEST_BOUNDS_MS, value)]] += 1
                samples.floats[total] += value
            elif how is _GAPS:
                count, total, top, buckets = field_of((_GAPS, key))
                samples.ints[count] += len(value)
                samples.ints[total] += sum(value)
                samples.set_max(top, max(value))
                for gap in value:
                    samples.ints[buckets[bucket_index(gap)]] += 1
            else:  # _LOOP
                count, total, top, buckets = field_of((_LOOP, key))
                samples.ints[count] += 1
                samples.floats[total] += value
                samples.set_max(top, value)
                samples.ints[buckets[bucket_index(value)]] += 1

    def _field(self, key: tuple) -> Any:
        """The field name(s) of a sample's key, built once per key (a bounded cache)."""
        names = self._names.get(key)
        if names is None:
            if len(self._names) >= _MAX_NAMES:
                self._names.clear()
            names = self._names[key] = _field_names(key)
        return names

    # -- flushing ------------------------------------------------------------------------------

    def flush(self) -> None:
        """Send every buffered interval to Redis; on failure keep it for the next flush.

        Never raises a Redis error. A reply lost after Redis applied the script is re-sent
        next time (counted twice): the price of never losing a sample to a short outage.
        """
        with self._lock:
            self._drain()
            intervals, self._pending = self._pending, {}
        if not intervals:
            return
        try:
            failed, error = self._send(intervals)
        except redis.RedisError:
            if not self._failing:
                logger.exception("monitor flush failed; keeping %d interval(s) for the next flush",
                                 len(intervals))
            failed = intervals
        else:
            if failed and not self._failing:
                logger.error("monitor flush failed for %d interval(s); keeping them: %s",
                             len(failed), error)
        if failed:
            self._failing = True
            self._requeue(failed)
        elif self._failing:
            logger.info("monitor flush recovered")
            self._failing = False

    def _send(self, intervals: dict[int, _Samples]) -> tuple[dict[int, _Samples], Exception | None]:
        """Run the flush script once per interval in one round trip.

        Returns the intervals that failed and the first error (a round trip answers per call).
        """
        calls = [(start, samples, samples.args()) for start, samples in sorted(intervals.items())]
        calls = [call for call in calls if call[2]]
        trip = self.scripts.round_trip(self.client)
        for start, _, args in calls:
            self.scripts.monitor_flush(self.keys, start, self.retention_ms, args, trip=trip)
        results = trip.execute()
        failed: dict[int, _Samples] = {}
        error: Exception | None = None
        for (start, samples, _), result in zip(calls, results):
            if isinstance(result, Exception):
                failed[start] = samples
                error = error or result
            elif int(result) < 0:
                # A malformed call is a bug here, not an outage: retrying cannot help.
                logger.error("monitor_flush rejected interval %d with code %s", start, result)
        return failed, error

    def _requeue(self, failed: dict[int, _Samples]) -> None:
        with self._lock:
            for start, samples in failed.items():
                newer = self._pending.get(start)
                if newer is not None:
                    samples.merge(newer)
                self._pending[start] = samples
            excess = sorted(self._pending)[:-MAX_BUFFERED_INTERVALS]
            for start in excess:
                del self._pending[start]
        if excess:
            logger.warning("monitor buffer full: dropped %d unflushed interval(s) from %d",
                           len(excess), excess[0])

    # -- reading -------------------------------------------------------------------------------

    def interval_start(self, now_ms: int) -> int:
        return now_ms - now_ms % self.interval_ms

    def read_interval(self, interval_start_ms: int) -> dict[str, dict]:
        """topic -> the counters and both histograms, summed over the fleet, for one interval
        (the default subscription's consumer counters)."""
        topics, _ = parse_monitor_hash(self.client.hgetall(self.keys.monitor(interval_start_ms)))
        return topics

    def read_interval_subscriptions(self, interval_start_ms: int
                                    ) -> tuple[dict[str, dict], dict[tuple[str, str], dict]]:
        """``read_interval`` and {(topic, subscription): stats} of the named subscriptions,
        from the one read of the interval's hash."""
        subscriptions: dict[tuple[str, str], dict] = {}
        topics, _ = parse_monitor_hash(self.client.hgetall(self.keys.monitor(interval_start_ms)),
                                       subscriptions)
        return topics, subscriptions

    def monitor_data(self) -> dict:
        """getMonitorData's "data" object for the last complete interval.

        Samples a process has not flushed yet (at most about a second's worth) are not included.
        """
        start = self.interval_start(self.clock.now_ms()) - self.interval_ms
        stats, named = self.read_interval_subscriptions(start)
        requests = []
        pull_gaps = []
        ready_gaps = []
        for topic in sorted(stats):
            entry = stats[topic]
            if any(entry[name] for name in COUNTERS):
                requests.append({
                    "topic": topic,
                    "sendMsg": entry["sendMsg"],
                    "pullMsg": entry["pullMsg"],
                    "deleteMsg": entry["deleteMsg"],
                    # camellia's ackMsg counts acks and nacks alike.
                    "ackMsg": entry["ackMsg"] + entry["nackMsg"],
                    "getMsg": entry["getMsg"],
                    "triggerMsgReady": entry["triggerMsgReady"],
                    "triggerMsgEndLife": entry["triggerMsgEndLife"],
                    "triggerMsgTimeout": entry["triggerMsgTimeout"],
                })
            if entry["pullMsgTimeGap"]["count"] > 0:
                pull_gaps.append(time_gap_stats(topic, entry["pullMsgTimeGap"]))
            if entry["readyQueueTimeGap"]["count"] > 0:
                ready_gaps.append(time_gap_stats(topic, entry["readyQueueTimeGap"]))
        data: dict = {
            "requestStatsList": requests,
            "pullMsgTimeGapStatsList": pull_gaps,
            "readyQueueTimeGapStatsList": ready_gaps,
        }
        # ours, only when something pushed: otherwise camellia's keys exactly
        pushed = push_stats_list(stats, named)
        if pushed:
            data["pushStatsList"] = pushed
        return data

    def totals(self, raw: dict | None = None) -> dict:
        """Cumulative fleet-wide stats: {"topics": {topic: stats}, "subscriptions":
        {(topic, subscription): stats} (the named ones), "loops": {loop: histogram},
        "events": {event: count}, "audit": {route: audited writes},
        "requests": RequestStats}. ``raw``: the cumulative hash as already read (a cache of
        it: monitoring/size_cache.py), else read now."""
        if raw is None:
            raw = self.client.hgetall(self.keys.monitor_total)
        subscriptions: dict[tuple[str, str], dict] = {}
        topics, loops = parse_monitor_hash(raw, subscriptions)
        events = dict.fromkeys(EVENTS, 0)
        audit: dict[str, int] = {}
        prefix = EVENT_TOPIC + FIELD_SEPARATOR
        audit_prefix = AUDIT_TOPIC + FIELD_SEPARATOR
        for raw_field, raw_value in raw.items():
            name = field_text(raw_field)
            if name.startswith(prefix) and name[len(prefix):] in events:
                events[name[len(prefix):]] = int(field_number(raw_value))
            elif name.startswith(audit_prefix):
                audit[name[len(audit_prefix):]] = int(field_number(raw_value))
        return {"topics": topics, "subscriptions": subscriptions, "loops": loops,
                "events": events, "audit": audit, "requests": parse_requests(raw)}
