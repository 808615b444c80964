"""What camellia's Java SDK sends, answered as camellia's server answers it (issue 31).

The SDK posts a form with every parameter of the call, always: a Java null goes out as the
text ``null``, an SDK default as ``ttlMillis=-1`` and ``maxRetry=-1``, and the caller's
empty string as an empty value. It throws on any HTTP status other than 200 and takes the
node out of its server list for a while, so a request camellia answers HTTP 200 must be
answered HTTP 200 here too:

- every parameter present and valid, ``-1`` for the defaults: HTTP 200, code 200;
- a required text parameter (``topic``, ``msgId``, ``msg``) empty: HTTP 200 with code 400
  naming it, as camellia's own check answers (Spring takes ``""`` as a value); nothing
  written;
- the text ``null``: a value like any other;
- a parameter absent or unconvertible: HTTP 400, code 400 (Spring's answer in camellia).

The whole rule, for our endpoints too: delayqueue/http/param_rules.py, docs/api.md
("Parameter errors").
"""

from __future__ import annotations

import pytest

from support import conformance as api

pytestmark = pytest.mark.every_topology

NOT_SENT = object()


def sdk_form(endpoint: str, topic: str, msg_id: str) -> dict[str, object]:
    """Every parameter camellia's SDK sends to ``endpoint`` (camellia-delay-queue-sdk's
    CamelliaDelayQueueApi), with the values its defaults give."""
    return {
        "sendMsg": {"topic": topic, "msgId": msg_id, "msg": "body", "delayMillis": 0,
                    "ttlMillis": -1, "maxRetry": -1},
        # An older SDK names the ack timeout timeoutMillis: unknown, ignored.
        "pullMsg": {"topic": topic, "batch": 1, "ackTimeoutMillis": -1, "timeoutMillis": -1},
        "longPollingMsg": {"topic": topic, "batch": 1, "ackTimeoutMillis": -1,
                           "longPollingTimeoutMillis": 100},
        "ackMsg": {"topic": topic, "msgId": msg_id, "ack": "true"},
        "getMsg": {"topic": topic, "msgId": msg_id},
        "deleteMsg": {"topic": topic, "msgId": msg_id},
        "getTopicInfo": {"topic": topic},
        "getTopicInfoList": {},
        "getMonitorData": {},
    }[endpoint]


REQUIRED_TEXT = [("sendMsg", "topic"), ("sendMsg", "msg"), ("pullMsg", "topic"),
                 ("longPollingMsg", "topic"), ("ackMsg", "topic"), ("ackMsg", "msgId"),
                 ("getMsg", "topic"), ("getMsg", "msgId"), ("deleteMsg", "topic"),
                 ("deleteMsg", "msgId"), ("getTopicInfo", "topic")]
UNCONVERTIBLE = [("sendMsg", "delayMillis"), ("sendMsg", "ttlMillis"),
                 ("sendMsg", "maxRetry"), ("pullMsg", "batch"),
                 ("pullMsg", "ackTimeoutMillis"), ("longPollingMsg", "batch"),
                 ("longPollingMsg", "ackTimeoutMillis"),
                 ("longPollingMsg", "longPollingTimeoutMillis"), ("ackMsg", "ack")]


def sdk_post(node, endpoint, topic, msg_id="m", /, **changed):
    """(HTTP status, envelope) of the SDK's form for ``topic`` and ``msg_id``, with
    ``changed`` values (NOT_SENT: left out, as a client other than the SDK may)."""
    form = {**sdk_form(endpoint, topic, msg_id), **changed}
    return api.post(node, endpoint, **{k: v for k, v in form.items() if v is not NOT_SENT})


def test_every_parameter_as_the_sdk_sends_it(node, topic):
    status_code, reply = sdk_post(node, "sendMsg", topic, "a")
    assert status_code == 200 and reply["code"] == 200, reply
    sent = reply["delayMsg"]
    assert sent["maxRetry"] == 10                                    # -1: the server's
    assert sent["expireTime"] - sent["triggerTime"] == api.HOUR      # -1: the server's ttl
    assert sent["status"] == 2
    status_code, reply = sdk_post(node, "pullMsg", topic)
    assert status_code == 200 and [m["msgId"] for m in reply["delayMsgList"]] == ["a"]
    assert sdk_post(node, "ackMsg", topic, "a") == (200, {"code": 200, "msg": "success"})
    status_code, reply = sdk_post(node, "getMsg", topic, "a")
    assert status_code == 200 and reply["delayMsg"]["status"] == 4
    sdk_post(node, "sendMsg", topic, "b", delayMillis=-5)            # negative: due now
    status_code, reply = sdk_post(node, "longPollingMsg", topic)
    assert status_code == 200 and [m["msgId"] for m in reply["delayMsgList"]] == ["b"]
    assert sdk_post(node, "deleteMsg", topic, "b") == (200, {"code": 200, "msg": "success"})
    status_code, reply = sdk_post(node, "getTopicInfo", topic)
    assert status_code == 200 and reply["data"]["topic"] == topic
    for endpoint in ("getTopicInfoList", "getMonitorData"):
        status_code, reply = sdk_post(node, endpoint, topic)
        assert status_code == 200 and reply["code"] == 200, reply


@pytest.mark.parametrize("endpoint, name", REQUIRED_TEXT, ids=lambda v: v)
def test_an_empty_required_text_parameter_is_http_200_code_400(node, topic, raw_redis,
                                                               endpoint, name):
    assert sdk_post(node, endpoint, topic, **{name: ""}) == \
        (200, {"code": 400, "msg": f"{name}: must not be empty"})
    api.assert_nothing_written(raw_redis, topic)
    assert raw_redis.zscore(api.NS.topics, "") is None


def test_an_empty_parameter_refuses_only_its_request(node, topic):
    """The node is not sick: the same caller's next requests succeed."""
    assert sdk_post(node, "sendMsg", topic, "a", msg="")[0] == 200
    assert sdk_post(node, "sendMsg", topic, "a")[1]["code"] == 200
    assert sdk_post(node, "ackMsg", topic, "")[0] == 200
    assert [m["msgId"] for m in sdk_post(node, "pullMsg", topic)[1]["delayMsgList"]] == ["a"]
    assert sdk_post(node, "ackMsg", topic, "a")[1]["code"] == 200


def test_the_text_null_is_a_value(node, topic):
    """A Java null goes out as the text null: an ordinary body, msgId or topic."""
    status_code, reply = sdk_post(node, "sendMsg", topic, "null", msg="null")
    assert status_code == 200 and reply["delayMsg"]["msg"] == "null"
    assert reply["delayMsg"]["msgId"] == "null"
    assert api.get_msg(node, topic, "null")["msg"] == "null"
    assert sdk_post(node, "ackMsg", topic, "null")[1]["code"] == 400    # not delivered yet
    assert sdk_post(node, "deleteMsg", topic, "null") == (200, {"code": 200, "msg": "success"})
    assert sdk_post(node, "getMsg", topic, "null")[1]["delayMsg"]["status"] == 7
    # A topic named null: only reads, so no such topic is registered on the shared node.
    status_code, reply = sdk_post(node, "getMsg", "null", f"{topic}-none")
    assert (status_code, reply["code"]) == (200, 404)
    status_code, reply = sdk_post(node, "getTopicInfo", "null")
    assert (status_code, reply["code"], reply["data"]["topic"]) == (200, 200, "null")


@pytest.mark.parametrize("endpoint, name", REQUIRED_TEXT, ids=lambda v: v)
def test_an_absent_required_parameter_is_http_400(node, topic, raw_redis, endpoint, name):
    assert sdk_post(node, endpoint, topic, **{name: NOT_SENT}) == \
        (400, {"code": 400, "msg": f"{name}: required parameter is missing"})
    api.assert_nothing_written(raw_redis, topic)


@pytest.mark.parametrize("endpoint, name", UNCONVERTIBLE, ids=lambda v: v)
def test_an_unconvertible_parameter_is_http_400(node, topic, raw_redis, endpoint, name):
    status_code, reply = sdk_post(node, endpoint, topic, **{name: "abc"})
    assert (status_code, reply["code"]) == (400, 400)
    assert reply["msg"].startswith(f"{name}: must be "), reply
    api.assert_nothing_written(raw_redis, topic)


def test_an_empty_optional_parameter_is_absent(node, topic):
    """Only a required text parameter is refused empty; any other empty value is absent."""
    status_code, reply = sdk_post(node, "sendMsg", topic, "", delayMillis="", ttlMillis="",
                                  maxRetry="")
    assert status_code == 200 and reply["code"] == 200, reply
    sent = reply["delayMsg"]
    assert len(sent["msgId"]) == 32 and sent["maxRetry"] == 10 and sent["status"] == 2
    status_code, reply = sdk_post(node, "pullMsg", topic, batch="", ackTimeoutMillis="")
    assert status_code == 200 and [m["msgId"] for m in reply["delayMsgList"]] == [sent["msgId"]]
    assert sdk_post(node, "ackMsg", topic, sent["msgId"], ack="") == \
        (200, {"code": 200, "msg": "success"})                         # ack: default true
    assert api.status(node, topic, sent["msgId"]) == 4
