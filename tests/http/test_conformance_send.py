"""sendMsg: what a send answers and stores; duplicates, replacements, and the
absolute trigger time."""

from __future__ import annotations

import re

import pytest

from support import conformance as api

pytestmark = pytest.mark.every_topology


def test_send_of_due_message_answers_ready_with_defaults(node, topic):
    status_code, reply = api.post(node, "sendMsg", topic=topic, msg="hi")
    assert status_code == 200
    assert reply["code"] == 200 and reply["msg"] == "success"
    assert "duplicate" not in reply
    m = reply["delayMsg"]
    assert set(m) == api.CAMELLIA_FIELDS
    assert m["topic"] == topic and m["msg"] == "hi"
    assert re.fullmatch(r"[0-9a-f]{32}", m["msgId"])
    assert m["status"] == 2 and m["retry"] == 0 and m["maxRetry"] == 10
    assert m["triggerTime"] == m["produceTime"]
    assert m["expireTime"] == m["triggerTime"] + api.HOUR


def test_send_with_delay_answers_waiting_and_counts_ttl_from_trigger_time(node, topic):
    m = api.send(node, topic, msgId="m1", delayMillis=5000, ttlMillis=1000, maxRetry=3)
    assert m["msgId"] == "m1" and m["status"] == 1
    assert m["triggerTime"] == m["produceTime"] + 5000
    assert m["expireTime"] == m["triggerTime"] + 1000
    assert m["maxRetry"] == 3
    assert api.get(node, topic, "m1")["delayMsg"] == m


def test_send_non_positive_ttl_and_negative_max_retry_mean_the_defaults(node, topic):
    m = api.send(node, topic, delayMillis=-50, ttlMillis=0, maxRetry=-1)
    assert m["status"] == 2 and m["triggerTime"] == m["produceTime"]
    assert m["expireTime"] == m["triggerTime"] + api.HOUR and m["maxRetry"] == 10
    m = api.send(node, topic, ttlMillis=-5)
    assert m["expireTime"] == m["triggerTime"] + api.HOUR
    assert api.send(node, topic, maxRetry=0)["maxRetry"] == 0


def test_send_with_trigger_time_uses_the_absolute_time(node, topic, raw_redis):
    future = api.redis_now_ms(raw_redis) + 120_000
    m = api.send(node, topic, msgId="f", triggerTime=future)
    assert m["triggerTime"] == future and m["status"] == 1
    assert m["expireTime"] == future + api.HOUR
    past = api.redis_now_ms(raw_redis) - 5000
    m = api.send(node, topic, msgId="p", triggerTime=past)        # in the past: due now (fix)
    assert m["status"] == 2 and m["triggerTime"] == m["produceTime"] >= past + 5000
    assert m["expireTime"] == m["triggerTime"] + api.HOUR


def test_send_with_both_delay_and_trigger_time_is_refused_and_writes_nothing(node, topic,
                                                                           raw_redis):
    status_code, reply = api.post(node, "sendMsg", topic=topic, msg="x", delayMillis=10,
                                  triggerTime=api.redis_now_ms(raw_redis))
    assert status_code == 200 and reply["code"] == 400
    assert "delayMillis" in reply["msg"] and "triggerTime" in reply["msg"]
    api.assert_nothing_written(raw_redis, topic)


def test_send_of_live_msg_id_returns_stored_message_as_duplicate(node, topic):
    first = api.send(node, topic, msgId="d", msg="first", delayMillis=60_000)
    reply = node.call("sendMsg", topic=topic, msgId="d", msg="second")
    assert reply["code"] == 200 and reply["duplicate"] is True
    assert reply["delayMsg"] == first
    data = api.info(node, topic)
    assert (data["waitingQueueSize"], data["readyQueueSize"], data["ackQueueSize"]) == (1, 0, 0)
    # Also while consuming.
    api.send(node, topic, msgId="c", msg="one")
    api.pull(node, topic)
    reply = node.call("sendMsg", topic=topic, msgId="c", msg="two")
    assert reply["duplicate"] is True and reply["delayMsg"]["status"] == 3
    data = api.info(node, topic)
    assert (data["waitingQueueSize"], data["readyQueueSize"], data["ackQueueSize"]) == (1, 0, 1)


def test_send_of_acked_msg_id_replaces_it(node, topic):
    api.send(node, topic, msgId="r", msg="first")
    api.pull(node, topic)
    assert node.call("ackMsg", topic=topic, msgId="r")["code"] == 200
    reply = node.call("sendMsg", topic=topic, msgId="r", msg="second")
    assert reply["code"] == 200 and "duplicate" not in reply
    m = reply["delayMsg"]
    assert m["msg"] == "second" and m["status"] == 2 and m["retry"] == 0
    assert [x["msg"] for x in api.pull(node, topic)] == ["second"]
