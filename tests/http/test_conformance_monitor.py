"""getMonitorData (camellia's keys), /metrics (Prometheus text) and the health endpoints."""

from __future__ import annotations

import time

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from support import conformance as api
from support import wait_until

pytestmark = pytest.mark.every_topology


def test_monitor_data_reports_the_last_interval_with_camellia_keys(node, raw_redis, topic):
    expected = {"sendMsg": 2, "pullMsg": 2, "ackMsg": 2, "deleteMsg": 0, "getMsg": 1,
                "triggerMsgReady": 0, "triggerMsgEndLife": 0, "triggerMsgTimeout": 0}
    for attempt in range(3):
        t = f"{topic}-{attempt}"
        # Start early in an interval so every request lands in it; the server's clock may
        # trail Redis TIME by up to a round trip, hence the margins on both sides.
        wait_until(lambda: 150 <= api.redis_now_ms(raw_redis) % 1000 <= 400, 3, interval_s=0.005)
        interval = api.redis_now_ms(raw_redis) // 1000
        api.send(node, t, msgId="a")
        api.send(node, t, msgId="b")
        api.pull(node, t, batch=2)
        node.call("ackMsg", topic=t, msgId="a")
        node.call("ackMsg", topic=t, msgId="b", ack="false")      # a nack counts as ackMsg
        api.get(node, t, "a")
        done = api.redis_now_ms(raw_redis)
        if done // 1000 != interval or done % 1000 > 900:
            continue                                              # straddled: try again
        wait_until(lambda: api.redis_now_ms(raw_redis) // 1000 > interval, 3, interval_s=0.01)
        while api.redis_now_ms(raw_redis) // 1000 < interval + 2:
            reply = node.call("getMonitorData")
            if api.redis_now_ms(raw_redis) // 1000 != interval + 1:
                break
            assert reply["code"] == 200
            data = reply["data"]
            stats = [s for s in data["requestStatsList"] if s["topic"] == t]
            if stats and {k: stats[0][k] for k in expected} == expected:
                assert set(data) == {"requestStatsList", "pullMsgTimeGapStatsList",
                                     "readyQueueTimeGapStatsList"}
                assert set(stats[0]) == {"topic", *expected}
                gaps = [g for g in data["pullMsgTimeGapStatsList"] if g["topic"] == t]
                assert len(gaps) == 1
                assert {"topic", "count", "avg", "max", "p50", "p99"} <= set(gaps[0])
                assert gaps[0]["count"] == 2
                assert 0 <= gaps[0]["p50"] <= gaps[0]["p99"]
                return
            time.sleep(0.05)
    pytest.fail("getMonitorData never showed the interval's counts")


def test_metrics_is_prometheus_text_with_queue_sizes(node, topic):
    api.send(node, topic, msgId="w", delayMillis=60_000)
    api.send(node, topic, msgId="r")
    response = requests.get(node.url + "/metrics", timeout=10)
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(response.text)}
    assert "delayqueue_queue_size" in families
    sizes = {s.labels["state"]: s.value for s in families["delayqueue_queue_size"].samples
             if s.labels.get("topic") == topic}
    assert sizes["waiting"] == 1 and sizes["ready"] == 1 and sizes["dead"] == 0
    # Every topology's reads succeed: the sizes pipeline (its ready head too) and INFO.
    assert [s.value for s in families["delayqueue_redis_up"].samples] == [1]
    (build,) = families["delayqueue_build_info"].samples
    assert build.labels["redis_version"] and build.value == 1
    (age,) = [s.value for s in families["delayqueue_oldest_ready_age_seconds"].samples
              if s.labels["topic"] == topic]
    assert age >= 0
    api.pull(node, topic)

    def flushed():
        text = requests.get(node.url + "/metrics", timeout=10).text
        fams = {f.name: f for f in text_string_to_metric_families(text)}
        sent = [s.value for s in fams["delayqueue_messages"].samples
                if s.labels.get("topic") == topic and s.labels.get("op") == "sendMsg"
                and s.name.endswith("_total")]
        gaps = [s for s in fams["delayqueue_time_gap_milliseconds"].samples
                if s.labels.get("topic") == topic and s.name.endswith("_count")]
        return fams if sent == [2] and gaps else None

    fams = wait_until(flushed, 10, interval_s=0.2)
    assert fams["delayqueue_time_gap_milliseconds"].type == "histogram"
    loops = {s.labels["loop"] for s in
             fams["delayqueue_scheduler_loop_duration_milliseconds"].samples}
    assert "schedule" in loops


def test_health_status_follows_online_and_offline(node):
    def health(path, method=requests.get):
        response = method(node.url + "/camellia/health/" + path, timeout=5)
        return response.status_code, response.json()

    assert health("status") == (200, {"code": 200})
    try:
        assert health("offline") == (200, {"code": 200})
        assert health("status") == (500, {"code": 500})
        assert health("check") == (200, {"code": 200})
    finally:
        assert health("online", requests.post) == (200, {"code": 200})
    assert health("status") == (200, {"code": 200})
