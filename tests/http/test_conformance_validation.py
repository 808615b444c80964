"""Refusals: a request that breaks a rule answers code 400 naming the parameter, and
writes nothing; the limits themselves are accepted."""

from __future__ import annotations

import pytest

from support import conformance as api

pytestmark = pytest.mark.every_topology


@pytest.mark.parametrize("case", ["topic_too_long", "topic_brace_open", "topic_brace_close",
                                  "topic_control_char", "msg_id_too_long",
                                  "msg_id_control_char", "msg_too_large",
                                  "msg_too_large_multibyte"])
def test_send_that_breaks_a_rule_is_code_400_naming_the_parameter_and_writes_nothing(
        node, topic, raw_redis, case):
    params = {"topic": topic, "msg": "x", "msgId": "m"}
    checked = topic
    name = {"topic_too_long": "topic", "topic_brace_open": "topic",
            "topic_brace_close": "topic", "topic_control_char": "topic",
            "msg_id_too_long": "msgId", "msg_id_control_char": "msgId",
            "msg_too_large": "msg", "msg_too_large_multibyte": "msg"}[case]
    if case == "topic_too_long":
        params["topic"] = checked = (topic + "x" * 300)[:257]
    elif case == "topic_brace_open":
        params["topic"] = topic + "{"
    elif case == "topic_brace_close":
        params["topic"] = topic + "}"
    elif case == "topic_control_char":
        params["topic"] = topic + "\x01"
    elif case == "msg_id_too_long":
        params["msgId"] = "i" * 257
    elif case == "msg_id_control_char":
        params["msgId"] = "a\nb"
    elif case == "msg_too_large":
        params["msg"] = "x" * (api.MIB + 1)
    else:
        params["msg"] = "é" * (api.MIB // 2) + "x"        # 1 MiB + 1 byte in UTF-8
    status_code, reply = api.post(node, "sendMsg", **params)
    assert status_code == 200
    assert reply["code"] == 400
    assert reply["msg"].startswith(name + ":"), reply["msg"]
    api.assert_nothing_written(raw_redis, checked)
    api.assert_nothing_written(raw_redis, topic)


def test_limits_themselves_are_accepted(node, topic):
    m = api.send(node, topic, msgId="i" * 256, msg="x" * api.MIB)
    assert len(m["msg"]) == api.MIB
    long_topic = (topic + "t" * 300)[:256]
    assert api.send(node, long_topic, msgId="m")["topic"] == long_topic
    assert len(api.pull(node, topic, batch=1000)) == 1


def test_batch_over_1000_is_code_400_and_pulls_nothing(node, topic):
    api.send(node, topic, msgId="r")
    status_code, reply = api.post(node, "pullMsg", topic=topic, batch=1001)
    assert status_code == 200 and reply["code"] == 400 and reply["msg"].startswith("batch")
    assert api.status(node, topic, "r") == 2


def test_long_polling_timeout_over_60000_is_code_400(node, topic, raw_redis):
    status_code, reply = api.post(node, "longPollingMsg", topic=topic,
                                  longPollingTimeoutMillis=60_001)
    assert status_code == 200 and reply["code"] == 400
    assert reply["msg"].startswith("longPollingTimeoutMillis")
    api.assert_nothing_written(raw_redis, topic)


@pytest.mark.parametrize("params,name", [
    ({"msg": "x", "delayMillis": "abc"}, "delayMillis"),
    ({"msg": "x", "ttlMillis": "1.5"}, "ttlMillis"),
    ({"msg": "x", "maxRetry": "many"}, "maxRetry"),
    ({"msg": "x", "triggerTime": "soon"}, "triggerTime"),
    ({}, "msg"),
])
def test_unconvertible_or_missing_send_parameter_is_http_400(node, topic, raw_redis, params,
                                                            name):
    status_code, reply = api.post(node, "sendMsg", topic=topic, **params)
    assert status_code == 400 and reply["code"] == 400
    assert reply["msg"].startswith(name), reply["msg"]
    api.assert_nothing_written(raw_redis, topic)


def test_an_empty_msg_is_code_400_in_http_200_as_camellia_answers_it(node, topic, raw_redis):
    """Every case of camellia's SDK: tests/http/test_conformance_camellia_params.py."""
    assert api.post(node, "sendMsg", topic=topic, msg="") == \
        (200, {"code": 400, "msg": "msg: must not be empty"})
    api.assert_nothing_written(raw_redis, topic)


@pytest.mark.parametrize("endpoint", ["sendMsg", "pullMsg", "longPollingMsg", "ackMsg",
                                      "getMsg", "deleteMsg", "getTopicInfo"])
def test_missing_topic_is_http_400(node, endpoint):
    status_code, reply = api.post(node, endpoint, msg="x", msgId="m")
    assert status_code == 400 and reply["code"] == 400 and reply["msg"].startswith("topic")


@pytest.mark.parametrize("endpoint", ["ackMsg", "getMsg", "deleteMsg"])
def test_missing_msg_id_is_http_400(node, topic, endpoint):
    status_code, reply = api.post(node, endpoint, topic=topic)
    assert status_code == 400 and reply["code"] == 400 and reply["msg"].startswith("msgId")


def test_rejected_pull_and_ack_register_no_topic(node, topic, raw_redis):
    api.post(node, "pullMsg", topic=topic, batch=5000)
    api.post(node, "pullMsg", topic=topic, ackTimeoutMillis="x")
    api.post(node, "ackMsg", topic=topic, msgId="m", ack="perhaps")
    api.post(node, "longPollingMsg", topic=topic, longPollingTimeoutMillis="x")
    api.assert_nothing_written(raw_redis, topic)
