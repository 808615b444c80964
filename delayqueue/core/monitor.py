"""Per-process counters and time-gap histograms, flushed into Redis so every reader sees the fleet.

Request handlers and scheduler loops call ``incr`` / ``observe`` / ``observe_loop``: no I/O, just
a dict update under a lock, credited to the interval the sample was recorded in (by the shared
clock). The flush loop calls ``flush()`` about once a second; it adds every buffered interval to
the interval's HASH ``keys.monitor(start)`` (with a TTL) and to the cumulative HASH
``keys.monitor_total`` in one ``lua/monitor_flush.lua`` call per interval, one round trip.

Field names are ``"<topic>\\t<name>"`` (topics never contain control characters, the API refuses
them) where name is a counter (``sendMsg``), or ``<histogram>:count`` / ``:sum`` / ``:max`` /
``:b<i>`` (samples in bucket i of ``histogram.BOUNDS_MS``; only non-zero buckets are stored).
Scheduler loop timings use the pseudo-topic ``LOOP_TOPIC = "\\tloop"`` (no real topic can start
with a tab) and the loop's name as the histogram: ``"\\tloop\\tpromote:b0"``; server events
(``EVENTS``, such as a write Redis refused over maxmemory) the pseudo-topic ``"\\tevent"``;
audited writes (http/audit.py) the pseudo-topic ``"\\taudit"`` and the endpoint's name.
Answered HTTP requests use ``REQUEST_TOPIC = "\\trequest"``: ``"\\trequest\\t<route>\\t<code>"``
counts them, ``"\\trequest\\t<route>:sum"`` and ``:b<i>`` (buckets of
``histogram.REQUEST_BOUNDS_MS``; the count is their sum) hold their durations in ms.
Time gaps are whole milliseconds (rounded, negatives clamped to 0); loop durations keep
fractional ms in sum and max.

Subscriptions: the default subscription's samples (``subscription=None``) are the fields above,
unchanged, so data written before subscriptions reads the same. A named subscription's are
``"<topic>\\t<subscription>\\t<name>"`` (``"orders\\tbilling\\tpullMsg"``,
``"orders\\tbilling\\tpullMsgTimeGap:b3"``): names are ``[A-Za-z0-9._-]``, never a tab, so the
number of tabs tells the two apart, and a reader that predates subscriptions skips them (its
``<name>`` would be ``"billing\\tpullMsg"``, no counter of its). ``parse_monitor_hash`` files
them under ``(topic, subscription)``.

Push delivery (background/push.py) records per subscription the same way: one counter per
outcome class of a POST (``PUSH_COUNTERS``: ``push2xx`` ... ``pushRefused``) and the POSTs'
latency histogram ``pushMillis`` (``PUSH_HISTOGRAMS``, the bounds of the time gaps).
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
from delayqueue.core.histogram import BOUNDS_MS, REQUEST_BOUNDS_MS, bucket_index, percentile
from delayqueue.core.keys import NamespaceKeys
from delayqueue.core.scripts import Scripts

logger = logging.getLogger(__name__)

COUNTERS = ("sendMsg", "pullMsg", "ackMsg", "nackMsg", "getMsg", "deleteMsg",
            "triggerMsgReady", "triggerMsgEndLife", "triggerMsgTimeout",
            "deadLettered", "redriven", "purged", "backlogRefused",
            "replaced", "deduplicated", "scheduleSent", "scheduleMissed")
HISTOGRAMS = ("pullMsgTimeGap", "readyQueueTimeGap")
# Push delivery (background/push.py), per subscription: one counter per outcome class of a
# POST (push_client.OUTCOMES) and the POST's latency (ms, from the request to the answer).
PUSH_COUNTERS = ("push2xx", "push3xx", "push4xx", "push5xx", "pushTimeout",
                 "pushConnectionError", "pushRefused")
PUSH_HISTOGRAMS = ("pushMillis",)
# The outcome class of each push counter: /metrics' ``outcome`` label (push_client.OUTCOMES).
PUSH_OUTCOMES = dict(zip(PUSH_COUNTERS, ("2xx", "3xx", "4xx", "5xx", "timeout", "connection",
                                         "refused")))
# The counters of a consumer's state, kept per subscription: what /metrics labels with
# ``subscription`` and a named subscription's snapshot line carries. Any counter may be
# recorded for a subscription; the others are the topic's (a send reaches every subscription).
SUBSCRIPTION_COUNTERS = ("pullMsg", "ackMsg", "nackMsg", "triggerMsgReady", "triggerMsgEndLife",
                         "triggerMsgTimeout", "deadLettered", "redriven")
# The name of the default subscription (core/subscriptions.DEFAULT): recorded as None.
DEFAULT_SUBSCRIPTION = "default"
# Fleet-wide counts of server events, not of any topic.
EVENTS = ("redisOutOfMemory",)

LOOP_TOPIC = "\tloop"
EVENT_TOPIC = "\tevent"
AUDIT_TOPIC = "\taudit"
REQUEST_TOPIC = "\trequest"
FIELD_SEPARATOR = "\t"
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


def empty_histogram(bounds: tuple[float, ...] = BOUNDS_MS) -> dict[str, Any]:
    return {"count": 0, "sum": 0, "max": 0, "counts": [0] * len(bounds)}


def empty_topic_stats() -> dict[str, Any]:
    stats: dict[str, Any] = {name: 0 for name in COUNTERS}
    for name in HISTOGRAMS:
        stats[name] = empty_histogram()
    stats.update(dict.fromkeys(PUSH_COUNTERS, 0))
    for name in PUSH_HISTOGRAMS:
        stats[name] = empty_histogram()
    return stats


def pushes(stats: dict[str, Any]) -> int:
    """POSTs answered (every outcome) in ``stats``: 0 for a subscription that did not push."""
    return sum(stats.get(name, 0) for name in PUSH_COUNTERS)


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _number(value: str | bytes) -> int | float:
    text = _text(value)
    try:
        return int(text)
    except ValueError:
        number = float(text)
        return int(number) if number.is_integer() else number


def _apply_histogram_field(hist: dict[str, Any], suffix: str, value: float) -> None:
    if suffix in ("count", "sum", "max"):
        hist[suffix] = value
    elif suffix.startswith("b") and suffix[1:].isdigit() and int(suffix[1:]) < len(hist["counts"]):
        hist["counts"][int(suffix[1:])] = int(value)


def parse_monitor_hash(raw: dict, subscriptions: dict[tuple[str, str], dict] | None = None
                       ) -> tuple[dict[str, dict], dict[str, dict]]:
    """Split a monitor HASH into ({topic: counters + histograms}, {loop: histogram}); the topic's
    stats are its default subscription's (and the topic-wide counters). Given a dict,
    ``subscriptions`` receives {(topic, subscription): stats} of the named subscriptions;
    without one their fields are skipped.

    Unknown fields are ignored so older readers survive newer writers.
    """
    topics: dict[str, dict] = {}
    loops: dict[str, dict] = {}
    for raw_field, raw_value in raw.items():
        name = _text(raw_field)
        if name.startswith(LOOP_TOPIC + FIELD_SEPARATOR):
            loop, _, suffix = name[len(LOOP_TOPIC) + 1:].rpartition(":")
            if loop:
                _apply_histogram_field(loops.setdefault(loop, empty_histogram()), suffix,
                                       _number(raw_value))
            continue
        topic, sep, metric = name.partition(FIELD_SEPARATOR)
        if not sep:
            continue
        into, key = topics, topic
        if FIELD_SEPARATOR in metric:
            if subscriptions is None or not topic:
                continue
            subscription, _, metric = metric.partition(FIELD_SEPARATOR)
            into, key = subscriptions, (topic, subscription)
        if metric in COUNTERS or metric in PUSH_COUNTERS:
            _topic_stats(into, key)[metric] = int(_number(raw_value))
            continue
        hist_name, _, suffix = metric.rpartition(":")
        if hist_name in HISTOGRAMS or hist_name in PUSH_HISTOGRAMS:
            _apply_histogram_field(_topic_stats(into, key)[hist_name], suffix, _number(raw_value))
    return topics, loops


def _topic_stats(topics: dict, topic: Any) -> dict:
    """The topic's stats, made on its first field only (a /metrics scrape parses ~20 fields
    per topic: building empty stats for each was a tenth of a scrape of 10,000 topics)."""
    stats = topics.get(topic)
    if stats is None:
        stats = topics[topic] = empty_topic_stats()
    return stats


@dataclass
class RequestStats:
    """The HTTP requests answered: counts by (route, code), a duration histogram by route."""

    counts: dict[tuple[str, str], int] = field(default_factory=dict)
    durations: dict[str, dict[str, Any]] = field(default_factory=dict)


def parse_requests(raw: dict) -> RequestStats:
    """The ``REQUEST_TOPIC`` fields of a monitor HASH; a histogram's count is its buckets' sum."""
    stats = RequestStats()
    prefix = REQUEST_TOPIC + FIELD_SEPARATOR
    for raw_field, raw_value in raw.items():
        name = _text(raw_field)
        if not name.startswith(prefix):
            continue
        route, sep, code = name[len(prefix):].partition(FIELD_SEPARATOR)
        if sep:
            stats.counts[(route, code)] = int(_number(raw_value))
            continue
        route, _, suffix = route.rpartition(":")
        hist = stats.durations.get(route)
        if hist is None:
            hist = stats.durations[route] = empty_histogram(REQUEST_BOUNDS_MS)
        _apply_histogram_field(hist, suffix, _number(raw_value))
    for hist in stats.durations.values():
        hist["count"] = sum(hist["counts"])
    return stats


def time_gap_stats(topic: str, hist: dict[str, Any]) -> dict[str, Any]:
    """One entry of getMonitorData's time-gap lists."""
    return {"topic": topic, **histogram_stats(hist)}


def histogram_stats(hist: dict[str, Any]) -> dict[str, Any]:
    """A histogram's count, mean, max, p50 and p99 (ms) as getMonitorData shows them."""
    count = hist["count"]
    return {
        "count": count,
        "avg": hist["sum"] / count if count else 0.0,
        "max": hist["max"],
        "p50": percentile(hist["counts"], 0.5, hist["max"]),
        "p99": percentile(hist["counts"], 0.99, hist["max"]),
    }


def push_stats_list(topics: dict[str, dict], named: dict[tuple[str, str], dict]
                    ) -> list[dict[str, Any]]:
    """getMonitorData's ``pushStatsList``: one entry per (topic, subscription) that pushed
    (the default subscription's named ``"default"``), in topic then subscription order: the
    POSTs answered by outcome class (``PUSH_COUNTERS``), their sum ``pushes``, and the POSTs'
    latency ``pushMillis`` (count, avg, max, p50, p99 in ms)."""
    sources = [((topic, DEFAULT_SUBSCRIPTION), stats) for topic, stats in topics.items()]
    sources += list(named.items())
    entries = []
    for (topic, subscription), stats in sorted(sources, key=lambda item: item[0]):
        total = pushes(stats)
        if total:
            entries.append({"topic": topic, "subscription": subscription,
                            **{name: stats[name] for name in PUSH_COUNTERS}, "pushes": total,
                            "pushMillis": histogram_stats(stats["pushMillis"])})
    return entries


def _prefix(topic: str, subscription: str | None) -> str:
    """The start of a sample's field: the topic's, or a named subscription's (module
    docstring). A name outside the subscription pattern would break the field's parse."""
    if subscription is None or subscription == DEFAULT_SUBSCRIPTION:
        return topic + FIELD_SEPARATOR
    if FIELD_SEPARATOR in subscription or ":" in subscription or not subscription:
        raise ValueError(f"bad subscription name {subscription!r}")
    return f"{topic}{FIELD_SEPARATOR}{subscription}{FIELD_SEPARATOR}"


def _named(topic: str, subscription: str | None) -> str | None:
    """A named subscription, checked now (a bad name raises here, not at the flush), or None
    for the default one."""
    if subscription == DEFAULT_SUBSCRIPTION or subscription is None:
        return None
    _prefix(topic, subscription)
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
        return _prefix(topic, subscription) + name
    how, inner = key
    if how is _REQUEST:
        route, code = inner
        prefix = f"{REQUEST_TOPIC}{FIELD_SEPARATOR}{route}"
        return (f"{prefix}{FIELD_SEPARATOR}{code}",
                tuple(f"{prefix}:b{i}" for i in range(len(REQUEST_BOUNDS_MS) + 1)),
                prefix + ":sum")
    if how is _GAPS:
        topic, subscription, histogram = inner
        return _histogram_fields(f"{_prefix(topic, subscription)}{histogram}:", BOUNDS_MS)
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

    def totals(self) -> dict:
        """Cumulative fleet-wide stats: {"topics": {topic: stats}, "subscriptions":
        {(topic, subscription): stats} (the named ones), "loops": {loop: histogram},
        "events": {event: count}, "audit": {route: audited writes},
        "requests": RequestStats}."""
        raw = self.client.hgetall(self.keys.monitor_total)
        subscriptions: dict[tuple[str, str], dict] = {}
        topics, loops = parse_monitor_hash(raw, subscriptions)
        events = dict.fromkeys(EVENTS, 0)
        audit: dict[str, int] = {}
        prefix = EVENT_TOPIC + FIELD_SEPARATOR
        audit_prefix = AUDIT_TOPIC + FIELD_SEPARATOR
        for raw_field, raw_value in raw.items():
            name = _text(raw_field)
            if name.startswith(prefix) and name[len(prefix):] in events:
                events[name[len(prefix):]] = int(_number(raw_value))
            elif name.startswith(audit_prefix):
                audit[name[len(audit_prefix):]] = int(_number(raw_value))
        return {"topics": topics, "subscriptions": subscriptions, "loops": loops,
                "events": events, "audit": audit, "requests": parse_requests(raw)}
