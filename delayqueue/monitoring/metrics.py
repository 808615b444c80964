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

Subscriptions: the series of a consumer's state (the ``SUBSCRIPTION_COUNTERS`` ops of
``delayqueue_messages``, the ready, consuming, group_blocked and dead sizes, the oldest ready
age, the time gaps) carry a ``subscription`` label, ``"default"`` for the topic's default
subscription; the series of the topic as a whole (sends and the other ops, the waiting size,
the topic's pause) do not. Each named subscription adds ``SERIES_PER_SUBSCRIPTION`` series (at
most max-subscriptions-per-topic per topic); those of a folded topic are summed under
``subscription="_other"``. Their sizes cost the scrape two round trips whatever the number of
topics (``named_subscription_sizes``).

Push delivery: ``delayqueue_push_total{topic,subscription,outcome}`` and the histogram
``delayqueue_push_duration_seconds{topic,subscription}``, for each subscription (the default
one included) that ever pushed: ``SERIES_PER_PUSH_SUBSCRIPTION`` series each, folded under
``_other`` like the rest.
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
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString
from redis.exceptions import RedisClusterException

from delayqueue import __version__
from delayqueue.core.errors import DelayQueueError
from delayqueue.core.histogram import BOUNDS_MS, REQUEST_BOUNDS_MS
from delayqueue.core.monitor import Monitor
from delayqueue.core.monitor_hash import (
    COUNTERS,
    DEFAULT_SUBSCRIPTION,
    PUSH_COUNTERS,
    PUSH_OUTCOMES,
    SUBSCRIPTION_COUNTERS,
    RequestStats,
    pushes,
)
from delayqueue.core.queue import DelayQueue
from delayqueue.core.requests import TopicSizes
from delayqueue.monitoring.cooperative import cooperative

logger = logging.getLogger(__name__)

QUEUE_STATES = ("waiting", "ready", "consuming", "group_blocked", "dead")
# The states of one subscription's consumers; waiting is the topic's (not yet due for anyone).
SUBSCRIPTION_STATES = QUEUE_STATES[1:]
TIME_GAP_KINDS = (("pull", "pullMsgTimeGap"), ("ready", "readyQueueTimeGap"))
# The label of the topics past metrics-max-topics; a real topic of that name is always folded,
# so the series has one meaning.
OTHER_TOPIC = "_other"
# Series one busy topic adds to a scrape: 17 counters (one op each), 5 sizes, paused, oldest
# ready age, and two time-gap histograms of 16 buckets, _sum and _count (tests/monitoring/
# test_metrics_families.py counts them).
SERIES_PER_TOPIC = len(COUNTERS) + len(QUEUE_STATES) + 2 + 2 * (len(BOUNDS_MS) + 2)
# Series one busy named subscription adds: 8 counters, 4 sizes, paused, oldest ready age and
# the two time-gap histograms.
SERIES_PER_SUBSCRIPTION = (len(SUBSCRIPTION_COUNTERS) + len(SUBSCRIPTION_STATES) + 2
                           + 2 * (len(BOUNDS_MS) + 2))
# Series one push subscription (one that ever pushed) adds: a counter per outcome class and the
# POSTs' latency histogram.
SERIES_PER_PUSH_SUBSCRIPTION = len(PUSH_COUNTERS) + len(BOUNDS_MS) + 2
SubscriptionSizes = dict[tuple[str, str], TopicSizes]
REDIS_FAILURES = (redis.RedisError, RedisClusterException, DelayQueueError)


@dataclass(frozen=True)
class FleetReads:
    """One scrape's reads of Redis."""
    totals: dict[str, Any]
    sizes: dict[str, TopicSizes]
    redis_version: str
    long_polls: dict[str, int]      # node -> long polls its live processes hold
    subscription_sizes: SubscriptionSizes   # (topic, named subscription) -> its sizes


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


def named_subscription_sizes(queue: DelayQueue, topics: list[str]) -> SubscriptionSizes:
    """The sizes of every named subscription of ``topics``, in two pipelined round trips:
    their names (HKEYS of each topic's ``subs``), then per subscription what ``queue_sizes``
    reads for the topic with health (ready, consuming, due group-blocked, paused, dead
    letters, the ready head's age), from its own keys. ``waiting`` is left 0: messages not
    yet due wait in the topic."""
    if not topics:
        return {}
    pipe = queue.client.pipeline(transaction=False)
    for topic in topics:
        pipe.hkeys(queue.topic_keys(topic).subs)
    named = [(topic, _text(name)) for topic, names in zip(topics, pipe.execute())
             for name in names]
    if not named:
        return {}
    now = queue.clock.now_ms()
    pipe = queue.client.pipeline(transaction=False)
    for topic, name in named:
        sk = queue.topic_keys(topic).subscription(name)
        pipe.zcard(sk.ready).zcard(sk.ack).zcount(sk.held, "-inf", now)
        pipe.hget(sk.config, "paused").zcard(sk.dead).zrange(sk.ready, 0, 0, withscores=True)
    replies = pipe.execute()
    sizes = {}
    for i, key in enumerate(named):
        ready, ack, blocked, paused, dead, head = replies[6 * i:6 * i + 6]
        age = max(0, now - int(head[0][1])) if head else 0
        sizes[key] = TopicSizes(0, ready, ack, blocked, _text(paused or "") == "1", dead, age)
    return sizes


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def subscription_labels(names: Iterable[tuple[str, str]], label: dict[str, str]
                        ) -> dict[tuple[str, str], tuple[str, str]]:
    """(topic, named subscription) -> its (topic, subscription) labels: its own names, or
    ``OTHER_TOPIC`` twice when its topic is folded."""
    return {(topic, name): (label[topic], name if label[topic] != OTHER_TOPIC else OTHER_TOPIC)
            for topic, name in names}


def _add(family: Metric, suffix: str, labels: dict[str, str], value: float) -> None:
    """One sample with its own label set: a family's series of the topic and of its
    subscriptions differ by the ``subscription`` label."""
    family.samples.append(Sample(family.name + suffix, labels, value))


class MonitorCollector(Collector):
    """Builds the metric families from one read of the monitor totals and queue sizes.

    The paused flags, dead letters and oldest ready ages come with the sizes
    (``TopicSizes``, the same round trip), so they name the same topics.
    """

    def __init__(self, monitor: Monitor,
                 queue_sizes: Callable[[], dict[str, TopicSizes]],
                 long_polls: Callable[[], dict[str, int]] = dict, max_topics: int = 0,
                 subscription_sizes: Callable[[list[str]], SubscriptionSizes] | None = None,
                 totals: Callable[[], dict] | None = None) -> None:
        self.monitor = monitor
        self.totals = totals or monitor.totals
        self.queue_sizes = queue_sizes
        self.long_polls = long_polls
        self.max_topics = max_topics
        self.subscription_sizes = subscription_sizes

    def read(self) -> FleetReads | None:
        """The scrape's Redis reads, or None when one failed (redis_up 0)."""
        try:
            sizes = self.queue_sizes()
            named = self.subscription_sizes(sorted(sizes)) if self.subscription_sizes else {}
            return FleetReads(self.totals(), sizes,
                              redis_version(self.monitor.client), self.long_polls(), named)
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
        named_stats = totals.get("subscriptions", {})
        named = set(named_stats) | set(reads.subscription_sizes)
        label = folded_labels(set(topics) | set(queue_sizes) | {topic for topic, _ in named},
                              self.max_topics)
        sub_label = subscription_labels(named, label)

        folded = GaugeMetricFamily(
            "delayqueue_metrics_topics_folded",
            "Topics past metrics-max-topics, summed into the series of topic=\"_other\".",
            labels=[])
        folded.add_metric([], sum(1 for name in label.values() if name == OTHER_TOPIC))
        yield folded

        # (topic, subscription or None, op) -> count: None for the topic's own ops
        counts: dict[tuple[str, str | None, str], int] = {}
        for topic in cooperative(topics):
            for op in COUNTERS:
                sub = DEFAULT_SUBSCRIPTION if op in SUBSCRIPTION_COUNTERS else None
                key = (label[topic], sub, op)
                counts[key] = counts.get(key, 0) + topics[topic][op]
        for named, stats in named_stats.items():
            topic, sub = sub_label[named]
            for op in COUNTERS:
                # a topic-wide op recorded for a subscription counts for its topic
                key = (topic, sub if op in SUBSCRIPTION_COUNTERS else None, op)
                if stats[op] or op in SUBSCRIPTION_COUNTERS:
                    counts[key] = counts.get(key, 0) + stats[op]
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
            "policy). The ops of a consumer's state (pullMsg, ackMsg, nackMsg, "
            "triggerMsgReady, triggerMsgEndLife, triggerMsgTimeout, deadLettered, redriven) "
            "carry the subscription label (\"default\": the default subscription).",
            labels=["topic", "op"])
        for (topic, sub, op) in sorted(counts, key=lambda k: (k[0], k[1] or "", k[2])):
            labels = {"topic": topic, "op": op} if sub is None else {
                "topic": topic, "subscription": sub, "op": op}
            _add(messages, "_total", labels, counts[(topic, sub, op)])
        yield messages

        yield from self.sizes(queue_sizes, label, reads.subscription_sizes, sub_label)

        merged: dict[tuple[str, str, str], list] = {}
        sources = [((label[topic], DEFAULT_SUBSCRIPTION), topics[topic]) for topic in topics]
        sources += [(sub_label[named], stats) for named, stats in named_stats.items()]
        for (topic, sub), stats in cooperative(sources):
            for kind, name in TIME_GAP_KINDS:
                hist = stats[name]
                if hist["count"]:
                    into = merged.setdefault((topic, sub, kind), [[0] * len(BOUNDS_MS), 0])
                    into[0] = [a + b for a, b in zip(into[0], hist["counts"])]
                    into[1] += hist["sum"]
        gaps = HistogramMetricFamily(
            "delayqueue_time_gap_milliseconds",
            "Lateness against triggerTime in ms, by topic and subscription: kind=pull at "
            "delivery, kind=ready at promotion to the subscription's ready queue.",
            labels=["topic", "subscription", "kind"])
        for key in sorted(merged):
            gaps.add_metric(list(key), cumulative_buckets(merged[key][0]),
                            sum_value=merged[key][1])
        yield gaps

        yield from self.push(sources)

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

    def sizes(self, queue_sizes: dict[str, TopicSizes], label: dict[str, str],
              named_sizes: SubscriptionSizes | None = None,
              sub_label: dict[tuple[str, str], tuple[str, str]] | None = None
              ) -> Iterable[Metric]:
        """Sizes and dead letters summed, paused topics counted, the oldest age the largest,
        per label: the waiting size and the pause per topic, the others per (topic,
        subscription)."""
        waiting: dict[str, int] = {}
        states: dict[tuple[str, str], list[int]] = {}
        paused: dict[str, int] = {}
        sub_paused: dict[tuple[str, str], int] = {}
        ages: dict[tuple[str, str], int] = {}

        def add(key: tuple[str, str], values: TopicSizes) -> None:
            row = states.setdefault(key, [0] * len(SUBSCRIPTION_STATES))
            for i, state in enumerate(SUBSCRIPTION_STATES):
                row[i] += getattr(values, state)
            ages[key] = max(ages.get(key, 0), values.oldest_ready_age_ms)

        for topic, values in cooperative(queue_sizes.items()):
            name = label[topic]
            waiting[name] = waiting.get(name, 0) + values.waiting
            paused[name] = paused.get(name, 0) + int(values.paused)
            add((name, DEFAULT_SUBSCRIPTION), values)
        for named, values in (named_sizes or {}).items():
            key = (sub_label or {})[named]
            add(key, values)
            sub_paused[key] = sub_paused.get(key, 0) + int(values.paused)

        sizes = GaugeMetricFamily(
            "delayqueue_queue_size",
            "Messages per topic in each state: waiting (not yet due; per topic), and per "
            "subscription ready (due, not delivered), consuming (delivered, awaiting ack), "
            "group_blocked (due, waiting behind their message group's head), dead (dead "
            "letters kept for redrive).",
            labels=["topic", "state"])
        for topic in sorted(set(waiting) | {key[0] for key in states}):
            if topic in waiting:
                _add(sizes, "", {"topic": topic, "state": "waiting"}, waiting[topic])
            for key in sorted(key for key in states if key[0] == topic):
                for state, value in zip(SUBSCRIPTION_STATES, states[key]):
                    _add(sizes, "", {"topic": topic, "subscription": key[1], "state": state},
                         value)
        yield sizes

        flags = GaugeMetricFamily(
            "delayqueue_topic_paused",
            "1 while the topic is paused (pauseTopic: nothing is handed out), else 0 "
            "(topic=\"_other\": how many of the folded topics are paused).",
            labels=["topic"])
        for name in sorted(paused):
            flags.add_metric([name], paused[name])
        yield flags

        sub_flags = GaugeMetricFamily(
            "delayqueue_subscription_paused",
            "1 while a named subscription is paused on its own (pauseTopic with subscription), "
            "else 0; the whole topic's pause is delayqueue_topic_paused.",
            labels=["topic", "subscription"])
        for key in sorted(sub_paused):
            sub_flags.add_metric(list(key), sub_paused[key])
        yield sub_flags

        oldest = GaugeMetricFamily(
            "delayqueue_oldest_ready_age_seconds",
            "How long the oldest ready message of the topic's subscription has waited for a "
            "consumer (since it became ready; 0 when none is ready), by the fleet's clock.",
            labels=["topic", "subscription"])
        for key in sorted(ages):
            oldest.add_metric(list(key), ages[key] / 1000)
        yield oldest

    def push(self, sources: list[tuple[tuple[str, str], dict]]) -> Iterable[Metric]:
        """Push delivery per (topic, subscription) label, for those that ever pushed: the
        POSTs answered by outcome class, and their latency."""
        merged: dict[tuple[str, str], list] = {}
        for key, stats in sources:
            if pushes(stats):
                into = merged.setdefault(key, [dict.fromkeys(PUSH_COUNTERS, 0),
                                               [0] * len(BOUNDS_MS), 0])
                for name in PUSH_COUNTERS:
                    into[0][name] += stats[name]
                hist = stats["pushMillis"]
                into[1] = [a + b for a, b in zip(into[1], hist["counts"])]
                into[2] += hist["sum"]
        total = CounterMetricFamily(
            "delayqueue_push",
            "Push deliveries POSTed and answered, by topic, subscription and outcome: 2xx "
            "(acked), 3xx, 4xx, 5xx (the answer's status class; nacked), timeout (no answer "
            "within pushTimeoutMillis), connection (could not connect or the connection "
            "broke), refused (the host resolved outside push-allowed-networks: not "
            "connected), cumulative over the whole fleet.",
            labels=["topic", "subscription", "outcome"])
        durations = HistogramMetricFamily(
            "delayqueue_push_duration_seconds",
            "Time from a push's request to its answer (or its timeout / failure), by topic "
            "and subscription, over the whole fleet.",
            labels=["topic", "subscription"])
        for key in sorted(merged):
            counts, buckets, millis = merged[key]
            for name in PUSH_COUNTERS:
                total.add_metric([*key, PUSH_OUTCOMES[name]], counts[name])
            durations.add_metric(list(key), cumulative_buckets(buckets, BOUNDS_MS, 0.001),
                                 sum_value=millis / 1000)
        yield total
        yield durations

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
                   long_polls: Callable[[], dict[str, int]] = dict, max_topics: int = 0,
                   subscription_sizes: Callable[[list[str]], SubscriptionSizes] | None = None,
                   totals: Callable[[], dict] | None = None) -> tuple[bytes, str]:
    """The /metrics body and its content type. ``long_polls``: node -> held long polls (the
    node registry's, read by the caller: this floor does not know the registry);
    ``subscription_sizes``: topics -> the sizes of their named subscriptions
    (``named_subscription_sizes`` with the queue), none when not given; ``totals``: the
    cumulative counters (``Monitor.totals`` when not given; a node passes its cache's,
    monitoring/size_cache.py, called after ``queue_sizes``)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(MonitorCollector(monitor, queue_sizes, long_polls, max_topics,
                                       subscription_sizes, totals))
    return generate_latest(registry), CONTENT_TYPE_LATEST
