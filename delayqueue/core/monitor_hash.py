"""The monitor hashes' vocabulary (core/monitor.py writes them): their field names, the
counters and histograms they hold, and how they are read back into per-topic statistics.

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

``"<topic>\ttouched"`` (``TOUCHED``) counts the changes to a topic's sizes or state that no
counter records (pause, resume, a dead-letter purge or trim, a reschedule, a subscription
created, changed or deleted): no reader shows it, it names the topic as changed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from delayqueue.core.histogram import BOUNDS_MS, REQUEST_BOUNDS_MS, percentile

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
# A field that marks a topic as changed without counting anything (``Monitor.touch``): a
# pause, a purge of dead letters, a subscription's creation... The readers of sizes
# (monitoring/size_cache.py) re-read the topics the interval hashes name; parsers skip it.
TOUCHED = "touched"


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


def field_text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def field_number(value: str | bytes) -> int | float:
    text = field_text(value)
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
        name = field_text(raw_field)
        if name.startswith(LOOP_TOPIC + FIELD_SEPARATOR):
            loop, _, suffix = name[len(LOOP_TOPIC) + 1:].rpartition(":")
            if loop:
                _apply_histogram_field(loops.setdefault(loop, empty_histogram()), suffix,
                                       field_number(raw_value))
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
            _topic_stats(into, key)[metric] = int(field_number(raw_value))
            continue
        hist_name, _, suffix = metric.rpartition(":")
        if hist_name in HISTOGRAMS or hist_name in PUSH_HISTOGRAMS:
            _apply_histogram_field(_topic_stats(into, key)[hist_name], suffix,
                                   field_number(raw_value))
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
        name = field_text(raw_field)
        if not name.startswith(prefix):
            continue
        route, sep, code = name[len(prefix):].partition(FIELD_SEPARATOR)
        if sep:
            stats.counts[(route, code)] = int(field_number(raw_value))
            continue
        route, _, suffix = route.rpartition(":")
        hist = stats.durations.get(route)
        if hist is None:
            hist = stats.durations[route] = empty_histogram(REQUEST_BOUNDS_MS)
        _apply_histogram_field(hist, suffix, field_number(raw_value))
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


def field_prefix(topic: str, subscription: str | None) -> str:
    """The start of a sample's field: the topic's, or a named subscription's (module
    docstring). A name outside the subscription pattern would break the field's parse."""
    if subscription is None or subscription == DEFAULT_SUBSCRIPTION:
        return topic + FIELD_SEPARATOR
    if FIELD_SEPARATOR in subscription or ":" in subscription or not subscription:
        raise ValueError(f"bad subscription name {subscription!r}")
    return f"{topic}{FIELD_SEPARATOR}{subscription}{FIELD_SEPARATOR}"
