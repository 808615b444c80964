"""rescheduleMsg (ours), and trigger times in the past: due now, with a full ttl."""

from __future__ import annotations

import pytest

from support import conformance as api


def test_reschedule_a_waiting_message_later_then_now(node, topic, raw_redis):
    sent = api.send(node, topic, msgId="w", delayMillis=60_000, ttlMillis=10_000)
    before = api.redis_now_ms(raw_redis)
    reply = api.call(node, "rescheduleMsg", topic=topic, msgId="w", delayMillis=120_000)
    after = api.redis_now_ms(raw_redis)
    assert reply["code"] == 200 and reply["msg"] == "success", reply
    m = reply["delayMsg"]
    assert m["status"] == 1 and m["produceTime"] == sent["produceTime"]
    assert before + 120_000 - api.CLOCK_SLACK <= m["triggerTime"] <= after + 120_000
    assert m["expireTime"] == m["triggerTime"] + 10_000
    assert api.get_msg(node, topic, "w") == m
    target = api.redis_now_ms(raw_redis) + 30_000
    m = api.call(node, "rescheduleMsg", topic=topic, msgId="w", triggerTime=target)["delayMsg"]
    assert (m["status"], m["triggerTime"], m["expireTime"]) == (1, target, target + 10_000)
    assert api.pull(node, topic) == []
    before = api.redis_now_ms(raw_redis)
    m = api.call(node, "rescheduleMsg", topic=topic, msgId="w", delayMillis=0)["delayMsg"]
    after = api.redis_now_ms(raw_redis)
    assert m["status"] == 2
    assert before - api.CLOCK_SLACK <= m["triggerTime"] <= after
    assert m["expireTime"] == m["triggerTime"] + 10_000
    data = api.info(node, topic)
    assert (data["waitingQueueSize"], data["readyQueueSize"]) == (0, 1)
    assert api.pull_one(node, topic, "w")["retry"] == 1


def test_reschedule_a_ready_message_into_the_future_and_to_the_past(node, topic, raw_redis):
    api.send(node, topic, msgId="r", ttlMillis=20_000)
    m = api.call(node, "rescheduleMsg", topic=topic, msgId="r", delayMillis=60_000)["delayMsg"]
    assert m["status"] == 1 and m["expireTime"] == m["triggerTime"] + 20_000
    assert api.pull(node, topic) == []
    data = api.info(node, topic)
    assert (data["waitingQueueSize"], data["readyQueueSize"]) == (1, 0)
    before = api.redis_now_ms(raw_redis)
    m = api.call(node, "rescheduleMsg", topic=topic, msgId="r",
                 triggerTime=before - 60_000)["delayMsg"]          # a past one means now
    assert m["status"] == 2 and m["triggerTime"] >= before - api.CLOCK_SLACK
    assert m["expireTime"] == m["triggerTime"] + 20_000
    assert api.pull_one(node, topic, "r")["status"] == 3


def test_reschedule_of_a_nacked_message_shifts_expire_time_by_the_same_amount(node, topic):
    """Decision: "expireTime moves with it" keeps expireTime - triggerTime. For a message whose
    triggerTime a delayed nack moved (its expireTime stays), that is less than its ttl."""
    api.send(node, topic, msgId="n", ttlMillis=600_000)
    api.pull_one(node, topic, "n")
    assert api.nack(node, topic, "n", delayMillis=30_000)["code"] == 200
    waiting = api.get_msg(node, topic, "n")
    life = waiting["expireTime"] - waiting["triggerTime"]
    assert 600_000 - 30_000 - api.CLOCK_SLACK <= life <= 600_000 - 30_000
    m = api.call(node, "rescheduleMsg", topic=topic, msgId="n", delayMillis=0)["delayMsg"]
    assert m["status"] == 2 and m["retry"] == 1
    assert m["expireTime"] - m["triggerTime"] == life
    assert api.pull_one(node, topic, "n")["retry"] == 2


def test_reschedule_refusals(node, topic, raw_redis):
    api.send(node, topic, msgId="c")
    api.pull_one(node, topic, "c", ackTimeoutMillis=60_000)
    api.send(node, topic, msgId="a")
    api.pull_one(node, topic, "a")
    api.ack(node, topic, "a")
    api.send(node, topic, msgId="w", delayMillis=60_000)
    before = api.dump(raw_redis, topic)
    for msg_id, code in (("c", 400), ("a", 404), ("ghost", 404)):
        status_code, reply = api.post(node, "rescheduleMsg", topic=topic, msgId=msg_id,
                                      delayMillis=1000)
        assert status_code == 200 and reply["code"] == code, (msg_id, reply)
    status_code, reply = api.post(node, "rescheduleMsg", topic=topic, msgId="w",
                                  delayMillis=1000, triggerTime=api.redis_now_ms(raw_redis))
    assert reply["code"] == 400 and "delayMillis" in reply["msg"]
    status_code, reply = api.post(node, "rescheduleMsg", topic=topic, msgId="w")
    assert reply["code"] == 400 and ("delayMillis" in reply["msg"]
                                     or "triggerTime" in reply["msg"]), reply
    status_code, reply = api.post(node, "rescheduleMsg", topic=topic, msgId="w",
                                  delayMillis="soon")
    assert status_code == 400 and reply["code"] == 400
    status_code, reply = api.post(node, "rescheduleMsg", topic=topic, delayMillis=5)
    assert status_code == 400 and reply["msg"].startswith("msgId")
    assert api.dump(raw_redis, topic) == before


@pytest.mark.parametrize("how", ["triggerTime", "delayMillis"])
def test_a_past_trigger_time_means_due_now_with_a_full_ttl(node, topic, raw_redis, how):
    before = api.redis_now_ms(raw_redis)
    params = {"triggerTime": before - 60_000} if how == "triggerTime" \
        else {"delayMillis": -60_000}
    m = api.send(node, topic, msgId="p", ttlMillis=1000, **params)
    after = api.redis_now_ms(raw_redis)
    assert m["status"] == 2
    assert before - api.CLOCK_SLACK <= m["triggerTime"] <= after
    assert m["triggerTime"] == m["produceTime"]
    assert m["expireTime"] == m["triggerTime"] + 1000
    got = api.pull_one(node, topic, "p")                          # not born expired
    assert got["status"] == 3 and got["retry"] == 1
