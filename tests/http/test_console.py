"""The console's pages in-process (the real app and Lua scripts on a real redis-server):
what they show, their writes and the cross-site guard, and speed with 10,000 topics.

The browser side (console errors, screenshots, a redrive click) is
tests/http/test_console_browser.py.
"""

from __future__ import annotations

import re
import time
from html import unescape

import pytest

from delayqueue.http.app import create_app
from delayqueue.http.console.fleet_view import RECENT_INTERVALS

from support import wait_until

Q = "/camellia/delayQueue/"
SAME_ORIGIN = {"Sec-Fetch-Site": "same-origin"}


@pytest.fixture
def app(redis_url):
    return create_app(overrides={"redis_url": redis_url, "snapshot_dir": "",
                                 "monitor_interval_seconds": 1})


@pytest.fixture
def http(app):
    return app.test_client()


def cells(html: str, row_attr: str) -> dict[str, str]:
    """data-field -> text of the cells in the row marked ``row_attr``."""
    row = re.search(rf"<tr {row_attr}>(.*?)</tr>", html, re.DOTALL)
    assert row, f"no row {row_attr}"
    return {name: unescape(text.strip()) for name, text in
            re.findall(r'data-field="(\w+)">([^<]*)<', row.group(1))}


def send(http, topic, n, **extra):
    for i in range(n):
        body = http.post(Q + "sendMsg", data={"topic": topic, "msg": f"m{i}", **extra}).get_json()
        assert body["code"] == 200, body


def make_dead(http, topic, msg_id="poison"):
    http.post(Q + "setTopicConfig", data={"topic": topic, "maxRetry": 0})
    http.post(Q + "sendMsg", data={"topic": topic, "msg": "x", "msgId": msg_id})
    assert http.post(Q + "pullMsg", data={"topic": topic}).get_json()["delayMsgList"]
    assert http.post(Q + "ackMsg", data={"topic": topic, "msgId": msg_id,
                                         "ack": "false"}).get_json()["code"] == 200


def test_fleet_page_sorts_by_backlog_and_matches_get_topic_info(http):
    send(http, "small", 1)
    send(http, "big", 3)
    send(http, "later", 2, delayMillis=600_000)
    send(http, "grouped", 3, groupId="g")       # one ready, two blocked behind it
    make_dead(http, "dead")
    html = http.get("/dashboard/").get_data(as_text=True)
    order = re.findall(r'<tr data-topic="([^"]+)">', html)
    assert order == ["big", "grouped", "later", "small", "dead"]
    infos = {i["topic"]: i for i in http.get(Q + "getTopicInfoList").get_json()["data"]}
    for topic, info in infos.items():
        shown = cells(html, f'data-topic="{topic}"')
        for field in ("waitingQueueSize", "readyQueueSize", "ackQueueSize",
                      "groupBlockedSize", "deadQueueSize"):
            assert int(shown[field]) == info[field], (topic, field)
        assert int(shown["backlog"]) == (info["waitingQueueSize"] + info["readyQueueSize"]
                                         + info["ackQueueSize"] + info["groupBlockedSize"])
    assert cells(html, 'data-topic="dead"')["deadQueueSize"] == "1"
    assert [cells(html, 'data-topic="grouped"')[f] for f in
            ("readyQueueSize", "groupBlockedSize", "backlog")] == ["1", "2", "3"]


def test_backlog_counts_the_messages_behind_their_group_head(http):
    send(http, "grouped", 4, groupId="g")      # one ready front, three due behind it
    send(http, "plain", 3)
    info = http.get(Q + "getTopicInfo", query_string={"topic": "grouped"}).get_json()["data"]
    assert (info["readyQueueSize"], info["groupBlockedSize"]) == (1, 3)
    html = http.get("/dashboard/").get_data(as_text=True)
    assert re.findall(r'<tr data-topic="([^"]+)">', html) == ["grouped", "plain"]
    assert cells(html, 'data-topic="grouped"')["backlog"] == "4"
    page = http.get("/dashboard/topic?topic=grouped").get_data(as_text=True)
    assert cells(page, "data-sizes")["backlog"] == "4"


def test_fleet_rates_and_lag_come_from_the_monitor_intervals(app, http):
    rt = app.extensions["delayqueue"]
    send(http, "rated", 10)
    pulled = http.post(Q + "pullMsg", data={"topic": "rated", "batch": 4}).get_json()
    assert len(pulled["delayMsgList"]) == 4
    rt.monitor.flush()
    # Wait until the interval holding those samples is complete (1 s intervals).
    start = rt.monitor.interval_start(rt.clock.now_ms())
    wait_until(lambda: rt.monitor.interval_start(rt.clock.now_ms()) > start, 5)
    shown = cells(http.get("/dashboard/").get_data(as_text=True), 'data-topic="rated"')
    assert float(shown["sendRate"]) == pytest.approx(10 / RECENT_INTERVALS, abs=0.01)
    assert float(shown["deliveryRate"]) == pytest.approx(4 / RECENT_INTERVALS, abs=0.01)
    assert float(shown["lagP99"]) >= float(shown["lagP50"]) >= 0


def test_fragment_is_only_the_table_for_the_auto_refresh(http):
    send(http, "frag", 1)
    fragment = http.get("/dashboard/?fragment=1").get_data(as_text=True)
    assert '<table id="topics">' in fragment and "<html" not in fragment
    page = http.get("/dashboard/").get_data(as_text=True)
    assert "<html" in page and "fragment" in page


def test_topic_page_shows_sizes_settings_charts_and_dead_letters(http):
    make_dead(http, "orders", "poison-1")
    send(http, "orders", 2)
    html = http.get("/dashboard/topic?topic=orders").get_data(as_text=True)
    info = http.get(Q + "getTopicInfo", query_string={"topic": "orders"}).get_json()["data"]
    shown = cells(html, "data-sizes")
    assert int(shown["readyQueueSize"]) == info["readyQueueSize"] == 2
    assert int(shown["deadQueueSize"]) == info["deadQueueSize"] == 1
    assert html.count('<svg class="chart"') == 3
    assert 'data-msg-id="poison-1"' in html
    assert re.search(r'data-setting="maxRetry">0<', html)


def test_redrive_and_purge_buttons_post_same_origin(http):
    make_dead(http, "redrive-me", "p1")
    make_dead(http, "redrive-me", "p2")
    answer = http.post("/dashboard/topic/redrive", data={"topic": "redrive-me", "msgId": "p1"},
                       headers=SAME_ORIGIN)
    assert answer.status_code == 303
    assert "redriven" in answer.headers["Location"]
    assert http.post(Q + "getMsg", data={"topic": "redrive-me", "msgId": "p1"}
                     ).get_json()["delayMsg"]["status"] == 2
    answer = http.post("/dashboard/topic/purge", data={"topic": "redrive-me"},
                       headers={"Origin": "http://localhost"})
    assert answer.status_code == 303
    info = http.get(Q + "getTopicInfo", query_string={"topic": "redrive-me"}).get_json()["data"]
    assert info["deadQueueSize"] == 0


def test_settings_form_writes_the_topic_config(http):
    answer = http.post("/dashboard/topic/settings",
                       data={"topic": "cfg", "maxRetry": "3", "ttlMillis": "",
                             "deadLetter": "false"}, headers=SAME_ORIGIN)
    assert answer.status_code == 303
    body = http.post(Q + "getTopicConfig", data={"topic": "cfg"}).get_json()
    assert body["data"]["maxRetry"] == 3 and body["data"]["deadLetter"] is False
    assert body["source"]["ttlMillis"] == "server"
    bad = http.post("/dashboard/topic/settings", data={"topic": "cfg", "maxRetry": "-1"},
                    headers=SAME_ORIGIN).get_json()
    assert bad["code"] == 400 and "maxRetry" in bad["msg"]


@pytest.mark.parametrize("headers", [
    {"Sec-Fetch-Site": "cross-site"},
    {"Sec-Fetch-Site": "same-site"},
    {"Origin": "http://evil.example"},
    {"Origin": "https://localhost"},          # another scheme is another origin
    {},                                       # not a browser: use the HTTP API
], ids=["cross-site", "same-site", "foreign-origin", "other-scheme", "no-headers"])
def test_cross_site_writes_are_refused_and_change_nothing(http, headers):
    make_dead(http, "guarded")
    for path in ("redrive", "purge", "settings"):
        answer = http.post(f"/dashboard/topic/{path}",
                           data={"topic": "guarded", "maxRetry": "5"}, headers=headers)
        assert answer.status_code == 403, path
        assert answer.get_json()["code"] == 403
    info = http.get(Q + "getTopicInfo", query_string={"topic": "guarded"}).get_json()["data"]
    assert info["deadQueueSize"] == 1
    config = http.post(Q + "getTopicConfig", data={"topic": "guarded"}).get_json()
    assert config["data"]["maxRetry"] == 0


def test_topic_page_counts_group_blocked_messages_and_shows_the_group_of_dead_letters(http):
    make_dead(http, "jobs", "poison-1")
    http.post(Q + "sendMsg", data={"topic": "jobs", "msg": "x", "msgId": "dies",
                                   "groupId": "g-7", "maxRetry": 0})
    http.post(Q + "pullMsg", data={"topic": "jobs"})
    http.post(Q + "ackMsg", data={"topic": "jobs", "msgId": "dies", "ack": "false"})
    send(http, "jobs", 3, groupId="g-8")
    html = http.get("/dashboard/topic?topic=jobs").get_data(as_text=True)
    info = http.get(Q + "getTopicInfo", query_string={"topic": "jobs"}).get_json()["data"]
    shown = cells(html, "data-sizes")
    assert int(shown["groupBlockedSize"]) == info["groupBlockedSize"] == 2
    assert int(shown["readyQueueSize"]) == info["readyQueueSize"] == 1
    assert int(shown["backlog"]) == 3 and info["deadQueueSize"] == 2
    dead = {row[0]: row[1] for row in re.findall(
        r'<tr data-msg-id="([^"]+)">\s*<td>.*?</td>\s*<td>([^<]*)</td>', html, re.DOTALL)}
    assert dead == {"poison-1": "", "dies": "g-7"}


def test_writes_are_post_only(http):
    assert http.get("/dashboard/topic/redrive?topic=t").status_code == 405


def test_message_lookup_shows_state_and_fields(http):
    http.post(Q + "sendMsg", data={"topic": "look", "msg": "<b>hi</b>", "msgId": "m-1",
                                   "delayMillis": 60_000, "attributes": '{"k":"v"}'})
    html = http.get("/dashboard/message?topic=look&msgId=m-1").get_data(as_text=True)
    assert "1 (waiting)" in html
    assert "&lt;b&gt;hi&lt;/b&gt;" in html and "<b>hi</b>" not in html   # escaped
    assert "groupId" not in html                         # not in a group: no such field
    http.post(Q + "sendMsg", data={"topic": "look", "msg": "x", "msgId": "m-2",
                                   "groupId": "<g>"})
    grouped = http.get("/dashboard/message?topic=look&msgId=m-2").get_data(as_text=True)
    assert '<dt>groupId</dt><dd data-field="groupId">&lt;g&gt;</dd>' in grouped
    missing = http.get("/dashboard/message?topic=look&msgId=nope").get_data(as_text=True)
    assert 'id="lookup-error"' in missing and "no message" in missing


def test_topic_page_escapes_a_hostile_topic_name(http):
    name = '<script>alert(1)</script>'
    send(http, name, 1)
    html = http.get("/dashboard/topic", query_string={"topic": name}).get_data(as_text=True)
    assert name not in html and "&lt;script&gt;" in html
    assert name not in http.get("/dashboard/").get_data(as_text=True)


def commands(client) -> dict[str, int]:
    return {name.removeprefix("cmdstat_"): stats["calls"]
            for name, stats in client.info("commandstats").items()}


def test_fleet_page_is_fast_with_10000_topics(app, http, redis_client):
    rt = app.extensions["delayqueue"]
    now = rt.clock.now_ms()
    # 10,000 registered topics (the registry is bookkeeping; their queues are real scripts'
    # work for the 30 with messages).
    redis_client.zadd(rt.keys.topics, {f"idle-{i:05d}": now for i in range(10_000)})
    for i in range(30):
        send(http, f"busy-{i:02d}", i % 7 + 1)
    timings = []
    for page in (1, 2, 201):
        redis_client.config_resetstat()
        started = time.perf_counter()
        html = http.get(f"/dashboard/?page={page}&size=50").get_data(as_text=True)
        timings.append(time.perf_counter() - started)
        shown = len(re.findall(r"<tr data-topic=", html))
        assert shown == (50 if page < 201 else 30)
        # The work is paged: three ZCARDs and two ZCOUNTs (group blocked, before and after
        # due) per topic to sort, the rest for the page alone.
        calls = commands(redis_client)
        assert calls["zcard"] == 3 * 10_030 + 2 * shown      # + ready/ack of the page's infos
        assert calls["hmget"] == RECENT_INTERVALS * shown
        # + the page's infos: dead, group blocked, and nine waiting buckets of the waiting
        # and of the group blocked messages
        assert calls["zcount"] == 2 * 10_030 + 20 * shown
    first = http.get("/dashboard/?page=1&size=50").get_data(as_text=True)
    order = re.findall(r'<tr data-topic="([^"]+)">', first)
    assert order[:5] == ["busy-06", "busy-13", "busy-20", "busy-27", "busy-05"]
    assert "10030 topics" in first
    print(f"fleet page with 10,030 topics: {[round(t, 3) for t in timings]} s")
    # About 0.6 s on a quiet 2-core machine; the bound only catches a gross regression.
    assert max(timings) < 5.0, timings
