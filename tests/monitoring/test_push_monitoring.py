"""Push delivery's samples read back: the monitor hashes' parse, getMonitorData's
pushStatsList, getMonitorString's table, /metrics' delayqueue_push_total and
delayqueue_push_duration_seconds (folded under _other), and the snapshot line's push fields
(only on the line of a subscription that pushed in the interval)."""

from __future__ import annotations

from test_metrics import START_MS, make_monitor, samples_by_name, value
from test_snapshot import GRACE_MS, INTERVAL_MS, Fleet, read_lines

from delayqueue.core.clock import ManualClock
from delayqueue.core.histogram import BOUNDS_MS
from delayqueue.core.monitor_hash import PUSH_COUNTERS
from delayqueue.core.requests import TopicSizes
from delayqueue.monitoring.metrics import (
    OTHER_TOPIC,
    SERIES_PER_PUSH_SUBSCRIPTION,
    render_metrics,
)
from delayqueue.monitoring.monitor_text import monitor_string

OUTCOMES = ("2xx", "3xx", "4xx", "5xx", "timeout", "connection", "refused")


def pushed(monitor, topic: str, subscription: str | None, outcomes: dict[str, list[float]]):
    """Record POSTs as background/push.py does: per outcome counter, one latency each."""
    for counter, latencies in outcomes.items():
        for millis in latencies:
            monitor.incr(topic, counter, subscription=subscription)
            monitor.observe(topic, "pushMillis", [millis], subscription=subscription)


def test_the_push_samples_of_the_default_and_a_named_subscription_are_read_apart(redis_client):
    clock = ManualClock(START_MS + 1_000)
    a, b = make_monitor(redis_client, clock), make_monitor(redis_client, clock)
    pushed(a, "t", None, {"push2xx": [3, 4]})
    pushed(b, "t", None, {"push2xx": [7]})                # two processes: the fleet's sum
    pushed(a, "t", "hook", {"push2xx": [15], "push5xx": [250, 260], "pushTimeout": [10_000],
                            "pushRefused": [0]})
    a.incr("t", "pullMsg", 3)                            # other counters unchanged beside
    a.flush()
    b.flush()
    totals = a.totals()
    own, hook = totals["topics"]["t"], totals["subscriptions"][("t", "hook")]
    assert ({name: own[name] for name in PUSH_COUNTERS}
            == {**dict.fromkeys(PUSH_COUNTERS, 0), "push2xx": 3})
    assert own["pullMsg"] == 3 and own["pushMillis"]["count"] == 3
    assert (own["pushMillis"]["sum"], own["pushMillis"]["max"]) == (14, 7)
    assert [hook[name] for name in PUSH_COUNTERS] == [1, 0, 0, 2, 1, 0, 1]
    assert hook["pushMillis"]["count"] == 5 and hook["pushMillis"]["max"] == 10_000

    clock.advance(60_000)                                # that interval is the last complete
    data = a.monitor_data()
    assert [(e["topic"], e["subscription"], e["pushes"]) for e in data["pushStatsList"]] == [
        ("t", "default", 3), ("t", "hook", 5)]
    entry = data["pushStatsList"][1]
    assert [entry[name] for name in PUSH_COUNTERS] == [1, 0, 0, 2, 1, 0, 1]
    assert entry["pushMillis"] == {"count": 5, "avg": (15 + 250 + 260 + 10_000) / 5,
                                   "max": 10_000, "p50": 500, "p99": 10_000}
    assert [s["topic"] for s in data["requestStatsList"]] == ["t"]
    clock.advance(60_000)                                # an interval without pushes
    assert "pushStatsList" not in a.monitor_data()       # camellia's keys, exactly

    text = monitor_string(data, [], "default", START_MS, 60)
    table = text.split("== push delivery (ms: POST latency) ==\n")[1].split("\n\n")[0]
    header, *rows = table.splitlines()
    assert header.split() == ["topic", "subscription", *OUTCOMES, "p50", "p99", "max"]
    assert [row.split() for row in rows] == [
        ["t", "default", "3", "0", "0", "0", "0", "0", "0", "5", "7", "7"],
        ["t", "hook", "1", "0", "0", "2", "1", "0", "1", "500", "10000", "10000"]]


def test_metrics_count_pushes_by_outcome_and_their_latency_per_subscription(redis_client):
    monitor = make_monitor(redis_client, ManualClock(START_MS + 1_000))
    pushed(monitor, "t", None, {"push2xx": [3, 40]})
    pushed(monitor, "t", "hook", {"push4xx": [1_500], "pushConnectionError": [2]})
    monitor.incr("quiet", "sendMsg")                     # never pushed: no push series
    monitor.flush()
    body, _ = render_metrics(monitor, lambda: {"t": TopicSizes(0, 0, 0, 0),
                                               "quiet": TopicSizes(1, 0, 0, 0)})
    families, samples = samples_by_name(body)
    assert families["delayqueue_push"].type == "counter"
    assert families["delayqueue_push_duration_seconds"].type == "histogram"
    counts = {(s.labels["topic"], s.labels["subscription"], s.labels["outcome"]): s.value
              for s in samples["delayqueue_push_total"]}
    assert counts == {**{("t", "default", o): 0 for o in OUTCOMES},
                      **{("t", "hook", o): 0 for o in OUTCOMES},
                      ("t", "default", "2xx"): 2, ("t", "hook", "4xx"): 1,
                      ("t", "hook", "connection"): 1}
    buckets = {s.labels["le"]: s.value for s in samples["delayqueue_push_duration_seconds_bucket"]
               if s.labels["subscription"] == "default"}
    assert (buckets["0.005"], buckets["0.05"], buckets["+Inf"]) == (1, 2, 2)
    assert len(buckets) == len(BOUNDS_MS)
    assert value(samples, "delayqueue_push_duration_seconds_sum", subscription="hook") == 1.502
    assert value(samples, "delayqueue_push_duration_seconds_count", subscription="hook") == 2
    pushing = [s for name in ("delayqueue_push_total", "delayqueue_push_duration_seconds_bucket",
                              "delayqueue_push_duration_seconds_sum",
                              "delayqueue_push_duration_seconds_count")
               for s in samples[name] if s.labels["subscription"] == "hook"]
    assert len(pushing) == SERIES_PER_PUSH_SUBSCRIPTION


def test_pushes_of_folded_topics_are_summed_under_other(redis_client):
    monitor = make_monitor(redis_client, ManualClock(START_MS + 1_000))
    for topic in ("a", "b", "c"):
        pushed(monitor, topic, None, {"push5xx": [100]})
        pushed(monitor, topic, "h-" + topic, {"push2xx": [10, 10]})
    monitor.flush()
    body, _ = render_metrics(monitor, lambda: {t: TopicSizes(0, 0, 0, 0) for t in "abc"},
                             max_topics=1)
    _, samples = samples_by_name(body)
    counts = {(s.labels["topic"], s.labels["subscription"], s.labels["outcome"]): s.value
              for s in samples["delayqueue_push_total"] if s.value}
    assert counts == {("a", "default", "5xx"): 1, ("a", "h-a", "2xx"): 2,
                      (OTHER_TOPIC, "default", "5xx"): 2, (OTHER_TOPIC, OTHER_TOPIC, "2xx"): 4}
    assert value(samples, "delayqueue_push_duration_seconds_count", topic=OTHER_TOPIC,
                 subscription=OTHER_TOPIC) == 4


def test_only_the_lines_of_subscriptions_that_pushed_carry_the_push_fields(redis_client,
                                                                           tmp_path):
    fleet = Fleet(redis_client, str(tmp_path / "snap"), ["t1", "t2"])
    fleet.sizes.subscription_infos = lambda topic: [{"subscription": "hook"}]
    redis_client.hset(fleet.keys.topic("t1").subs, "hook", "{}")
    assert fleet.writer.tick() == 3     # the interval before: t1, t1/hook, t2; none pushed
    pushed(fleet.monitor, "t1", "hook", {"push2xx": [12], "push5xx": [300, 301]})
    pushed(fleet.monitor, "t2", None, {"pushTimeout": [10_000]})
    fleet.monitor.incr("t1", "sendMsg", 3)
    fleet.monitor.flush()
    fleet.clock.advance(INTERVAL_MS - 5_000 + GRACE_MS)
    assert fleet.writer.tick() == 3
    lines = read_lines(tmp_path / "snap" / "date=2025-11-20" / "default-00.jsonl")
    t1, hook, t2 = lines
    assert (t1["schemaVersion"], hook["schemaVersion"], t2["schemaVersion"]) == (1, 3, 1)
    assert "push2xx" not in t1 and "pushMillis" not in t1 and t1["sendMsg"] == 3
    assert [hook[name] for name in PUSH_COUNTERS] == [1, 0, 0, 2, 0, 0, 0]
    assert hook["pushMillis"]["count"] == 3 and hook["pushMillis"]["max"] == 301
    assert sum(hook["pushMillis"]["counts"]) == 3 and len(hook["pushMillis"]["counts"]) == 16
    assert [t2[name] for name in PUSH_COUNTERS] == [0, 0, 0, 0, 1, 0, 0]
    earlier = read_lines(tmp_path / "snap" / "date=2025-11-19" / "default-23.jsonl")
    assert not [line for line in earlier if "push2xx" in line or "pushMillis" in line]
