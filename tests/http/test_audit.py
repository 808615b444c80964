"""The audit trail (delayqueue/http/audit.py): each audited route, through the API or the
console, logs exactly one JSON line on ``delayqueue.audit`` with who, what, outcome and
when; the data path logs none; a message body or a token's secret never appears; the token's
name does when authentication is on; the count reaches a real node's /metrics, and the line
its stderr at log-level warning.

In-process against a real redis-server (the app and its Lua scripts), except the last test,
which runs a real gunicorn node.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import datetime, timedelta, timezone

import pytest
import requests

from delayqueue.core.monitor import Monitor
from delayqueue.http.app import create_app
from delayqueue.http.audit import AUDIT_LOGGER, AUDITED
from delayqueue.http.endpoints import BY_NAME

from support import wait_until
from support.node import ServerProcess

Q = "/camellia/delayQueue/"
SAME_ORIGIN = {"Sec-Fetch-Site": "same-origin"}
BODY = "the-message-body-never-logged"
SECRET = "a-push-secret-never-logged"
ISO_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


@pytest.fixture
def app(redis_url):
    return create_app(overrides={"redis_url": redis_url, "snapshot_dir": ""})


@pytest.fixture
def http(app):
    return app.test_client()


@pytest.fixture
def lines(caplog):
    """The audit lines logged since the last call, parsed."""
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)

    def taken() -> list[dict]:
        records = [r for r in caplog.records if r.name == AUDIT_LOGGER]
        caplog.clear()
        return [json.loads(r.getMessage()) for r in records]
    return taken


def send(http, topic, msg_id, **extra):
    body = http.post(Q + "sendMsg", data={"topic": topic, "msg": BODY, "msgId": msg_id,
                                          **extra}).get_json()
    assert body["code"] == 200, body


def make_dead(http, topic, msg_id):
    http.post(Q + "setTopicConfig", data={"topic": topic, "maxRetry": 0})
    send(http, topic, msg_id)
    assert http.post(Q + "pullMsg", data={"topic": topic}).get_json()["delayMsgList"]
    assert http.post(Q + "ackMsg", data={"topic": topic, "msgId": msg_id,
                                         "ack": "false"}).get_json()["code"] == 200


# route -> (method, path, form or JSON body, headers, the line's expected what and outcome)
def cases():
    api = {
        "setTopicConfig": ({"topic": "t", "maxRetry": "3", "ttlMillis": "", "reset": "true"},
                           {"params": {"maxRetry": "3", "reset": "true"}, "code": 200}),
        "pauseTopic": ({"topic": "t"}, {"code": 200, "result": {"changed": True}}),
        "resumeTopic": ({"topic": "t"}, {"code": 200, "result": {"changed": True}}),
        "purgeTopic": ({"topic": "t", "limit": "1"},
                       {"params": {"limit": "1"}, "code": 200,
                        "result": {"count": 1, "remaining": 1}}),
        "redriveDeadMsg": ({"topic": "d", "limit": "5"},
                           {"params": {"limit": "5"}, "code": 200, "result": {"count": 1}}),
        "purgeDeadMsg": ({"topic": "d", "msgId": "dead-1"},
                         {"msgId": "dead-1", "code": 200, "result": {"count": 1}}),
        "deleteMsg": ({"topic": "t", "msgId": "m2", "release": "true"},
                      {"msgId": "m2", "params": {"release": "true"}, "code": 200}),
        "rescheduleMsg": ({"topic": "t", "msgId": "m2", "delayMillis": "60000"},
                          {"msgId": "m2", "params": {"delayMillis": "60000"}, "code": 200}),
        "createSchedule": ({"topic": "t", "scheduleId": "new", "msg": BODY,
                            "everyMillis": "60000"},
                           {"params": {"scheduleId": "new", "everyMillis": "60000"},
                            "code": 200}),
        "deleteSchedule": ({"topic": "t", "scheduleId": "s"},
                           {"params": {"scheduleId": "s"}, "code": 200}),
        "pauseSchedule": ({"topic": "t", "scheduleId": "s"},
                          {"params": {"scheduleId": "s"}, "code": 200,
                           "result": {"changed": True}}),
        "resumeSchedule": ({"topic": "t", "scheduleId": "s"},
                           {"params": {"scheduleId": "s"}, "code": 200,
                            "result": {"changed": True}}),
        "createSubscription": ({"topic": "t", "subscription": "new", "maxRetry": "2"},
                               {"params": {"subscription": "new", "maxRetry": "2"},
                                "code": 200}),
        "deleteSubscription": ({"topic": "t", "subscription": "s"},
                               {"params": {"subscription": "s"}, "code": 200}),
        "setSubscriptionConfig": ({"topic": "t", "subscription": "s", "reset": "true",
                                   "ackTimeoutMillis": "5000"},
                                  {"params": {"subscription": "s", "reset": "true",
                                              "ackTimeoutMillis": "5000"}, "code": 200}),
    }
    for name, (form, want) in api.items():
        yield name, "POST", Q + name, {"data": form}, want
    yield ("deleteMsgBatch", "POST", Q + "deleteMsgBatch",
           {"json": {"topic": "t", "msgIds": ["m1", "m9"]}},
           {"params": {"msgIds": 2}, "code": 200, "result": {"ok": 1, "refused": 1}})
    # The default subscription's push settings: the secret as (set), a cleared URL as "".
    yield ("setSubscriptionConfig", "POST", Q + "setSubscriptionConfig",
           {"json": {"topic": "t", "pushSecret": SECRET, "pushConcurrency": 3, "pushUrl": ""}},
           {"params": {"pushSecret": "(set)", "pushConcurrency": 3, "pushUrl": ""}, "code": 200})
    for name in ("offline", "online"):
        yield name, "GET", "/camellia/health/" + name, {}, {"code": 200}
    forms = {
        "settings": ({"topic": "t", "maxRetry": "4", "ttlMillis": "",
                      "description": "orders of the shop"},
                     {"params": {"maxRetry": "4", "description": "orders of the shop"},
                      "code": 200}),
        "pause": ({"topic": "t"}, {"code": 200, "result": {"changed": True}}),
        "resume": ({"topic": "t"}, {"code": 200, "result": {"changed": True}}),
        "purgeMessages": ({"topic": "t"}, {"params": {"limit": 10_000}, "code": 200,
                                           "result": {"count": 2, "remaining": 0}}),
        "redrive": ({"topic": "d", "msgId": "dead-1"},
                    {"msgId": "dead-1", "code": 200, "result": {"count": 1}}),
        "purge": ({"topic": "d"}, {"code": 200, "result": {"count": 1}}),
        "subscriptionCreate": ({"topic": "t", "subscription": "audit"},
                               {"params": {"subscription": "audit"}, "code": 200,
                                "result": {"changed": True}}),
        "subscriptionDelete": ({"topic": "t", "subscription": "audit"},
                               {"params": {"subscription": "audit"}, "code": 200,
                                "result": {"changed": True}}),
    }
    for name, (form, want) in forms.items():
        yield name, "POST", BY_NAME[name].path, {"data": form, "headers": SAME_ORIGIN}, want


CASES = list(cases())


def test_every_audited_route_has_a_case():
    assert {c[0] for c in CASES} == AUDITED


@pytest.mark.parametrize("name,method,path,kwargs,want", CASES, ids=[c[0] for c in CASES])
def test_an_audited_route_logs_one_line_with_who_what_outcome_and_when(
        http, lines, name, method, path, kwargs, want):
    send(http, "t", "m1")
    send(http, "t", "m2")
    make_dead(http, "d", "dead-1")
    if name == "resumeTopic":
        http.post(Q + "pauseTopic", data={"topic": "t"})
    if name in ("deleteSchedule", "pauseSchedule", "resumeSchedule"):
        http.post(Q + "createSchedule", data={"topic": "t", "scheduleId": "s", "msg": BODY,
                                              "everyMillis": 60_000})
    if name in ("deleteSubscription", "setSubscriptionConfig"):
        http.post(Q + "createSubscription", data={"topic": "t", "subscription": "s"})
    if name == "resumeSchedule":
        http.post(Q + "pauseSchedule", data={"topic": "t", "scheduleId": "s"})
    if name == "resume":
        http.post("/dashboard/topic/pause", data={"topic": "t"}, headers=SAME_ORIGIN)
    if name == "subscriptionDelete":
        http.post("/dashboard/subscription/create", data={"topic": "t", "subscription": "audit"},
                  headers=SAME_ORIGIN)
    lines()
    before = datetime.now(timezone.utc)
    answer = http.open(path, method=method, **kwargs)
    assert answer.status_code in (200, 303), answer.get_data(as_text=True)
    [line] = lines()
    at = line.pop("at")
    assert ISO_MS.match(at), at
    assert before - timedelta(milliseconds=1) <= datetime.fromisoformat(
        at.replace("Z", "+00:00")) <= datetime.now(timezone.utc)
    topic = {"topic": kwargs.get("data", kwargs.get("json", {})).get("topic")} \
        if name not in ("offline", "online") else {}
    assert line == {"who": "anonymous", "remote": "127.0.0.1", "route": name,
                    "method": method, **topic, **want}
    assert BODY not in json.dumps(line) and SECRET[:8] not in json.dumps(line)


def test_a_refused_write_is_logged_with_its_code_and_reason(http, lines):
    http.post(Q + "pauseTopic", data={"topic": "nowhere"})
    http.post("/dashboard/topic/purgeMessages", data={"topic": "nowhere"}, headers=SAME_ORIGIN)
    http.post(Q + "purgeTopic", data={"topic": "t", "limit": "0"})
    api, form, bad = lines()
    assert (api["route"], api["code"]) == ("pauseTopic", 404)
    assert api["msg"].startswith("topic: no topic 'nowhere'")
    assert (form["route"], form["code"], form["msg"]) == ("purgeMessages", 404, api["msg"])
    assert "result" not in form
    assert (bad["code"], bad["params"]) == (400, {"limit": "0"})
    assert bad["msg"].startswith("limit: must be between 1 and")


def test_the_data_path_and_reads_log_nothing(http, lines):
    send(http, "t", "m1")
    pulled = http.post(Q + "pullMsg", data={"topic": "t"}).get_json()["delayMsgList"]
    http.post(Q + "ackMsg", data={"topic": "t", "msgId": "m1",
                                  "receipt": pulled[0]["receipt"]})
    http.post(Q + "sendMsgBatch", json={"topic": "t", "msgs": [{"msg": "x"}]})
    for path in (Q + "getTopicInfo?topic=t", Q + "getTopicConfig?topic=t",
                 Q + "listMsg?topic=t&status=1", "/dashboard/", "/dashboard/topic?topic=t",
                 "/metrics", "/camellia/health/status", "/docs"):
        assert http.get(path).status_code == 200, path
    # OPTIONS is answered by Flask without the view: no write. A method the route does not
    # take never reaches it either (405).
    http.options(Q + "purgeTopic")
    assert http.get(Q + "purgeTopic?topic=t").status_code == 405
    assert lines() == []


def test_a_body_refused_as_too_large_is_logged_from_its_url(http, lines):
    answer = http.post(Q + "purgeTopic?topic=t", data="limit=1&" + "x" * (5 << 22),
                       content_type="application/x-www-form-urlencoded")
    assert answer.status_code == 413
    [line] = lines()
    assert (line["route"], line["topic"], line["code"]) == ("purgeTopic", "t", 413)
    assert "params" not in line


def test_head_runs_the_view_so_it_is_audited_too(http, lines):
    http.head("/camellia/health/offline")
    [line] = lines()
    assert (line["route"], line["method"], line["code"]) == ("offline", "HEAD", 200)
    assert http.get("/camellia/health/status").status_code == 500    # it did go offline


def test_a_long_or_odd_value_is_cut_and_stays_on_one_line(http, lines):
    http.post(Q + "setTopicConfig", data={"topic": "t", "description": "x\n" * 500})
    [line] = lines()
    assert line["params"]["description"] == ("x\n" * 100) + "..."
    http.post(Q + "purgeTopic", json={"topic": "t", "limit": {"a": [1, 2]}})
    [line] = lines()
    assert line["params"]["limit"] == "{'a': [1, 2]}" and line["code"] == 400


TOKENS = [{"name": "ops", "secret": "audit-ops-secret-000001", "roles": ["admin"]},
          {"name": "app", "secret": "audit-app-secret-000002", "roles": ["produce"]}]


def test_with_tokens_the_line_names_the_token_and_never_its_secret(redis_url, lines):
    app = create_app(overrides={"redis_url": redis_url, "snapshot_dir": "",
                                "auth_tokens": json.dumps(TOKENS)})
    http = app.test_client()
    ops = {"Authorization": "Bearer audit-ops-secret-000001"}
    app_token = {"Authorization": "Bearer audit-app-secret-000002"}
    http.post(Q + "sendMsg", data={"topic": "t", "msg": BODY}, headers=app_token)
    http.post(Q + "purgeTopic", data={"topic": "t"}, headers=ops,
              environ_base={"REMOTE_ADDR": "10.1.2.3"})
    http.post(Q + "purgeTopic", data={"topic": "t"}, headers=app_token)
    http.post(Q + "purgeTopic", data={"topic": "t"},
              headers={"Authorization": "Bearer not-a-known-secret-0003",
                       "X-Forwarded-For": "192.0.2.9"})
    done, forbidden, unknown = lines()
    assert (done["who"], done["roles"], done["remote"], done["code"], done["result"]) == \
        ("ops", ["admin"], "10.1.2.3", 200, {"count": 1, "remaining": 0})
    assert (forbidden["who"], forbidden["roles"], forbidden["code"]) == \
        ("app", ["produce"], 403)
    assert (unknown["who"], unknown["code"], unknown["forwardedFor"]) == \
        ("unauthenticated", 401, "192.0.2.9")
    text = json.dumps([done, forbidden, unknown])
    for secret in ("audit-ops-secret-000001", "audit-app-secret-000002",
                   "not-a-known-secret-0003", BODY):
        assert secret not in text


def test_the_counts_add_up_per_route_through_the_monitor(app, http):
    for _ in range(3):
        http.post(Q + "pauseTopic", data={"topic": "nowhere"})
    http.get("/camellia/health/offline")
    monitor: Monitor = app.extensions["delayqueue"].monitor
    monitor.flush()
    assert monitor.totals()["audit"] == {"pauseTopic": 3, "offline": 1}
    with pytest.raises(ValueError):
        monitor.count_audit("not\ta route")


def test_a_real_node_logs_the_line_at_log_level_warning_and_metrics_count_it(redis_db_url,
                                                                             tmp_path):
    log = tmp_path / "node.log"
    with ServerProcess(redis_db_url, settings={"monitor-interval-seconds": 1,
                                               "log-level": "warning"},
                       log_path=log) as node:
        requests.post(node.url + Q + "sendMsg", data={"topic": "n", "msg": BODY}, timeout=10)
        for _ in range(2):
            requests.post(node.url + Q + "purgeTopic", data={"topic": "n"}, timeout=10)
        requests.post(node.url + Q + "pauseTopic", data={"topic": "n"}, timeout=10)

        def scraped() -> str | None:
            text = requests.get(node.url + "/metrics", timeout=10).text
            wanted = ('delayqueue_audit_events_total{route="pauseTopic"} 1.0',
                      'delayqueue_audit_events_total{route="purgeTopic"} 2.0')
            return text if all(w in text for w in wanted) else None
        text = wait_until(scraped, 15, 0.2, message="no audit counts in /metrics")
        assert "# TYPE delayqueue_audit_events_total counter" in text
    audit = [line for line in log.read_text().splitlines() if " delayqueue.audit: " in line]
    assert len(audit) == 3, audit
    first = json.loads(audit[0].split(" delayqueue.audit: ", 1)[1])
    assert (first["route"], first["topic"], first["code"], first["result"]) == \
        ("purgeTopic", "n", 200, {"count": 1, "remaining": 0})
    assert BODY not in log.read_text()
