"""Real named subscriptions (the core's) in /metrics and the snapshot lines: the sizes a scrape
reads for them are listSubscriptions' own, their deliveries are counted apart from the
default's, and the snapshot writer gives each a line of its own."""

from __future__ import annotations

import functools
import json

import redis
from test_metrics import START_MS, samples_by_name, value

from delayqueue.background.runtime import Runtime
from delayqueue.core.clock import ManualClock
from delayqueue.core.subscriptions import Subscriptions
from delayqueue.http.app import create_app
from delayqueue.monitoring.metrics import named_subscription_sizes, render_metrics
from delayqueue.monitoring.size_cache import SnapshotSizes
from delayqueue.monitoring.snapshot import SnapshotWriter
from delayqueue.settings.config import load_settings

Q = "/camellia/delayQueue/"


def make_runtime(redis_url: str, clock) -> Runtime:
    settings = load_settings(overrides={"redis_url": redis_url, "snapshot_dir": ""})
    return Runtime(settings, client=redis.Redis.from_url(redis_url, decode_responses=True),
                   clock=clock)


def traffic(rt: Runtime) -> Subscriptions:
    """"orders": "billing" created before three sends, two of them pulled there and one of
    those acked; the default pulls one; "audit" created, paused, never pulled."""
    subs = Subscriptions(rt.queue)
    subs.create("orders", "billing", {})
    subs.create("orders", "audit", {})
    for n in range(3):
        rt.queue.send("orders", f"m{n}", msg_id=f"m{n}")
    rt.controls.pause("orders", subscription="audit")
    billing = rt.queue.pull("orders", count=2, subscription="billing").messages
    assert len(billing) == 2
    rt.queue.ack("orders", billing[0].msg_id, billing[0].receipt, subscription="billing")
    assert len(rt.queue.pull("orders", count=1).messages) == 1
    rt.monitor.flush()
    return subs


def test_a_scrape_reads_each_named_subscription_as_list_subscriptions_does(redis_url):
    rt = make_runtime(redis_url, ManualClock(START_MS + 1_000))
    subs = traffic(rt)
    listed = {entry["subscription"]: entry for entry in subs.list("orders")}
    sizes = named_subscription_sizes(rt.queue, ["orders"])
    assert set(sizes) == {("orders", "billing"), ("orders", "audit")}
    for (_, name), read in sizes.items():
        entry = listed[name]
        assert (read.ready, read.consuming, read.group_blocked, read.paused) == (
            entry["readyQueueSize"], entry["ackQueueSize"], entry["groupBlockedSize"],
            entry["paused"]), name
        assert read.dead == entry["deadQueueSize"], name

    body, _ = render_metrics(rt.monitor, rt.queue.queue_sizes,
                             subscription_sizes=functools.partial(named_subscription_sizes,
                                                                  rt.queue))
    _, samples = samples_by_name(body)

    def size(sub: str, state: str) -> float:
        return value(samples, "delayqueue_queue_size", topic="orders", subscription=sub,
                     state=state)
    assert (size("billing", "ready"), size("billing", "consuming")) == (1, 1)
    assert (size("audit", "ready"), size("audit", "consuming")) == (3, 0)
    assert (size("default", "ready"), size("default", "consuming")) == (2, 1)
    assert value(samples, "delayqueue_subscription_paused", topic="orders",
                 subscription="audit") == 1
    assert value(samples, "delayqueue_subscription_paused", topic="orders",
                 subscription="billing") == 0
    assert value(samples, "delayqueue_messages_total", topic="orders", op="sendMsg") == 3


def test_a_named_subscription_s_deliveries_are_counted_apart(redis_url):
    rt = make_runtime(redis_url, ManualClock(START_MS + 1_000))
    traffic(rt)
    body, _ = render_metrics(rt.monitor, rt.queue.queue_sizes,
                             subscription_sizes=functools.partial(named_subscription_sizes,
                                                                  rt.queue))
    _, samples = samples_by_name(body)

    def ops(sub: str) -> tuple:
        return tuple(value(samples, "delayqueue_messages_total", topic="orders",
                           subscription=sub, op=op) for op in ("pullMsg", "ackMsg"))
    assert ops("billing") == (2, 1)
    assert ops("default") == (1, 0)


def test_the_snapshot_writer_gives_each_named_subscription_its_line(redis_url, tmp_path):
    clock = ManualClock(START_MS + 1_000)
    rt = make_runtime(redis_url, clock)
    writer = SnapshotWriter(rt.monitor, rt.client, rt.keys, clock, str(tmp_path), "default",
                            60, SnapshotSizes(rt.queue, rt.monitor))
    writer.tick()                      # marks the interval before: no backfill
    subs = traffic(rt)
    clock.advance(60_000 + 2_000)
    writer.tick()
    lines = [json.loads(line) for path in sorted(tmp_path.glob("date=*/*.jsonl"))
             for line in path.read_text().splitlines()]
    lines = [line for line in lines if line["intervalStart"] == START_MS]
    keyed = {(line["topic"], line.get("subscription")): line for line in lines}
    assert set(keyed) == {("orders", None), ("orders", "audit"), ("orders", "billing")}
    listed = {entry["subscription"]: entry for entry in subs.list("orders")}
    billing = keyed[("orders", "billing")]
    assert billing["schemaVersion"] == 3
    assert (billing["readyQueueSize"], billing["ackQueueSize"]) == (
        listed["billing"]["readyQueueSize"], listed["billing"]["ackQueueSize"])
    assert keyed[("orders", "audit")]["paused"] is True
    own = keyed[("orders", None)]
    assert (own["schemaVersion"], own["sendMsg"]) == (1, 3)
    assert billing["sendMsg"] == 0


def test_metrics_over_http_carry_the_named_subscriptions(redis_url):
    app = create_app(overrides={"redis_url": redis_url, "snapshot_dir": ""})
    http = app.test_client()
    Subscriptions(app.extensions["delayqueue"].queue).create("t", "mail", {})
    http.post(Q + "sendMsg", data={"topic": "t", "msg": "a"})
    _, samples = samples_by_name(http.get("/metrics").get_data())
    assert value(samples, "delayqueue_queue_size", topic="t", subscription="mail",
                 state="ready") == 1
    assert value(samples, "delayqueue_queue_size", topic="t", subscription="default",
                 state="ready") == 1
