"""Prometheus text for /metrics: fleet-wide counters, queue sizes, paused flags, time gaps,
audited writes, loop timings, HTTP requests; and what the answering process knows of itself.

Counters and histograms come from the namespace's cumulative monitor HASH (every process's
flushed samples), so any worker of any node answers for the whole fleet; scrape one target,
or sum with care. A fresh registry per scrape keeps no state between requests.

When the scrape's own reads of Redis fail, /metrics still answers: ``delayqueue_redis_up``
0, the build, and no series read from Redis.

Past ``metrics-max-topics`` topics (in name order), the rest are summed under one label,
``topic="_other"`` (``OTHER_TOPIC``), and ``delayqueue_metrics_topics_folded`` says how many:
every topic costs ``SERIES_PER_TOPIC`` series on every scraped node.
"""

from __future__ import annotations

import logging
import platform
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import redis
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString
from redis.exceptions import RedisClusterException

from delayqueue import __version__
from delayqueue.core.errors import DelayQueueError
from delayqueue.core.histogram import BOUNDS_MS, REQUEST_BOUNDS_MS
from delayqueue.core.monitor import COUNTERS, Monitor, RequestStats
from delayqueue.core.queue import TopicSizes

logger = logging.getLogger(__name__)

QUEUE_STATES = ("waiting", "ready", "consuming", "group_blocked", "dead")
TIME_GAP_KINDS = (("pull", "pullMsgTimeGap"), ("ready", "readyQueueTimeGap"))
# The label of the topics past metrics-max-topics; a real topic of that name is always folded,
# so the series has one meaning.
OTHER_TOPIC = "_other"
# Series one busy topic adds to a scrape: 17 counters (one op each), 5 sizes, paused, oldest
# ready age, and two time-gap histograms of 16 buckets, _sum and _count (tests/monitoring/
# test_metrics_families.py counts them).
SERIES_PER_TOPIC = len(COUNTERS) + len(QUEUE_STATES) + 2 + 2 * (len(BOUNDS_MS) + 2)
REDIS_FAILURES = (redis.RedisError, RedisClusterException, DelayQueueError)


@dataclass(frozen=True)
class FleetReads:
    """One scrape's reads of Redis."""
    totals: dict[str, Any]
    sizes: dict[str, TopicSizes]
    redis_version: str
    long_polls: dict[str, int]      # node -> long polls its live processes hold


def cumulative_buckets(counts: list[int], bounds: tuple[float, ...] = BOUNDS_MS,
                       scale: float = 1.0) -> list[tuple[str, float]]:
    """Per-bucket counts -> Prometheus' cumulative (le, count) pairs, "+Inf" last; ``scale``
    converts the bounds (ms -> s: 0.001)."""
    buckets = []
    running = 0
    for bound, count in zip(bounds, counts):
        running += count
        buckets.append((floatToGoString(bound * scale), running))
    return buckets


def redis_version(client: redis.Redis) -> str:
    """The Redis server's version (on a Cluster client, the first node's); "" when it cannot
    be read (a Redis user without INFO): a label, never what decides redis_up."""
    try:
        info = client.info("server")
    except REDIS_FAILURES as exc:
        logger.debug("/metrics: INFO failed: %s", exc)
        return ""
    if "redis_version" not in info and info:
        info = next(iter(info.values()))
    return str(info.get("redis_version", ""))


def folded_labels(topics: Iterable[str], max_topics: int) -> dict[str, str]:
    """topic -> its label: itself for the first ``max_topics`` in name order (0: no limit),
    ``OTHER_TOPIC`` for the others and for a topic named so."""
    labels = {}
    kept = 0
    for topic in sorted(topics):
        if topic != OTHER_TOPIC and (max_topics <= 0 or kept < max_topics):
            labels[topic] = topic
            kept += 1
        else:
            labels[topic] = OTHER_TOPIC
    return labels


class MonitorCollector(Collector):
    """Builds the metric families from one read of the monitor totals and queue sizes.

    The paused flags, dead letters and oldest ready ages come with the sizes
    (``TopicSizes``, the same round trip), so they name the same topics.
    """

    def __init__(self, monitor: Monitor,
                 queue_sizes: Callable[[], dict[str, TopicSizes]],
                 long_polls: Callable[[], dict[str, int]] = dict, max_topics: int = 0
                 ) -> None:
        self.monitor = monitor
        self.queue_sizes = queue_sizes
        self.long_polls = long_polls
        self.max_topics = max_topics

    def read(self) -> FleetReads | None:
        """The scrape's Redis reads, or None when one failed (redis_up 0)."""
        try:
            return FleetReads(self.monitor.totals(), self.queue_sizes(),
                              redis_version(self.monitor.client), self.long_polls())
        except REDIS_FAILURES as exc:
            logger.debug("/metrics: Redis read failed: %s", exc)
            return None

    def collect(self) -> Iterable[Metric]:
        reads = self.read()
        up = GaugeMetricFamily(
            "delayqueue_redis_up",
            "1 when this scrape's reads of Redis succeeded, else 0 (and no series read from "
            "Redis).", labels=[])
        up.add_metric([], 1 if reads else 0)
        yield up

        build = GaugeMetricFamily(
            "delayqueue_build_info",
            "Always 1: the server's version, its Python and the Redis server's version (empty "
            "while Redis cannot be read).", labels=["version", "python", "redis_version"])
        build.add_metric([__version__, platform.python_version(),
                          reads.redis_version if reads else ""], 1)
        yield build

        if reads is not None:
            yield from self.fleet(reads)

    def fleet(self, reads: FleetReads) -> Iterable[Metric]:
        totals, queue_sizes = reads.totals, reads.sizes
        topics = totals["topics"]
        label = folded_labels(set(topics) | set(queue_sizes), self.max_topics)

        folded = GaugeMetricFamily(
            "delayqueue_metrics_topics_folded",
            "Topics past metrics-max-topics, summed into the series of topic=\"_other\".",
            labels=[])
        folded.add_metric([], sum(1 for name in label.values() if name == OTHER_TOPIC))
        yield folded

        counts: dict[tuple[str, str], int] = {}
        for topic in topics:
            for op in COUNTERS:
                key = (label[topic], op)
                counts[key] = counts.get(key, 0) + topics[topic][op]
        messages = CounterMetricFamily(
            "delayqueue_messages",
            "Messages handled, by topic and operation, cumulative over the whole fleet: "
            "camellia's monitor counters sendMsg, pullMsg, ackMsg, nackMsg (apart from ackMsg), "
            "getMsg, deleteMsg, triggerMsgReady, triggerMsgEndLife, triggerMsgTimeout; and "
            "deadLettered, redriven, purged, backlogRefused (sends refused at maxBacklog), "
            "replaced (sends that "
            "replaced a waiting or ready message: onDuplicate=replace), "
            "deduplicated (sends answered duplicate inside dedupWindowMillis), scheduleSent "
            "(occurrences of recurring schedules written) and scheduleMissed (schedule fire "
            "times missed while the fleet was down: collapsed or skipped by the misfire "
            "policy).",
            labels=["topic", "op"])
        for key in sorted(counts):
            messages.add_metric(list(key), counts[key])
        yield messages

        yield from self.sizes(queue_sizes, label)

        merged: dict[tuple[str, str], list] = {}
        for topic in topics:
            for kind, name in TIME_GAP_KINDS:
                hist = topics[topic][name]
                if hist["count"]:
                    into = merged.setdefault((label[topic], kind), [[0] * len(BOUNDS_MS), 0])
                    into[0] = [a + b for a, b in zip(into[0], hist["counts"])]
                    into[1] += hist["sum"]
        gaps = HistogramMetricFamily(
            "delayqueue_time_gap_milliseconds",
            "Lateness against triggerTime in ms: kind=pull at delivery, kind=ready at "
            "promotion to the ready queue.",
            labels=["topic", "kind"])
        for key in sorted(merged):
            gaps.add_metric(list(key), cumulative_buckets(merged[key][0]),
                            sum_value=merged[key][1])
        yield gaps

        oom = CounterMetricFamily(
            "delayqueue_redis_out_of_memory",
            "Requests refused because Redis was over its maxmemory (nothing written), "
            "cumulative over the whole fleet. Counted once Redis accepts writes again.",
            labels=[])
        oom.add_metric([], totals["events"]["redisOutOfMemory"])
        yield oom

        audit = CounterMetricFamily(
            "delayqueue_audit_events",
            "Audited writes (the delayqueue.audit log's lines: topic settings, pause, resume, "
            "purges, redrives, deletes, reschedules, the console's forms, health online / "
            "offline), by route (the endpoint's name), refused ones included, cumulative over "
            "the whole fleet.",
            labels=["route"])
        for route, count in sorted(totals["audit"].items()):
            audit.add_metric([route], count)
        yield audit

        loops = HistogramMetricFamily(
            "delayqueue_scheduler_loop_duration_milliseconds",
            "Duration of one tick of a background scheduler loop, in ms.",
            labels=["loop"])
        for loop, hist in sorted(totals["loops"].items()):
            loops.add_metric([loop], cumulative_buckets(hist["counts"]), sum_value=hist["sum"])
        yield loops

        yield from self.requests(totals["requests"])

        polls = GaugeMetricFamily(
            "delayqueue_long_polls_held",
            "Long polls (longPollingMsg) held per node: the sum of its live processes' counts "
            "in the node registry (each beats every 5 s).", labels=["node"])
        for node, held in sorted(reads.long_polls.items()):
            polls.add_metric([node], held)
        yield polls

    def sizes(self, queue_sizes: dict[str, TopicSizes], label: dict[str, str]
              ) -> Iterable[Metric]:
        """Sizes and dead letters summed, paused topics counted, the oldest age the largest,
        per label."""
        states: dict[str, list[int]] = {}
        paused: dict[str, int] = {}
        ages: dict[str, int] = {}
        for topic, values in queue_sizes.items():
            name = label[topic]
            row = states.setdefault(name, [0] * len(QUEUE_STATES))
            for i, state in enumerate(QUEUE_STATES):
                row[i] += getattr(values, state)
            paused[name] = paused.get(name, 0) + int(values.paused)
            ages[name] = max(ages.get(name, 0), values.oldest_ready_age_ms)

        sizes = GaugeMetricFamily(
            "delayqueue_queue_size",
            "Messages per topic in each state: waiting (not yet due), ready (due, not "
            "delivered), consuming (delivered, awaiting ack), group_blocked (due, waiting "
            "behind their message group's head), dead (dead letters kept for redrive).",
            labels=["topic", "state"])
        for name in sorted(states):
            for state, value in zip(QUEUE_STATES, states[name]):
                sizes.add_metric([name, state], value)
        yield sizes

        flags = GaugeMetricFamily(
            "delayqueue_topic_paused",
            "1 while the topic is paused (pauseTopic: nothing is handed out), else 0 "
            "(topic=\"_other\": how many of the folded topics are paused).",
            labels=["topic"])
        for name in sorted(paused):
            flags.add_metric([name], paused[name])
        yield flags

        oldest = GaugeMetricFamily(
            "delayqueue_oldest_ready_age_seconds",
            "How long the topic's oldest ready message has waited for a consumer (since it "
            "became ready; 0 when none is ready), by the fleet's clock.",
            labels=["topic"])
        for name in sorted(ages):
            oldest.add_metric([name], ages[name] / 1000)
        yield oldest

    def requests(self, stats: RequestStats) -> Iterable[Metric]:
        requests = CounterMetricFamily(
            "delayqueue_http_requests",
            "HTTP requests answered, by route (the endpoint's name) and code (the answer's "
            "envelope code, else its HTTP status), cumulative over the whole fleet.",
            labels=["route", "code"])
        for (route, code), count in sorted(stats.counts.items()):
            requests.add_metric([route, code], count)
        yield requests

        durations = HistogramMetricFamily(
            "delayqueue_http_request_duration_seconds",
            "Time from the request's first hook to its answer, by route (a long poll's "
            "includes its hold), over the whole fleet.",
            labels=["route"])
        for route, hist in sorted(stats.durations.items()):
            durations.add_metric([route], cumulative_buckets(hist["counts"], REQUEST_BOUNDS_MS,
                                                             0.001),
                                 sum_value=hist["sum"] / 1000)
        yield durations


def render_metrics(monitor: Monitor, queue_sizes: Callable[[], dict[str, TopicSizes]],
                   long_polls: Callable[[], dict[str, int]] = dict, max_topics: int = 0
                   ) -> tuple[bytes, str]:
    """The /metrics body and its content type. ``long_polls``: node -> held long polls (the
    node registry's, read by the caller: this floor does not know the registry)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(MonitorCollector(monitor, queue_sizes, long_polls, max_topics))
    return generate_latest(registry), CONTENT_TYPE_LATEST
