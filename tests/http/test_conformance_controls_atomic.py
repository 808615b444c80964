"""sendMsgBatch with "atomic": true (ours): every entry is written or none. A refused entry
(a bad entry, the backlog quota) answers its own code, every other one 409 "not written", the
envelope code 400, and nothing is written; a live duplicate is not a refusal."""

from __future__ import annotations

import pytest

from support import conformance as api

pytestmark = pytest.mark.every_topology

REFUSED = {"code": 400, "msg": "msgs: atomic batch refused, nothing was written"}
NOT_WRITTEN = {"code": 409, "msg": "not written: another entry of this atomic batch was refused"}


def atomic(node, topic, msgs):
    status_code, reply = api.post_json(node, "sendMsgBatch",
                                       {"topic": topic, "msgs": msgs, "atomic": True})
    assert status_code == 200, reply
    return reply


def assert_nothing_sent(node, topic, msg_ids):
    data = api.info(node, topic)
    assert (data["waitingQueueSize"], data["readyQueueSize"], data["ackQueueSize"]) == \
        (0, 0, 0)
    assert [api.status(node, topic, m) for m in msg_ids] == [404] * len(msg_ids)


@pytest.mark.parametrize("bad", range(5))
def test_a_bad_entry_anywhere_refuses_the_whole_atomic_batch(node, topic, bad):
    msgs = [{"msg": "x", "msgId": f"m{i}"} for i in range(5)]
    del msgs[bad]["msg"]
    reply = atomic(node, topic, msgs)
    assert {k: reply[k] for k in ("code", "msg")} == REFUSED
    assert reply["results"][bad] == {"code": 400, "msg": f"msgs[{bad}].msg: required "
                                                         "parameter is missing or empty"}
    assert [r for i, r in enumerate(reply["results"]) if i != bad] == [NOT_WRITTEN] * 4
    assert_nothing_sent(node, topic, [f"m{i}" for i in range(5)])


def test_a_backlog_refusal_refuses_the_whole_atomic_batch(node, topic, raw_redis):
    api.set_config(node, topic, maxBacklog=3)
    api.send(node, topic, msgId="live")
    before = api.dump(raw_redis, topic)
    reply = atomic(node, topic, [{"msg": "x", "msgId": f"m{i}"} for i in range(5)])
    assert {k: reply[k] for k in ("code", "msg")} == REFUSED
    # The first two would fit (3 live with them), the next three are over the quota.
    assert [r["code"] for r in reply["results"]] == [409, 409, 429, 429, 429]
    assert reply["results"][:2] == [NOT_WRITTEN] * 2
    assert all(r["msg"].startswith("topic: backlog quota exceeded: ")
               for r in reply["results"][2:])
    assert api.dump(raw_redis, topic) == before
    assert [api.status(node, topic, f"m{i}") for i in range(5)] == [404] * 5
    # Within the quota the same batch goes through whole.
    api.set_config(node, topic, maxBacklog=6)
    reply = atomic(node, topic, [{"msg": "x", "msgId": f"m{i}"} for i in range(5)])
    assert reply["code"] == 200 and [r["code"] for r in reply["results"]] == [200] * 5
    assert api.info(node, topic)["readyQueueSize"] == 6


def test_a_live_duplicate_in_an_atomic_batch_is_not_a_refusal(node, topic):
    stored = api.send(node, topic, msgId="dup", msg="first")
    reply = atomic(node, topic, [{"msg": "a", "msgId": "new1"},
                                 {"msg": "second", "msgId": "dup"},
                                 {"msg": "b", "msgId": "new2"}])
    assert reply["code"] == 200 and reply["msg"] == "success"
    assert [r["code"] for r in reply["results"]] == [200, 200, 200]
    assert reply["results"][1]["duplicate"] is True
    assert reply["results"][1]["delayMsg"] == stored
    assert api.ids(api.pull(node, topic, batch=10)) == ["dup", "new1", "new2"]


def test_an_atomic_batch_of_1000_entries_is_written_whole(node, topic):
    msgs = [{"msg": f"body {i}", "msgId": f"m{i:04d}"} for i in range(1000)]
    reply = atomic(node, topic, msgs)
    assert reply["code"] == 200
    assert [r["code"] for r in reply["results"]] == [200] * 1000
    assert api.info(node, topic)["readyQueueSize"] == 1000
    assert api.ids(api.list_all(node, topic, status=2, limit=1000)) == \
        [m["msgId"] for m in msgs]
