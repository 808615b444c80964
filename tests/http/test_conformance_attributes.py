"""Message attributes (ours): round trips in every transport, the limits, the refusals."""

from __future__ import annotations

import json

import pytest

from support import conformance as api

ATTRS = {"trace-id": "abc-123", "ключ": "значение ✓", "emoji": "🎉 中文", "empty": ""}


@pytest.mark.parametrize("transport", ["form", "json", "query"])
def test_attributes_round_trip_with_unicode(node, topic, transport):
    if transport == "form":
        reply = api.call(node, "sendMsg", topic=topic, msgId="a", msg="x", maxRetry=0,
                         attributes=json.dumps(ATTRS, ensure_ascii=False))
    elif transport == "json":
        reply = api.post_json(node, "sendMsg", {"topic": topic, "msgId": "a", "msg": "x",
                                                "maxRetry": 0, "attributes": ATTRS})[1]
    else:
        reply = api.SESSION.get(node.url + api.API + "sendMsg", timeout=10, params={
            "topic": topic, "msgId": "a", "msg": "x", "maxRetry": 0,
            "attributes": json.dumps(ATTRS)}).json()
    assert reply["code"] == 200, reply
    assert reply["delayMsg"]["attributes"] == ATTRS
    assert api.get_msg(node, topic, "a")["attributes"] == ATTRS
    dup = api.call(node, "sendMsg", topic=topic, msgId="a", msg="y",
                   attributes=json.dumps({"other": "1"}))
    assert dup["duplicate"] is True and dup["delayMsg"]["attributes"] == ATTRS
    delivered = api.pull_one(node, topic, "a")
    assert delivered["attributes"] == ATTRS
    assert api.nack(node, topic, "a", delivered["receipt"])["code"] == 200
    (dead,) = api.list_dead(node, topic)["delayMsgList"]
    assert dead["attributes"] == ATTRS


def test_attributes_absent_when_none_were_given(node, topic):
    for params in ({}, {"attributes": "{}"}):
        m = api.send(node, topic, **params)
        assert "attributes" not in m
        assert "attributes" not in api.get_msg(node, topic, m["msgId"])
    assert all("attributes" not in m for m in api.pull(node, topic, batch=10))


def test_attributes_at_the_limits_are_accepted(node, topic):
    keys32 = {f"k{i}": "v" for i in range(32)}
    assert api.send(node, topic, attributes=json.dumps(keys32))["attributes"] == keys32
    exact = {"k": "v" * 8191}                                 # 8192 bytes
    assert api.send(node, topic, attributes=json.dumps(exact))["attributes"] == exact
    multibyte = {"é": "é" * 4095}                              # 2 + 8190 bytes
    assert api.send(node, topic, attributes=json.dumps(multibyte))["attributes"] == multibyte


BAD_ATTRIBUTES = {
    "33_keys": json.dumps({f"k{i}": "v" for i in range(33)}),
    "8193_bytes": json.dumps({"k": "v" * 8192}),
    "8194_bytes_multibyte": json.dumps({"é": "é" * 4096}),
    "number_value": json.dumps({"k": 1}),
    "null_value": json.dumps({"k": None}),
    "bool_value": json.dumps({"k": True}),
    "list_value": json.dumps({"k": ["a"]}),
    "object_value": json.dumps({"k": {"a": "b"}}),
    "a_list": json.dumps(["a", "b"]),
    "a_string": json.dumps("text"),
    "a_number": "5",
    "not_json": "{k: v",
}


@pytest.mark.parametrize("case", list(BAD_ATTRIBUTES))
def test_bad_attributes_are_refused_and_nothing_is_written(node, topic, raw_redis, case):
    status_code, reply = api.post(node, "sendMsg", topic=topic, msg="x", msgId="m",
                                  attributes=BAD_ATTRIBUTES[case])
    assert reply["code"] == 400, reply
    assert reply["msg"].startswith("attributes"), reply
    api.assert_nothing_written(raw_redis, topic)


@pytest.mark.parametrize("value", [["a"], "text", 5, {"k": 1}, {"k": None}])
def test_bad_attributes_in_a_json_body_are_refused(node, topic, raw_redis, value):
    status_code, reply = api.post_json(node, "sendMsg", {"topic": topic, "msg": "x",
                                                         "attributes": value})
    assert reply["code"] == 400 and reply["msg"].startswith("attributes"), reply
    api.assert_nothing_written(raw_redis, topic)
