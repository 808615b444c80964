"""sendMsg onDuplicate (keep, replace: debounce) and the topic setting dedupWindowMillis,
through HTTP on a live node: what each answers, what it stores, what it refuses with nothing
written (checked on the raw keys), in single sends and batches (atomic or not).
"""

from __future__ import annotations

import time

import pytest

from support import conformance as api


def send(node, topic, **params):
    return node.call("sendMsg", topic=topic, **params)


def test_replace_of_a_waiting_message_begins_it_again_with_the_new_values(node, topic):
    first = api.send(node, topic, msgId="d", msg="first", delayMillis=60_000, maxRetry=4,
                     attributes='{"k":"v"}')
    reply = send(node, topic, msgId="d", msg="second", delayMillis=120_000, ttlMillis=5000,
                 onDuplicate="replace")
    assert reply["code"] == 200 and reply["replaced"] is True and "duplicate" not in reply
    m = reply["delayMsg"]
    assert (m["msg"], m["status"], m["retry"], m["maxRetry"]) == ("second", 1, 0, 4)
    assert m["triggerTime"] == m["produceTime"] + 120_000 >= first["triggerTime"] + 60_000
    assert m["expireTime"] == m["triggerTime"] + 5000 and "attributes" not in m
    assert api.get(node, topic, "d")["delayMsg"] == m
    info = api.info(node, topic)
    assert (info["waitingQueueSize"], info["readyQueueSize"]) == (1, 0)
    # keep (the default, and said out loud) answers the live one as a duplicate.
    for params in ({}, {"onDuplicate": "keep"}):
        reply = send(node, topic, msgId="d", msg="third", **params)
        assert reply["duplicate"] is True and reply["delayMsg"] == m and "replaced" not in reply


def test_replace_of_a_ready_message_after_a_nack_makes_its_old_receipt_stale(node, topic):
    api.send(node, topic, msgId="r", msg="one")
    receipt = api.pull_one(node, topic, "r")["receipt"]
    assert api.nack(node, topic, "r", receipt)["code"] == 200
    reply = send(node, topic, msgId="r", msg="two", onDuplicate="replace")
    assert reply["replaced"] is True and reply["delayMsg"]["retry"] == 0
    api.assert_stale(api.ack(node, topic, "r", receipt))
    delivered = api.pull_one(node, topic, "r")
    assert delivered["msg"] == "two" and delivered["retry"] == 1
    assert api.ack(node, topic, "r", delivered["receipt"])["code"] == 200


def test_replace_of_a_consuming_message_answers_409_and_changes_nothing(node, topic,
                                                                        raw_redis):
    api.send(node, topic, msgId="c", msg="one")
    api.pull_one(node, topic, "c")
    before = api.dump(raw_redis, topic)
    reply = send(node, topic, msgId="c", msg="two", onDuplicate="replace")
    assert reply["code"] == 409 and reply["msg"].startswith("msgId: ")
    assert "consumed" in reply["msg"]
    assert api.dump(raw_redis, topic) == before


def test_replace_that_changes_the_group_id_answers_400_naming_it(node, topic, raw_redis):
    api.send(node, topic, msgId="g", msg="one", groupId="order-1", delayMillis=60_000)
    before = api.dump(raw_redis, topic)
    for group in ("order-2", None):
        params = {"groupId": group} if group else {}
        reply = send(node, topic, msgId="g", msg="two", onDuplicate="replace", **params)
        assert reply["code"] == 400 and reply["msg"].startswith("groupId: "), reply
    assert api.dump(raw_redis, topic) == before
    reply = send(node, topic, msgId="g", msg="two", onDuplicate="replace", groupId="order-1")
    assert reply["replaced"] is True and reply["delayMsg"]["groupId"] == "order-1"


@pytest.mark.parametrize("value", ["debounce", "Replace", "keep "])
def test_a_bad_on_duplicate_answers_400_naming_it_and_writes_nothing(node, topic, raw_redis,
                                                                     value):
    status, reply = api.post(node, "sendMsg", topic=topic, msg="x", onDuplicate=value)
    assert status == 200 and reply["code"] == 400
    assert reply["msg"].startswith("onDuplicate: must be keep or replace"), reply
    api.assert_nothing_written(raw_redis, topic)
    status, reply = api.post_json(node, "sendMsgBatch", {"topic": topic, "msgs": [
        {"msg": "ok"}, {"msg": "x", "onDuplicate": value}]})
    assert reply["results"][0]["code"] == 200
    assert reply["results"][1]["code"] == 400
    assert reply["results"][1]["msg"].startswith("msgs[1].onDuplicate: must be keep or replace")


def test_a_batch_replaces_and_keeps_each_entry_on_its_own(node, topic):
    api.send(node, topic, msgId="a", msg="a1", delayMillis=60_000)
    api.send(node, topic, msgId="b", msg="b1", delayMillis=60_000)
    status, reply = api.post_json(node, "sendMsgBatch", {"topic": topic, "msgs": [
        {"msgId": "a", "msg": "a2", "onDuplicate": "replace"},
        {"msgId": "b", "msg": "b2"},
        {"msgId": "n", "msg": "n1", "onDuplicate": "replace"}]})
    assert status == 200 and reply["code"] == 200
    first, second, third = reply["results"]
    assert first["replaced"] is True and first["delayMsg"]["msg"] == "a2"
    assert second["duplicate"] is True and second["delayMsg"]["msg"] == "b1"
    assert "replaced" not in third and "duplicate" not in third


def test_an_atomic_batch_with_a_consuming_replace_writes_nothing(node, topic, raw_redis):
    api.send(node, topic, msgId="busy", msg="one")
    api.pull_one(node, topic, "busy")
    api.send(node, topic, msgId="live", msg="x", delayMillis=60_000)
    before = api.dump(raw_redis, topic)
    status, reply = api.post_json(node, "sendMsgBatch", {"topic": topic, "atomic": True, "msgs": [
        {"msgId": "new", "msg": "n"}, {"msgId": "live", "msg": "y"},
        {"msgId": "busy", "msg": "two", "onDuplicate": "replace"}]})
    assert status == 200 and reply["code"] == 400
    assert [r["code"] for r in reply["results"]] == [409, 409, 409]
    assert reply["results"][0]["msg"].startswith("not written")
    assert reply["results"][2]["msg"].startswith("msgId: ")
    assert api.dump(raw_redis, topic) == before
    # Duplicates and replaces alone are no refusal: written.
    status, reply = api.post_json(node, "sendMsgBatch", {"topic": topic, "atomic": True, "msgs": [
        {"msgId": "live", "msg": "y"}, {"msgId": "live", "msg": "z", "onDuplicate": "replace"},
        {"msgId": "new", "msg": "n"}]})
    assert reply["code"] == 200, reply
    assert [bool(r.get("duplicate")) for r in reply["results"]] == [True, False, False]
    assert [bool(r.get("replaced")) for r in reply["results"]] == [False, True, False]


def test_the_dedup_window_answers_a_resend_after_an_ack_as_the_ended_message(node, topic,
                                                                              raw_redis):
    api.set_config(node, topic, dedupWindowMillis=3_600_000)
    api.send(node, topic, msgId="w", msg="once")
    receipt = api.pull_one(node, topic, "w")["receipt"]
    assert api.ack(node, topic, "w", receipt)["code"] == 200
    before = api.dump(raw_redis, topic)
    for params in ({}, {"onDuplicate": "replace"}):
        reply = send(node, topic, msgId="w", msg="twice", **params)
        assert reply["code"] == 200 and reply["duplicate"] is True, reply
        assert reply["delayMsg"]["msg"] == "once" and reply["delayMsg"]["status"] == 4
    assert api.dump(raw_redis, topic) == before
    assert api.get(node, topic, "w")["delayMsg"]["status"] == 4      # getMsg shows it
    info = api.info(node, topic)
    assert (info["waitingQueueSize"], info["readyQueueSize"], info["ackQueueSize"]) == (0, 0, 0)


def test_the_dedup_window_is_a_topic_setting_with_bounds(node, topic):
    assert api.get_config(node, topic)["data"]["dedupWindowMillis"] == 0
    reply = node.call("setTopicConfig", topic=topic, dedupWindowMillis=-1)
    assert reply["code"] == 400 and reply["msg"].startswith("dedupWindowMillis: ")
    api.set_config(node, topic, dedupWindowMillis=5000)
    config = api.get_config(node, topic)
    assert config["data"]["dedupWindowMillis"] == 5000
    assert config["source"]["dedupWindowMillis"] == "topic"


def test_once_the_window_has_passed_a_resend_is_an_ordinary_send(node, topic):
    api.set_config(node, topic, dedupWindowMillis=1)
    api.send(node, topic, msgId="p", msg="once")
    assert node.call("deleteMsg", topic=topic, msgId="p")["code"] == 200
    time.sleep(0.01)                                  # past the 1 ms window
    reply = send(node, topic, msgId="p", msg="again")
    assert reply["code"] == 200 and "duplicate" not in reply
    assert reply["delayMsg"]["msg"] == "again" and reply["delayMsg"]["status"] == 2
