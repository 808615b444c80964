"""Authentication and authorization: every route x {no token, malformed, unknown, wrong role,
other namespace, other topic, right}, with the exact answer, on a live node with tokens."""

from __future__ import annotations

import json

import pytest
import requests

from delayqueue.core.errors import TooManyRequests
from delayqueue.http.access import Limits
from delayqueue.http.app import create_app
from delayqueue.http.endpoints import ADMIN, BATCH, BY_PATH, CONSUME, FORM, PRODUCE
from delayqueue.settings.config import ConfigError, load_settings

from support.node import ServerProcess

Q = "/camellia/delayQueue/"
SECRETS = {
    "producer": "producer-secret-0001",
    "consumer": "consumer-secret-0002",
    "both": "both-roles-secret-003",
    "admin": "admin-secret-000004",
    "elsewhere": "elsewhere-secret-05",
    "narrow": "narrow-topic-secret6",
    "two": "two-patterns-secret7",
}
TOKENS = [
    {"name": "producer", "secret": SECRETS["producer"], "roles": [PRODUCE], "topics": ["t-*"]},
    {"name": "consumer", "secret": SECRETS["consumer"], "roles": [CONSUME], "topics": ["t-*"]},
    {"name": "both", "secret": SECRETS["both"], "roles": [PRODUCE, CONSUME]},
    {"name": "admin", "secret": SECRETS["admin"], "roles": [ADMIN], "namespaces": ["default"]},
    {"name": "elsewhere", "secret": SECRETS["elsewhere"], "roles": [PRODUCE, CONSUME, ADMIN],
     "namespaces": ["other"]},
    {"name": "narrow", "secret": SECRETS["narrow"], "roles": [PRODUCE, CONSUME, ADMIN],
     "topics": ["orders-*"]},
    {"name": "two", "secret": SECRETS["two"], "roles": [PRODUCE], "topics": ["a-*", "b-*"]},
]
# route -> (params, the right token, the wrong-role token or None, HTTP status, code) of the
# right token's answer. Unknown msgIds give an exact answer (404) past the access check, and
# so does a topic no case creates (UNKNOWN) for the controls that never create one.
UNKNOWN = "t-never-used"
CASES = {
    Q + "sendMsg": ({"msg": "x"}, "producer", "consumer", 200, 200),
    Q + "sendMsgBatch": ({"msgs": [{"msg": "x"}]}, "producer", "consumer", 200, 200),
    Q + "ackMsgBatch": ({"acks": [{"msgId": "nope"}]}, "consumer", "producer", 200, 200),
    Q + "deleteMsgBatch": ({"msgIds": ["nope"]}, "producer", None, 200, 200),
    Q + "changeVisibilityBatch": ({"entries": [{"msgId": "nope", "ackTimeoutMillis": 1}]},
                                  "consumer", "producer", 200, 200),
    Q + "rescheduleMsg": ({"msgId": "nope", "delayMillis": 1}, "producer", "consumer", 200, 404),
    Q + "deleteMsg": ({"msgId": "nope"}, "producer", None, 200, 404),
    Q + "getMsg": ({"msgId": "nope"}, "consumer", None, 200, 404),
    Q + "pullMsg": ({}, "consumer", "producer", 200, 200),
    Q + "longPollingMsg": ({"longPollingTimeoutMillis": 1}, "consumer", "producer", 200, 200),
    Q + "ackMsg": ({"msgId": "nope"}, "consumer", "producer", 200, 404),
    Q + "changeVisibility": ({"msgId": "nope", "ackTimeoutMillis": 1}, "consumer", "producer",
                             200, 404),
    Q + "listDeadMsg": ({}, "consumer", "producer", 200, 200),
    Q + "getTopicConfig": ({}, "producer", None, 200, 200),
    Q + "getTopicInfo": ({}, "consumer", None, 200, 200),
    Q + "redriveDeadMsg": ({}, "admin", "both", 200, 200),
    Q + "purgeDeadMsg": ({}, "admin", "both", 200, 200),
    Q + "setTopicConfig": ({"maxRetry": 3}, "admin", "both", 200, 200),
    Q + "pauseTopic": ({"topic": UNKNOWN}, "admin", "both", 200, 404),
    Q + "resumeTopic": ({"topic": UNKNOWN}, "admin", "both", 200, 404),
    Q + "purgeTopic": ({"topic": UNKNOWN}, "admin", "both", 200, 404),
    Q + "listMsg": ({"status": 1}, "consumer", "producer", 200, 200),
    Q + "createSchedule": ({"scheduleId": "s", "msg": "x", "everyMillis": 60_000}, "producer",
                           "consumer", 200, 200),
    Q + "listSchedules": ({"topic": UNKNOWN}, "consumer", None, 200, 404),
    Q + "getSchedule": ({"topic": UNKNOWN, "scheduleId": "nope"}, "consumer", None, 200, 404),
    Q + "deleteSchedule": ({"topic": UNKNOWN, "scheduleId": "nope"}, "producer", "consumer",
                           200, 404),
    Q + "pauseSchedule": ({"topic": UNKNOWN, "scheduleId": "nope"}, "producer", "consumer",
                          200, 404),
    Q + "resumeSchedule": ({"topic": UNKNOWN, "scheduleId": "nope"}, "producer", "consumer",
                           200, 404),
    Q + "createSubscription": ({"subscription": "s"}, "admin", "both", 200, 200),
    Q + "deleteSubscription": ({"subscription": "nope"}, "admin", "both", 200, 404),
    Q + "listSubscriptions": ({}, "consumer", None, 200, 200),
    Q + "setSubscriptionConfig": ({"subscription": "nope", "maxRetry": 3}, "admin", "both",
                                  200, 404),
    Q + "getSubscriptionConfig": ({"subscription": "nope"}, "producer", None, 200, 404),
    Q + "getPushStatus": ({"subscription": "nope"}, "consumer", None, 200, 404),
    Q + "getTopicInfoList": ({}, "admin", "both", 200, 200),
    Q + "getMonitorData": ({}, "admin", "both", 200, 200),
    Q + "getMonitorString": ({}, "admin", "both", 200, None),
    "/dashboard/": ({}, "admin", "both", 200, None),
    "/dashboard/topic": ({}, "admin", "both", 200, None),
    "/dashboard/message": ({"msgId": "nope"}, "admin", "both", 200, None),
    "/dashboard/subscription": ({"subscription": "nope"}, "admin", "both", 404, None),
    "/dashboard/subscription/create": ({"subscription": "acc"}, "admin", "both", 303, None),
    "/dashboard/subscription/delete": ({"subscription": "nope"}, "admin", "both", 303, None),
    "/dashboard/topic/redrive": ({}, "admin", "both", 303, None),
    "/dashboard/topic/purge": ({}, "admin", "both", 303, None),
    "/dashboard/topic/settings": ({"maxRetry": 3}, "admin", "both", 303, None),
    "/dashboard/topic/pause": ({}, "admin", "both", 303, None),
    "/dashboard/topic/resume": ({}, "admin", "both", 303, None),
    "/dashboard/topic/purgeMessages": ({}, "admin", "both", 303, None),
    "/dashboard/topic/publish": ({"msg": "x"}, "admin", "both", 303, None),
    "/dashboard/nodes": ({}, "admin", "both", 200, None),
    "/dashboard/console.js": ({}, "admin", "both", 200, None),
    "/dashboard/console.css": ({}, "admin", "both", 200, None),
    "/openapi.json": ({}, None, None, 200, None),
    "/docs": ({}, None, None, 200, None),
    "/docs/swagger-ui-bundle.js": ({}, None, None, 200, None),
    "/docs/swagger-ui.css": ({}, None, None, 200, None),
    "/metrics": ({}, "admin", "both", 200, None),
    "/camellia/health/offline": ({}, "admin", "both", 200, 200),
    "/camellia/health/online": ({}, "admin", "both", 200, 200),
    "/camellia/health/status": ({}, None, None, 200, 200),
    "/camellia/health/check": ({}, None, None, 200, 200),
}
KINDS = ["no token", "malformed", "unknown", "wrong role", "other namespace", "other topic",
         "right"]
MISSING = "Authorization: missing; send 'Authorization: Bearer <token>'"


@pytest.fixture(scope="module")
def node(redis_server):
    with redis_server.leased_db_url() as url:
        with ServerProcess(url, settings={"auth-tokens": json.dumps(TOKENS)}) as server:
            yield server


def call(node, route: str, params: dict, header: str | None) -> requests.Response:
    headers = {} if header is None else {"Authorization": header}
    data = {"topic": params.pop("topic", "t-1"), **params}
    endpoint = BY_PATH[route]
    if "POST" not in endpoint.methods:
        return requests.get(node.url + route, params=data, headers=headers, timeout=10)
    if endpoint.kind == BATCH:                     # the batch endpoints take a JSON body
        return requests.post(node.url + route, json=data, headers=headers, timeout=10)
    if endpoint.kind == FORM:                      # the console's writes: a same-origin form
        return requests.post(node.url + route, data=data, timeout=10, allow_redirects=False,
                             headers={**headers, "Origin": node.url})
    return requests.post(node.url + route, data=data, headers=headers, timeout=10)


def expected(route: str, kind: str) -> tuple[int, int | None, str | None, str | None]:
    """(HTTP status, envelope code, exact msg or None, the Authorization header to send)."""
    params, right, wrong, status, code = CASES[route]
    name = BY_PATH[route].name
    rule = BY_PATH[route].rule
    bearer = {n: f"Bearer {s}" for n, s in SECRETS.items()}
    ok = (status, code, None)
    if rule.scope == "open":
        return (*ok, {"no token": None, "malformed": "Basic abc", "unknown": "Bearer x" * 3,
                      "wrong role": bearer["consumer"], "other namespace": bearer["elsewhere"],
                      "other topic": bearer["narrow"], "right": None}[kind])
    if kind == "no token":
        return 401, 401, MISSING, None
    if kind == "malformed":
        return 401, 401, "Authorization: malformed; the form is 'Bearer <token>'", \
            "Token " + SECRETS[right]
    if kind == "unknown":
        return 401, 401, "Authorization: unknown token", "Bearer not-a-token-of-this-server"
    if kind == "wrong role":
        if wrong is None:                 # any role may: the consumer's answer is the right one
            return (*ok, bearer["consumer"] if right == "producer" else bearer["producer"])
        roles = ", ".join(sorted(next(t for t in TOKENS if t["name"] == wrong)["roles"]))
        return 403, 403, (f"token {wrong!r}: {name} needs role {' or '.join(rule.roles)} "
                          f"(it has {roles})"), bearer[wrong]
    if kind == "other namespace":
        return 403, 403, "token 'elsewhere': namespace 'default' is outside its namespaces", \
            bearer["elsewhere"]
    if kind == "other topic":
        if rule.scope == "namespace":
            return 403, 403, (f"token 'narrow': {name} covers every topic; the token is "
                              f"limited to topics ['orders-*']"), bearer["narrow"]
        return 403, 403, f"topic: {params.get('topic', 't-1')!r} is outside token " \
                         "'narrow''s topics", bearer["narrow"]
    return (*ok, bearer[right])


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("route", list(CASES))
def test_every_route_answers_each_kind_of_caller_exactly(node, route, kind):
    status, code, msg, header = expected(route, kind)
    response = call(node, route, dict(CASES[route][0]), header)
    assert response.status_code == status, response.text
    if code is not None:
        body = response.json()
        assert body["code"] == code, body
        if msg is not None:
            assert body == {"code": code, "msg": msg}
    if status == 401:
        assert response.headers["WWW-Authenticate"] == 'Bearer realm="delayqueue"'
    if route.endswith("/offline") and status == 200:
        call(node, "/camellia/health/online", {}, f"Bearer {SECRETS['admin']}")


def test_every_route_of_the_app_is_in_the_endpoint_table_and_in_this_test():
    app = create_app(overrides={"redis-url": "redis://127.0.0.1:1/0", "snapshot-dir": ""})
    routes = {rule.rule for rule in app.url_map.iter_rules() if rule.endpoint != "static"}
    assert routes == set(BY_PATH), (routes ^ set(BY_PATH))
    assert set(CASES) == set(BY_PATH)


def test_without_tokens_every_route_is_open(server):
    answer = requests.post(server.url + Q + "sendMsg", data={"topic": "t", "msg": "x"},
                           timeout=10).json()
    assert answer["code"] == 200


@pytest.mark.parametrize("entry, rule", [
    ({"name": "a", "secret": "short", "roles": ["produce"]}, "at least 16 characters"),
    ({"name": "a", "secret": "x" * 16, "roles": ["root"]}, "unknown role(s) ['root']"),
    ({"name": "a", "roles": ["admin"]}, "give exactly one of secret, secret-env"),
    ({"name": "a", "secret-env": "DQ_NOT_SET_ANYWHERE", "roles": ["admin"]},
     "DQ_NOT_SET_ANYWHERE (secret-env) is not set"),
    ({"secret": "x" * 16, "roles": ["admin"]}, "name is required"),
    ({"name": "a", "secret": "x" * 16, "roles": ["admin"], "role": "x"}, "unknown field(s)"),
])
def test_a_malformed_token_entry_is_refused_naming_the_setting_and_the_rule(entry, rule):
    with pytest.raises(ConfigError) as info:
        load_settings(env={}, overrides={"auth-tokens": json.dumps([entry])})
    assert str(info.value).startswith("auth-tokens: ") and rule in str(info.value)


def test_a_secret_read_from_the_environment_and_never_printed(monkeypatch):
    monkeypatch.setenv("DQ_T", "from-the-environment-1")
    settings = load_settings(env={}, overrides={
        "auth-tokens": [{"name": "ops", "secret-env": "DQ_T", "roles": ["admin"]}]})
    assert settings.auth_tokens.find("from-the-environment-1").name == "ops"
    assert "from-the-environment-1" not in repr(settings)
    assert "from-the-environment-1" not in str(settings.as_table())


def test_a_topic_given_in_a_json_body_or_the_query_string_is_checked_too(node):
    narrow = {"Authorization": f"Bearer {SECRETS['narrow']}"}
    as_json = requests.post(node.url + Q + "pullMsg", json={"topic": "payments"},
                            headers=narrow, timeout=10)
    in_query = requests.post(node.url + Q + "pullMsg?topic=payments", headers=narrow,
                             timeout=10)
    for answer in (as_json, in_query):
        assert answer.status_code == 403
        assert answer.json()["msg"] == "topic: 'payments' is outside token 'narrow''s topics"
    allowed = requests.post(node.url + Q + "pullMsg", json={"topic": "orders-1"},
                            headers=narrow, timeout=10)
    assert allowed.json()["code"] == 200


def test_a_query_topic_cannot_vouch_for_another_topic_in_the_body(node):
    # The view reads the body's topic over the query string's: so must the access check.
    narrow = {"Authorization": f"Bearer {SECRETS['narrow']}"}
    for kwargs in ({"data": {"topic": "payments"}}, {"json": {"topic": "payments"}},
                   {"json": {"topic": 5}}):
        answer = requests.post(node.url + Q + "pullMsg?topic=orders-1", headers=narrow,
                               timeout=10, **kwargs)
        assert answer.status_code == 403, answer.text


@pytest.mark.parametrize("route, params", [("sendMsg", {"msg": "x"}), ("pullMsg", {})])
def test_an_admin_only_token_may_call_the_produce_and_consume_routes_too(node, route, params):
    answer = requests.post(node.url + Q + route, data={"topic": "t-admin", **params},
                           headers={"Authorization": f"Bearer {SECRETS['admin']}"}, timeout=10)
    assert answer.status_code == 200 and answer.json()["code"] == 200, answer.text


def test_a_token_with_two_topic_patterns_may_use_a_topic_of_either_and_no_other(node):
    two = {"Authorization": f"Bearer {SECRETS['two']}"}

    def send(topic: str) -> requests.Response:
        return requests.post(node.url + Q + "sendMsg", data={"topic": topic, "msg": "x"},
                             headers=two, timeout=10)

    for topic in ("a-1", "b-1"):
        answer = send(topic)
        assert answer.status_code == 200 and answer.json()["code"] == 200, answer.text
    outside = send("c-1")
    assert outside.status_code == 403
    assert outside.json() == {"code": 403, "msg": "topic: 'c-1' is outside token 'two''s topics"}


def test_an_idle_token_saves_up_one_second_of_requests_and_no_more():
    now = [1000.0]
    limits = Limits(rate=5, long_polls=0, clock=lambda: now[0])
    limits.take("idle")                        # the token's bucket starts here
    now[0] += 3600.0                           # an hour idle: 18,000 requests' worth of time
    for _ in range(5):
        limits.take("idle")
    with pytest.raises(TooManyRequests) as info:
        limits.take("idle")
    assert info.value.msg == "rate: token 'idle' is over token-rate-limit (5 requests/s)"
    assert info.value.headers == {"Retry-After": "1"}


def test_a_route_missing_from_the_access_table_is_refused_to_every_token():
    app = create_app(overrides={"redis-url": "redis://127.0.0.1:1/0", "snapshot-dir": "",
                                "auth-tokens": json.dumps(TOKENS)})
    app.add_url_rule("/not-in-the-table", "not_in_the_table", lambda: "reached")
    answer = app.test_client().get("/not-in-the-table",
                                   headers={"Authorization": f"Bearer {SECRETS['admin']}"})
    assert answer.status_code == 403
    assert answer.get_json() == {"code": 403, "msg": "/not-in-the-table: not in the access "
                                                     "table; refused to every token"}
