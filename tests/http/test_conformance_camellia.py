"""A camellia client that sends none of our new parameters (receipts, delays, settings)
sees no change: the same fields, the same answers, no backoff."""

from __future__ import annotations

from support import conformance as api
from support import wait_until


def test_without_the_new_parameters_a_camellia_client_sees_no_change(node, topic):
    # The forms camellia's SDK posts.
    status_code, reply = api.post(node, "sendMsg", topic=topic, msgId="c", msg="body",
                                  delayMillis=0, ttlMillis=60_000, maxRetry=3)
    assert status_code == 200 and set(reply) == {"code", "msg", "delayMsg"}
    sent = reply["delayMsg"]
    assert set(sent) == api.CAMELLIA_FIELDS
    reply = api.call(node, "pullMsg", topic=topic, batch=1, ackTimeoutMillis=30_000)
    (m,) = reply["delayMsgList"]
    assert set(m) == api.CAMELLIA_FIELDS | {"receipt"}
    assert api.call(node, "ackMsg", topic=topic, msgId="c", ack="false") == \
        {"code": 200, "msg": "success"}
    m = api.get_msg(node, topic, "c")
    assert set(m) == api.CAMELLIA_FIELDS
    assert m["status"] == 2 and m["triggerTime"] == sent["triggerTime"]   # no backoff
    assert api.pull_one(node, topic, "c", ackTimeoutMillis=300)["retry"] == 2
    wait_until(lambda: api.status(node, topic, "c") == 2, 10)    # timed out: ready at once
    assert api.call(node, "ackMsg", topic=topic, msgId="c", ack="true") == \
        {"code": 200, "msg": "success"}                    # late ack, no receipt
    assert api.status(node, topic, "c") == 4
    api.send(node, topic, msgId="d")
    api.pull_one(node, topic, "d")
    assert api.call(node, "ackMsg", topic=topic, msgId="d", ack="true")["code"] == 200
    data = api.info(node, topic)
    assert {"topic", "waitingQueueSize", "waitingQueueInfo", "readyQueueSize",
            "ackQueueSize"} <= set(data)
    assert data["deadQueueSize"] == 0
    entry = next(e for e in api.call(node, "getTopicInfoList")["data"] if e["topic"] == topic)
    assert entry["deadQueueSize"] == 0
