"""The recurring schedule endpoints (ours) on a live node: create (form and JSON), the
waiting occurrence seen by getMsg and listMsg, occurrences pulled with the real clock never
early and exactly once, get, list, delete, pause, resume, every bad parameter, unknown topic
and schedule, and the token rule of listSchedules without a topic. On standalone, Sentinel
and Cluster: the scripts take the topic's slot, the index the namespace's."""

from __future__ import annotations

import json
import time

import pytest
from jsonschema import Draft202012Validator

from delayqueue.http.app import create_app
from delayqueue.http.openapi import document

from support import conformance as api

pytestmark = pytest.mark.every_topology

Q = "/camellia/delayQueue/"


def create(node, topic, sid="s", **params):
    params.setdefault("msg", "tick")
    reply = api.call(node, "createSchedule", topic=topic, scheduleId=sid, **params)
    assert reply["code"] == 200, reply
    return reply["data"]


def test_create_answers_the_schedule_and_its_waiting_occurrence_is_a_message(node, topic,
                                                                            raw_redis):
    start = api.redis_now_ms(raw_redis) + 60_000
    schedule = create(node, topic, everyMillis=5000, startTime=start,
                      attributes='{"k":"v"}', groupId="g", maxRetry=2)
    assert schedule == {
        "scheduleId": "s", "topic": topic, "cron": None, "timezone": None,
        "everyMillis": 5000, "msg": "tick", "attributes": {"k": "v"}, "groupId": "g",
        "ttlMillis": None, "maxRetry": 2, "startTime": start, "endTime": None, "limit": None,
        "misfire": "once", "paused": False, "createdTime": schedule["createdTime"],
        "sentCount": 1, "missedCount": 0, "lastFireTime": None, "nextFireTime": start,
        "nextFireTimes": [start + k * 5000 for k in range(5)]}
    waiting = api.get_msg(node, topic, f"s:{start}")
    assert (waiting["status"], waiting["triggerTime"], waiting["msg"], waiting["groupId"],
            waiting["attributes"], waiting["maxRetry"]) == (1, start, "tick", "g", {"k": "v"}, 2)
    listed = api.call(node, "listMsg", topic=topic, status=1)["delayMsgList"]
    assert [m["msgId"] for m in listed] == [f"s:{start}"]
    assert api.call(node, "getSchedule", topic=topic, scheduleId="s") == {
        "code": 200, "msg": "success", "data": schedule}


def test_create_takes_a_json_body_and_a_cron_in_a_time_zone(node, topic):
    status, reply = api.post_json(node, "createSchedule", {
        "topic": topic, "scheduleId": "nightly", "msg": "report", "cron": "30 2 * * *",
        "timezone": "Europe/Paris", "attributes": {"kind": "daily"}, "limit": 3})
    assert status == 200 and reply["code"] == 200, reply
    times = reply["data"]["nextFireTimes"]
    assert len(times) == 3 and all(b - a == 86_400_000 for a, b in zip(times, times[1:]))
    # 02:30 in Paris: 00:30 or 01:30 UTC.
    assert all(t % 86_400_000 in (1_800_000, 5_400_000) for t in times)


def test_occurrences_are_pulled_with_the_real_clock_never_early_and_exactly_once(node, topic,
                                                                                raw_redis):
    """everyMillis=1000 for about four seconds: every fire time is delivered once, at or
    after its fire time, and none is skipped."""
    schedule = create(node, topic, everyMillis=1000)
    first = schedule["nextFireTime"]
    seen: dict[str, int] = {}
    deadline = time.monotonic() + 4.5
    while time.monotonic() < deadline:
        reply = api.call(node, "longPollingMsg", topic=topic, batch=10,
                         longPollingTimeoutMillis=500)
        now = api.redis_now_ms(raw_redis)
        for message in reply["delayMsgList"]:
            fire = int(message["msgId"].rpartition(":")[2])
            assert message["msgId"] not in seen, message
            assert now >= fire and message["triggerTime"] == fire, (now, message)
            seen[message["msgId"]] = fire
            assert api.ack(node, topic, message["msgId"], message["receipt"])["code"] == 200
    fires = list(seen.values())                              # in delivery order
    # Every fire time once, in order, none skipped. The first is the create answer's
    # nextFireTime, or the one before it when the loop wrote that one as the answer was made.
    assert len(fires) >= 4 and fires == [fires[0] + k * 1000 for k in range(len(fires))]
    assert fires[0] in (first - 1000, first), (first, fires)
    info = api.call(node, "getSchedule", topic=topic, scheduleId="s")["data"]
    assert info["missedCount"] == 0 and info["nextFireTime"] == fires[-1] + 1000


def test_list_pages_and_delete_pause_resume(node, topic, raw_redis):
    start = api.redis_now_ms(raw_redis) + 60_000
    for sid in ("b", "a", "c"):
        create(node, topic, sid, everyMillis=1000, startTime=start)
    page = api.call(node, "listSchedules", topic=topic, limit=2)
    assert [s["scheduleId"] for s in page["data"]] == ["a", "b"]
    assert set(page) == {"code", "msg", "data", "nextCursor"}      # the contract's shape
    rest = api.call(node, "listSchedules", topic=topic, cursor=page["nextCursor"])
    assert [s["scheduleId"] for s in rest["data"]] == ["c"] and "nextCursor" not in rest
    assert "nextFireTimes" not in page["data"][0]

    assert api.call(node, "deleteSchedule", topic=topic, scheduleId="a") == {
        "code": 200, "msg": "success", "deleted": True, "occurrenceDeleted": True}
    assert api.status(node, topic, f"a:{start}") == 7
    assert api.call(node, "getSchedule", topic=topic, scheduleId="a") == {
        "code": 404, "msg": f"scheduleId: no schedule 'a' in topic '{topic}'"}

    paused = api.call(node, "pauseSchedule", topic=topic, scheduleId="b")
    assert paused["changed"] is True and paused["data"]["paused"] is True
    assert paused["data"]["nextFireTime"] is None
    assert api.status(node, topic, f"b:{start}") == 7
    resumed = api.call(node, "resumeSchedule", topic=topic, scheduleId="b")
    assert resumed["changed"] is True and resumed["data"]["paused"] is False
    assert resumed["data"]["nextFireTime"] == start     # startTime is still ahead
    assert set(paused) == set(resumed) == {"code", "msg", "data", "changed"}
    assert (paused["data"]["sentCount"], resumed["data"]["sentCount"]) == (0, 1)
    assert api.status(node, topic, f"b:{start}") == 1       # written anew


def test_every_answer_has_the_contracts_shape_and_satisfies_its_documented_schema(
        node, topic, raw_redis):
    """The object under data (as getTopicConfig), what is about the call beside it; each
    real answer, 200 or not, satisfies the schema /openapi.json gives its route."""
    spec = document()
    start = api.redis_now_ms(raw_redis) + 60_000
    create(node, topic, "b", everyMillis=1000, startTime=start)
    answers = [(name, api.call(node, name, topic=topic, **values)) for name, values in [
        ("createSchedule", {"scheduleId": "a", "msg": "m", "cron": "0 3 * * *",
                            "timezone": "Europe/Paris", "limit": 2}),
        ("getSchedule", {"scheduleId": "a"}),
        ("listSchedules", {"limit": 1}),
        ("listSchedules", {}),
        ("pauseSchedule", {"scheduleId": "a"}), ("pauseSchedule", {"scheduleId": "a"}),
        ("resumeSchedule", {"scheduleId": "a"}), ("resumeSchedule", {"scheduleId": "a"}),
        ("deleteSchedule", {"scheduleId": "a"}),
        ("getSchedule", {"scheduleId": "a"}),                               # 404
        ("createSchedule", {"scheduleId": "x", "msg": "m", "cron": "* * *"}),  # 400
    ]]
    shapes = [(name, sorted(set(answer) - {"code", "msg"})) for name, answer in answers]
    assert shapes == [
        ("createSchedule", ["data"]), ("getSchedule", ["data"]),
        ("listSchedules", ["data", "nextCursor"]), ("listSchedules", ["data"]),
        ("pauseSchedule", ["changed", "data"]), ("pauseSchedule", ["changed", "data"]),
        ("resumeSchedule", ["changed", "data"]), ("resumeSchedule", ["changed", "data"]),
        ("deleteSchedule", ["deleted", "occurrenceDeleted"]),
        ("getSchedule", []), ("createSchedule", [])]
    assert [a["code"] for _, a in answers][-2:] == [404, 400]
    assert answers[0][1]["data"]["nextFireTimes"] == answers[1][1]["data"]["nextFireTimes"]
    assert [s["scheduleId"] for s in answers[3][1]["data"]] == ["a", "b"]
    assert [a["changed"] for _, a in answers[4:8]] == [True, False, True, False]
    for name, answer in answers:
        errors = [e.message for e in answer_validator(spec, name).iter_errors(answer)]
        assert not errors, (name, answer, errors)
    got = answers[1][1]
    for broken in ({**got, "data": {**got["data"], "sentCount": "1"}},      # not vacuous
                   {"code": 200, "msg": "success", "schedule": got["data"]}):
        assert list(answer_validator(spec, "getSchedule").iter_errors(broken)), broken


def answer_validator(spec, name: str) -> Draft202012Validator:
    """The validator of a route's documented answer (its refs resolved in the document)."""
    schema = spec["paths"][Q + name]["post"]["responses"]["200"]["content"][
        "application/json"]["schema"]
    return Draft202012Validator({**spec, "$ref": "#/$defs/target",
                                 "$defs": {"target": schema}})


def test_the_write_routes_take_post_only(node, topic):
    for name in ("createSchedule", "deleteSchedule", "pauseSchedule", "resumeSchedule"):
        response = api.SESSION.get(node.url + Q + name, params={"topic": topic}, timeout=10)
        assert response.status_code == 405, name
    response = api.SESSION.get(node.url + Q + "getSchedule",
                               params={"topic": topic, "scheduleId": "s"}, timeout=10)
    assert response.json()["code"] == 404


def test_unknown_topic_and_unknown_schedule_answer_404_and_create_nothing(node, topic,
                                                                         raw_redis):
    for name in ("getSchedule", "deleteSchedule", "pauseSchedule", "resumeSchedule"):
        assert api.call(node, name, topic=topic, scheduleId="s") == {
            "code": 404, "msg": f"topic: no topic '{topic}': it holds no message, no "
                                "schedule and has no settings"}, name
    assert api.call(node, "listSchedules", topic=topic)["code"] == 404
    api.assert_nothing_written(raw_redis, topic)
    api.send(node, topic)
    for name in ("getSchedule", "deleteSchedule", "pauseSchedule", "resumeSchedule"):
        assert api.call(node, name, topic=topic, scheduleId="ghost") == {
            "code": 404, "msg": f"scheduleId: no schedule 'ghost' in topic '{topic}'"}, name
    assert api.call(node, "listSchedules", topic=topic) == {
        "code": 200, "msg": "success", "data": []}


BAD = [
    ({"everyMillis": 999}, 200, "everyMillis: must be an integer >= 1000 and at most"),
    ({"everyMillis": "abc"}, 400, "everyMillis: "),
    ({}, 400, "cron, everyMillis: give one of them"),
    ({"everyMillis": 1000, "cron": "* * * * *"}, 200,
     "cron, everyMillis: give cron or everyMillis, not both"),
    ({"cron": "* * * *"}, 200, "cron: must have 5 fields: minute hour day-of-month month "
                               "day-of-week"),
    ({"cron": "@daily"}, 200, "cron: "),
    ({"cron": "* * * * *", "timezone": "Mars/Olympus"}, 200, "timezone: "),
    ({"everyMillis": 1000, "timezone": "UTC"}, 200, "timezone: applies to cron only"),
    ({"everyMillis": 1000, "startTime": 2000, "endTime": 1000}, 200,
     "endTime: must be after startTime"),
    ({"everyMillis": 1000, "startTime": -1}, 200, "startTime: must be milliseconds"),
    ({"everyMillis": 1000, "limit": 0}, 200, "limit: "),
    ({"everyMillis": 1000, "misfire": "never"}, 200, "misfire: must be one of once, skip, "
                                                     "all"),
    ({"everyMillis": 1000, "ttlMillis": 0}, 200, "ttlMillis: must be >= 1"),
    ({"everyMillis": 1000, "maxRetry": -1}, 200, "maxRetry: must be >= 0"),
    ({"everyMillis": 1000, "attributes": "[1]"}, 200, "attributes: "),
    ({"everyMillis": 1000, "groupId": "a\tb"}, 200, "groupId: "),
    ({"everyMillis": 1000, "scheduleId": "x" * 242}, 200, "scheduleId: must be at most 241"),
    ({"everyMillis": 1000, "scheduleId": "a\nb"}, 200, "scheduleId: must not contain control"),
    ({"everyMillis": 1000, "msg": ""}, 400, "msg: required parameter is missing or empty"),
]


@pytest.mark.parametrize("params, http, text", BAD, ids=[b[2][:30] for b in BAD])
def test_every_bad_parameter_is_refused_naming_it_and_writes_nothing(node, topic, raw_redis,
                                                                   params, http, text):
    status, reply = api.post(node, "createSchedule", **{"topic": topic, "scheduleId": "s",
                                                         "msg": "tick", **params})
    assert (status, reply["code"]) == (http, 400) and reply["msg"].startswith(text), reply
    api.assert_nothing_written(raw_redis, topic)


def test_list_without_a_topic_needs_a_token_that_covers_every_topic(redis_url):
    tokens = [{"name": "all", "secret": "all-topics-secret-01", "roles": ["produce"]},
              {"name": "narrow", "secret": "narrow-secret-0002", "roles": ["consume"],
               "topics": ["t-*"]}]
    app = create_app(overrides={"redis_url": redis_url, "snapshot_dir": "",
                                "auth_tokens": json.dumps(tokens)})
    client = app.test_client()
    narrow = {"Authorization": "Bearer narrow-secret-0002"}
    every = {"Authorization": "Bearer all-topics-secret-01"}
    refused = client.post(Q + "listSchedules", headers=narrow)
    assert refused.get_json() == {"code": 403, "msg": "topic: required for token 'narrow', "
                                                      "which is limited to topics ['t-*']"}
    created = client.post(Q + "createSchedule", headers=every, data={
        "topic": "t-1", "scheduleId": "s", "msg": "m", "everyMillis": 60_000})
    assert created.get_json()["code"] == 200
    listed = client.post(Q + "listSchedules", headers=every).get_json()
    assert [(s["topic"], s["scheduleId"]) for s in listed["data"]] == [("t-1", "s")]
    own = client.post(Q + "listSchedules", headers=narrow, data={"topic": "t-1"}).get_json()
    assert own["code"] == 200 and len(own["data"]) == 1
