"""HTTP fuzzing from the node's own /openapi.json (schemathesis) against a real node.

One real node (gunicorn, one gevent worker, as deployed: the HTTP parsing, body limits and
error answers are gunicorn's and the app's, not a test client's) on a real redis-server
database leased to this module; schemathesis reads the document the node serves and, for
every documented operation, generates requests from its parameter and body schemas, valid
ones and invalid ones (wrong types, missing required parameters, values outside the schema).
Every answer is checked:

- no HTTP 5xx, and no envelope ``code`` 500 in an HTTP 200 answer (how this server answers
  an internal error);
- the status code, the content type and the body are ones the document gives for that
  operation (schemathesis' conformance checks).

Half of the cases are steered onto one topic and a handful of msgIds, so sends, pulls, acks,
nacks, reschedules, dead letters and deletes meet real messages rather than only 404s.
Afterwards no key of the database lies outside the node's key prefix and namespace.

``make test`` runs 30 cases per operation with a fixed seed (repeatable, ~40 s); ``make
fuzz`` runs DQ_FUZZ_CASES=500 (figures in docs/reliability.md, "HTTP fuzzing").
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter

import hypothesis.strategies as st
import pytest
import redis
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, seed, settings
from schemathesis.checks import CheckContext, not_a_server_error
from schemathesis.core.failures import Failure, FailureGroup
from schemathesis.core.transport import Response
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from delayqueue.http.endpoints import ENDPOINTS, FORM
from delayqueue.http.openapi import document
from delayqueue.http.schema import EXAMPLE_MSG

from support.node import ServerProcess

CASES = int(os.environ.get("DQ_FUZZ_CASES", "30"))   # per operation
SEED = int(os.environ.get("DQ_FUZZ_SEED", "13"))
PREFIX, NAMESPACE = "fz", "fuzz"
TOPIC = "fuzz-orders"
MSG_IDS = ("m1", "m2", "m3", "m4", "m5")
WRITE_PATHS = {e.path for e in ENDPOINTS if e.kind == FORM}   # same-origin forms: an Origin
# Short long polls, so the thousands of longPollingMsg cases do not each hold for 10 s; a
# longer longPollingTimeoutMillis is refused (code 400), which the fuzz meets as well.
NODE_SETTINGS = {"namespace": NAMESPACE, "redis-key-prefix": PREFIX,
                 "long-polling-timeout-millis": 20, "max-long-polling-timeout-millis": 100}
OPERATIONS = sorted((method.upper(), path) for path, ops in document()["paths"].items()
                    for method in ops)
STATS: dict[str, Counter] = {}
UNKNOWN_PARAMS = st.dictionaries(st.text(min_size=1, max_size=12), st.text(max_size=24),
                                 min_size=1, max_size=3)


def content_type(response) -> str:
    return (response.headers.get("content-type") or [""])[0]


def no_envelope_500(ctx: CheckContext, response, case) -> bool | None:
    """This server answers an internal error as {"code": 500, ...} with HTTP 200."""
    if content_type(response).startswith("application/json"):
        body = response.json()
        if isinstance(body, dict) and body.get("code") == 500:
            raise AssertionError(f"envelope code 500: {body.get('msg')!r}")
    return None


CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]


@pytest.fixture(scope="module")
def node(redis_server):
    with redis_server.leased_db_url() as url:
        with ServerProcess(url, settings=NODE_SETTINGS) as node:
            yield node, url


@pytest.fixture(scope="module")
def schema(node):
    """The document exactly as the node serves it."""
    served, _ = node
    return schemathesis.openapi.from_url(served.url + "/openapi.json")


def steer(case, msg_id: str) -> None:
    """Point the case at the shared topic and msgId pool (where it has those fields)."""
    for values in (case.query, case.body):
        if not isinstance(values, dict):
            continue
        if "topic" in values:
            values["topic"] = TOPIC
        if "msgId" in values:
            values["msgId"] = msg_id
        for name in ("msgs", "acks"):
            if isinstance(values.get(name), list):
                for i, entry in enumerate(values[name]):
                    if isinstance(entry, dict) and "msgId" in entry:
                        entry["msgId"] = MSG_IDS[(MSG_IDS.index(msg_id) + i) % len(MSG_IDS)]
        if isinstance(values.get("msgIds"), list):
            values["msgIds"] = [MSG_IDS[(MSG_IDS.index(msg_id) + i) % len(MSG_IDS)]
                                for i in range(len(values["msgIds"]))]


def check(case, response, headers: dict[str, str]) -> str | None:
    """None when the answer is one the document gives, else what is wrong with it."""
    try:
        case.validate_response(response, checks=CHECKS, additional_checks=[no_envelope_500],
                               headers=headers)
    except (FailureGroup, AssertionError) as exc:
        return describe(case, response, exc)
    return None


def describe(case, response, exc: Exception) -> str:
    failures = exc.exceptions if isinstance(exc, FailureGroup) else [exc]
    what = "; ".join(f"{f.title}: {f.message.strip()[:300]}" if isinstance(f, Failure)
                     else str(f) for f in failures)
    return (f"{what}\n  request: {case.method} {case.path} query={case.query!r} "
            f"body={case.body!r} media={case.media_type}\n"
            f"  answer: HTTP {response.status_code} {response.text[:300]!r}")


@pytest.mark.slow
@pytest.mark.timeout(max(300, CASES * 3))
@pytest.mark.parametrize("method, path", OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_fuzz_operation(node, schema, method, path):
    served, _ = node
    operation = schema[path][method]
    modes = [operation.as_strategy(GenerationMode.POSITIVE)]
    if (operation.query or operation.body) and not path.endswith(("/offline", "/online")):
        modes.append(operation.as_strategy(GenerationMode.NEGATIVE))
    headers = {"Origin": served.url} if path in WRITE_PATHS else {}
    session = requests.Session()
    stats = STATS.setdefault(f"{method} {path}", Counter())
    findings: list[str] = []

    # An operation without parameters gets unknown query parameters, which every endpoint
    # ignores: without them it has only a handful of distinct requests.
    extra = UNKNOWN_PARAMS if not (operation.query or operation.body) else st.just({})

    @seed(SEED)
    @settings(max_examples=CASES, database=None, deadline=None, derandomize=False,
              phases=[Phase.explicit, Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(case=st.one_of(modes), shared=st.booleans(), msg_id=st.sampled_from(MSG_IDS),
           unknown=extra)
    def fuzz(case, shared, msg_id, unknown):
        if shared:
            steer(case, msg_id)
        if unknown:
            case.query = {**(case.query or {}), **unknown}
        response = case.call(base_url=served.url, session=session, headers=headers,
                             timeout=15, allow_redirects=False)
        stats["cases"] += 1
        stats[f"HTTP {response.status_code}"] += 1
        if content_type(response).startswith("application/json"):
            answer = response.json()
            if isinstance(answer, dict) and answer.get("code", 0) not in (0, response.status_code):
                stats[f"code {answer.get('code')}"] += 1
        if path.endswith("/offline"):
            # Back online at once: health/status answers 500 while offline, by design.
            session.get(served.url + "/camellia/health/online", timeout=15)
        finding = check(case, response, headers)
        if finding:
            findings.append(finding)

    started = time.monotonic()
    with session:   # closed after: open keep-alive connections hold up the node's stop
        fuzz()
    stats["seconds"] += round(time.monotonic() - started)
    assert stats["cases"] > 0
    assert not findings, f"{len(findings)} finding(s):\n" + "\n".join(findings[:20])


FORM = "application/x-www-form-urlencoded"


@pytest.mark.parametrize("method, path, values, status", [
    ("GET", "/dashboard/topic", {}, 400),
    ("GET", "/dashboard/topic", {"topic": "a\x01b"}, 200),
    ("GET", "/dashboard/topic", {"topic": "t", "cursor": "not-a-cursor"}, 200),
    ("POST", "/dashboard/topic/redrive", {"topic": ""}, 400),
    ("POST", "/dashboard/topic/purge", {"msgId": "m1"}, 400),
    ("POST", "/dashboard/topic/settings", {"topic": "t", "reset": "maybe"}, 400),
], ids=["page-no-topic", "page-control-chars", "page-bad-cursor", "redrive-empty-topic",
        "purge-no-topic", "settings-bad-reset"])
def test_console_error_answers_are_documented(node, schema, method, path, values, status):
    """Found by the fuzz: the console's error envelopes (HTTP 400, or JSON in place of the
    page) were missing from the document."""
    served, _ = node
    served.call("sendMsg", topic="t", msg="x")     # the page of a topic that exists
    operation = schema[path][method]
    if method == "GET":
        case = operation.Case(query=values)
    else:
        case = operation.Case(body=values, media_type=FORM)
    headers = {"Origin": served.url} if method == "POST" else {}
    response = case.call(base_url=served.url, headers=headers, timeout=15,
                         allow_redirects=False)
    assert response.status_code == status
    assert response.json()["code"] == 400
    assert check(case, response, headers) is None


def test_the_unknown_topic_page_is_a_documented_404(node, schema):
    served, _ = node
    case = schema["/dashboard/topic"]["GET"].Case(query={"topic": "never-sent-to"})
    response = case.call(base_url=served.url, timeout=15, allow_redirects=False)
    assert response.status_code == 404
    assert "<h1>No topic" in response.text
    assert check(case, response, {}) is None


@pytest.mark.parametrize("path", ["/camellia/delayQueue/sendMsg", "/camellia/health/check",
                                  "/dashboard/", "/metrics", "/openapi.json"])
def test_a_request_line_over_the_limit_is_a_documented_414(node, schema, path):
    """Found by the fuzz (GET sendMsg with many unknown parameters): gunicorn's 414 for a
    request line over 4094 bytes was missing from the document."""
    served, _ = node
    case = schema[path]["GET"].Case(query={"topic": "t", "pad": "x" * 5000})
    response = case.call(base_url=served.url, timeout=15)
    assert response.status_code == 414
    assert response.json() == {"code": 414, "msg": "request line: longer than 4094 bytes"}
    assert check(case, response, {}) is None


@pytest.mark.parametrize("status, body, wrong", [
    (200, {"code": 500, "msg": "internal error: KeyError"}, "envelope code 500"),
    (502, {"code": 200, "msg": "success", "delayMsg": EXAMPLE_MSG}, "Server error"),
    (418, {"code": 400, "msg": "topic: required"}, "Undocumented status code"),
    (200, {"code": 200, "msg": "success", "delayMsg": {"topic": "t"}}, "Response violates"),
], ids=["envelope-500", "http-5xx", "undocumented-status", "body-outside-schema"])
def test_the_checks_catch_a_wrong_answer(node, schema, status, body, wrong):
    """The checks are not vacuous: each wrong answer to getMsg is a finding."""
    served, _ = node
    case = schema["/camellia/delayQueue/getMsg"]["GET"].Case(query={"topic": "t", "msgId": "m"})
    real = case.call(base_url=served.url, timeout=15)
    assert check(case, real, {}) is None
    forged = Response(status, {"content-type": ["application/json"]},
                      json.dumps(body).encode(), real.request, 0.0, True)
    finding = check(case, forged, {})
    assert finding is not None and wrong in finding, finding


def test_no_key_outside_the_namespace_prefix(node):
    """After the fuzz, every key of the node's database is under its prefix and namespace."""
    _, url = node
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        keys = list(client.scan_iter(count=1000))
    finally:
        client.close()
    ours = (f"{PREFIX}:{{{NAMESPACE}}}", f"{PREFIX}:{{{NAMESPACE}:")
    outside = [key for key in keys if not key.startswith(ours)]
    assert keys, "the node wrote nothing: the fuzz did not reach Redis"
    assert not outside, f"{len(outside)} key(s) outside {PREFIX}:{{{NAMESPACE}...}}: " \
                        f"{outside[:10]}"
    print(f"fuzz: {len(keys)} keys, all under {PREFIX}:{{{NAMESPACE}...}}; "
          f"operations: {len(STATS)}, cases: {sum(s['cases'] for s in STATS.values())}")
    for label, stats in sorted(STATS.items()):
        print(f"  {label}: {dict(stats)}")
