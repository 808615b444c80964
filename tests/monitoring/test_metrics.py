"""render_metrics: Prometheus text from the fleet-wide monitor totals and queue sizes."""

from __future__ import annotations

import math

from prometheus_client.parser import text_string_to_metric_families

from delayqueue.core.clock import ManualClock
from delayqueue.core.histogram import BOUNDS_MS
from delayqueue.core.keys import NamespaceKeys
from delayqueue.core.monitor import COUNTERS, Monitor
from delayqueue.core.scripts import Scripts
from delayqueue.monitoring.metrics import render_metrics

START_MS = 1_763_596_800_000


def make_monitor(client, clock):
    return Monitor(client, NamespaceKeys("dq", "default"), clock, 60, Scripts(client))


def samples_by_name(body: bytes) -> tuple[dict, dict]:
    families = {family.name: family for family in text_string_to_metric_families(body.decode())}
    samples: dict[str, list] = {}
    for family in families.values():
        for sample in family.samples:
            samples.setdefault(sample.name, []).append(sample)
    return families, samples


def value(samples: dict, name: str, **labels) -> float:
    (match,) = [s.value for s in samples[name] if all(s.labels.get(k) == v
                                                         for k, v in labels.items())]
    return match


def test_metrics_report_fleet_counters_sizes_and_histograms(redis_client):
    clock = ManualClock(START_MS + 1_000)
    a = make_monitor(redis_client, clock)
    b = make_monitor(redis_client, clock)
    a.incr("t1", "sendMsg", 4)
    b.incr("t1", "sendMsg", 6)
    clock.advance(60_000)  # totals are cumulative across intervals
    b.incr("t1", "nackMsg", 2)
    a.observe("t1", "pullMsgTimeGap", [0, 3, 3, 70, 45_000])
    b.observe("t2", "readyQueueTimeGap", [8])
    a.observe_loop("promote", 0.5)
    b.observe_loop("promote", 30.0)
    a.flush()
    b.flush()

    body, content_type = render_metrics(
        a, lambda: {"t1": (451, 3, 1), "t2": (0, 0, 0)})
    assert content_type.startswith("text/plain")
    families, samples = samples_by_name(body)

    assert families["delayqueue_messages"].type == "counter"
    assert value(samples, "delayqueue_messages_total", topic="t1", op="sendMsg") == 10
    assert value(samples, "delayqueue_messages_total", topic="t1", op="nackMsg") == 2
    assert value(samples, "delayqueue_messages_total", topic="t2", op="pullMsg") == 0
    assert {s.labels["op"] for s in samples["delayqueue_messages_total"]} == set(COUNTERS)

    assert families["delayqueue_queue_size"].type == "gauge"
    assert value(samples, "delayqueue_queue_size", topic="t1", state="waiting") == 451
    assert value(samples, "delayqueue_queue_size", topic="t1", state="ready") == 3
    assert value(samples, "delayqueue_queue_size", topic="t1", state="consuming") == 1
    assert value(samples, "delayqueue_queue_size", topic="t2", state="ready") == 0

    gaps = families["delayqueue_time_gap_milliseconds"]
    assert gaps.type == "histogram"
    buckets = [s for s in samples["delayqueue_time_gap_milliseconds_bucket"]
               if s.labels["topic"] == "t1" and s.labels["kind"] == "pull"]
    bounds = [float(s.labels["le"]) for s in buckets]
    assert bounds == list(BOUNDS_MS) and math.isinf(bounds[-1])
    counts = [s.value for s in buckets]
    assert counts == sorted(counts), "buckets must be cumulative"
    by_le = dict(zip(bounds, counts))
    assert (by_le[1], by_le[2], by_le[5], by_le[50], by_le[100], by_le[30000]) == (1, 1, 3, 3, 4, 4)
    assert by_le[60000] == 5 and by_le[math.inf] == 5
    assert value(samples, "delayqueue_time_gap_milliseconds_count", topic="t1", kind="pull") == 5
    assert value(samples, "delayqueue_time_gap_milliseconds_sum",
                 topic="t1", kind="pull") == 45_076
    assert value(samples, "delayqueue_time_gap_milliseconds_count", topic="t2", kind="ready") == 1
    assert not [s for s in samples["delayqueue_time_gap_milliseconds_count"]
                if s.labels == {"topic": "t1", "kind": "ready"}]

    assert families["delayqueue_scheduler_loop_duration_milliseconds"].type == "histogram"
    assert value(samples, "delayqueue_scheduler_loop_duration_milliseconds_count",
                 loop="promote") == 2
    assert value(samples, "delayqueue_scheduler_loop_duration_milliseconds_sum",
                 loop="promote") == 30.5
    assert value(samples, "delayqueue_scheduler_loop_duration_milliseconds_bucket",
                 loop="promote", le="1.0") == 1
    assert value(samples, "delayqueue_scheduler_loop_duration_milliseconds_bucket",
                 loop="promote", le="50.0") == 2


def test_metrics_with_no_activity_still_render(redis_client):
    monitor = make_monitor(redis_client, ManualClock(START_MS))
    body, _ = render_metrics(monitor, dict)
    families, _ = samples_by_name(body)
    assert {"delayqueue_messages", "delayqueue_queue_size", "delayqueue_time_gap_milliseconds",
            "delayqueue_scheduler_loop_duration_milliseconds"} <= set(families)
