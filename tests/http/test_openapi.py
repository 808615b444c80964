"""/openapi.json: a valid OpenAPI 3.1 document that describes exactly the server's routes,
whose examples validate against their schemas, and whose schemas real answers satisfy.

The real answers come from the real app and Lua scripts on a real redis-server (no loops
started: every transition here is a request's own script).
"""

from __future__ import annotations

import uuid

import pytest
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate

from delayqueue.http.app import create_app
from delayqueue.http.endpoints import ENDPOINTS, OPEN
from delayqueue.http.openapi import document

IGNORED_METHODS = {"HEAD", "OPTIONS"}


@pytest.fixture(scope="module")
def spec():
    return document()


@pytest.fixture
def app(redis_url):
    return create_app(overrides={"redis_url": redis_url, "snapshot_dir": ""})


def _validator(spec, schema) -> Draft202012Validator:
    # Refs in the document are "#/components/schemas/X": give every schema the document as
    # its base by wrapping it inside a copy of the document.
    wrapped = {**spec, "$schema": "https://json-schema.org/draft/2020-12/schema",
               "$ref": "#/$defs/target", "$defs": {"target": schema}}
    return Draft202012Validator(wrapped)


def routes(app) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "static":
            continue
        found.setdefault(rule.rule, set()).update(rule.methods - IGNORED_METHODS)
    return found


def test_the_document_is_valid_openapi_3_1(spec):
    validate(spec)
    assert spec["openapi"] == "3.1.0"


def test_every_operation_is_grouped_under_a_described_tag_and_every_tag_is_used(spec):
    used = {tag for ops in spec["paths"].values() for op in ops.values() for tag in op["tags"]}
    listed = [tag["name"] for tag in spec["tags"]]
    assert all(len(op["tags"]) == 1 for ops in spec["paths"].values() for op in ops.values())
    assert len(listed) == len(set(listed)) and set(listed) == used
    assert all(tag["description"].strip() for tag in spec["tags"])


def test_every_operation_but_the_open_ones_wants_a_bearer_token(spec):
    assert spec["components"]["securitySchemes"] == {"bearer": {
        "type": "http", "scheme": "bearer",
        "description": spec["components"]["securitySchemes"]["bearer"]["description"]}}
    assert "security" not in spec          # none at the top: the open operations stay open
    for endpoint in ENDPOINTS:
        for method in endpoint.methods:
            op = spec["paths"][endpoint.path][method.lower()]
            if endpoint.rule is OPEN:
                assert "security" not in op, endpoint.path
            else:
                assert op["security"] == [{"bearer": []}], endpoint.path
                assert op["description"].startswith("**Token** (while `auth-tokens` is set): "
                                                    "role "), endpoint.path
    send = spec["paths"]["/camellia/delayQueue/sendMsg"]["post"]["description"]
    assert send == ("**Token** (while `auth-tokens` is set): role produce (or admin); its "
                    "`namespaces` must match the server's namespace, and its `topics` must "
                    "match the request's topic.")
    open_paths = {e.path for e in ENDPOINTS if e.rule is OPEN}
    assert open_paths == {"/camellia/health/status", "/camellia/health/check",
                          "/openapi.json", "/docs", "/docs/swagger-ui-bundle.js",
                          "/docs/swagger-ui.css"}


def test_every_route_is_documented_and_every_documented_path_is_a_route(app, spec):
    served = routes(app)
    documented = {path: {m.upper() for m in ops} for path, ops in spec["paths"].items()}
    undocumented = sorted(set(served) - set(documented))
    not_routes = sorted(set(documented) - set(served))
    wrong_methods = {path: (sorted(served[path]), sorted(documented[path]))
                     for path in set(served) & set(documented)
                     if served[path] != documented[path]}
    assert not undocumented, f"routes missing from /openapi.json: {undocumented}"
    assert not not_routes, f"/openapi.json documents paths that are not routes: {not_routes}"
    assert not wrong_methods, f"methods differ (served, documented): {wrong_methods}"


def test_the_coverage_figure(app, spec):
    """Operations (path, method) documented over operations served: printed for the report."""
    served = {(path, m) for path, methods in routes(app).items() for m in methods}
    documented = {(path, m.upper()) for path, ops in spec["paths"].items() for m in ops}
    covered = len(served & documented)
    print(f"openapi coverage: {covered}/{len(served)} served operations documented")
    assert covered == len(served)


def examples(spec):
    """(where, schema, example) for every example in the document."""
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            media_sets = [("request", op.get("requestBody", {}).get("content", {}))]
            media_sets += [(f"response {code}", answer.get("content", {}))
                           for code, answer in op["responses"].items()]
            for part, contents in media_sets:
                for media, content in contents.items():
                    where = f"{method.upper()} {path} {part} {media}"
                    if "example" in content:
                        yield where, content["schema"], content["example"]
                    for name, example in content.get("examples", {}).items():
                        yield f"{where} [{name}]", content["schema"], example["value"]


def test_every_example_validates_against_its_schema(spec):
    checked = 0
    failures = []
    for where, schema, example in examples(spec):
        errors = list(_validator(spec, schema).iter_errors(example))
        checked += 1
        if errors:
            failures.append(f"{where}: {errors[0].message}")
    assert not failures, "\n".join(failures)
    # Every JSON endpoint has a success example; the batch ones a request example as well.
    assert checked >= len(spec["paths"]) + 3


def test_every_example_is_checked_by_the_validator(spec):
    """The validator is not vacuous: a broken example of each answer schema fails."""
    broken = {"code": 200, "msg": "success", "delayMsg": {"topic": "t"}}
    schema = spec["paths"]["/camellia/delayQueue/getMsg"]["get"]["responses"]["200"][
        "content"]["application/json"]["schema"]
    assert list(_validator(spec, schema).iter_errors(broken))


def answer_schema(spec, path, method="post"):
    return spec["paths"][path][method]["responses"]["200"]["content"]["application/json"][
        "schema"]


def test_real_answers_satisfy_the_documented_schemas(app, spec):
    """Drive every non-batch JSON endpoint through the real app and Lua on real Redis."""
    http = app.test_client()
    topic = f"openapi-{uuid.uuid4().hex[:8]}"
    base = "/camellia/delayQueue/"
    calls = [
        ("setTopicConfig", {"topic": topic, "maxRetry": 0, "redeliveryDelayMillis": 0}),
        ("getTopicConfig", {"topic": topic}),
        ("sendMsg", {"topic": topic, "msg": "a", "msgId": "m1", "attributes": '{"k":"v"}'}),
        ("sendMsg", {"topic": topic, "msg": "a", "msgId": "m1"}),           # duplicate
        ("sendMsg", {"topic": topic, "msg": "b", "msgId": "m2", "delayMillis": 60_000}),
        ("sendMsg", {"topic": topic, "msg": "c", "msgId": "g1", "groupId": "g"}),
        ("sendMsg", {"topic": topic, "msg": "d", "msgId": "g2", "groupId": "g"}),  # blocked
        ("rescheduleMsg", {"topic": topic, "msgId": "m2", "delayMillis": 120_000}),
        ("pullMsg", {"topic": topic, "batch": 5}),
        ("longPollingMsg", {"topic": topic, "longPollingTimeoutMillis": 1}),
        ("getMsg", {"topic": topic, "msgId": "m1"}),               # receipt, ackDeadline
        ("getMsg", {"topic": topic, "msgId": "g2"}),                        # blocked: 2
        ("getTopicInfo", {"topic": topic}),                                 # one blocked
        ("listMsg", {"topic": topic, "status": 1}),
        ("listMsg", {"topic": topic, "status": 2}),                         # empty
        ("listMsg", {"topic": topic, "status": 3, "limit": 1}),             # nextCursor
        ("listMsg", {"topic": topic, "groupBlocked": "true"}),
        ("listMsg", {"topic": topic, "status": 4}),                         # 400
        ("pauseTopic", {"topic": topic}),
        ("getTopicInfo", {"topic": topic}),                                 # paused
        ("resumeTopic", {"topic": topic}),
        ("pauseTopic", {"topic": f"{topic}-unknown"}),                      # 404
        ("changeVisibility", {"topic": topic, "msgId": "m1", "ackTimeoutMillis": 60_000}),
        ("ackMsg", {"topic": topic, "msgId": "m1", "ack": "false"}),        # -> dead letter
        ("listDeadMsg", {"topic": topic}),
        ("getMsg", {"topic": topic, "msgId": "m1"}),                        # deadTime
        ("redriveDeadMsg", {"topic": topic, "msgId": "m1"}),
        ("pullMsg", {"topic": topic}),
        ("ackMsg", {"topic": topic, "msgId": "m1"}),
        ("purgeDeadMsg", {"topic": topic}),
        ("deleteMsg", {"topic": topic, "msgId": "m2"}),
        ("purgeTopic", {"topic": topic, "limit": 1}),                       # stops at 1
        ("purgeTopic", {"topic": topic}),
        ("getMsg", {"topic": topic, "msgId": "nope"}),                      # 404
        ("sendMsg", {"topic": topic}),                                      # 400
        ("getTopicInfo", {"topic": topic}),
        ("getTopicInfoList", {}),
        ("getMonitorData", {}),
    ]
    seen_codes, grouped = set(), 0
    for name, values in calls:
        for method in ("get", "post"):
            if name in ("sendMsg", "pullMsg", "ackMsg", "redriveDeadMsg", "deleteMsg",
                        "purgeDeadMsg", "rescheduleMsg", "changeVisibility",
                        "longPollingMsg", "pauseTopic", "resumeTopic",
                        "purgeTopic") and method == "get":
                continue      # a write: once is enough
            response = (http.get(base + name, query_string=values) if method == "get"
                        else http.post(base + name, data=values))
            body = response.get_json()
            seen_codes.add(body["code"])
            grouped += '"groupId"' in response.get_data(as_text=True)
            errors = list(_validator(spec, answer_schema(spec, base + name, method))
                          .iter_errors(body))
            assert not errors, f"{method} {name} {values}: {body}: {errors[0].message}"
    assert seen_codes == {200, 400, 404}
    assert grouped >= 5       # the grouped sends, their pull and getMsg (twice) carry groupId
    for path in ("/camellia/health/check", "/camellia/health/status"):
        body = http.get(path).get_json()
        assert not list(_validator(spec, answer_schema(spec, path, "get")).iter_errors(body))


def test_a_real_change_visibility_batch_answer_satisfies_its_schema(app, spec):
    """The batch answer's entries carry the message (as changeVisibility shows it) or an
    error."""
    http = app.test_client()
    topic = f"openapi-{uuid.uuid4().hex[:8]}"
    base = "/camellia/delayQueue/"
    http.post(base + "sendMsg", data={"topic": topic, "msg": "a", "msgId": "m1"})
    [delivered] = http.post(base + "pullMsg", data={"topic": topic}).get_json()["delayMsgList"]
    body = http.post(base + "changeVisibilityBatch", json={"topic": topic, "entries": [
        {"msgId": "m1", "receipt": delivered["receipt"], "ackTimeoutMillis": 60_000},
        {"msgId": "m1", "receipt": "0.1", "ackTimeoutMillis": 0},
        {"msgId": "nope", "ackTimeoutMillis": 0},
        {"msgId": "m1"}]}).get_json()
    assert [r["code"] for r in body["results"]] == [200, 409, 404, 400]
    assert body["results"][0]["delayMsg"]["status"] == 3
    assert "receipt" not in body["results"][0]["delayMsg"]    # as changeVisibility: not shown
    errors = list(_validator(spec, answer_schema(spec, base + "changeVisibilityBatch"))
                  .iter_errors(body))
    assert not errors, f"{body}: {errors[0].message}"


def test_served_document_is_the_built_one(app, spec):
    response = app.test_client().get("/openapi.json")
    assert response.status_code == 200
    assert response.get_json() == spec
