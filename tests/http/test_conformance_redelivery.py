"""Nack with a delay and the topic's backoff (ours): a redelivery is never early, never
outlives expireTime, and queues at the tail, behind older siblings."""

from __future__ import annotations

import pytest

from support import conformance as api
from support import wait_until


def test_nack_with_delay_waits_then_redelivers_never_early(node, topic, raw_redis):
    sent = api.send(node, topic, msgId="n")
    receipt = api.pull_one(node, topic, "n")["receipt"]
    before = api.redis_now_ms(raw_redis)
    assert api.nack(node, topic, "n", receipt, delayMillis=800)["code"] == 200
    after = api.redis_now_ms(raw_redis)
    m = api.get_msg(node, topic, "n")
    assert m["status"] == 1 and m["retry"] == 1
    assert before + 800 - api.CLOCK_SLACK <= m["triggerTime"] <= after + 800
    assert m["expireTime"] == sent["expireTime"]          # a redelivery never lengthens life
    data = api.info(node, topic)
    assert (data["waitingQueueSize"], data["readyQueueSize"], data["ackQueueSize"]) == \
        (1, 0, 0)
    assert api.pull(node, topic) == []
    reply = api.call(node, "longPollingMsg", topic=topic, longPollingTimeoutMillis=5000,
                     ackTimeoutMillis=60_000)
    assert [x["msgId"] for x in reply["delayMsgList"]] == ["n"]
    delivered_at = api.ack_deadline(raw_redis, topic, "n") - 60_000
    assert delivered_at >= m["triggerTime"]
    assert reply["delayMsgList"][0]["retry"] == 2
    assert reply["delayMsgList"][0]["triggerTime"] == m["triggerTime"]


def test_nack_with_delay_zero_is_ready_at_once_whatever_the_backoff(node, topic):
    api.set_config(node, topic, redeliveryDelayMillis=60_000)
    m = api.send(node, topic, msgId="z")
    receipt = api.pull_one(node, topic, "z")["receipt"]
    assert api.nack(node, topic, "z", receipt, delayMillis=0)["code"] == 200
    got = api.get_msg(node, topic, "z")
    assert got["status"] == 2 and got["triggerTime"] == m["triggerTime"]
    assert api.pull_one(node, topic, "z")["retry"] == 2


def test_nack_without_delay_waits_the_topic_backoff(node, topic, raw_redis):
    api.set_config(node, topic, redeliveryDelayMillis=60_000)
    api.send(node, topic, msgId="b")
    api.pull_one(node, topic, "b")
    before = api.redis_now_ms(raw_redis)
    assert api.nack(node, topic, "b")["code"] == 200
    after = api.redis_now_ms(raw_redis)
    m = api.get_msg(node, topic, "b")
    assert m["status"] == 1
    assert before + 60_000 - api.CLOCK_SLACK <= m["triggerTime"] <= after + 60_000


def test_nack_with_a_negative_or_bad_delay_is_refused_and_changes_nothing(node, topic,
                                                                         raw_redis):
    api.send(node, topic, msgId="n")
    api.pull_one(node, topic, "n", ackTimeoutMillis=60_000)
    before = api.dump(raw_redis, topic)
    status_code, reply = api.post(node, "ackMsg", topic=topic, msgId="n", ack="false",
                                  delayMillis=-1)
    assert status_code == 200 and reply["code"] == 400
    assert reply["msg"].startswith("delayMillis"), reply
    status_code, reply = api.post(node, "ackMsg", topic=topic, msgId="n", ack="false",
                                  delayMillis="later")
    assert status_code == 400 and reply["code"] == 400
    assert api.dump(raw_redis, topic) == before
    assert api.status(node, topic, "n") == 3


def test_a_redelivery_due_at_or_after_expire_time_ends_the_message(node, topic):
    api.send(node, topic, msgId="d", ttlMillis=2000)
    api.pull_one(node, topic, "d")
    assert api.nack(node, topic, "d", delayMillis=5000)["code"] == 200
    assert api.status(node, topic, "d") == 6
    api.set_config(node, topic, redeliveryDelayMillis=5000)
    api.send(node, topic, msgId="b", ttlMillis=2000)
    api.pull_one(node, topic, "b")
    assert api.nack(node, topic, "b")["code"] == 200
    assert api.status(node, topic, "b") == 6
    assert set(api.dead_ids(node, topic)) == {"d", "b"}


@pytest.mark.parametrize("requeue", ["nack", "ack_timeout", "change_visibility_0"])
def test_a_requeued_poison_message_queues_behind_older_siblings(node, topic, requeue):
    # Sent in this order, so ready in this order whether or not they share a millisecond
    # (ties go by msgId). camellia put a requeued message back at the head: the poison
    # would be redelivered before every sibling.
    poison = api.send(node, topic, msgId="a-poison")
    api.send(node, topic, msgId="a-sibling-equal")
    api.send(node, topic, msgId="b-sibling-later")
    first = api.pull_one(node, topic, "a-poison", ackTimeoutMillis=300)
    api.send(node, topic, msgId="c-sibling-after-delivery")     # due later than the poison
    if requeue == "nack":
        assert api.nack(node, topic, "a-poison", first["receipt"])["code"] == 200
    elif requeue == "ack_timeout":
        wait_until(lambda: api.status(node, topic, "a-poison") == 2, 10)
    else:
        reply = api.change_visibility(node, topic, "a-poison", 0, first["receipt"])
        assert reply["code"] == 200
    order, second = [], []
    for _ in range(4):
        got = api.pull(node, topic, batch=1, ackTimeoutMillis=60_000)
        order += [m["msgId"] for m in got]
        second = got
    assert order == ["a-sibling-equal", "b-sibling-later", "c-sibling-after-delivery",
                     "a-poison"]
    assert second[0]["retry"] == 2
    assert second[0]["triggerTime"] == poison["triggerTime"]   # unchanged when ready at once
