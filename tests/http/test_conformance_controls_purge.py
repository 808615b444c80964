"""purgeTopic (ours): every live message accepted before the call ends with status 7, wherever
it sits; dead letters, ended messages and later sends are left alone; a limit stops a call
early and the next one finishes. (50,000 messages under two consumers:
test_conformance_controls_purge_large.py.)"""

from __future__ import annotations

import pytest

from support import conformance as api

pytestmark = pytest.mark.every_topology


def test_purge_ends_every_live_message_with_status_7_and_counts_them(node, topic):
    api.kill(node, topic, "dead")                  # a dead letter (6): not purged
    for i in range(3):
        api.send(node, topic, msgId=f"waiting{i}", delayMillis=api.HOUR)
    for i in range(3):
        api.send(node, topic, msgId=f"ready{i}")
    api.send(node, topic, msgId="consuming")
    api.pull_one(node, topic, "ready0")            # ready0 now consuming, then acked
    assert api.ack(node, topic, "ready0")["code"] == 200
    api.pull_one(node, topic, "ready1")            # consuming while purged
    # Groups: g1's head is consuming, two blocked behind it (one due, one not); g2's head is
    # ready with one blocked behind it.
    api.send(node, topic, msgId="g1-head", groupId="g1")
    api.pull_one(node, topic, "ready2")
    api.pull_one(node, topic, "consuming")
    api.pull_one(node, topic, "g1-head")
    api.send(node, topic, msgId="g1-due", groupId="g1")
    api.send(node, topic, msgId="g1-later", groupId="g1", delayMillis=api.HOUR)
    api.send(node, topic, msgId="g2-head", groupId="g2")
    api.send(node, topic, msgId="g2-next", groupId="g2")
    before = api.info(node, topic)
    assert (before["waitingQueueSize"], before["readyQueueSize"], before["ackQueueSize"],
            before["groupBlockedSize"], before["deadQueueSize"]) == (4, 1, 4, 2, 1)
    live = [f"waiting{i}" for i in range(3)] + ["ready1", "ready2", "consuming", "g1-head",
                                                "g1-due", "g1-later", "g2-head", "g2-next"]
    assert api.call(node, "purgeTopic", topic=topic) == {
        "code": 200, "msg": "success", "count": len(live), "remaining": 0}
    assert {m: api.status(node, topic, m) for m in live} == {m: 7 for m in live}
    assert api.status(node, topic, "ready0") == 4
    assert api.status(node, topic, "dead") == 6
    assert api.dead_ids(node, topic) == ["dead"]
    after = api.info(node, topic)
    assert (after["waitingQueueSize"], after["readyQueueSize"], after["ackQueueSize"],
            after["groupBlockedSize"], after["deadQueueSize"]) == (0, 0, 0, 0, 1)
    # A consumer's ack of a purged delivery finds no live message.
    assert api.ack(node, topic, "ready1")["code"] == 404
    # A message sent after the purge is untouched, and its group starts afresh.
    api.send(node, topic, msgId="after")
    api.send(node, topic, msgId="g1-after", groupId="g1")
    assert sorted(api.ids(api.pull(node, topic, batch=10))) == ["after", "g1-after"]
    assert api.purge(node, topic) == (2, 0)
    assert api.purge(node, topic) == (0, 0)


def send_30(node, topic):
    """30 messages, every other one waiting an hour, the others ready."""
    reply = api.post_json(node, "sendMsgBatch", {"topic": topic, "msgs": [
        {"msg": "x", "msgId": f"m{i:02d}", "delayMillis": 0 if i % 2 else api.HOUR}
        for i in range(30)]})[1]
    assert [r["code"] for r in reply["results"]] == [200] * 30


def test_a_purge_ends_at_most_its_limit_and_the_next_call_finishes(node, topic):
    send_30(node, topic)
    assert api.purge(node, topic, limit=10)[0] == 10
    assert api.purge(node, topic, limit=7)[0] == 7
    assert api.call(node, "purgeTopic", topic=topic) == {
        "code": 200, "msg": "success", "count": 13, "remaining": 0}
    assert {api.status(node, topic, f"m{i:02d}") for i in range(30)} == {7}
    assert api.list_all(node, topic, status=1) == api.list_all(node, topic, status=2) == []


def test_a_purge_stopped_by_its_limit_says_what_remains(node, topic):
    send_30(node, topic)
    assert api.call(node, "purgeTopic", topic=topic, limit=10) == {
        "code": 200, "msg": "success", "count": 10, "remaining": 20}
    assert api.purge(node, topic, limit=7) == (7, 13)
    assert api.purge(node, topic) == (13, 0)


@pytest.mark.parametrize("limit, http", [(0, 200), (1_000_001, 200), (-3, 200), ("x", 400)])
def test_a_bad_limit_is_refused_naming_it_and_purges_nothing(node, topic, limit, http):
    api.send(node, topic, msgId="m")
    status_code, reply = api.post(node, "purgeTopic", topic=topic, limit=limit)
    assert (status_code, reply["code"]) == (http, 400), reply
    assert reply["msg"].startswith("limit:"), reply
    assert api.status(node, topic, "m") == 2
