"""Subscriptions in the console, in-process (the real app and Lua scripts on a real
redis-server): the topic page lists them with their sizes as listSubscriptions answers
them; a subscription's page shows its own sizes, messages and dead letters (not the
topic's, not another subscription's), sets its settings with their source, pauses it,
redrives its dead letters; it is created and deleted from the console; an unknown or bad
name is a 404 page or a 400 naming ``subscription``; a cross-site write is refused.

The subscriptions themselves are made through the core (core/subscriptions.py), so these
tests read the console and nothing else of the HTTP API's subscription routes.

The browser side is tests/http/test_console_subscriptions_browser.py.
"""

from __future__ import annotations

import re
from html import unescape
from urllib.parse import parse_qs, urlsplit

import pytest

from delayqueue.core.subscriptions import Subscriptions
from delayqueue.http.app import create_app

Q = "/camellia/delayQueue/"
SAME_ORIGIN = {"Sec-Fetch-Site": "same-origin"}
SIZES = ("waitingQueueSize", "readyQueueSize", "ackQueueSize", "groupBlockedSize",
         "deadQueueSize")


@pytest.fixture
def app(redis_url):
    return create_app(overrides={"redis_url": redis_url, "snapshot_dir": "",
                                 "monitor_interval_seconds": 1})


@pytest.fixture
def http(app):
    return app.test_client()


@pytest.fixture
def rt(app):
    return app.extensions["delayqueue"]


@pytest.fixture
def subs(rt):
    return Subscriptions(rt.queue)


def send(http, topic, msg_id, **extra):
    body = http.post(Q + "sendMsg", data={"topic": topic, "msg": f"body of {msg_id}",
                                          "msgId": msg_id, **extra}).get_json()
    assert body["code"] == 200, body


def kill(rt, topic, sub, msg_id, *, acked=()):
    """Deliver ``sub``'s next messages: ack ``acked``, then nack ``msg_id`` with no retry
    left (maxRetry 0): its dead letter in ``sub`` (None: the default subscription)."""
    pulled = rt.queue.pull(topic, len(acked) + 1, subscription=sub).messages
    assert [m.msg_id for m in pulled] == [*acked, msg_id]
    for m in pulled[:-1]:
        rt.queue.ack(topic, m.msg_id, m.receipt, subscription=sub)
    rt.queue.nack(topic, msg_id, pulled[-1].receipt, subscription=sub)
    assert rt.queue.get(topic, msg_id, subscription=sub).status == 6


def rows(html: str, table: str, key: str) -> dict[str, dict[str, str]]:
    """``key`` attribute -> {data-field: cell text} of table ``table``, in page order."""
    found = re.search(rf'<table id="{table}".*?</table>', html, re.DOTALL)
    assert found, f"no table {table}"
    return {unescape(name): {f: unescape(re.sub(r"<[^>]+>", "", text)).strip()
                             for f, text in re.findall(r'data-field="(\w+)">(.*?)</td>',
                                                       body, re.DOTALL)}
            for name, body in re.findall(rf'<tr {key}="([^"]*)">(.*?)</tr>', found.group(0),
                                         re.DOTALL)}


def sizes(html: str) -> dict[str, int]:
    row = re.search(r"<tr data-sizes>(.*?)</tr>", html, re.DOTALL).group(1)
    return {f: int(v.replace(",", "")) for f, v in
            re.findall(r'data-field="(\w+)">([^<]*)<', row)}


def page(http, topic, sub=None, **args) -> str:
    query = {"topic": topic, **({"subscription": sub} if sub else {}), **args}
    path = "/dashboard/subscription" if sub else "/dashboard/topic"
    answer = http.get(path, query_string=query)
    assert answer.status_code == 200, answer.get_data(as_text=True)[:2000]
    return answer.get_data(as_text=True)


def post(http, path, **form):
    answer = http.post(path, data=form, headers=SAME_ORIGIN)
    assert answer.status_code == 303, answer.get_data(as_text=True)[:2000]
    where = urlsplit(answer.headers["Location"])
    return where.path, {k: v[0] for k, v in parse_qs(where.query).items()}


def test_the_topic_page_lists_its_subscriptions_default_first_with_their_sizes(http, rt,
                                                                                 subs):
    topic = "orders"
    http.post(Q + "setTopicConfig", data={"topic": topic, "maxRetry": 0})
    send(http, topic, "before")                 # the default's only: sent before both
    subs.create(topic, "billing", {})
    subs.create(topic, "audit", {"maxRetry": 0})
    for i in range(3):
        send(http, topic, f"m{i}")
    send(http, topic, "later", delayMillis=600_000)
    rt.queue.pull(topic, 2, subscription="billing")         # billing: 2 consuming, 1 ready
    kill(rt, topic, "audit", "m0")                           # audit: 1 dead, 2 ready
    rt.controls.pause(topic, subscription="audit")

    html = page(http, topic)
    shown = rows(html, "subscription-list", "data-subscription")
    listed = subs.list(topic)
    assert list(shown) == [s["subscription"] for s in listed]          # the core's order
    assert list(shown)[0] == "default" and set(shown) == {"default", "audit", "billing"}
    for entry in listed:
        row = shown[entry["subscription"]]
        for field in SIZES:
            assert int(row[field]) == entry[field], (entry["subscription"], field)
        assert row["state"] == ("paused" if entry["paused"] else "active")
    assert [shown["billing"][f] for f in ("readyQueueSize", "ackQueueSize")] == ["1", "2"]
    assert [shown["audit"][f] for f in ("readyQueueSize", "deadQueueSize", "state")] == \
        ["2", "1", "paused"]
    assert [shown["default"][f] for f in ("readyQueueSize", "deadQueueSize")] == ["4", "0"]
    assert "<h2 id=\"subscriptions\">Subscriptions (3)</h2>" in html
    # Each named one links to its page; the default's page is this one.
    links = dict(re.findall(r'<a href="(/dashboard/subscription\?[^"]+)">([^<]+)</a>', html))
    assert sorted(links.values()) == ["audit", "billing"]
    for href, name in links.items():
        assert parse_qs(urlsplit(unescape(href)).query) == {"topic": [topic],
                                                             "subscription": [name]}


def test_a_subscription_page_shows_its_own_queue_and_dead_letters_only(http, rt, subs):
    topic = "payments"
    http.post(Q + "setTopicConfig", data={"topic": topic, "maxRetry": 0})
    subs.create(topic, "audit", {"maxRetry": 0})
    subs.create(topic, "billing", {"maxRetry": 0})
    for msg_id in ("first", "second", "third"):
        send(http, topic, msg_id)
    # Each subscription's own dead letter: a different message in each.
    kill(rt, topic, "audit", "first")
    kill(rt, topic, "billing", "second", acked=["first"])
    kill(rt, topic, None, "third", acked=["first", "second"])

    html = page(http, topic, "audit")
    assert re.search(r'<span id="subscription-name">audit</span>', html)
    dead = rows(html, "dead", "data-msg-id")
    assert list(dead) == ["first"]                   # not billing's, not the default's
    info = next(s for s in subs.list(topic) if s["subscription"] == "audit")
    assert sizes(html) == {"backlog": info["waitingQueueSize"] + info["readyQueueSize"]
                           + info["ackQueueSize"] + info["groupBlockedSize"],
                           **{f: info[f] for f in SIZES}}
    assert sizes(html)["deadQueueSize"] == 1 and sizes(html)["readyQueueSize"] == 2
    # Its messages are its own: the ready tab lists what audit has ready.
    ready = rows(page(http, topic, "audit", view="ready"), "message-list", "data-msg-id")
    assert list(ready) == ["second", "third"]
    # Its dead letter's links and forms carry the subscription.
    block = re.search(r'<tr data-msg-id="first">.*?</tr>', html, re.DOTALL).group(0)
    assert block.count('<input type="hidden" name="subscription" value="audit">') == 2
    assert "subscription=audit" in unescape(re.search(r'href="([^"]+)"', block).group(1))
    # The topic page's dead letters are the default subscription's.
    assert list(rows(page(http, topic), "dead", "data-msg-id")) == ["third"]
    assert list(rows(page(http, topic, "billing"), "dead", "data-msg-id")) == ["second"]

    # Redrive from audit's page: audit's dead letter is ready again there, billing's stays.
    where, query = post(http, "/dashboard/topic/redrive", topic=topic, subscription="audit",
                        msgId="first")
    assert (where, query) == ("/dashboard/subscription",
                              {"topic": topic, "subscription": "audit",
                               "done": "redriven: 1"})
    assert rt.queue.get(topic, "first", subscription="audit").status == 2
    assert rt.queue.get(topic, "second", subscription="billing").status == 6
    assert rt.queue.get(topic, "third").status == 6
    # Purge all from billing's page: billing's only.
    assert post(http, "/dashboard/topic/purge", topic=topic, subscription="billing")[1][
        "done"] == "purged: 1"
    assert rows(page(http, topic, "billing"), "dead", "data-msg-id") == {}
    assert list(rows(page(http, topic), "dead", "data-msg-id")) == ["third"]


def test_the_settings_form_sets_a_subscription_value_with_source_subscription(http, subs):
    topic = "settle"
    send(http, topic, "m")
    subs.create(topic, "audit", {})
    http.post(Q + "setTopicConfig", data={"topic": topic, "maxRetry": 5})
    html = page(http, topic, "audit")
    assert re.search(r'data-source="maxRetry">topic<', html)
    assert re.search(r'data-source="ackTimeoutMillis">server<', html)
    assert 'name="description"' not in html           # a topic's setting, not a subscription's

    where, query = post(http, "/dashboard/topic/settings", topic=topic, subscription="audit",
                        ackTimeoutMillis="45000", maxRetry="")
    assert (where, query["done"]) == ("/dashboard/subscription", "settings saved")
    values, source = subs.get_config(topic, "audit")
    assert (values["ackTimeoutMillis"], source["ackTimeoutMillis"]) == (45000, "subscription")
    assert (values["maxRetry"], source["maxRetry"]) == (5, "topic")         # left unchanged
    html = page(http, topic, "audit")
    assert re.search(r'data-setting="ackTimeoutMillis">45000<', html)
    assert re.search(r'data-source="ackTimeoutMillis">subscription<', html)
    # The topic's own settings are untouched.
    topic_config = http.get(Q + "getTopicConfig", query_string={"topic": topic}).get_json()
    assert topic_config["source"]["ackTimeoutMillis"] == "server"
    # A bad value is refused naming the setting; reset drops the subscription's own values.
    bad = http.post("/dashboard/topic/settings", headers=SAME_ORIGIN,
                    data={"topic": topic, "subscription": "audit", "ackTimeoutMillis": "-1"})
    assert bad.get_json()["code"] == 400 and "ackTimeoutMillis" in bad.get_json()["msg"]
    post(http, "/dashboard/topic/settings", topic=topic, subscription="audit", reset="true")
    assert subs.get_config(topic, "audit")[1]["ackTimeoutMillis"] == "server"


def test_pause_and_resume_a_subscription_from_its_page(http, rt, subs):
    topic = "held"
    http.post(Q + "setTopicConfig", data={"topic": topic, "maxRetry": 1})
    subs.create(topic, "audit", {})
    send(http, topic, "m")
    assert post(http, "/dashboard/topic/pause", topic=topic, subscription="audit")[1] == \
        {"topic": topic, "subscription": "audit",
         "done": "paused: nothing is handed out until resumed"}
    html = page(http, topic, "audit")
    assert 'id="paused"' in html and 'id="resume"' in html
    assert rt.queue.pull(topic, 1, subscription="audit").messages == []
    assert [m.msg_id for m in rt.queue.pull(topic, 1).messages] == ["m"]   # default goes on
    assert 'id="paused"' not in page(http, topic)
    assert post(http, "/dashboard/topic/resume", topic=topic, subscription="audit")[1][
        "done"] == "resumed"
    assert [m.msg_id for m in rt.queue.pull(topic, 1, subscription="audit").messages] == ["m"]


def test_create_and_delete_a_subscription_from_the_console(http, subs):
    topic = "fresh"
    send(http, topic, "m")
    assert 'id="create-subscription"' in page(http, topic)
    where, query = post(http, "/dashboard/subscription/create", topic=topic,
                        subscription="audit")
    assert (where, query["subscription"]) == ("/dashboard/subscription", "audit")
    assert query["done"].startswith("created")
    assert subs.names(topic) == ["audit"]
    assert post(http, "/dashboard/subscription/create", topic=topic, subscription="audit"
                )[1]["done"] == "already exists: nothing changed"
    # Refused names: said on the topic page, naming the parameter; nothing created.
    for bad in ("default", "no spaces", "x" * 65):
        where, query = post(http, "/dashboard/subscription/create", topic=topic,
                            subscription=bad)
        assert where == "/dashboard/topic" and query["error"].startswith("subscription:"), \
            (bad, query)
    assert subs.names(topic) == ["audit"]
    page(http, topic, "audit")
    where, query = post(http, "/dashboard/subscription/delete", topic=topic,
                        subscription="audit")
    assert (where, query["done"]) == ("/dashboard/topic", "deleted subscription audit")
    assert subs.names(topic) == []
    # Deleting it again: 404 said on the topic page.
    where, query = post(http, "/dashboard/subscription/delete", topic=topic,
                        subscription="audit")
    assert where == "/dashboard/topic" and query["error"].startswith("subscription:")


def test_unknown_and_bad_subscriptions_answer_404_or_400_naming_the_parameter(http, subs):
    send(http, "t", "m")
    gone = http.get("/dashboard/subscription?topic=t&subscription=nope")
    assert gone.status_code == 404
    assert 'id="unknown-subscription"' in gone.get_data(as_text=True)
    assert http.get("/dashboard/subscription?topic=never-sent&subscription=a"
                    ).status_code == 404
    for query, start in (("topic=t", "subscription: required"),
                         ("topic=t&subscription=default", "subscription:"),
                         ("topic=t&subscription=a%20b", "subscription:")):
        body = http.get("/dashboard/subscription?" + query).get_json()
        assert body["code"] == 400 and body["msg"].startswith(start), (query, body)
    # A form for an unknown subscription is refused on the topic page.
    where, query = post(http, "/dashboard/topic/pause", topic="t", subscription="nope")
    assert where == "/dashboard/topic" and query["error"].startswith("subscription:")
    # A cross-site post is refused before it acts.
    subs.create("t", "audit", {})
    refused = http.post("/dashboard/subscription/delete",
                        data={"topic": "t", "subscription": "audit"},
                        headers={"Sec-Fetch-Site": "cross-site"})
    assert refused.status_code == 403 and subs.names("t") == ["audit"]


def test_the_message_page_shows_each_subscription_and_one_subscription_s_view(http, rt,
                                                                            subs):
    topic = "looked-up"
    http.post(Q + "setTopicConfig", data={"topic": topic, "maxRetry": 1})
    subs.create(topic, "audit", {})
    send(http, topic, "m")
    rt.queue.pull(topic, 1, subscription="audit")
    html = http.get(f"/dashboard/message?topic={topic}&msgId=m").get_data(as_text=True)
    listed = re.search(r'<li data-subscription="audit">(.*?)</li>', html, re.DOTALL)
    assert listed and "3 (consuming)" in listed.group(1)
    html = http.get(f"/dashboard/message?topic={topic}&msgId=m&subscription=audit"
                    ).get_data(as_text=True)
    assert re.search(r'data-field="status">3 \(consuming\)<', html)
    html = http.get(f"/dashboard/message?topic={topic}&msgId=m").get_data(as_text=True)
    assert re.search(r'data-field="status">2 \(ready\)<', html)            # the default's


def test_a_hostile_topic_name_is_escaped_on_the_subscription_page(http, subs):
    hostile = '<b>"x"</b>'
    send(http, hostile, "m")
    subs.create(hostile, "audit", {})
    html = page(http, hostile, "audit")
    assert hostile not in html and "&lt;b&gt;" in html


def test_a_subscription_beyond_the_topic_s_limit_is_refused_on_the_topic_page(redis_url):
    app = create_app(overrides={"redis_url": redis_url, "snapshot_dir": "",
                                "max_subscriptions_per_topic": 1})
    http, subs = app.test_client(), Subscriptions(app.extensions["delayqueue"].queue)
    send(http, "small", "m")
    post(http, "/dashboard/subscription/create", topic="small", subscription="one")
    where, query = post(http, "/dashboard/subscription/create", topic="small",
                        subscription="two")
    assert where == "/dashboard/topic" and "error" in query, query
    assert subs.names("small") == ["one"]
