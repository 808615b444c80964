"""Push delivery in the console, in-process (the real app and Lua scripts on a real
redis-server; no delivery loop runs in-process, so what the pages show is set up through
the core): a push subscription is listed with a "push" badge and its URL, HTML-escaped; its
page (the topic page for the default) has a push panel with its settings, its in-flight
deliveries fleet-wide (the push-mode pull's consuming messages) and its last failures, a
pull subscription none; the push form sets the URL, timeout and concurrency, takes the
secret write-only (never on a page, never in the audit line) and forgets it; an emptied URL
stops pushing; a refused URL is said on the page; a cross-site post is refused.

The browser side, with a real node pushing to a local receiver:
tests/http/test_console_push_browser.py.
"""

from __future__ import annotations

import json
import logging
import re
from html import unescape
from urllib.parse import parse_qs

import pytest

from delayqueue.http.app import create_app
from delayqueue.http.audit import AUDIT_LOGGER
from delayqueue.http.console.filters import iso

Q = "/camellia/delayQueue/"
SAME_ORIGIN = {"Sec-Fetch-Site": "same-origin"}
SETTINGS = "/dashboard/topic/settings"
RECEIVER = "http://127.0.0.1:9/hook"            # allowed; never called (no loop runs here)
ODD_URL = 'http://127.0.0.1:9/h?a=<b>x</b>&c="d"'
SECRET = "s3cr3t-never-shown"


@pytest.fixture
def app(redis_url):
    return create_app(overrides={"redis_url": redis_url, "snapshot_dir": "",
                                 "push_allowed_networks": "127.0.0.0/8"})


@pytest.fixture
def http(app):
    return app.test_client()


@pytest.fixture
def rt(app):
    return app.extensions["delayqueue"]


@pytest.fixture
def audit_lines(caplog):
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    return lambda: [json.loads(r.getMessage()) for r in caplog.records
                    if r.name == AUDIT_LOGGER]


def send(http, topic, msg_id):
    body = http.post(Q + "sendMsg", data={"topic": topic, "msg": f"body of {msg_id}",
                                          "msgId": msg_id}).get_json()
    assert body["code"] == 200, body


def page(http, topic, sub=None) -> str:
    query = {"topic": topic, **({"subscription": sub} if sub else {})}
    answer = http.get("/dashboard/subscription" if sub else "/dashboard/topic",
                      query_string=query)
    assert answer.status_code == 200, answer.get_data(as_text=True)[:2000]
    return answer.get_data(as_text=True)


def post(http, **form) -> dict[str, str]:
    """The push form's post: 303 back to the page, whose done or error it returns."""
    answer = http.post(SETTINGS, data=form, headers=SAME_ORIGIN)
    assert answer.status_code == 303, answer.get_data(as_text=True)[:2000]
    query = answer.headers["Location"].split("?", 1)[1]
    return {k: v[0] for k, v in parse_qs(query).items()}


def delivery(html: str) -> dict[str, str]:
    """subscription -> its list row's delivery cell (raw HTML)."""
    table = re.search(r'<table id="subscription-list".*?</table>', html, re.DOTALL).group(0)
    return {unescape(name): cell for name, cell in re.findall(
        r'<tr data-subscription="([^"]*)">.*?data-field="delivery">(.*?)</td>', table,
        re.DOTALL)}


def panel(html: str) -> dict[str, str]:
    """The push panel's fields (text), {} when the page has none."""
    found = re.search(r'<section id="push".*?</section>', html, re.DOTALL)
    if not found:
        return {}
    return {k: unescape(re.sub(r"<[^>]+>", "", v)).strip() for k, v in
            re.findall(r'data-push="(\w+)"[^>]*>(.*?)</dd>', found.group(0), re.DOTALL)}


def error_rows(html: str) -> list[dict[str, str]]:
    table = re.search(r'<table id="push-errors".*?</table>', html, re.DOTALL).group(0)
    return [{**{f: unescape(re.sub(r"<[^>]+>", "", t)).strip()
                for f, t in re.findall(r'data-field="(\w+)"[^>]*>(.*?)</td>', row, re.DOTALL)},
             "datetime": re.search(r'<time datetime="([^"]+)"', row).group(1)}
            for row in re.findall(r"<tr data-push-error=.*?</tr>", table, re.DOTALL)]


def test_a_push_subscription_is_listed_with_a_badge_and_its_url_escaped(http, rt):
    topic = "push-list"
    send(http, topic, "m0")
    rt.subscriptions.create(topic, "odd", {"pushUrl": ODD_URL})
    rt.subscriptions.create(topic, "puller", {})
    rt.subscriptions.set_config(topic, None, {"pushUrl": RECEIVER, "pushSecret": SECRET})
    html = page(http, topic)
    cells = delivery(html)
    assert set(cells) == {"default", "odd", "puller"}
    assert cells["puller"] == "pull"
    for name, url in (("default", RECEIVER), ("odd", ODD_URL)):
        assert '<span class="badge push">push</span>' in cells[name]
        assert unescape(re.sub(r"<[^>]+>", "", cells[name])).strip() == f"push {url}"
    # Escaped, in the text and in the title attribute: no tag, no attribute broken out of.
    assert "&lt;b&gt;x&lt;/b&gt;&amp;c=&#34;d&#34;" in cells["odd"]
    assert "<b>" not in html and 'c="d"' not in html
    assert SECRET not in html
    html = page(http, topic, "odd")
    assert panel(html)["pushUrl"] == ODD_URL
    assert "<b>" not in html and 'c="d"' not in html
    # The form's field holds the URL, escaped in its value.
    assert 'value="http://127.0.0.1:9/h?a=&lt;b&gt;x&lt;/b&gt;&amp;c=&#34;d&#34;"' in html


def test_the_push_panel_shows_settings_in_flight_and_last_failures(http, rt):
    topic = "push-panel"
    for i in range(3):
        send(http, topic, f"m{i}")
    rt.subscriptions.set_config(topic, None, {"pushUrl": RECEIVER, "pushTimeoutMillis": 2500,
                                              "pushConcurrency": 7})
    html = page(http, topic)
    assert panel(html) == {"pushUrl": RECEIVER, "pushTimeoutMillis": "2.5 s",
                           "pushConcurrency": "7", "pushSecretSet": "no", "paused": "no",
                           "inFlight": "0"}
    assert error_rows(html) == [] and 'id="push-no-errors"' in html
    assert "No failures." in html

    # Two handed out by the delivery loop's pull: in flight (the fleet's, from Redis).
    pulled = rt.queue.pull(topic, 2, push=True).messages
    assert len(pulled) == 2
    rt.controls.pause(topic)
    status = rt.subscriptions.push_status(topic, None)
    assert status["inFlight"] == 2
    shown = panel(page(http, topic))
    assert (shown["inFlight"], shown["paused"]) == ("2", "yes")

    # The last failures as background/push.py records them: newest first.
    key = rt.queue.topic_keys(topic).push_errors
    now = rt.clock.now_ms()
    for i, (outcome, code, error) in enumerate((
            ("5xx", 500, "HTTP 500: <boom & bust>"), ("timeout", None, "read timed out"))):
        rt.queue.client.lpush(key, json.dumps({"time": now - 60_000 + i, "msgId": f"m{i}",
                                               "outcome": outcome, "status": code,
                                               "error": error, "millis": 12.5 + i}))
    html = page(http, topic)
    rows = error_rows(html)
    assert [(r["msgId"], r["outcome"], r["status"], r["error"], r["millis"]) for r in rows] == [
        ("m1", "timeout", "", "read timed out", "13.5"),
        ("m0", "5xx", "500", "HTTP 500: <boom & bust>", "12.5")]
    assert [r["datetime"] for r in rows] == [iso(now - 60_000 + 1), iso(now - 60_000)]
    assert all(r["time"].endswith(" ago") for r in rows)
    assert "&lt;boom &amp; bust&gt;" in html and "No failures." not in html


def test_a_pull_subscription_has_no_push_panel(http, rt):
    topic = "push-none"
    send(http, topic, "m0")
    rt.subscriptions.create(topic, "puller", {})
    for html in (page(http, topic), page(http, topic, "puller")):
        assert panel(html) == {} and 'id="push"' not in html
        assert 'id="push-off"' in html and 'id="push-settings"' in html
        assert 'id="push-errors"' not in html


def test_the_push_form_sets_the_settings_and_keeps_the_secret_write_only(http, rt,
                                                                          audit_lines):
    topic = "push-form"
    send(http, topic, "m0")
    rt.subscriptions.create(topic, "hook", {"ackTimeoutMillis": 45000})
    shown = post(http, topic=topic, subscription="hook", pushUrl=RECEIVER,
                 pushTimeoutMillis="3000", pushConcurrency="", pushSecret=SECRET)
    assert shown == {"topic": topic, "subscription": "hook", "done": "push settings saved"}
    data, source = rt.subscriptions.get_config(topic, "hook")
    assert (data["pushUrl"], data["pushTimeoutMillis"], data["pushSecretSet"]) == \
        (RECEIVER, 3000, True)
    assert (source["pushTimeoutMillis"], source["pushConcurrency"]) == ("subscription", "server")
    assert data["ackTimeoutMillis"] == 45000                 # its other settings kept
    html = page(http, topic, "hook")
    assert panel(html)["pushSecretSet"] == "yes" and SECRET not in html
    assert 'id="forget-push-secret"' in html
    [line] = [x for x in audit_lines() if x["route"] == "settings"]
    assert line["params"] == {"subscription": "hook", "pushUrl": RECEIVER,
                              "pushTimeoutMillis": "3000", "pushSecret": "(set)"}
    assert SECRET not in json.dumps(audit_lines())

    # Posted as shown (the URL unchanged, the password field empty): nothing changes.
    shown = post(http, topic=topic, subscription="hook", pushUrl=RECEIVER,
                 pushTimeoutMillis="", pushConcurrency="", pushSecret="")
    assert shown["done"] == "push settings unchanged"
    assert rt.subscriptions.get_config(topic, "hook")[0]["pushSecretSet"] is True

    # Forget the secret: its own form, pushSecret empty and no pushUrl.
    assert post(http, topic=topic, subscription="hook", pushSecret="")["done"] == \
        "push secret forgotten: pushes are unsigned"
    assert rt.subscriptions.get_config(topic, "hook")[0]["pushSecretSet"] is False
    assert 'id="forget-push-secret"' not in page(http, topic, "hook")

    # An emptied URL stops pushing: a pull subscription again.
    assert post(http, topic=topic, subscription="hook", pushUrl="")["done"].startswith(
        "push settings saved: push stopped")
    assert rt.subscriptions.push_status(topic, "hook")["pushUrl"] is None
    assert panel(page(http, topic, "hook")) == {}


def test_the_default_subscriptions_push_form_leaves_the_topic_settings_alone(http, rt):
    topic = "push-default"
    http.post(Q + "setTopicConfig", data={"topic": topic, "maxRetry": 3})
    shown = post(http, topic=topic, pushUrl=RECEIVER, pushConcurrency="5", pushSecret="")
    assert shown == {"topic": topic, "done": "push settings saved"}
    status = rt.subscriptions.push_status(topic, None)
    assert (status["pushUrl"], status["pushConcurrency"], status["pushSecretSet"]) == \
        (RECEIVER, 5, False)
    data, source = rt.admin.get_config(topic)
    assert (data["maxRetry"], source["maxRetry"]) == (3, "topic")
    # Registered for the delivery loops (and they were nudged: the runtime's Subscriptions).
    assert f"{topic}\ndefault" in rt.queue.client.smembers(rt.queue.keys.push_subscriptions)


def test_a_refused_push_url_is_said_on_the_page_and_nothing_is_written(http, rt):
    topic = "push-refused"
    send(http, topic, "m0")
    rt.subscriptions.create(topic, "hook", {})
    for url, reason in (("http://10.1.2.3/x", "outside push-allowed-networks"),
                        ("ftp://127.0.0.1/x", "must be an http:// or https:// URL"),
                        ("http://u:p@127.0.0.1/x", "must not carry a user or password")):
        shown = post(http, topic=topic, subscription="hook", pushUrl=url)
        assert shown["subscription"] == "hook" and "done" not in shown
        assert shown["error"].startswith("pushUrl: ") and reason in shown["error"], shown
    shown = post(http, topic=topic, subscription="hook", pushUrl=RECEIVER,
                 pushConcurrency="0")
    assert shown["error"].startswith("pushConcurrency: "), shown
    assert rt.subscriptions.push_status(topic, "hook")["pushUrl"] is None
    # An unknown subscription: said on the topic page.
    shown = post(http, topic=topic, subscription="nope", pushUrl=RECEIVER)
    assert "subscription" not in shown and "nope" in shown["error"]


def test_a_cross_site_push_form_is_refused(http, rt):
    topic = "push-csrf"
    send(http, topic, "m0")
    for headers in ({"Sec-Fetch-Site": "cross-site"}, {"Origin": "http://evil.example"}, {}):
        answer = http.post(SETTINGS, data={"topic": topic, "pushUrl": RECEIVER},
                           headers=headers)
        assert answer.status_code == 403
    assert rt.subscriptions.push_status(topic, None)["pushUrl"] is None
