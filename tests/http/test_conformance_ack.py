"""ackMsg: acks and nacks, retries used up by nacks or ack timeouts, late acks, and the
ends of a message's life (expired 5, retries exhausted 6)."""

from __future__ import annotations

import pytest

from support import conformance as api
from support import wait_until

pytestmark = pytest.mark.every_topology


def test_ack_without_ack_param_acks(node, topic):
    api.send(node, topic, msgId="a")
    api.pull(node, topic)
    status_code, reply = api.post(node, "ackMsg", topic=topic, msgId="a")
    assert status_code == 200 and reply["code"] == 200
    assert api.status(node, topic, "a") == 4
    assert api.info(node, topic)["ackQueueSize"] == 0


def test_ack_of_already_acked_message_answers_200_again(node, topic):
    api.send(node, topic, msgId="a")
    api.pull(node, topic)
    assert node.call("ackMsg", topic=topic, msgId="a", ack="true")["code"] == 200
    assert node.call("ackMsg", topic=topic, msgId="a", ack="true")["code"] == 200
    assert api.status(node, topic, "a") == 4


def test_ack_of_waiting_message_is_400_and_changes_nothing(node, topic):
    api.send(node, topic, msgId="w", delayMillis=60_000)
    reply = node.call("ackMsg", topic=topic, msgId="w")
    assert reply["code"] == 400 and "msgId" in reply["msg"]
    assert api.status(node, topic, "w") == 1
    assert api.info(node, topic)["waitingQueueSize"] == 1


def test_ack_of_unknown_message_is_404(node, topic, raw_redis):
    reply = node.call("ackMsg", topic=topic, msgId="ghost")
    assert reply["code"] == 404
    assert raw_redis.keys(f"*{topic}*ghost*") == []


def test_nack_makes_message_pullable_again_with_retry_incremented(node, topic):
    api.send(node, topic, msgId="n")
    assert api.pull(node, topic)[0]["retry"] == 1
    assert node.call("ackMsg", topic=topic, msgId="n", ack="false")["code"] == 200
    assert api.status(node, topic, "n") == 2
    again = api.pull(node, topic)
    assert [m["msgId"] for m in again] == ["n"] and again[0]["retry"] == 2


def test_nack_of_non_consuming_message_is_400_and_changes_nothing(node, topic):
    api.send(node, topic, msgId="w", delayMillis=60_000)
    api.send(node, topic, msgId="r")
    for msg_id in ("w", "r"):
        reply = node.call("ackMsg", topic=topic, msgId=msg_id, ack="false")
        assert reply["code"] == 400 and "msgId" in reply["msg"]
    assert (api.status(node, topic, "w"), api.status(node, topic, "r")) == (1, 2)
    data = api.info(node, topic)
    assert (data["waitingQueueSize"], data["readyQueueSize"]) == (1, 1)
    assert [m["msgId"] for m in api.pull(node, topic, batch=10)] == ["r"]


def test_nack_of_unknown_message_is_404_and_writes_nothing(node, topic, raw_redis):
    reply = node.call("ackMsg", topic=topic, msgId="ghost", ack="false")
    assert reply["code"] == 404
    assert raw_redis.keys(f"*{topic}*ghost*") == []
    assert api.info(node, topic)["readyQueueSize"] == 0


def test_max_retry_zero_delivers_once_then_nack_ends_it_with_status_6(node, topic):
    api.send(node, topic, msgId="z", maxRetry=0)
    assert api.pull(node, topic)[0]["retry"] == 1
    assert node.call("ackMsg", topic=topic, msgId="z", ack="false")["code"] == 200
    assert api.status(node, topic, "z") == 6
    assert api.pull(node, topic) == []


def test_max_retry_zero_ack_timeout_ends_it_with_status_6(node, topic):
    api.send(node, topic, msgId="z", maxRetry=0)
    assert len(api.pull(node, topic, ackTimeoutMillis=200)) == 1
    wait_until(lambda: api.status(node, topic, "z") == 6, 10)
    assert api.pull(node, topic) == []
    data = api.info(node, topic)
    assert (data["readyQueueSize"], data["ackQueueSize"]) == (0, 0)


def test_retries_exhausted_by_ack_timeouts_end_with_status_6(node, topic):
    api.send(node, topic, msgId="x", maxRetry=1)
    assert api.pull(node, topic, ackTimeoutMillis=200)[0]["retry"] == 1
    wait_until(lambda: api.status(node, topic, "x") == 2, 10)      # timed out, redeliverable
    assert api.pull(node, topic, ackTimeoutMillis=200)[0]["retry"] == 2
    wait_until(lambda: api.status(node, topic, "x") == 6, 10)
    assert api.get(node, topic, "x")["delayMsg"]["retry"] == 2
    assert api.pull(node, topic) == []


def test_late_ack_after_ack_timeout_acks_and_prevents_redelivery(node, topic):
    api.send(node, topic, msgId="late")
    api.pull(node, topic, ackTimeoutMillis=200)
    m = wait_until(lambda: (lambda r: r if r["status"] == 2 else None)(
        api.get(node, topic, "late")["delayMsg"]), 10)
    assert m["retry"] == 1
    assert node.call("ackMsg", topic=topic, msgId="late")["code"] == 200
    assert api.status(node, topic, "late") == 4
    assert api.pull(node, topic) == []
    assert api.info(node, topic)["readyQueueSize"] == 0


def test_never_delivered_message_expires_with_status_5(node, topic):
    api.send(node, topic, msgId="ready", ttlMillis=300)
    api.send(node, topic, msgId="waiting", delayMillis=200, ttlMillis=200)
    wait_until(lambda: api.status(node, topic, "ready") == 5, 10)
    wait_until(lambda: api.status(node, topic, "waiting") == 5, 10)
    data = api.info(node, topic)
    assert (data["waitingQueueSize"], data["readyQueueSize"]) == (0, 0)
    assert api.pull(node, topic) == []


@pytest.mark.parametrize("ack", ["true", "false"])
def test_ack_or_nack_of_expired_exhausted_or_deleted_message_is_404(node, topic, ack):
    api.send(node, topic, msgId="exhausted", maxRetry=0)
    assert [m["msgId"] for m in api.pull(node, topic, batch=10)] == ["exhausted"]
    api.send(node, topic, msgId="expired", ttlMillis=200)
    node.call("ackMsg", topic=topic, msgId="exhausted", ack="false")
    api.send(node, topic, msgId="deleted")
    node.call("deleteMsg", topic=topic, msgId="deleted")
    wait_until(lambda: api.status(node, topic, "expired") == 5, 10)
    for msg_id, ended in (("expired", 5), ("exhausted", 6), ("deleted", 7)):
        assert api.status(node, topic, msg_id) == ended
        assert node.call("ackMsg", topic=topic, msgId=msg_id, ack=ack)["code"] == 404
        assert api.status(node, topic, msg_id) == ended
