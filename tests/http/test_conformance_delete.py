"""deleteMsg and getMsg, and how long an ended message is kept."""

from __future__ import annotations

import pytest

from support import conformance as api
from support import wait_until
from support.lua import NS, read

pytestmark = pytest.mark.every_topology


def test_delete_of_consuming_message_then_ack_is_404_and_status_7(node, topic):
    api.send(node, topic, msgId="d")
    api.pull(node, topic)
    assert node.call("deleteMsg", topic=topic, msgId="d")["code"] == 200
    assert node.call("ackMsg", topic=topic, msgId="d")["code"] == 404
    assert api.status(node, topic, "d") == 7
    data = api.info(node, topic)
    assert (data["readyQueueSize"], data["ackQueueSize"]) == (0, 0)


def test_delete_of_waiting_message_removes_it_from_every_queue(node, topic):
    api.send(node, topic, msgId="d", delayMillis=60_000)
    assert node.call("deleteMsg", topic=topic, msgId="d", release="false")["code"] == 200
    assert api.status(node, topic, "d") == 7
    assert api.info(node, topic)["waitingQueueSize"] == 0


def test_delete_with_release_removes_the_body(node, topic, raw_redis):
    api.send(node, topic, msgId="d")
    assert node.call("deleteMsg", topic=topic, msgId="d", release="true")["code"] == 200
    assert api.get(node, topic, "d")["code"] == 404
    assert read(raw_redis, NS.topic(topic), "d") == (None, None)     # not even retained
    assert api.pull(node, topic) == []


def test_delete_of_unknown_or_ended_message_is_404(node, topic):
    assert node.call("deleteMsg", topic=topic, msgId="ghost")["code"] == 404
    api.send(node, topic, msgId="a")
    api.pull(node, topic)
    node.call("ackMsg", topic=topic, msgId="a")
    assert node.call("deleteMsg", topic=topic, msgId="a")["code"] == 404
    assert api.status(node, topic, "a") == 4
    assert node.call("deleteMsg", topic=topic, msgId="a", release="true")["code"] == 404
    assert api.get(node, topic, "a")["code"] == 404


def test_get_of_unknown_message_is_404(node, topic):
    status_code, reply = api.post(node, "getMsg", topic=topic, msgId="ghost")
    assert status_code == 200 and reply["code"] == 404 and "delayMsg" not in reply


def test_ended_message_is_retained_then_gone(short_node, topic):
    api.send(short_node, topic, msgId="a")
    api.pull(short_node, topic)
    assert short_node.call("ackMsg", topic=topic, msgId="a")["code"] == 200
    assert api.status(short_node, topic, "a") == 4
    wait_until(lambda: api.get(short_node, topic, "a")["code"] == 404, 10)
    # After retention the id is free: a new message, not a duplicate.
    reply = short_node.call("sendMsg", topic=topic, msgId="a", msg="again")
    assert "duplicate" not in reply and reply["delayMsg"]["status"] == 2
