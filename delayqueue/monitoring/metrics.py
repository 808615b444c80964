"""Prometheus text for /metrics: fleet-wide counters, queue sizes, paused flags, time gaps,
audited writes, loop timings.

Counters and histograms come from the namespace's cumulative monitor HASH (every process's
flushed samples), so any worker of any node answers for the whole fleet; scrape one target,
or sum with care. A fresh registry per scrape keeps no state between requests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from delayqueue.core.histogram import BOUNDS_MS
from delayqueue.core.monitor import COUNTERS, Monitor
from delayqueue.core.queue import TopicSizes

QUEUE_STATES = ("waiting", "ready", "consuming", "group_blocked")
TIME_GAP_KINDS = (("pull", "pullMsgTimeGap"), ("ready", "readyQueueTimeGap"))


def cumulative_buckets(counts: list[int]) -> list[tuple[str, float]]:
    """Per-bucket counts -> Prometheus' cumulative (le, count) pairs, "+Inf" last."""
    buckets = []
    running = 0
    for bound, count in zip(BOUNDS_MS, counts):
        running += count
        buckets.append((floatToGoString(bound), running))
    return buckets


class MonitorCollector(Collector):
    """Builds the metric families from one read of the monitor totals and queue sizes.

    The paused flags come with the sizes (``TopicSizes.paused``, the same round trip), so
    they name the same topics.
    """

    def __init__(self, monitor: Monitor,
                 queue_sizes: Callable[[], dict[str, TopicSizes]]) -> None:
        self.monitor = monitor
        self.queue_sizes = queue_sizes

    def collect(self) -> Iterable[Metric]:
        totals = self.monitor.totals()
        topics = totals["topics"]

        messages = CounterMetricFamily(
            "delayqueue_messages",
            "Messages handled, by topic and operation (camellia's monitor counters, and "
            "deadLettered, redriven, purged, backlogRefused), cumulative over the whole fleet.",
            labels=["topic", "op"])
        for topic in sorted(topics):
            for op in COUNTERS:
                messages.add_metric([topic, op], topics[topic][op])
        yield messages

        sizes = GaugeMetricFamily(
            "delayqueue_queue_size",
            "Messages per topic in each state: waiting (not yet due), ready (due, not "
            "delivered), consuming (delivered, awaiting ack), group_blocked (due, waiting "
            "behind their message group's head).",
            labels=["topic", "state"])
        queue_sizes = self.queue_sizes()
        for topic, values in sorted(queue_sizes.items()):
            for state, value in zip(QUEUE_STATES, values):
                sizes.add_metric([topic, state], value)
        yield sizes

        paused = GaugeMetricFamily(
            "delayqueue_topic_paused",
            "1 while the topic is paused (pauseTopic: nothing is handed out), else 0.",
            labels=["topic"])
        for topic, values in sorted(queue_sizes.items()):
            paused.add_metric([topic], int(values.paused))
        yield paused

        gaps = HistogramMetricFamily(
            "delayqueue_time_gap_milliseconds",
            "Lateness against triggerTime in ms: kind=pull at delivery, kind=ready at "
            "promotion to the ready queue.",
            labels=["topic", "kind"])
        for topic in sorted(topics):
            for kind, name in TIME_GAP_KINDS:
                hist = topics[topic][name]
                if hist["count"]:
                    gaps.add_metric([topic, kind], cumulative_buckets(hist["counts"]),
                                    sum_value=hist["sum"])
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


def render_metrics(monitor: Monitor, queue_sizes: Callable[[], dict[str, TopicSizes]]
                   ) -> tuple[bytes, str]:
    """The /metrics body and its content type."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(MonitorCollector(monitor, queue_sizes))
    return generate_latest(registry), CONTENT_TYPE_LATEST
