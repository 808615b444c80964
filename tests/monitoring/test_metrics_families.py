"""The /metrics families of issue 28: dead letters, the oldest ready age, HTTP requests, Redis
up, the build, held long polls, and the label cap that folds topics into topic="_other".

Real scrapes of a real app on a real redis-server (the Flask test client, or a live node).
"""

from __future__ import annotations

import platform
import threading
import time

import pytest
import redis
import requests
from test_metrics import START_MS, make_monitor, samples_by_name, value

from delayqueue import __version__
from delayqueue.background.longpoll import long_poll
from delayqueue.background.node_registry import LOST_AFTER_MS, NodeRegistry, ProcessBeat
from delayqueue.background.runtime import Runtime
from delayqueue.core.clock import ManualClock
from delayqueue.core.histogram import REQUEST_BOUNDS_MS
from delayqueue.core.monitor_hash import COUNTERS, HISTOGRAMS
from delayqueue.core.requests import TopicSizes
from delayqueue.http.app import create_app
from delayqueue.monitoring.metrics import (
    OTHER_TOPIC,
    QUEUE_STATES,
    SERIES_PER_TOPIC,
    render_metrics,
)
from delayqueue.settings.config import load_settings

from support import wait_until
from support.redis_server import RedisServer

Q = "/camellia/delayQueue/"


def make_runtime(redis_url: str, clock=None) -> Runtime:
    settings = load_settings(overrides={"redis_url": redis_url, "snapshot_dir": ""})
    return Runtime(settings, client=redis.Redis.from_url(redis_url, decode_responses=True),
                   clock=clock)


def scrape(rt: Runtime, max_topics: int = 0) -> dict:
    body, _ = render_metrics(rt.monitor, rt.queue.queue_sizes, max_topics=max_topics)
    return samples_by_name(body)[1]


def by_topic(samples: dict, name: str, **labels) -> dict[str, float]:
    return {s.labels["topic"]: s.value for s in samples.get(name, [])
            if all(s.labels.get(k) == v for k, v in labels.items())}


def test_dead_letters_are_a_queue_state_read_with_the_other_sizes(redis_url):
    rt = make_runtime(redis_url, ManualClock(START_MS))
    rt.admin.set_config("t", {"maxRetry": "0"})
    for msg_id in ("a", "b", "c"):
        rt.queue.send("t", "body", msg_id=msg_id)
    for msg in rt.queue.pull("t", count=2).messages:
        rt.queue.nack("t", msg.msg_id, msg.receipt)       # out of deliveries: dead letters
    rt.queue.send("u", "body", delay_ms=60_000)
    samples = scrape(rt)
    assert by_topic(samples, "delayqueue_queue_size", state="dead") == {"t": 2, "u": 0}
    assert by_topic(samples, "delayqueue_queue_size", state="ready") == {"t": 1, "u": 0}
    assert {s.labels["state"] for s in samples["delayqueue_queue_size"]} == set(QUEUE_STATES)
    # Without health (the console's sort by backlog) each topic reads two commands fewer:
    # the same sizes and pause for every topic, no dead letters or age.
    rt.controls.pause("u")
    full, lean = rt.queue.queue_sizes(), rt.queue.queue_sizes(health=False)
    assert full["t"].dead == 2 and full["u"].paused
    assert lean == {topic: sizes._replace(dead=0, oldest_ready_age_ms=0)
                    for topic, sizes in full.items()}


def test_oldest_ready_age_is_how_long_the_ready_head_has_waited_by_the_fleet_clock(redis_url):
    clock = ManualClock(START_MS)
    rt = make_runtime(redis_url, clock)
    rt.queue.send("t", "body", msg_id="first")
    clock.advance(2_000)
    rt.queue.send("t", "body", msg_id="second")
    rt.queue.send("idle", "body", delay_ms=60_000)       # nothing ready: 0
    clock.advance(5_500)
    ages = by_topic(scrape(rt), "delayqueue_oldest_ready_age_seconds")
    assert ages == {"t": 7.5, "idle": 0}

    # A nacked message queues behind the ready ones, scored by when it came back.
    first = rt.queue.pull("t").messages[0]
    assert first.msg_id == "first"
    ages = by_topic(scrape(rt), "delayqueue_oldest_ready_age_seconds")
    assert ages["t"] == 5.5                               # "second" is the head now

    # A node whose reading of the clock trails the score never reports a negative age.
    behind = make_runtime(redis_url, ManualClock(START_MS))
    assert by_topic(scrape(behind), "delayqueue_oldest_ready_age_seconds")["t"] == 0


def test_oldest_ready_age_on_a_real_clock_is_at_least_the_time_waited(redis_db_url):
    app = create_app(overrides={"redis_url": redis_db_url, "snapshot_dir": ""})
    http = app.test_client()
    assert http.post(Q + "sendMsg", data={"topic": "t", "msg": "x"}).get_json()["code"] == 200
    time.sleep(1.2)
    _, samples = samples_by_name(http.get("/metrics").get_data())
    age = value(samples, "delayqueue_oldest_ready_age_seconds", topic="t")
    assert 1.1 <= age < 30


def request_counts(samples: dict) -> dict[tuple[str, str], float]:
    return {(s.labels["route"], s.labels["code"]): s.value
            for s in samples.get("delayqueue_http_requests_total", [])}


def test_http_requests_are_counted_exactly_by_route_and_code_and_timed(redis_db_url):
    app = create_app(overrides={"redis_url": redis_db_url, "snapshot_dir": ""})
    rt = app.extensions["delayqueue"]
    http = app.test_client()
    _, before = samples_by_name(http.get("/metrics").get_data())
    assert request_counts(before) == {}                  # nothing flushed yet
    for i in range(3):
        assert http.post(Q + "sendMsg", data={"topic": "t", "msg": str(i)}
                         ).get_json()["code"] == 200
    refused = [http.post(Q + "sendMsg", data={"topic": "t"}) for _ in range(2)]   # no msg
    code = refused[0].get_json()["code"]
    assert code != 200 and refused[1].get_json()["code"] == code
    assert http.get("/no/such/path").status_code == 404
    rt.monitor.flush()

    _, samples = samples_by_name(http.get("/metrics").get_data())
    assert request_counts(samples) == {
        ("metrics", "200"): 1,            # the scrape before; a scrape never counts itself
        ("sendMsg", "200"): 3, ("sendMsg", str(code)): 2, ("_unmatched", "404"): 1}
    buckets = [s for s in samples["delayqueue_http_request_duration_seconds_bucket"]
               if s.labels["route"] == "sendMsg"]
    assert [float(s.labels["le"]) for s in buckets] == [b / 1000 for b in REQUEST_BOUNDS_MS]
    counts = [s.value for s in buckets]
    assert counts == sorted(counts) and counts[-1] == 5
    assert value(samples, "delayqueue_http_request_duration_seconds_count", route="sendMsg") == 5
    total = value(samples, "delayqueue_http_request_duration_seconds_sum", route="sendMsg")
    assert 0 < total < 5


def test_a_live_node_counts_its_requests_into_the_fleet_totals(server):
    topic = "live-requests"
    for i in range(4):
        answer = requests.post(server.url + Q + "sendMsg",
                               data={"topic": topic, "msg": str(i)}, timeout=10).json()
        assert answer["code"] == 200

    def counted():
        text = requests.get(server.url + "/metrics", timeout=10).content
        _, samples = samples_by_name(text)
        return request_counts(samples).get(("sendMsg", "200")) == 4 and samples
    samples = wait_until(counted, 10, interval_s=0.2, message="sendMsg never counted 4")
    assert value(samples, "delayqueue_http_request_duration_seconds_count", route="sendMsg") == 4
    assert value(samples, "delayqueue_redis_up") == 1


def test_metrics_answer_with_redis_up_0_and_no_fleet_series_while_redis_is_down(tmp_path):
    redis_server = RedisServer(tmp_path).start()
    try:
        app = create_app(overrides={"redis_url": redis_server.url, "snapshot_dir": "",
                                    "redis_connect_timeout_millis": 200})
        http = app.test_client()
        http.post(Q + "sendMsg", data={"topic": "t", "msg": "x"})
        _, samples = samples_by_name(http.get("/metrics").get_data())
        assert value(samples, "delayqueue_redis_up") == 1
        version = redis.Redis.from_url(redis_server.url).info("server")["redis_version"]
        assert [s.labels for s in samples["delayqueue_build_info"]] == [
            {"version": __version__, "python": platform.python_version(),
             "redis_version": version}]
        assert by_topic(samples, "delayqueue_queue_size", state="ready") == {"t": 1}
    finally:
        redis_server.stop()

    response = http.get("/metrics")
    assert response.status_code == 200
    _, samples = samples_by_name(response.get_data())
    assert value(samples, "delayqueue_redis_up") == 0
    assert value(samples, "delayqueue_build_info", redis_version="") == 1
    assert set(samples) == {"delayqueue_redis_up", "delayqueue_build_info"}


def test_held_long_polls_are_every_node_s_from_the_node_registry(redis_db_url):
    """Any worker answers for every node: the sums of their processes' last beats."""
    app = create_app(overrides={"redis_url": redis_db_url, "snapshot_dir": ""})
    rt = app.extensions["delayqueue"]
    threads = [threading.Thread(target=long_poll, daemon=True,
                                args=(rt.queue, rt.hub, rt.clock, "held", 1, None, 2_000, 5.0))
               for _ in range(3)]
    for thread in threads:
        thread.start()
    wait_until(lambda: rt.hub.held() == 3, 5, interval_s=0.01,
               message="three polls not held")
    rt.nodes.tick()                                       # this process's beat: 3 held
    for pid, held in ((101, 4), (102, 1)):                # another node's two workers
        NodeRegistry(rt.client, rt.keys, rt.clock, "other-host:8080", lambda h=held: h,
                     pid=pid).tick()
    # A node whose processes all fell silent (lost) is not exported, whatever it last held.
    lost = ProcessBeat("lost-host:8080", 7, "0", 0, rt.clock.now_ms() - LOST_AFTER_MS - 1_000, 9)
    rt.client.hset(rt.keys.nodes, lost.field, lost.to_json())
    _, samples = samples_by_name(app.test_client().get("/metrics").get_data())
    assert {s.labels["node"]: s.value for s in samples["delayqueue_long_polls_held"]} == {
        rt.node_id: 3, "other-host:8080": 5}
    for thread in threads:
        thread.join(5)
    assert rt.hub.held() == 0


def busy_monitor(redis_client, topics):
    """A monitor whose totals hold every counter and both histograms for each topic."""
    monitor = make_monitor(redis_client, ManualClock(START_MS))
    for topic in topics:
        for counter in COUNTERS:
            monitor.incr(topic, counter)
        for histogram in HISTOGRAMS:
            monitor.observe(topic, histogram, [3])
    monitor.flush()
    return monitor


def test_a_busy_topic_costs_series_per_topic_series(redis_client):
    monitor = busy_monitor(redis_client, ["a", "b"])
    sizes = {"a": TopicSizes(1, 1, 1, 1, False, 1, 5), "b": TopicSizes(1, 1, 1, 1, False, 1, 5)}
    body, _ = render_metrics(monitor, lambda: sizes)
    _, samples = samples_by_name(body)
    per_topic = [s for group in samples.values() for s in group if s.labels.get("topic") == "b"]
    # 17 counters + 5 states + paused + oldest age + 2 histograms x (16 buckets + _sum + _count)
    assert len(per_topic) == SERIES_PER_TOPIC == 60


def test_topics_past_the_cap_are_summed_under_other_and_counted(redis_client):
    monitor = busy_monitor(redis_client, ["a", "b", "c", "d"])
    sizes = {"a": TopicSizes(1, 2, 0, 0), "b": TopicSizes(0, 0, 0, 0, True),
             "c": TopicSizes(10, 1, 2, 3, True, 4, 9_000),
             "d": TopicSizes(20, 5, 0, 0, True, 6, 2_000),
             OTHER_TOPIC: TopicSizes(100, 0, 0, 0)}       # a real topic of that name: folded
    body, _ = render_metrics(monitor, lambda: sizes, max_topics=2)
    _, samples = samples_by_name(body)
    assert value(samples, "delayqueue_metrics_topics_folded") == 3
    assert by_topic(samples, "delayqueue_queue_size", state="waiting") == {
        "a": 1, "b": 0, OTHER_TOPIC: 130}
    assert by_topic(samples, "delayqueue_queue_size", state="dead") == {
        "a": 0, "b": 0, OTHER_TOPIC: 10}
    assert by_topic(samples, "delayqueue_topic_paused") == {"a": 0, "b": 1, OTHER_TOPIC: 2}
    assert by_topic(samples, "delayqueue_oldest_ready_age_seconds") == {
        "a": 0, "b": 0, OTHER_TOPIC: 9}
    assert by_topic(samples, "delayqueue_messages_total", op="sendMsg") == {
        "a": 1, "b": 1, OTHER_TOPIC: 2}
    assert by_topic(samples, "delayqueue_time_gap_milliseconds_count", kind="pull") == {
        "a": 1, "b": 1, OTHER_TOPIC: 2}
    assert value(samples, "delayqueue_time_gap_milliseconds_bucket",
                 topic=OTHER_TOPIC, kind="ready", le="5.0") == 2

    body, _ = render_metrics(monitor, lambda: sizes, max_topics=0)   # 0: no cap
    _, samples = samples_by_name(body)
    assert value(samples, "delayqueue_metrics_topics_folded") == 1   # only the real _other
    assert set(by_topic(samples, "delayqueue_topic_paused")) == {"a", "b", "c", "d", OTHER_TOPIC}


@pytest.mark.parametrize("cap, folded", [(1, 2), (1000, 0)])
def test_metrics_max_topics_is_a_server_setting(redis_db_url, cap, folded):
    app = create_app(overrides={"redis_url": redis_db_url, "snapshot_dir": "",
                                "metrics_max_topics": cap})
    http = app.test_client()
    for topic in ("x", "y", "z"):
        http.post(Q + "sendMsg", data={"topic": topic, "msg": "m"})
    _, samples = samples_by_name(http.get("/metrics").get_data())
    assert value(samples, "delayqueue_metrics_topics_folded") == folded
    assert len(by_topic(samples, "delayqueue_topic_paused")) == 3 - folded + (1 if folded else 0)


def test_a_process_that_never_reached_redis_answers_without_counting(tmp_path):
    """No clock without Redis: the count is skipped, the answer is not failed for it."""
    app = create_app(overrides={"redis_url": "redis://127.0.0.1:1/0", "snapshot_dir": "",
                                "redis_connect_timeout_millis": 200})
    http = app.test_client()
    assert http.get("/camellia/health/check").get_json() == {"code": 200}
    response = http.get("/metrics")
    assert response.status_code == 200
    _, samples = samples_by_name(response.get_data())
    assert value(samples, "delayqueue_redis_up") == 0
    monitor = app.extensions["delayqueue"].monitor
    assert not monitor._log and monitor._pending == {}     # nothing recorded, nothing buffered


def test_method_not_allowed_and_static_files_have_bounded_route_names(redis_db_url):
    app = create_app(overrides={"redis_url": redis_db_url, "snapshot_dir": ""})
    http = app.test_client()
    assert http.delete(Q + "sendMsg").status_code == 405
    assert http.get(f"/no/such/{'x' * 50}").status_code == 404
    app.extensions["delayqueue"].monitor.flush()
    _, samples = samples_by_name(http.get("/metrics").get_data())
    assert request_counts(samples) == {("_unmatched", "405"): 1, ("_unmatched", "404"): 1}
