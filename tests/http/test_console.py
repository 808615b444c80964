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
from markupsafe import escape

from delayqueue.background.runtime import Runtime
from delayqueue.core.clock import ManualClock
from delayqueue.http.app import create_app
from delayqueue.http.console.filters import rate
from delayqueue.http.console.fleet_view import RECENT_INTERVALS, FleetView
from delayqueue.settings.config import load_settings

from support.round_trips import RoundTrips

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


INTERVAL_START = 1_699_999_980_000       # a 60 s interval's start


def manual_app(redis_url, **overrides):
    """(app, clock): an app on a hand-driven clock with 60 s monitoring intervals."""
    settings = load_settings(overrides={"redis_url": redis_url, "snapshot_dir": "",
                                        "monitor_interval_seconds": 60, **overrides})
    clock = ManualClock(INTERVAL_START - 55_000)
    return create_app(settings=settings, runtime=Runtime(settings, clock=clock)), clock


@pytest.fixture
def manual(redis_url):
    return manual_app(redis_url)


@pytest.fixture
def manual_day(redis_url):
    """As ``manual``, with a day of monitoring history kept in Redis."""
    return manual_app(redis_url, monitor_history_minutes=1440)


def test_fleet_rates_include_the_current_interval_so_far(manual):
    app, clock = manual
    http, rt = app.test_client(), app.extensions["delayqueue"]
    send(http, "rated", 6)                       # in the last complete interval
    clock.advance(67_000)                        # 12 s into the next one
    send(http, "rated", 10)                      # a burst in the current interval
    assert len(http.post(Q + "pullMsg", data={"topic": "rated", "batch": 4}
                         ).get_json()["delayMsgList"]) == 4
    rt.monitor.flush()
    html = http.get("/dashboard/").get_data(as_text=True)
    shown = cells(html, 'data-topic="rated"')
    seconds = RECENT_INTERVALS * 60 + 12         # five complete intervals and 12 s
    assert shown["sendRate"] == rate(16 / seconds) == "0.05"
    assert shown["deliveryRate"] == rate(4 / seconds) == "0.01"
    # The four pulled were the first sent, 67 s before: lag humanised.
    assert shown["lagP50"] == shown["lagP99"] == "1 min 7 s"
    note = re.search(r'<p class="note" id="rate-window">([^<]*)</p>', html).group(1)
    assert "last 300 s of complete intervals plus 12.0 s of the current one (312.0 s)" in note


def test_fragment_is_only_the_table_for_the_auto_refresh(http):
    send(http, "frag", 1)
    fragment = http.get("/dashboard/?fragment=1").get_data(as_text=True)
    assert '<table id="topics"' in fragment and "<html" not in fragment
    page = http.get("/dashboard/").get_data(as_text=True)
    assert "<html" in page and 'id="fleet" data-refresh-ms="5000"' in page
    # The refresh is console.js's (no inline script: the pages work under a CSP of 'self').
    assert '<script src="/dashboard/console.js"></script>' in page
    script = http.get("/dashboard/console.js")
    assert script.status_code == 200 and script.mimetype == "text/javascript"
    assert b'searchParams.set("fragment", "1")' in script.data
    style = http.get("/dashboard/console.css")
    assert style.status_code == 200 and style.mimetype == "text/css"


def test_topic_page_shows_sizes_settings_charts_and_dead_letters(http):
    make_dead(http, "orders", "poison-1")
    send(http, "orders", 2)
    html = http.get("/dashboard/topic?topic=orders").get_data(as_text=True)
    info = http.get(Q + "getTopicInfo", query_string={"topic": "orders"}).get_json()["data"]
    shown = cells(html, "data-sizes")
    assert int(shown["readyQueueSize"]) == info["readyQueueSize"] == 2
    assert int(shown["deadQueueSize"]) == info["deadQueueSize"] == 1
    assert html.count('<svg class="chart"') == 5
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
    dead_table = html[html.index('<table id="dead">'):]
    dead = {row[0]: row[1] for row in re.findall(
        r'<tr data-msg-id="([^"]+)">\s*<td>.*?</td>\s*<td>([^<]*)</td>', dead_table, re.DOTALL)}
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
        assert calls["hmget"] == (RECENT_INTERVALS + 1) * shown   # + the current interval
        # + the page's infos: dead, group blocked, and nine waiting buckets of the waiting
        # and of the group blocked messages
        assert calls["zcount"] == 2 * 10_030 + 20 * shown
    first = http.get("/dashboard/?page=1&size=50").get_data(as_text=True)
    order = re.findall(r'<tr data-topic="([^"]+)">', first)
    assert order[:5] == ["busy-06", "busy-13", "busy-20", "busy-27", "busy-05"]
    assert "10030 topics" in first
    # About 0.6 s on a quiet 2-core machine, over 5 s on a loaded one: the time is printed
    # for the eye, the command counts above are what catch a regression.
    print(f"fleet page with 10,030 topics: {[round(t, 3) for t in timings]} s")


# -- the topic controls (issue 24): messages, pause / resume, purge, description -------------

HOSTILE_ID = """<img src=x onerror="alert(1)">'"""


def send_ids(http, topic, ids, **extra):
    for msg_id in ids:
        body = http.post(Q + "sendMsg", data={"topic": topic, "msg": f"body of {msg_id}",
                                              "msgId": msg_id, **extra}).get_json()
        assert body["code"] == 200, body


def list_msg(http, topic, **query):
    """Every message listMsg gives for one view, page after page."""
    messages, cursor = [], None
    while True:
        body = http.post(Q + "listMsg", data={"topic": topic, "limit": 100, **query,
                                              **({"cursor": cursor} if cursor else {})}
                         ).get_json()
        assert body["code"] == 200, body
        messages += body["delayMsgList"]
        cursor = body.get("nextCursor")
        if not cursor:
            return messages


def listed(html: str) -> list[str]:
    """The msgIds of the topic page's message list, in order."""
    table = re.search(r'<table id="message-list".*?</table>', html, re.DOTALL)
    assert table, "no message list"
    return [unescape(m) for m in re.findall(r'<tr data-msg-id="([^"]*)">', table.group(0))]


def link(html: str, anchor_id: str) -> str | None:
    found = re.search(rf'<a id="{anchor_id}" href="([^"]+)"', html)
    return unescape(found.group(1)) if found else None


def flash(http, answer) -> tuple[str | None, str | None]:
    """A form's 303: (done, error) as the topic page it points to shows them."""
    assert answer.status_code == 303, answer.get_data(as_text=True)
    html = http.get(answer.headers["Location"]).get_data(as_text=True)
    done = re.search(r'<p class="done" id="done">([^<]*)</p>', html)
    error = re.search(r'<p class="error" id="error">([^<]*)</p>', html)
    return (unescape(done.group(1)) if done else None,
            unescape(error.group(1)) if error else None)


def topic_info(http, topic):
    return http.get(Q + "getTopicInfo", query_string={"topic": topic}).get_json()["data"]


def test_message_list_pages_through_a_view_with_its_cursor(http):
    ids = [f"r-{i:03d}" for i in range(60)]
    send_ids(http, "paged", ids)
    expected = [m["msgId"] for m in list_msg(http, "paged", status=2)]
    assert sorted(expected) == ids
    url, pages = "/dashboard/topic?topic=paged&view=ready&size=25", []
    while url:
        html = http.get(url).get_data(as_text=True)
        pages.append(listed(html))
        assert (link(html, "msg-first") is None) == (len(pages) == 1)
        url = link(html, "msg-next")
    assert [len(p) for p in pages] == [25, 25, 10]
    assert [m for p in pages for m in p] == expected
    html = http.get("/dashboard/topic?topic=paged&view=ready&size=50").get_data(as_text=True)
    assert len(listed(html)) == 50 and "msgCursor=" in link(html, "msg-next")
    assert link(http.get("/dashboard/topic?topic=paged&view=ready&size=100"
                         ).get_data(as_text=True), "msg-next") is None


def test_each_view_lists_its_queue_with_times_retries_and_groups(http):
    send_ids(http, "views", ["w-2"], delayMillis=900_000)
    send_ids(http, "views", ["w-1"], delayMillis=600_000)
    send_ids(http, "views", ["ready-1", "ready-2", "taken"])
    send_ids(http, "views", ["g-head", "g-next"], groupId="grp")
    pulled = http.post(Q + "pullMsg", data={"topic": "views", "batch": 1,
                                            "ackTimeoutMillis": 300_000}).get_json()
    assert [m["msgId"] for m in pulled["delayMsgList"]] == ["ready-1"]
    for view, query in (("waiting", {"status": 1}), ("ready", {"status": 2}),
                        ("consuming", {"status": 3}), ("blocked", {"groupBlocked": "true"})):
        html = http.get(f"/dashboard/topic?topic=views&view={view}").get_data(as_text=True)
        expected = list_msg(http, "views", **query)
        assert listed(html) == [m["msgId"] for m in expected], view
        assert re.search(rf'<a href="[^"]*view={view}[^"]*"\s+data-view="{view}" '
                         r'aria-current="page">', html), view
        for m in expected:
            row = cells(html, f'data-msg-id="{m["msgId"]}"')
            assert row["status"] == status_name(m["status"])
            assert row["retry"] == f'{m["retry"]} / {m["maxRetry"]}'
            assert row["groupId"] == m.get("groupId", "")
            assert row["msg"] == m["msg"]
            iso = when_iso(m["triggerTime"])
            assert f'<time datetime="{iso}" title="{iso}">' in html
    assert listed(http.get("/dashboard/topic?topic=views").get_data(as_text=True)) == \
        ["w-1", "w-2"]                              # the first tab holding messages: waiting
    send_ids(http, "only-consuming", ["c-1"])
    http.post(Q + "pullMsg", data={"topic": "only-consuming"})
    html = http.get("/dashboard/topic?topic=only-consuming").get_data(as_text=True)
    assert listed(html) == ["c-1"] and 'id="message-list" data-view="consuming"' in html
    http.post(Q + "setTopicConfig", data={"topic": "nothing-here", "maxRetry": 3})
    html = http.get("/dashboard/topic?topic=nothing-here").get_data(as_text=True)
    assert listed(html) == [] and 'id="message-list" data-view="waiting"' in html
    assert "No waiting messages." in html
    waiting = http.get("/dashboard/topic?topic=views&view=waiting").get_data(as_text=True)
    assert re.search(r'data-msg-id="w-1">.*?<time [^>]*>in (9 min \d+ s|10 min)</time>',
                     waiting, re.DOTALL)
    consuming = http.get("/dashboard/topic?topic=views&view=consuming").get_data(as_text=True)
    deadline = list_msg(http, "views", status=3)[0]["ackDeadline"]
    assert re.search(rf'data-field="ackDeadline"><time datetime="{when_iso(deadline)}" '
                     r'[^>]*>in (4 min \d+ s|5 min)</time>', consuming)
    assert "ack deadline" in consuming and "ack deadline" not in waiting
    blocked = http.get("/dashboard/topic?topic=views&view=blocked").get_data(as_text=True)
    assert listed(blocked) == ["g-next"]
    assert 'data-view="blocked" aria-current="page">Group-blocked (1)<' in blocked


def when_iso(ms: int) -> str:
    from delayqueue.http.console.filters import iso
    return iso(ms)


def status_name(status: int) -> str:
    from delayqueue.http.console.views import status_name as name
    return name(status)


def test_message_list_escapes_ids_and_bodies_and_links_each_message(http):
    long_body = "<script>x</script>" + "y" * 200 + "\nnext line"
    http.post(Q + "sendMsg", data={"topic": "hostile", "msg": long_body, "msgId": HOSTILE_ID,
                                   "groupId": '<g id="1">'})
    html = http.get("/dashboard/topic?topic=hostile&view=ready").get_data(as_text=True)
    assert HOSTILE_ID not in html and "<script>x" not in html and '<g id="1">' not in html
    assert listed(html) == [HOSTILE_ID]
    row = cells(html, re.escape(f'data-msg-id="{escape(HOSTILE_ID)}"'))
    assert row["msg"] == long_body[:80] + "…" and "\n" not in row["msg"]
    assert row["groupId"] == '<g id="1">'
    href = re.search(r'<td><a href="([^"]+)">', html.split('id="message-list"')[1]).group(1)
    page = http.get(unescape(href)).get_data(as_text=True)
    assert '<dd data-field="status">2 (ready)</dd>' in page
    assert HOSTILE_ID not in page and "&lt;img src=x" in page


@pytest.mark.parametrize("query, rule", [
    ("view=dead", "view: must be one of waiting, ready, consuming, blocked, got 'dead'"),
    ("size=30", "size: must be one of 25, 50, 100, got 30"),
    ("msgCursor=bad!", "msgCursor: not a nextCursor of a listMsg page, got 'bad!'"),
])
def test_a_bad_message_list_parameter_names_itself_and_its_rule(http, query, rule):
    send(http, "t", 1)
    body = http.get(f"/dashboard/topic?topic=t&{query}").get_json()
    assert body == {"code": 400, "msg": rule}


def test_pause_and_resume_buttons_change_the_topic_and_show_it(http):
    send_ids(http, "pausable", ["p-1"])
    assert 'id="pause"' in http.get("/dashboard/topic?topic=pausable").get_data(as_text=True)
    done, error = flash(http, http.post("/dashboard/topic/pause", data={"topic": "pausable"},
                                        headers=SAME_ORIGIN))
    assert (done, error) == ("paused: nothing is handed out until resumed", None)
    assert topic_info(http, "pausable")["paused"] is True
    assert http.post(Q + "pullMsg", data={"topic": "pausable"}).get_json()["delayMsgList"] == []
    html = http.get("/dashboard/topic?topic=pausable").get_data(as_text=True)
    assert 'id="paused"' in html and 'id="resume"' in html and 'id="pause"' not in html
    fleet = http.get("/dashboard/").get_data(as_text=True)
    assert re.search(r'<tr data-topic="pausable">.*?data-field="paused"', fleet, re.DOTALL)
    assert flash(http, http.post("/dashboard/topic/pause", data={"topic": "pausable"},
                                 headers=SAME_ORIGIN))[0] == "already paused"
    assert flash(http, http.post("/dashboard/topic/resume", data={"topic": "pausable"},
                                 headers=SAME_ORIGIN))[0] == "resumed"
    assert topic_info(http, "pausable")["paused"] is False
    html = http.get("/dashboard/topic?topic=pausable").get_data(as_text=True)
    assert 'id="paused"' not in html and 'id="pause"' in html
    assert 'data-field="paused"' not in http.get("/dashboard/").get_data(as_text=True)
    assert flash(http, http.post("/dashboard/topic/resume", data={"topic": "pausable"},
                                 headers=SAME_ORIGIN))[0] == "not paused: nothing to resume"
    pulled = http.post(Q + "pullMsg", data={"topic": "pausable"}).get_json()["delayMsgList"]
    assert [m["msgId"] for m in pulled] == ["p-1"]


def test_purge_button_ends_the_live_messages_and_says_how_many(http):
    make_dead(http, "purgeable", "dead-1")       # a dead letter is not live: it stays
    send_ids(http, "purgeable", [f"x-{i}" for i in range(5)])
    send_ids(http, "purgeable", ["later"], delayMillis=600_000)
    http.post(Q + "pullMsg", data={"topic": "purgeable", "batch": 2})
    html = http.get("/dashboard/topic?topic=purgeable").get_data(as_text=True)
    assert re.search(r'<form method="post" action="/dashboard/topic/purgeMessages"\s+'
                     r'data-confirm="Purge topic purgeable\? [^"]*up to 10,000 per purge\.">',
                     html)
    purge = http.post("/dashboard/topic/purgeMessages", data={"topic": "purgeable"},
                      headers=SAME_ORIGIN)
    assert flash(http, purge) == ("purged: 6, remaining: 0", None)
    info = topic_info(http, "purgeable")
    assert [info[f] for f in ("waitingQueueSize", "readyQueueSize", "ackQueueSize",
                              "deadQueueSize")] == [0, 0, 0, 1]
    for msg_id in ("x-0", "x-4", "later"):
        assert http.post(Q + "getMsg", data={"topic": "purgeable", "msgId": msg_id}
                         ).get_json()["delayMsg"]["status"] == 7
    assert listed(http.get("/dashboard/topic?topic=purgeable&view=ready"
                           ).get_data(as_text=True)) == []


def test_a_purge_past_its_limit_says_how_many_remain(http, monkeypatch):
    from delayqueue.http.console import views
    monkeypatch.setattr(views, "PURGE_PER_POST", 250)
    batch = {"topic": "big-purge", "msgs": [{"msg": f"b{i}"} for i in range(600)]}
    assert all(r["code"] == 200 for r in
               http.post(Q + "sendMsgBatch", json=batch).get_json()["results"])
    first = http.post("/dashboard/topic/purgeMessages", data={"topic": "big-purge"},
                      headers=SAME_ORIGIN)
    assert flash(http, first) == ("purged: 250, remaining: 350 (purge again to go on)", None)
    assert topic_info(http, "big-purge")["readyQueueSize"] == 350
    second = http.post("/dashboard/topic/purgeMessages", data={"topic": "big-purge"},
                       headers=SAME_ORIGIN)
    assert flash(http, second) == ("purged: 250, remaining: 100 (purge again to go on)", None)
    third = http.post("/dashboard/topic/purgeMessages", data={"topic": "big-purge"},
                      headers=SAME_ORIGIN)
    assert flash(http, third) == ("purged: 100, remaining: 0", None)
    assert topic_info(http, "big-purge")["readyQueueSize"] == 0


def test_a_purge_that_stops_at_its_limit_in_the_last_slice_says_what_remains(http,
                                                                              monkeypatch):
    """A small topic is one HSCAN slice: the limit is reached in the scan's last slice."""
    from delayqueue.http.console import views
    monkeypatch.setattr(views, "PURGE_PER_POST", 4)
    send_ids(http, "small-purge", [f"s-{i}" for i in range(6)])
    purge = http.post("/dashboard/topic/purgeMessages", data={"topic": "small-purge"},
                      headers=SAME_ORIGIN)
    assert topic_info(http, "small-purge")["readyQueueSize"] == 2
    assert flash(http, purge) == ("purged: 4, remaining: 2 (purge again to go on)", None)


@pytest.mark.parametrize("path", ["pause", "resume", "purgeMessages"])
def test_an_unknown_topic_is_refused_on_the_topic_page_and_not_created(http, path):
    answer = http.post(f"/dashboard/topic/{path}", data={"topic": "no-such-topic"},
                       headers=SAME_ORIGIN)
    done, error = flash(http, answer)
    assert done is None
    assert error.startswith("topic: no topic 'no-such-topic': it holds no message")
    topics = [i["topic"] for i in http.get(Q + "getTopicInfoList").get_json()["data"]]
    assert "no-such-topic" not in topics
    assert http.post(Q + "getTopicConfig", data={"topic": "no-such-topic"}
                     ).get_json()["source"]["maxRetry"] == "server"


@pytest.mark.parametrize("path", ["pause", "resume", "purgeMessages"])
def test_the_control_forms_are_post_only_and_refused_cross_site(http, path):
    send_ids(http, "guarded-controls", ["g-1"])
    assert http.get(f"/dashboard/topic/{path}?topic=guarded-controls").status_code == 405
    for headers in ({"Sec-Fetch-Site": "cross-site"}, {"Origin": "http://evil.example"}, {}):
        answer = http.post(f"/dashboard/topic/{path}", data={"topic": "guarded-controls"},
                           headers=headers)
        assert answer.status_code == 403 and answer.get_json()["code"] == 403
    info = topic_info(http, "guarded-controls")
    assert info["paused"] is False and info["readyQueueSize"] == 1


def test_description_is_shown_escaped_and_the_settings_form_sets_the_new_settings(http):
    answer = http.post("/dashboard/topic/settings", headers=SAME_ORIGIN, data={
        "topic": "described", "delayMillis": "5000", "maxBacklog": "7",
        "description": "Orders <b>paid</b>\r\nsecond line"})
    assert answer.status_code == 303
    config = http.post(Q + "getTopicConfig", data={"topic": "described"}).get_json()
    assert config["data"]["delayMillis"] == 5000 and config["data"]["maxBacklog"] == 7
    assert config["data"]["description"] == "Orders <b>paid</b>\nsecond line"
    html = http.get("/dashboard/topic?topic=described").get_data(as_text=True)
    assert ('<p class="description" id="description">Orders &lt;b&gt;paid&lt;/b&gt;\n'
            'second line</p>') in html
    assert ('<textarea name="description" rows="3" cols="60" maxlength="1024" '
            'aria-label="description">\nOrders &lt;b&gt;paid&lt;/b&gt;\nsecond line'
            '</textarea>') in html
    assert re.search(r'data-setting="delayMillis">5000<', html)
    assert re.search(r'data-setting="maxBacklog">7<', html)
    # The form sends the textarea back as it was (CRLF): nothing to write.
    http.post("/dashboard/topic/settings", headers=SAME_ORIGIN, data={
        "topic": "described", "maxRetry": "2", "deadLetter": "false",
        "description": "Orders <b>paid</b>\r\nsecond line"})
    # Emptied: the topic's own description is the empty text; its other values stay.
    http.post("/dashboard/topic/pause", data={"topic": "described"}, headers=SAME_ORIGIN)
    http.post("/dashboard/topic/settings", headers=SAME_ORIGIN,
              data={"topic": "described", "ttlMillis": "60000", "description": ""})
    config = http.post(Q + "getTopicConfig", data={"topic": "described"}).get_json()
    assert config["data"]["description"] == "" and config["source"]["description"] == "topic"
    own = {k: v for k, v in config["data"].items() if config["source"][k] == "topic"}
    assert own == {"delayMillis": 5000, "maxBacklog": 7, "maxRetry": 2, "deadLetter": False,
                   "ttlMillis": 60000, "description": ""}
    assert topic_info(http, "described")["paused"] is True      # a reset keeps the pause
    assert 'id="description"' not in http.get("/dashboard/topic?topic=described"
                                              ).get_data(as_text=True)
    bad = http.post("/dashboard/topic/settings", headers=SAME_ORIGIN,
                    data={"topic": "described", "description": "x" * 1025}).get_json()
    assert bad["code"] == 400 and bad["msg"].startswith("description: ")


def test_an_untouched_description_stays_the_servers(http):
    http.post("/dashboard/topic/settings", headers=SAME_ORIGIN,
              data={"topic": "plain-cfg", "maxRetry": "4", "description": ""})
    config = http.post(Q + "getTopicConfig", data={"topic": "plain-cfg"}).get_json()
    assert config["data"]["maxRetry"] == 4
    assert config["source"]["description"] == "server"


def test_message_page_shows_receipt_and_ack_deadline_and_dead_time(http):
    send_ids(http, "lookup", ["c-1"])
    pulled = http.post(Q + "pullMsg", data={"topic": "lookup", "ackTimeoutMillis": 120_000}
                       ).get_json()["delayMsgList"]
    assert [m["msgId"] for m in pulled] == ["c-1"]
    got = http.post(Q + "getMsg", data={"topic": "lookup", "msgId": "c-1"}).get_json()
    html = http.get("/dashboard/message?topic=lookup&msgId=c-1").get_data(as_text=True)
    assert f'<dd data-field="receipt">{got["delayMsg"]["receipt"]}</dd>' in html
    deadline = got["delayMsg"]["ackDeadline"]
    assert re.search(rf'<dd data-field="ackDeadline">{deadline} · <time datetime='
                     rf'"{when_iso(deadline)}">[^<]+</time> · in (1 min \d+ s|2 min)</dd>', html)
    assert 'data-field="deadTime"' not in html
    make_dead(http, "lookup-dead", "gone")
    dead = http.post(Q + "getMsg", data={"topic": "lookup-dead", "msgId": "gone"}
                     ).get_json()["delayMsg"]
    html = http.get("/dashboard/message?topic=lookup-dead&msgId=gone").get_data(as_text=True)
    assert re.search(rf'<dd data-field="deadTime">{dead["deadTime"]} · <time [^>]+>[^<]+</time>'
                     r' · (now|\d+ s ago)</dd>', html)
    assert 'data-field="ackDeadline"' not in html and 'data-field="receipt"' not in html


@pytest.mark.parametrize("offset, text", [
    (0, "now"), (999, "now"), (-999, "now"), (1000, "in 1 s"), (-12_000, "12 s ago"),
    (250_000, "in 4 min 10 s"), (7_205_000, "in 2 h"), (-7_260_000, "2 h 1 min ago"),
    (90_000_000, "in 1 d 1 h"),
])
def test_times_read_relative_to_the_page(offset, text):
    from delayqueue.http.console.filters import ago
    assert ago(1_763_800_000_000 + offset, 1_763_800_000_000) == text


# -- the console an operator needs (issue 28 item 2) -----------------------------------------

def shown_order(html: str) -> list[str]:
    return re.findall(r'<tr data-topic="([^"]+)">', html)


def test_topics_sort_by_any_column_both_ways_ties_by_name(http):
    send(http, "b-two", 2)
    send(http, "a-three", 3)
    send(http, "c-one", 1, delayMillis=600_000)
    make_dead(http, "d-dead")
    http.post(Q + "pullMsg", data={"topic": "b-two", "batch": 2})     # two consuming
    order = {}
    for sort in ("topic", "backlog", "waiting", "ready", "consuming", "dead", "sendRate"):
        order[sort] = shown_order(http.get(f"/dashboard/?sort={sort}").get_data(as_text=True))
        asc = shown_order(http.get(f"/dashboard/?sort={sort}&order=asc").get_data(as_text=True))
        assert sorted(asc) == sorted(order[sort]) == ["a-three", "b-two", "c-one", "d-dead"]
    assert order["topic"] == ["a-three", "b-two", "c-one", "d-dead"]       # names: A to Z
    assert order["backlog"] == ["a-three", "b-two", "c-one", "d-dead"]     # 3, 2, 1, 0
    assert order["waiting"] == ["c-one", "a-three", "b-two", "d-dead"]     # 1, then ties
    assert order["ready"] == ["a-three", "b-two", "c-one", "d-dead"]
    assert order["consuming"] == ["b-two", "a-three", "c-one", "d-dead"]
    assert order["dead"] == ["d-dead", "a-three", "b-two", "c-one"]
    assert order["sendRate"] == ["a-three", "b-two", "c-one", "d-dead"]    # 3, 2, 1, 1 sent
    assert shown_order(http.get("/dashboard/?sort=topic&order=desc").get_data(as_text=True)) \
        == ["d-dead", "c-one", "b-two", "a-three"]
    html = http.get("/dashboard/?sort=ready&order=asc").get_data(as_text=True)
    assert shown_order(html) == ["b-two", "c-one", "d-dead", "a-three"]    # 0, 0, 0, 3
    # The sorted column's link turns the order round; the others sort their own way.
    assert re.search(r'<a data-sort="ready" href="/dashboard/\?sort=ready&amp;order=desc'
                     r'&amp;size=50&amp;page=1"\s*aria-sort="ascending">ready ▲</a>', html)
    assert '<a data-sort="topic" href="/dashboard/?sort=topic&amp;size=50&amp;page=1">' in html


def test_sorting_by_dead_letters_reads_them_with_the_sizes(http, monkeypatch):
    """The dead sort asks queue_sizes for its health reads: the dead-letter counts ride in
    the sizes' round trip, so the page costs the round trips the backlog sort does."""
    make_dead(http, "d-dead")
    send(http, "a-live", 2)
    http.get("/dashboard/")                       # anything loaded once is loaded
    trips = {}
    for sort in ("backlog", "dead"):
        counted = RoundTrips(monkeypatch)
        html = http.get(f"/dashboard/?sort={sort}").get_data(as_text=True)
        monkeypatch.undo()
        trips[sort] = counted.count
        assert sorted(shown_order(html)) == ["a-live", "d-dead"]
    assert shown_order(html) == ["d-dead", "a-live"]
    assert trips["dead"] == trips["backlog"], trips


def test_the_filter_keeps_sort_and_paging_in_its_links(http, redis_client, app):
    rt = app.extensions["delayqueue"]
    now = rt.clock.now_ms()
    redis_client.zadd(rt.keys.topics, {f"shop-{i:02d}": now for i in range(30)})
    redis_client.zadd(rt.keys.topics, {f"other-{i:02d}": now for i in range(30)})
    html = http.get("/dashboard/?q=shop&sort=topic&order=desc&size=25").get_data(as_text=True)
    assert shown_order(html) == [f"shop-{i:02d}" for i in range(29, 4, -1)]
    assert "30 of 60 topics · page 1 of 2" in html
    nxt = unescape(re.search(r'<a id="next" href="([^"]+)"', html).group(1))
    assert nxt == "/dashboard/?q=shop&sort=topic&order=desc&size=25&page=2"
    html = http.get(nxt).get_data(as_text=True)
    assert shown_order(html) == [f"shop-{i:02d}" for i in range(4, -1, -1)]
    assert unescape(re.search(r'<a id="prev" href="([^"]+)"', html).group(1)) == \
        "/dashboard/?q=shop&sort=topic&order=desc&size=25&page=1"
    # The filter form keeps the sort; the fragment the page refreshes with keeps everything.
    assert '<input type="hidden" name="sort" value="topic">' in html
    assert shown_order(http.get(nxt + "&fragment=1").get_data(as_text=True)) == \
        shown_order(html)
    empty = http.get("/dashboard/?q=nothing-like-it").get_data(as_text=True)
    assert shown_order(empty) == [] and "No topic name holds “nothing-like-it”." in empty


@pytest.mark.parametrize("query, rule", [
    ("sort=colour", "sort: must be one of topic, backlog, waiting, ready, consuming, blocked, "
                    "dead, sendRate, deliveryRate, lagP50, lagP99, got 'colour'"),
    ("order=up", "order: must be one of asc, desc, got 'up'"),
    ("q=" + "x" * 300, "q: must be at most 256 characters (a topic name's), got 300"),
])
def test_a_bad_sort_order_or_filter_names_itself_and_its_rule(http, query, rule):
    assert http.get(f"/dashboard/?{query}").get_json() == {"code": 400, "msg": rule}


def test_the_sort_columns_and_spans_are_the_documented_ones():
    from delayqueue.http.console.fleet_view import SORTS, SPANS
    from delayqueue.http.endpoints import CONSOLE_SORTS, CONSOLE_SPANS
    assert SORTS == CONSOLE_SORTS and tuple(SPANS) == CONSOLE_SPANS


def test_an_unknown_topic_page_is_a_404_with_a_link_back_and_creates_nothing(http, redis_client):
    before = sorted(redis_client.keys("*"))
    answer = http.get("/dashboard/topic?topic=doesnotexist")
    html = answer.get_data(as_text=True)
    assert answer.status_code == 404
    assert "topic: no topic 'doesnotexist'" in html
    assert '<a id="back" href="/dashboard/?q=doesnotexist">' in html
    assert sorted(redis_client.keys("*")) == before
    assert http.post(Q + "getTopicConfig", data={"topic": "doesnotexist"}
                     ).get_json()["source"]["maxRetry"] == "server"


def test_the_test_message_form_sends_and_says_the_msg_id(http):
    send(http, "publishing", 1)
    answer = http.post("/dashboard/topic/publish", headers=SAME_ORIGIN,
                       data={"topic": "publishing", "msg": "hello <b>", "delayMillis": "60000"})
    done, error = flash(http, answer)
    assert error is None and done.startswith("sent: msgId ")
    msg_id = done.removeprefix("sent: msgId ")
    got = http.get(Q + "getMsg", query_string={"topic": "publishing", "msgId": msg_id}
                   ).get_json()["delayMsg"]
    assert got["msg"] == "hello <b>" and got["triggerTime"] - got["produceTime"] == 60_000
    # Refused like sendMsg, shown on the page; cross-site refused before anything is sent.
    assert flash(http, http.post("/dashboard/topic/publish", headers=SAME_ORIGIN, data={
        "topic": "publishing", "msg": "x", "delayMillis": "soon"}))[1].startswith("delayMillis")
    for headers in ({"Sec-Fetch-Site": "cross-site"}, {}):
        assert http.post("/dashboard/topic/publish", headers=headers,
                         data={"topic": "publishing", "msg": "x"}).status_code == 403
    assert topic_info(http, "publishing")["waitingQueueSize"] == 1
    assert http.get("/dashboard/topic/publish?topic=publishing&msg=x").status_code == 405


def test_every_purge_asks_first_and_no_page_needs_inline_script_or_style(http):
    make_dead(http, "confirming", "dead-a")
    make_dead(http, "confirming", "dead-b")
    html = http.get("/dashboard/topic?topic=confirming").get_data(as_text=True)
    purges = re.findall(r'<form method="post" action="/dashboard/topic/purge"[^>]*>', html)
    assert len(purges) == 3                      # Purge all and one per dead letter
    assert all("data-confirm=" in form for form in purges), purges
    assert 'data-confirm="Purge dead letter dead-a of topic confirming?' in html
    pages = [html, http.get("/dashboard/").get_data(as_text=True),
             http.get("/dashboard/nodes").get_data(as_text=True),
             http.get("/dashboard/message?topic=confirming&msgId=dead-a").get_data(as_text=True),
             http.get("/dashboard/topic?topic=gone").get_data(as_text=True)]
    for page in pages:
        assert not re.search(r"<script(?! src=)|<style|\sstyle=|\son[a-z]+=", page)


def node_cells(html: str, node: str) -> dict[str, str]:
    """data-field -> text (tags stripped) of the nodes table's row of ``node``."""
    row = re.search(rf'<tr data-node="{re.escape(node)}">(.*?)</tr>', html, re.DOTALL)
    assert row, f"no row for node {node}"
    return {name: unescape(re.sub(r"<[^>]+>", "", text)).strip() for name, text in
            re.findall(r'data-field="(\w+)"[^>]*>(.*?)</td>', row.group(1), re.DOTALL)}


def test_nodes_page_shows_the_registry_and_redis(app, http, redis_client):
    from delayqueue import __version__
    from delayqueue.background.node_registry import LOST_AFTER_MS, ProcessBeat
    rt = app.extensions["delayqueue"]
    rt.nodes.tick()                               # this process's heartbeat
    now = rt.clock.now_ms()
    gone = ProcessBeat("gone-host:8080", 7, "0.0.9", now - 3_600_000, now - LOST_AFTER_MS - 5000,
                       4)
    redis_client.hset(rt.keys.nodes, gone.field, gone.to_json())
    html = http.get("/dashboard/nodes").get_data(as_text=True)
    mine = node_cells(html, rt.node_id)
    assert mine["state"] == "up"
    assert mine["version"] == __version__ and mine["processes"] == "1"
    assert mine["heldLongPolls"] == "0" and mine["uptime"].endswith("ms")
    lost = node_cells(html, "gone-host:8080")
    assert lost["version"] == "0.0.9" and lost["heldLongPolls"] == "0"   # lost: not counted
    assert lost["uptime"] == "1 h" and lost["processes"] == "0 of 1"
    assert lost["state"] == "lost"
    info = redis_client.info()
    redis_cells = dict(re.findall(r'<dd data-field="(\w+)"[^>]*>([^<]*)</dd>', html))
    assert redis_cells["health"] == "ok"
    assert redis_cells["version"] == info["redis_version"]
    assert redis_cells["role"] == info["role"] == "master"
    assert redis_cells["usedMemory"].endswith(("K", "M", "B"))
    assert redis_cells["maxmemory"].startswith(("no limit", info.get("maxmemory_human", "-")))


def test_nodes_page_says_redis_is_unreachable_instead_of_failing(redis_url):
    app = create_app(overrides={"redis_url": "redis://127.0.0.1:1/0", "snapshot_dir": "",
                                "redis_connect_timeout_millis": 200})
    answer = app.test_client().get("/dashboard/nodes")
    html = answer.get_data(as_text=True)
    assert answer.status_code == 200
    assert re.search(r'<dd data-field="health" class="lost">unreachable: [^<]+</dd>', html)
    assert 'id="nodes-error"' in html


def failures_point(html: str) -> str:
    """The hover text of the failures chart's last point."""
    return chart_points(html, "Failures")[-1]


def chart_points(html: str, label: str) -> list[str]:
    """The hover texts of the points of the chart ``label`` names, oldest first."""
    chart = re.search(rf'<svg class="chart" role="img" aria-label="{label}".*?</svg>', html,
                      re.DOTALL).group(0)
    return [unescape(t) for t in re.findall(r"<title>([^<]*)</title></rect>", chart)]


def test_charts_show_debounced_sends_schedule_occurrences_and_misses_and_the_backlog_counts_them(
        manual):
    """replaced, deduplicated, scheduleSent and scheduleMissed on the topic page: occurrences
    per second in the throughput, the others per point; and the estimated backlog walks back
    through them: a replace adds no message, an occurrence and a redrive add one, a purge
    takes one (counters as other helpers' code records them, through Monitor.incr)."""
    app, clock = manual
    http, rt = app.test_client(), app.extensions["delayqueue"]
    clock.advance(67_000)                        # 12 s into the interval after INTERVAL_START
    send(http, "cron", 6)                        # the backlog now: 6 live messages
    rt.monitor.incr("cron", "replaced", 2)       # 2 of those 6 sends replaced a namesake
    rt.monitor.incr("cron", "deduplicated", 3)
    rt.monitor.incr("cron", "scheduleSent", 4)
    rt.monitor.incr("cron", "scheduleMissed", 5)
    rt.monitor.incr("cron", "purged", 1)
    rt.monitor.flush()
    html = http.get("/dashboard/topic?topic=cron").get_data(as_text=True)
    assert html.count('<svg class="chart"') == 5
    assert "Debounced sends and missed fire times (per 1 min)" in html
    assert chart_points(html, "Debounce")[-1].endswith(
        "UTC (so far): replaced 2 · deduplicated 3 · missed fire times 5")
    assert chart_points(html, "Debounce")[-2].endswith(": replaced 0 · deduplicated 0 · "
                                                       "missed fire times 0")
    throughput = chart_points(html, "Throughput")[-1]
    assert throughput.endswith(f"(so far): sent/s {rate(6 / 12)} · scheduled/s {rate(4 / 12)} "
                               f"· delivered/s 0 · acked/s 0"), throughput
    assert chart_points(html, "Backlog")[-1].endswith("(so far): backlog 6")

    # The walk back, on counters alone: from 20 now, the current interval added
    # 4 sends - 2 replaces + 3 occurrences + 1 redrive - 1 ack - 2 purged = 3 (a walk blind to
    # replaces, occurrences and purges would say 4 + 1 - 1 = 4: 16), the one before 5 (a
    # deduplicated re-send adds nothing; a missed fire time is no message).
    for counter, n in (("sendMsg", 4), ("replaced", 2), ("scheduleSent", 3), ("redriven", 1),
                       ("ackMsg", 1), ("purged", 2), ("scheduleMissed", 9)):
        rt.monitor.incr("walk", counter, n)
    clock.advance(-60_000)                       # the interval before
    rt.monitor.incr("walk", "sendMsg", 5)
    rt.monitor.incr("walk", "deduplicated", 1)
    clock.advance(60_000)
    rt.monitor.flush()
    history = FleetView(rt.queue, rt.monitor).topic_history("walk", 20, 300_000)
    assert history.backlog[-3:] == [12, 17, 20]




@pytest.mark.parametrize("history", ["hour", "day"])
def test_charts_cover_the_span_asked_with_units_and_hover_values(history, request):
    app, clock = request.getfixturevalue("manual" if history == "hour" else "manual_day")
    http, rt = app.test_client(), app.extensions["delayqueue"]
    clock.advance(67_000)
    make_dead(http, "charted", "poison")         # a nack that dead-letters it
    http.post(Q + "setTopicConfig", data={"topic": "charted", "maxRetry": 5})
    send(http, "charted", 1)
    http.post(Q + "pullMsg", data={"topic": "charted", "ackTimeoutMillis": 1000})
    clock.advance(2_000)
    rt.scheduler.tick()                          # its ack timeout
    rt.monitor.flush()
    html = http.get("/dashboard/topic?topic=charted").get_data(as_text=True)
    assert html.count('<svg class="chart"') == 5
    assert '<a href="/dashboard/topic?topic=charted&amp;span=1h#charts" data-span="1h" ' \
           'aria-current="true">1h</a>' in html
    for unit in ("messages/s", "messages per 1 min", "lag", "messages", "time (UTC)"):
        assert f">{unit}</text>" in html, unit
    assert len(re.findall(r'<rect class="hit"', html)) == 5 * 60      # an hour of 60 s points
    assert '<h2 id="charts">Last hour</h2>' in html
    assert failures_point(html).endswith(
        "UTC (so far): nacked 1 · ack timeouts 1 · dead-lettered 1")
    spans = {}
    for span in ("5m", "6h", "24h"):
        page = http.get(f"/dashboard/topic?topic=charted&span={span}").get_data(as_text=True)
        spans[span] = len(re.findall(r'<rect class="hit"', page)) // 5
        assert failures_point(page).endswith("nacked 1 · ack timeouts 1 · dead-lettered 1")
    if history == "hour":      # the default monitor-history-minutes: the page says so
        assert spans == {"5m": 5, "6h": 60, "24h": 60} and 'id="span-cut"' in page
        assert re.search(r'<h2 id="charts">Last 1 h\b', page)
    else:
        assert spans == {"5m": 5, "6h": 180, "24h": 240}     # 6 h: 2 min points; 24 h: 6 min
        assert '<h2 id="charts">Last 24 hours</h2>' in page and "span-cut" not in page
    assert http.get("/dashboard/topic?topic=charted&span=2d").get_json() == {
        "code": 400, "msg": "span: must be one of 5m, 1h, 6h, 24h, got '2d'"}


@pytest.mark.parametrize("ms, text", [
    (0, "0 ms"), (0.5, "0.5 ms"), (120.4, "120 ms"), (999, "999 ms"), (4200, "4.2 s"),
    (6000, "6 s"), (41_156, "41 s"),
    (180_000, "3 min"), (185_000, "3 min 5 s"), (7_500_000, "2 h 5 min"), (None, ""),
])
def test_durations_read_as_an_operator_says_them(ms, text):
    from delayqueue.http.console.filters import duration
    assert duration(ms) == text


def test_counts_are_whole_numbers():
    from delayqueue.http.console.filters import count
    assert [count(41156), count(10), count(3.0), count(None)] == ["41,156", "10", "3", ""]


def test_a_span_longer_than_the_intervals_a_chart_reads_says_what_it_covers(http):
    send(http, "short-intervals", 1)             # 1 s intervals: 24 h would be 86,400 of them
    html = http.get("/dashboard/topic?topic=short-intervals&span=24h").get_data(as_text=True)
    assert '<h2 id="charts">Last 24 min</h2>' in html
    assert re.search(r'<span id="span-cut">The charts read at most 1,440 monitoring intervals '
                     r'and none older than Redis keeps them \(1 h\): at 1 s intervals they '
                     r'cover 24 min\.</span>', html)
    assert len(re.findall(r'<rect class="hit"', html)) == 5 * 240        # 6 s a point
