"""changeVisibility (ours): give a delivery up, extend its ack deadline, heartbeat; and
its refusals."""

from __future__ import annotations

import time

from support import conformance as api
from support import wait_until


def test_change_visibility_zero_gives_it_up_for_immediate_redelivery(node, topic):
    api.set_config(node, topic, redeliveryDelayMillis=60_000)   # no backoff for a give-up
    m = api.send(node, topic, msgId="v")
    receipt = api.pull_one(node, topic, "v", ackTimeoutMillis=60_000)["receipt"]
    reply = api.change_visibility(node, topic, "v", 0, receipt)
    assert reply["code"] == 200 and reply["msg"] == "success"
    assert reply["delayMsg"]["status"] == 2 and reply["delayMsg"]["msgId"] == "v"
    assert reply["delayMsg"]["triggerTime"] == m["triggerTime"]
    again = api.pull_one(node, topic, "v")
    assert again["retry"] == 2 and again["receipt"] != receipt


def test_change_visibility_extends_the_ack_deadline(node, topic, raw_redis):
    api.send(node, topic, msgId="x")
    receipt = api.pull_one(node, topic, "x", ackTimeoutMillis=300)["receipt"]
    before = api.redis_now_ms(raw_redis)
    reply = api.change_visibility(node, topic, "x", 1500, receipt)
    after = api.redis_now_ms(raw_redis)
    assert reply["code"] == 200 and reply["delayMsg"]["status"] == 3
    deadline = api.ack_deadline(raw_redis, topic, "x")
    assert before + 1500 - api.CLOCK_SLACK <= deadline <= after + 1500
    # Well past the original 300 ms: still consuming, nothing to pull.
    while api.redis_now_ms(raw_redis) < before + 900:
        assert api.pull(node, topic) == []
        time.sleep(0.05)
    assert api.status(node, topic, "x") == 3
    # After the new deadline it is redelivered, never before it.
    again = wait_until(lambda: api.pull(node, topic, ackTimeoutMillis=60_000), 5)
    delivered_at = api.ack_deadline(raw_redis, topic, "x") - 60_000
    assert [m["msgId"] for m in again] == ["x"] and again[0]["retry"] == 2
    assert delivered_at >= deadline
    api.assert_stale(api.ack(node, topic, "x", receipt))


def test_heartbeat_keeps_a_handler_three_times_the_ack_timeout_from_redelivery(node, topic):
    timeout_ms = 400
    api.send(node, topic, msgId="h")
    receipt = api.pull_one(node, topic, "h", ackTimeoutMillis=timeout_ms)["receipt"]
    started = time.monotonic()
    competitor = []
    beats = 0
    while time.monotonic() - started < 3 * timeout_ms / 1000:
        time.sleep(timeout_ms / 2000)
        reply = api.change_visibility(node, topic, "h", timeout_ms, receipt)
        assert reply["code"] == 200 and reply["delayMsg"]["status"] == 3, reply
        beats += 1
        competitor += api.pull(node, topic, batch=10)       # another consumer polling
    assert beats >= 5 and competitor == []
    assert api.ack(node, topic, "h", receipt)["code"] == 200
    m = api.get_msg(node, topic, "h")
    assert m["status"] == 4 and m["retry"] == 1


def test_change_visibility_refusals(node, topic, raw_redis):
    api.send(node, topic, msgId="r")
    api.pull_one(node, topic, "r")
    assert api.ack(node, topic, "r")["code"] == 200       # acked: ended
    api.send(node, topic, msgId="c")
    c = api.pull_one(node, topic, "c", ackTimeoutMillis=60_000)
    api.send(node, topic, msgId="w", delayMillis=60_000)
    api.send(node, topic, msgId="ready")
    before = api.dump(raw_redis, topic)
    for msg_id, code in (("w", 400), ("ready", 400), ("r", 404), ("ghost", 404)):
        status_code, reply = api.post(node, "changeVisibility", topic=topic, msgId=msg_id,
                                      ackTimeoutMillis=1000)
        assert status_code == 200 and reply["code"] == code, (msg_id, reply)
        assert reply["msg"] != "success"
    status_code, reply = api.post(node, "changeVisibility", topic=topic, msgId="c",
                                  ackTimeoutMillis=-1, receipt=c["receipt"])
    assert reply["code"] == 400 and reply["msg"].startswith("ackTimeoutMillis"), reply
    status_code, reply = api.post(node, "changeVisibility", topic=topic, msgId="c",
                                  receipt=c["receipt"])
    assert status_code == 400 and reply["code"] == 400
    assert reply["msg"].startswith("ackTimeoutMillis"), reply
    status_code, reply = api.post(node, "changeVisibility", topic=topic, msgId="c",
                                  ackTimeoutMillis=3_153_600_000_001, receipt=c["receipt"])
    assert reply["code"] == 400 and reply["msg"].startswith("ackTimeoutMillis"), reply
    status_code, reply = api.post(node, "changeVisibility", topic=topic, msgId="c",
                                  ackTimeoutMillis="soon")
    assert status_code == 400 and reply["code"] == 400
    assert api.dump(raw_redis, topic) == before
    status_code, reply = api.post(node, "changeVisibility", topic=topic + "{",
                                  msgId="c", ackTimeoutMillis=5)
    assert reply["code"] == 400 and reply["msg"].startswith("topic")


def test_change_visibility_zero_out_of_deliveries_ends_it_dead(node, topic):
    api.send(node, topic, msgId="z", maxRetry=0)
    receipt = api.pull_one(node, topic, "z")["receipt"]
    reply = api.change_visibility(node, topic, "z", 0, receipt)
    assert reply["code"] == 200 and reply["delayMsg"]["status"] == 6
    assert api.dead_ids(node, topic) == ["z"]
    assert api.pull(node, topic) == []
