"""The parameter-error table (delayqueue/http/param_rules.py) is what the server does, on
every endpoint of the endpoint table, and what /openapi.json shows.

For every envelope and batch endpoint of ``ENDPOINTS`` the requests below break one
parameter at a time (absent, empty, unconvertible, out of range, a malformed body), the rest
valid, and the answer must be the table's for the endpoint's column (camellia's, ours, our
batch endpoints): that HTTP status, that code, a message naming the parameter, nothing
written. Where a topic is broken the whole answer must equal /openapi.json's example of that
error. Through the real app and Lua scripts on a real redis-server; docs/api.md's copy of the
table is checked in tests/test_docs.py.
"""

from __future__ import annotations

import pytest

from delayqueue.http.app import create_app
from delayqueue.http.endpoints import BATCH, CAMELLIA, ENDPOINTS, ENVELOPE, OURS
from delayqueue.http.openapi import EXAMPLES, document
from delayqueue.http.param_rules import (
    BATCH_BODY,
    BROKEN,
    CASES,
    COLUMNS,
    REFUSED,
    answer,
    column,
    markdown_table,
)

TOPIC = "rules-topic"
VALID = {"topic": TOPIC, "msgId": "m", "msg": "x", "ackTimeoutMillis": "0", "scheduleId": "s",
         "subscription": "s"}
# Optional parameters an endpoint still needs one of to go past its own checks: listMsg
# wants a status (or groupBlocked) before it reads its limit.
NEEDS = {"listMsg": {"status": "1"}, "createSchedule": {"everyMillis": "60000"}}
ENTRIES = {"sendMsgBatch": ("msgs", {"msg": "x"}), "ackMsgBatch": ("acks", {"msgId": "m"}),
           "deleteMsgBatch": ("msgIds", "m"),
           "changeVisibilityBatch": ("entries", {"msgId": "m", "ackTimeoutMillis": 0})}
UNCONVERTIBLE = {"integer": "abc", "number": "abc", "boolean": "perhaps"}
ENVELOPES = [e for e in ENDPOINTS if e.kind == ENVELOPE and e.params]
BATCHES = [e for e in ENDPOINTS if e.kind == BATCH]


@pytest.fixture(scope="module")
def app(redis_server):
    with redis_server.leased_db_url() as url:
        yield create_app(overrides={"redis_url": url, "snapshot_dir": ""})


@pytest.fixture
def client(app):
    yield app.test_client()
    runtime = app.extensions["delayqueue"]
    assert runtime.client.zrange(runtime.keys.topics, 0, -1) == [], "a topic was registered"
    assert runtime.client.keys("*rules-topic*") == [], "a refused request wrote to Redis"


def kind(schema: dict) -> str:
    types = schema.get("type")
    return types if isinstance(types, str) else types[0]


def valid_form(endpoint) -> dict[str, str]:
    return {**{p.name: VALID[p.name] for p in endpoint.params if p.required},
            **NEEDS.get(endpoint.name, {})}


def assert_answer(response, expected, name: str) -> dict:
    body = response.get_json()
    assert (response.status_code, body["code"]) == (expected.http, expected.code), body
    assert body["msg"].startswith(name + ":"), body
    return body


def post(client, endpoint, form):
    return client.post(endpoint.path, data=form)


# -- the table and the endpoint table ------------------------------------------------------
def test_the_table_has_each_case_once_and_an_answer_in_every_column():
    assert [c.name for c in CASES] == ["absent", "empty", "unconvertible", "out of range",
                                       "malformed body"]
    for case in CASES:
        assert set(case.answers) == set(COLUMNS) == {CAMELLIA, OURS, BATCH_BODY}
        assert set(case.answers.values()) <= {REFUSED, BROKEN}


def test_camellias_endpoints_are_the_ones_its_server_has():
    """camellia's server: its six message endpoints, three monitoring ones, getMonitorString
    and the four health ones; everything else is ours."""
    assert {e.name for e in ENDPOINTS if e.origin == CAMELLIA} == {
        "sendMsg", "pullMsg", "longPollingMsg", "ackMsg", "getMsg", "deleteMsg",
        "getMonitorData", "getTopicInfo", "getTopicInfoList", "getMonitorString",
        "status", "check", "online", "offline"}
    assert {e.origin for e in ENDPOINTS} == {CAMELLIA, OURS}
    assert all(column(e) == BATCH_BODY for e in BATCHES)


# -- the server against the table, endpoint by endpoint ------------------------------------
@pytest.mark.parametrize("endpoint", ENVELOPES, ids=lambda e: e.name)
def test_a_required_parameter_absent_or_empty(client, endpoint):
    for param in (p for p in endpoint.params if p.required):
        form = valid_form(endpoint)
        del form[param.name]
        assert_answer(post(client, endpoint, form), answer("absent", column(endpoint)),
                      param.name)
        if kind(param.schema) == "string":
            form[param.name] = ""
            assert_answer(post(client, endpoint, form), answer("empty", column(endpoint)),
                          param.name)


@pytest.mark.parametrize("endpoint", ENVELOPES, ids=lambda e: e.name)
def test_an_unconvertible_value(client, endpoint):
    tried = 0
    for param in endpoint.params:
        bad = UNCONVERTIBLE.get(kind(param.schema))
        if bad is None:
            continue
        tried += 1
        assert_answer(post(client, endpoint, {**valid_form(endpoint), param.name: bad}),
                      answer("unconvertible", column(endpoint)), param.name)
    # Every endpoint's text parameters: a JSON list where a string is expected.
    response = client.post(endpoint.path, json={**valid_form(endpoint), "topic": ["a"]})
    body = assert_answer(response, answer("unconvertible", column(endpoint)), "topic")
    assert body == EXAMPLES[column(endpoint)]["unconvertible"]
    assert tried or endpoint.name in ("getMsg", "getTopicConfig", "getTopicInfo",
                                      "purgeDeadMsg", "pauseTopic", "resumeTopic",
                                      "getSchedule", "deleteSchedule", "pauseSchedule",
                                      "resumeSchedule", "deleteSubscription",
                                      "listSubscriptions", "getSubscriptionConfig",
                                      "getPushStatus")


@pytest.mark.parametrize("endpoint", ENVELOPES, ids=lambda e: e.name)
def test_a_value_out_of_range(client, endpoint):
    response = post(client, endpoint, {**valid_form(endpoint), "topic": "a{b"})
    body = assert_answer(response, answer("out of range", column(endpoint)), "topic")
    assert body == EXAMPLES[column(endpoint)]["out of range"]


@pytest.mark.parametrize("endpoint", ENVELOPES, ids=lambda e: e.name)
def test_a_malformed_body(client, endpoint):
    for data in ("{not json", "[1, 2]", '"text"'):
        response = client.post(endpoint.path, data=data, content_type="application/json")
        body = assert_answer(response, answer("malformed body", column(endpoint)), "body")
        assert body == EXAMPLES[column(endpoint)]["malformed body"]


@pytest.mark.parametrize("endpoint", [e for e in ENVELOPES if e.origin == CAMELLIA],
                         ids=lambda e: e.name)
def test_camellias_endpoints_say_which_of_absent_and_empty(client, endpoint):
    """The whole answers of /openapi.json's examples, for the topic."""
    form = valid_form(endpoint)
    absent = post(client, endpoint, {k: v for k, v in form.items() if k != "topic"})
    assert absent.get_json() == EXAMPLES[CAMELLIA]["absent"]
    empty = post(client, endpoint, {**form, "topic": ""})
    assert empty.get_json() == EXAMPLES[CAMELLIA]["empty"]


@pytest.mark.parametrize("endpoint", [e for e in ENVELOPES if e.origin == OURS and any(
    p.name == "topic" and p.required for p in e.params)], ids=lambda e: e.name)
def test_our_endpoints_answer_absent_and_empty_alike(client, endpoint):
    """(listSchedules' topic is optional: without one it lists every topic's.)"""
    form = valid_form(endpoint)
    absent = post(client, endpoint, {k: v for k, v in form.items() if k != "topic"})
    empty = post(client, endpoint, {**form, "topic": ""})
    assert absent.get_json() == empty.get_json() == EXAMPLES[OURS]["absent"] == \
        EXAMPLES[OURS]["empty"]


@pytest.mark.parametrize("endpoint", BATCHES, ids=lambda e: e.name)
def test_a_batch_body(client, endpoint):
    entries, entry = ENTRIES[endpoint.name]
    body = {"topic": TOPIC, entries: [entry]}
    broken = {"absent": ({entries: [entry]}, "topic"),
              "empty": ({**body, "topic": ""}, "topic"),
              "unconvertible": ({**body, "topic": ["a"]}, "topic"),
              "out of range": ({**body, "topic": "a{b"}, "topic")}
    for case, (sent, name) in broken.items():
        got = assert_answer(client.post(endpoint.path, json=sent),
                            answer(case, BATCH_BODY), name)
        assert got == EXAMPLES[BATCH_BODY][case]
    assert_answer(client.post(endpoint.path, json={"topic": TOPIC}),
                  answer("absent", BATCH_BODY), entries)
    assert_answer(client.post(endpoint.path, json={**body, entries: [entry] * 1001}),
                  answer("out of range", BATCH_BODY), entries)
    for data in ("{not json", "[1, 2]"):
        got = assert_answer(client.post(endpoint.path, data=data,
                                        content_type="application/json"),
                            answer("malformed body", BATCH_BODY), "body")
        assert got == EXAMPLES[BATCH_BODY]["malformed body"]


# -- /openapi.json -------------------------------------------------------------------------
def test_the_document_carries_the_table_and_each_operations_column():
    spec = document()
    assert markdown_table() in spec["info"]["description"]
    for endpoint in ENVELOPES + BATCHES:
        for op in spec["paths"][endpoint.path].values():
            assert op["x-origin"] == endpoint.origin
            of = column(endpoint)
            refused = {n.removeprefix("parameter ") for n in
                       op["responses"]["400"]["content"]["application/json"]["examples"]}
            broken = {n.removeprefix("parameter ") for n in
                      op["responses"]["200"]["content"]["application/json"]["examples"]}
            assert refused == {c.name for c in CASES if c.answers[of] == REFUSED}
            others = {"success", *(name for name, _ in endpoint.refusals)}
            assert broken - others == {c.name for c in CASES if c.answers[of] == BROKEN}
