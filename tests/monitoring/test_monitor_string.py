"""getMonitorString: camellia's text view, the same figures as getMonitorData and the sizes."""

from __future__ import annotations

import re

from delayqueue.background.runtime import Runtime
from delayqueue.core.clock import ManualClock
from delayqueue.http.app import create_app
from delayqueue.settings.config import load_settings

Q = "/camellia/delayQueue/"


def test_monitor_string_shows_the_last_interval_and_the_sizes(redis_url, redis_client):
    settings = load_settings(env={}, overrides={"redis_url": redis_url, "snapshot_dir": "",
                                                "monitor_interval_seconds": 60})
    clock = ManualClock(1_700_000_000_000)          # an interval start: all samples in one
    rt = Runtime(settings, client=redis_client, clock=clock)
    http = create_app(settings=settings, runtime=rt).test_client()
    for i in range(7):
        http.post(Q + "sendMsg", data={"topic": "text-orders", "msg": f"m{i}"})
    http.post(Q + "sendMsg", data={"topic": "text-later", "msg": "x", "delayMillis": 600_000})
    assert len(http.post(Q + "pullMsg", data={"topic": "text-orders", "batch": 3}
                         ).get_json()["delayMsgList"]) == 3
    rt.monitor.flush()
    clock.advance(60_000)                            # that interval is now the last complete

    def counted():
        data = http.get(Q + "getMonitorData").get_json()["data"]["requestStatsList"]
        return [s for s in data if s["topic"] == "text-orders"]
    answer = http.get(Q + "getMonitorString")
    assert answer.content_type.startswith("text/plain")
    text = answer.get_data(as_text=True)
    stats = counted()[0]
    row = re.search(r"^== request stats ==\n.*?^text-orders\s+(\d+)\s+(\d+)", text,
                    re.MULTILINE | re.DOTALL)
    assert row and (int(row[1]), int(row[2])) == (stats["sendMsg"], stats["pullMsg"]) == (7, 3)
    sizes = re.search(r"^== topics now ==\n(.*)", text, re.MULTILINE | re.DOTALL)[1]
    assert re.search(r"^text-orders\s+0\s+4\s+3\s+0$", sizes, re.MULTILINE), sizes
    assert re.search(r"^text-later\s+1\s+0\s+0\s+0$", sizes, re.MULTILINE), sizes
    assert "pullMsg time gap (ms)" in text
    assert http.post(Q + "getMonitorString").get_data(as_text=True).startswith(
        "delayqueue monitor")
