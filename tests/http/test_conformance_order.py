"""Send order over HTTP: messages ready at the same time leave in the order the server accepted
them (a batch: its entry order), whether a pull takes them all at once or one at a time.

msgIds are in no sorted order, so a queue that broke ties by msgId (or by anything but
acceptance) fails here."""

from __future__ import annotations

import pytest

from support import conformance as api
from support import wait_until

pytestmark = pytest.mark.every_topology

# Ahead of now by far more than 20 sends take, even on a busy 2-core machine: every send must
# be accepted before the shared triggerTime, or the server would make it "due now" (checked).
AHEAD_MS = 3000
# msgIds in neither sorted nor reverse-sorted order.
IDS = [f"m{(i * 7) % 20:02d}-{'zyxwvutsrqponmlkjihg'[i]}" for i in range(20)]


def drain(server, topic, batch, expected):
    """Pull with ``batch`` until ``expected`` messages came (each pull at most ``batch``)."""
    got = []
    for _ in range(expected + 1):
        pulled = api.pull(server, topic, batch=batch)
        assert len(pulled) <= batch
        got += pulled
        if len(got) >= expected:
            break
    assert api.pull(server, topic, batch=batch) == []     # nothing left, nothing extra
    return got


@pytest.mark.parametrize("batch", [100, 1])
def test_a_batch_due_at_once_comes_out_in_entry_order(node, topic, batch):
    ids = IDS[:12]
    status_code, reply = api.post_json(node, "sendMsgBatch", {
        "topic": topic, "msgs": [{"msgId": msg_id, "msg": msg_id} for msg_id in ids]})
    assert status_code == 200 and reply["code"] == 200, reply
    sent = [r["delayMsg"] for r in reply["results"]]
    assert [m["status"] for m in sent] == [2] * 12
    assert len({m["triggerTime"] for m in sent}) == 1        # one batch, one "now"
    got = drain(node, topic, batch, 12)
    assert [m["msgId"] for m in got] == ids


@pytest.mark.parametrize("batch", [100, 1])
def test_single_sends_with_one_trigger_time_come_out_in_send_order(node, topic, raw_redis,
                                                                    batch):
    due = api.redis_now_ms(raw_redis) + AHEAD_MS
    sent = [api.send(node, topic, msgId=msg_id, msg=msg_id, triggerTime=due) for msg_id in IDS]
    assert [m["triggerTime"] for m in sent] == [due] * 20, "a send came after the due time"
    assert [m["status"] for m in sent] == [1] * 20
    wait_until(lambda: api.info(node, topic)["readyQueueSize"] == 20, AHEAD_MS / 1000 + 10)
    got = drain(node, topic, batch, 20)
    assert [m["msgId"] for m in got] == IDS
    assert {m["triggerTime"] for m in got} == {due}


def test_a_redelivery_queues_behind_the_messages_ready_at_the_same_time(node, topic):
    status_code, reply = api.post_json(node, "sendMsgBatch", {
        "topic": topic, "msgs": [{"msgId": msg_id, "msg": msg_id} for msg_id in IDS[:4]]})
    assert reply["code"] == 200 and [r["code"] for r in reply["results"]] == [200] * 4
    first = api.pull_one(node, topic, IDS[0])
    assert api.nack(node, topic, IDS[0], first["receipt"])["code"] == 200
    got = drain(node, topic, 100, 4)
    assert [m["msgId"] for m in got] == IDS[1:4] + IDS[:1]
    assert got[-1]["retry"] == 2
