"""A camellia client that sends none of our new parameters (receipts, delays, settings)
sees no change: the same fields, the same answers, no backoff."""

from __future__ import annotations

from support import wait_until
from support.conformance import CAMELLIA_FIELDS, call, get_msg, info, post, pull_one, send, status


def test_without_the_new_parameters_a_camellia_client_sees_no_change(node, topic):
    # The forms camellia's SDK posts.
    status_code, reply = post(node, "sendMsg", topic=topic, msgId="c", msg="body",
                              delayMillis=0, ttlMillis=60_000, maxRetry=3)
    assert status_code == 200 and set(reply) == {"code", "msg", "delayMsg"}
    sent = reply["delayMsg"]
    assert set(sent) == CAMELLIA_FIELDS
    reply = call(node, "pullMsg", topic=topic, batch=1, ackTimeoutMillis=30_000)
    (m,) = reply["delayMsgList"]
    assert set(m) == CAMELLIA_FIELDS | {"receipt"}
    assert call(node, "ackMsg", topic=topic, msgId="c", ack="false") == \
        {"code": 200, "msg": "success"}
    m = get_msg(node, topic, "c")
    assert set(m) == CAMELLIA_FIELDS
    assert m["status"] == 2 and m["triggerTime"] == sent["triggerTime"]   # no backoff
    assert pull_one(node, topic, "c", ackTimeoutMillis=300)["retry"] == 2
    wait_until(lambda: status(node, topic, "c") == 2, 10)    # timed out: ready at once
    assert call(node, "ackMsg", topic=topic, msgId="c", ack="true") == \
        {"code": 200, "msg": "success"}                    # late ack, no receipt
    assert status(node, topic, "c") == 4
    send(node, topic, msgId="d")
    pull_one(node, topic, "d")
    assert call(node, "ackMsg", topic=topic, msgId="d", ack="true")["code"] == 200
    data = info(node, topic)
    assert {"topic", "waitingQueueSize", "waitingQueueInfo", "readyQueueSize",
            "ackQueueSize"} <= set(data)
    assert data["deadQueueSize"] == 0
    entry = next(e for e in call(node, "getTopicInfoList")["data"] if e["topic"] == topic)
    assert entry["deadQueueSize"] == 0
