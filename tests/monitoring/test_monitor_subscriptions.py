"""Subscriptions in the monitor, /metrics and the snapshot lines, without the core's
subscriptions: the monitor's field encoding, the labels /metrics gives them (sizes handed in as
the scrape's reader would), and the lines the snapshot writer adds for them."""

from __future__ import annotations

import json

import pytest
from test_metrics import START_MS, make_monitor, samples_by_name, value
from test_snapshot import GRACE_MS, INTERVAL_MS, Fleet, read_lines, topic_info

from delayqueue.core.clock import ManualClock
from delayqueue.core.monitor_hash import COUNTERS, SUBSCRIPTION_COUNTERS, parse_monitor_hash
from delayqueue.core.requests import TopicSizes
from delayqueue.monitoring.metrics import (
    OTHER_TOPIC,
    SERIES_PER_SUBSCRIPTION,
    SERIES_PER_TOPIC,
    render_metrics,
)


def test_a_named_subscription_is_counted_apart_and_the_default_as_before(redis_client):
    clock = ManualClock(START_MS + 1_000)
    monitor = make_monitor(redis_client, clock)
    monitor.incr("t", "pullMsg", 2)
    monitor.incr("t", "pullMsg", 3, subscription="default")        # the default, by name
    monitor.incr("t", "pullMsg", 5, subscription="billing")
    monitor.observe("t", "pullMsgTimeGap", [4], subscription="billing")
    monitor.record_promotions("t", 7, [1, 2], subscription="billing")
    monitor.record_promotions("t", 1, [30])
    monitor.flush()

    raw = redis_client.hgetall(monitor.keys.monitor_total)
    # The default's fields are those written before subscriptions existed.
    assert raw["t\tpullMsg"] == "5" and raw["t\ttriggerMsgReady"] == "1"
    assert raw["t\tbilling\tpullMsg"] == "5" and raw["t\tbilling\ttriggerMsgReady"] == "7"
    assert raw["t\tbilling\tpullMsgTimeGap:count"] == "1"
    assert raw["t\tbilling\treadyQueueTimeGap:b1"] == "1"

    # A reader that asks for no subscriptions (getMonitorData, the console) sees the default.
    topics, _ = parse_monitor_hash(raw)
    assert set(topics) == {"t"} and topics["t"]["pullMsg"] == 5
    assert topics["t"]["readyQueueTimeGap"]["count"] == 1
    totals = monitor.totals()
    assert totals["topics"]["t"]["pullMsg"] == 5
    billing = totals["subscriptions"][("t", "billing")]
    assert (billing["pullMsg"], billing["triggerMsgReady"], billing["sendMsg"]) == (5, 7, 0)
    assert billing["pullMsgTimeGap"]["count"] == 1
    assert billing["readyQueueTimeGap"]["counts"][:3] == [1, 1, 0]

    clock.advance(60_000)
    topics, named = monitor.read_interval_subscriptions(monitor.interval_start(START_MS))
    assert topics["t"]["pullMsg"] == 5 and named[("t", "billing")]["pullMsg"] == 5
    assert monitor.monitor_data()["requestStatsList"][0]["pullMsg"] == 5


def test_the_pseudo_topics_never_read_as_subscriptions(redis_client):
    monitor = make_monitor(redis_client, ManualClock(START_MS))
    monitor.record_request("pullMsg", "200", 3.0)
    monitor.count_event("redisOutOfMemory")
    monitor.count_audit("purgeTopic")
    monitor.observe_loop("promote", 2.0)
    monitor.flush()
    named: dict = {}
    topics, loops = parse_monitor_hash(redis_client.hgetall(monitor.keys.monitor_total), named)
    assert topics == {} and named == {} and set(loops) == {"promote"}


@pytest.mark.parametrize("name", ["", "a\tb", "a:b"])
def test_a_name_that_would_break_the_field_is_refused(redis_client, name):
    monitor = make_monitor(redis_client, ManualClock(START_MS))
    with pytest.raises(ValueError, match="subscription"):
        monitor.incr("t", "pullMsg", subscription=name)


def scraped(monitor, sizes, named_sizes, max_topics=0):
    body, _ = render_metrics(monitor, lambda: sizes, max_topics=max_topics,
                             subscription_sizes=lambda topics: {
                                 key: v for key, v in named_sizes.items() if key[0] in topics})
    return samples_by_name(body)


def test_metrics_label_consumer_series_by_subscription_and_sends_by_topic(redis_client):
    monitor = make_monitor(redis_client, ManualClock(START_MS + 1_000))
    monitor.incr("t", "sendMsg", 10)
    monitor.incr("t", "pullMsg", 4)
    monitor.incr("t", "pullMsg", 6, subscription="billing")
    monitor.incr("t", "getMsg", 1, subscription="billing")   # a topic op: the topic's series
    monitor.observe("t", "pullMsgTimeGap", [3, 3], subscription="billing")
    monitor.flush()
    families, samples = scraped(
        monitor, {"t": TopicSizes(5, 1, 2, 3, False, 4, 1_500)},
        {("t", "billing"): TopicSizes(0, 7, 8, 9, True, 10, 2_500)})

    messages = samples["delayqueue_messages_total"]
    assert value(samples, "delayqueue_messages_total", topic="t", op="sendMsg") == 10
    assert [s.labels for s in messages if s.labels["op"] == "sendMsg"] == [
        {"topic": "t", "op": "sendMsg"}]
    assert value(samples, "delayqueue_messages_total", topic="t", subscription="default",
                 op="pullMsg") == 4
    assert value(samples, "delayqueue_messages_total", topic="t", subscription="billing",
                 op="pullMsg") == 6
    assert value(samples, "delayqueue_messages_total", topic="t", op="getMsg") == 1
    for sample in messages:
        assert ("subscription" in sample.labels) == (sample.labels["op"] in SUBSCRIPTION_COUNTERS)

    def size(**labels):
        return value(samples, "delayqueue_queue_size", topic="t", **labels)
    assert size(state="waiting") == 5
    assert [s.labels for s in samples["delayqueue_queue_size"] if s.labels["state"] == "waiting"
            ] == [{"topic": "t", "state": "waiting"}]
    assert [size(subscription="default", state=state)
            for state in ("ready", "consuming", "group_blocked", "dead")] == [1, 2, 3, 4]
    assert [size(subscription="billing", state=state)
            for state in ("ready", "consuming", "group_blocked", "dead")] == [7, 8, 9, 10]
    assert value(samples, "delayqueue_oldest_ready_age_seconds", subscription="billing") == 2.5
    assert value(samples, "delayqueue_oldest_ready_age_seconds", subscription="default") == 1.5
    assert value(samples, "delayqueue_topic_paused", topic="t") == 0
    assert value(samples, "delayqueue_subscription_paused", topic="t",
                 subscription="billing") == 1
    assert value(samples, "delayqueue_time_gap_milliseconds_count", topic="t",
                 subscription="billing", kind="pull") == 2
    assert families["delayqueue_messages"].type == "counter"


def test_a_named_subscription_costs_its_documented_series(redis_client):
    monitor = make_monitor(redis_client, ManualClock(START_MS + 1_000))
    for counter in COUNTERS:
        monitor.incr("t", counter)
        monitor.incr("t", counter, subscription="s")
    for histogram in ("pullMsgTimeGap", "readyQueueTimeGap"):
        monitor.observe("t", histogram, [1])
        monitor.observe("t", histogram, [1], subscription="s")
    monitor.flush()
    _, samples = scraped(monitor, {"t": TopicSizes(1, 1, 1, 1, False, 1, 5)},
                         {("t", "s"): TopicSizes(0, 1, 1, 1, False, 1, 5)})
    every = [s for group in samples.values() for s in group if s.labels.get("topic") == "t"]
    named = [s for s in every if s.labels.get("subscription") == "s"]
    assert len(named) == SERIES_PER_SUBSCRIPTION == 50
    assert len(every) - len(named) == SERIES_PER_TOPIC


def test_the_subscriptions_of_folded_topics_are_summed_under_other(redis_client):
    monitor = make_monitor(redis_client, ManualClock(START_MS + 1_000))
    for topic in ("a", "b", "c"):
        monitor.incr(topic, "ackMsg", 1, subscription="s-" + topic)
    monitor.flush()
    sizes = {topic: TopicSizes(1, 1, 0, 0) for topic in ("a", "b", "c")}
    named = {(topic, "s-" + topic): TopicSizes(0, 2, 0, 0, True, 0, 1_000)
             for topic in ("a", "b", "c")}
    _, samples = scraped(monitor, sizes, named, max_topics=1)
    acks = {(s.labels["topic"], s.labels["subscription"]): s.value
            for s in samples["delayqueue_messages_total"] if s.labels["op"] == "ackMsg"}
    assert acks == {("a", "s-a"): 1, (OTHER_TOPIC, OTHER_TOPIC): 2}
    assert value(samples, "delayqueue_queue_size", topic=OTHER_TOPIC, subscription=OTHER_TOPIC,
                 state="ready") == 4
    assert value(samples, "delayqueue_subscription_paused", topic=OTHER_TOPIC) == 2


def with_subscriptions(topic: str) -> dict:
    info = topic_info(topic)
    if topic == "t1":
        info["subscriptions"] = [
            {"subscription": "default", "readyQueueSize": 3},
            {"subscription": "billing", "createdTime": START_MS, "waitingQueueSize": 4,
             "readyQueueSize": 5, "ackQueueSize": 6, "deadQueueSize": 1,
             "groupBlockedSize": 7, "paused": True},
        ]
    return info


def test_a_named_subscription_gets_its_own_line_after_its_topics(redis_client, tmp_path):
    fleet = Fleet(redis_client, str(tmp_path / "snap"), ["t1", "t2"])
    fleet.sizes.topic_infos = lambda topics: [with_subscriptions(t) for t in topics]
    assert fleet.writer.tick() == 3     # the interval before: t1, t1/billing, t2
    fleet.monitor.incr("t1", "sendMsg", 9)
    fleet.monitor.incr("t1", "pullMsg", 2)
    fleet.monitor.incr("t1", "pullMsg", 4, subscription="billing")
    fleet.monitor.incr("t1", "deadLettered", 1, subscription="billing")
    fleet.monitor.incr("t2", "ackMsg", 1, subscription="gone")    # deleted since: still a line
    fleet.monitor.flush()
    fleet.clock.advance(INTERVAL_MS - 5_000 + GRACE_MS)

    assert fleet.writer.tick() == 4
    lines = read_lines(tmp_path / "snap" / "date=2025-11-20" / "default-00.jsonl")
    assert [(line["topic"], line.get("subscription")) for line in lines] == [
        ("t1", None), ("t1", "billing"), ("t2", None), ("t2", "gone")]
    topic, billing, _, gone = lines
    # The topic's line is as before subscriptions: version 1, the default's counters.
    assert topic["schemaVersion"] == 1 and "subscription" not in topic
    assert (topic["sendMsg"], topic["pullMsg"], topic["readyQueueSize"]) == (9, 2, 3)
    assert list(billing)[:6] == ["schemaVersion", "namespace", "topic", "subscription",
                                 "intervalStart", "intervalEnd"]
    assert billing["schemaVersion"] == 3
    assert (billing["sendMsg"], billing["pullMsg"], billing["deadLettered"]) == (0, 4, 1)
    assert (billing["waitingQueueSize"], billing["readyQueueSize"], billing["ackQueueSize"],
            billing["groupBlockedSize"], billing["paused"]) == (4, 5, 6, 7, True)
    assert "waitingQueueInfo" not in billing
    assert billing["pullMsgTimeGap"] == {"count": 0, "sum": 0, "max": 0, "counts": [0] * 16}
    assert gone["ackMsg"] == 1 and gone["readyQueueSize"] == 0 and gone["paused"] is False
    assert all(json.dumps(line) for line in lines)
