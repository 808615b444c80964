"""render_metrics: Prometheus text from the fleet-wide monitor totals and queue sizes."""

from __future__ import annotations

import math

import redis
from prometheus_client.parser import text_string_to_metric_families

from delayqueue.background.runtime import Runtime
from delayqueue.core.clock import ManualClock
from delayqueue.core.errors import BacklogExceeded
from delayqueue.core.histogram import BOUNDS_MS
from delayqueue.core.keys import NamespaceKeys
from delayqueue.core.monitor import Monitor
from delayqueue.core.monitor_hash import COUNTERS
from delayqueue.core.requests import SendRequest, TopicSizes
from delayqueue.core.scripts import Scripts
from delayqueue.monitoring.metrics import QUEUE_STATES, render_metrics
from delayqueue.settings.config import load_settings

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
        a, lambda: {"t1": TopicSizes(451, 3, 1, 7), "t2": TopicSizes(0, 0, 0, 0)})
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
    assert value(samples, "delayqueue_queue_size", topic="t1", state="group_blocked") == 7
    assert value(samples, "delayqueue_queue_size", topic="t2", state="ready") == 0
    assert {s.labels["state"] for s in samples["delayqueue_queue_size"]} == set(QUEUE_STATES)

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


def queue_size_gauge(rt: Runtime, topic: str) -> dict[str, float]:
    """The topic's delayqueue_queue_size samples, state -> value, from a fresh render."""
    body, _ = render_metrics(rt.monitor, rt.queue.queue_sizes)
    _, samples = samples_by_name(body)
    return {s.labels["state"]: s.value for s in samples["delayqueue_queue_size"]
            if s.labels["topic"] == topic}


def test_group_blocked_is_exported_exactly_and_waiting_holds_the_blocked_not_yet_due(
        redis_url):
    clock = ManualClock(START_MS)
    settings = load_settings(overrides={"redis_url": redis_url, "snapshot_dir": ""})
    rt = Runtime(settings, client=redis.Redis.from_url(redis_url, decode_responses=True),
                 clock=clock)
    queue = rt.queue
    queue.send("t", "b", msg_id="g1", group_id="g")
    queue.send("t", "b", msg_id="g2", group_id="g")                      # due, behind g1
    queue.send("t", "b", msg_id="g3", group_id="g", delay_ms=60_000)     # behind, not due
    queue.send("t", "b", msg_id="h1", group_id="h")                      # another group's front
    queue.send("t", "b", msg_id="u1")                                    # ungrouped
    queue.send("t", "b", msg_id="u2", delay_ms=120_000)
    assert queue_size_gauge(rt, "t") == {
        "waiting": 2, "ready": 3, "consuming": 0, "group_blocked": 1, "dead": 0}

    pulled = queue.pull("t", count=10).messages
    assert [m.msg_id for m in pulled] == ["g1", "h1", "u1"]   # one per group, send order
    assert queue_size_gauge(rt, "t") == {
        "waiting": 2, "ready": 0, "consuming": 3, "group_blocked": 1, "dead": 0}

    clock.advance(60_000)   # g3 falls due behind g1: waiting -> group_blocked, no promotion
    assert queue_size_gauge(rt, "t") == {
        "waiting": 1, "ready": 0, "consuming": 3, "group_blocked": 2, "dead": 0}

    queue.ack("t", "g1", pulled[0].receipt)     # the head ends: g2 is the group's front
    assert queue_size_gauge(rt, "t") == {
        "waiting": 1, "ready": 1, "consuming": 2, "group_blocked": 1, "dead": 0}
    info = queue.topic_info("t")
    assert (info["waitingQueueSize"], info["readyQueueSize"], info["ackQueueSize"],
            info["groupBlockedSize"]) == (1, 1, 2, 1)


def test_metrics_with_no_activity_still_render(redis_client):
    monitor = make_monitor(redis_client, ManualClock(START_MS))
    body, _ = render_metrics(monitor, dict)
    families, _ = samples_by_name(body)
    assert {"delayqueue_messages", "delayqueue_queue_size", "delayqueue_time_gap_milliseconds",
            "delayqueue_scheduler_loop_duration_milliseconds"} <= set(families)


def test_paused_flags_purged_and_backlog_refusals_are_exported_per_topic(redis_url):
    """The controls as an operator meets them: a gauge of 1 for the paused topic and 0 for the
    others, and the purged and backlog-refused counts as ops of delayqueue_messages_total."""
    clock = ManualClock(START_MS)
    settings = load_settings(overrides={"redis_url": redis_url, "snapshot_dir": ""})
    rt = Runtime(settings, client=redis.Redis.from_url(redis_url, decode_responses=True),
                 clock=clock)
    rt.admin.set_config("full", {"maxBacklog": "2"})
    for msg_id in ("a", "b"):
        rt.queue.send("full", "body", msg_id=msg_id)
    refused = rt.queue.send_batch("full", [SendRequest("c"), SendRequest("d")])
    assert [type(r) for r in refused] == [BacklogExceeded, BacklogExceeded]
    for msg_id in ("x", "y", "z"):
        rt.queue.send("held", "body", msg_id=msg_id, delay_ms=60_000)
    assert rt.controls.pause("held") is True
    assert rt.controls.purge("full").count == 2
    rt.monitor.flush()

    body, _ = render_metrics(rt.monitor, rt.queue.queue_sizes)
    families, samples = samples_by_name(body)
    assert families["delayqueue_topic_paused"].type == "gauge"
    assert {s.labels["topic"]: s.value for s in samples["delayqueue_topic_paused"]} == {
        "full": 0, "held": 1}
    counts = {(s.labels["topic"], s.labels["op"]): s.value
              for s in samples["delayqueue_messages_total"]
              if s.labels["op"] in ("purged", "backlogRefused", "sendMsg")}
    assert counts == {("full", "sendMsg"): 2, ("full", "purged"): 2,
                      ("full", "backlogRefused"): 2, ("held", "sendMsg"): 3,
                      ("held", "purged"): 0, ("held", "backlogRefused"): 0}

    assert rt.controls.resume("held") is True
    body, _ = render_metrics(rt.monitor, rt.queue.queue_sizes)
    _, samples = samples_by_name(body)
    assert value(samples, "delayqueue_topic_paused", topic="held") == 0


def test_the_paused_gauge_names_exactly_the_topics_the_sizes_name(redis_client):
    """One read per scrape: the flags come with the sizes, for the same topics."""
    reads = []

    def queue_sizes():
        reads.append(1)
        return {"b": TopicSizes(0, 0, 0, 0, True), "a": TopicSizes(1, 0, 0, 0)}

    body, _ = render_metrics(make_monitor(redis_client, ManualClock(START_MS)), queue_sizes)
    _, samples = samples_by_name(body)
    assert reads == [1]
    assert [(s.labels["topic"], s.value) for s in samples["delayqueue_topic_paused"]] == [
        ("a", 0), ("b", 1)]


DEBOUNCE_AND_SCHEDULE = ("replaced", "deduplicated", "scheduleSent", "scheduleMissed")


def test_debounce_and_schedule_counters_are_ops_counted_exactly_and_folded_past_the_cap(
        redis_client):
    """replaced, deduplicated, scheduleSent and scheduleMissed: ops of
    delayqueue_messages_total like the others, each topic's own exact count, and the topics past
    metrics-max-topics summed under _other; the family's HELP names every op."""
    clock = ManualClock(START_MS)
    a = make_monitor(redis_client, clock)
    b = make_monitor(redis_client, clock)
    for i, counter in enumerate(DEBOUNCE_AND_SCHEDULE):
        a.incr("t1", counter, i + 1)             # 1, 2, 3, 4
        b.incr("t2", counter, 10 * (i + 1))      # 10, 20, 30, 40
        b.incr("t3", counter, 100)
    clock.advance(60_000)                        # cumulative across intervals
    a.incr("t1", "scheduleSent", 7)
    a.flush()
    b.flush()
    sizes = {t: TopicSizes(0, 0, 0, 0) for t in ("t1", "t2", "t3")}

    body, _ = render_metrics(a, lambda: sizes)
    families, samples = samples_by_name(body)
    counts = {(s.labels["topic"], s.labels["op"]): s.value
              for s in samples["delayqueue_messages_total"]
              if s.labels["op"] in DEBOUNCE_AND_SCHEDULE}
    assert counts == {
        ("t1", "replaced"): 1, ("t1", "deduplicated"): 2, ("t1", "scheduleSent"): 10,
        ("t1", "scheduleMissed"): 4,
        ("t2", "replaced"): 10, ("t2", "deduplicated"): 20, ("t2", "scheduleSent"): 30,
        ("t2", "scheduleMissed"): 40,
        **{("t3", op): 100 for op in DEBOUNCE_AND_SCHEDULE}}
    assert value(samples, "delayqueue_messages_total", topic="t1", op="sendMsg") == 0
    documentation = families["delayqueue_messages"].documentation
    assert all(name in documentation for name in COUNTERS), documentation

    body, _ = render_metrics(a, lambda: sizes, max_topics=1)
    _, samples = samples_by_name(body)
    folded = {(s.labels["topic"], s.labels["op"]): s.value
              for s in samples["delayqueue_messages_total"]
              if s.labels["op"] in DEBOUNCE_AND_SCHEDULE}
    assert folded == {
        ("t1", "replaced"): 1, ("t1", "deduplicated"): 2, ("t1", "scheduleSent"): 10,
        ("t1", "scheduleMissed"): 4,
        ("_other", "replaced"): 110, ("_other", "deduplicated"): 120,
        ("_other", "scheduleSent"): 130, ("_other", "scheduleMissed"): 140}
