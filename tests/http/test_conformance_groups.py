"""Message groups over HTTP: groupId on sendMsg and sendMsgBatch, one message of a group
consuming at a time and in order, what keeps a group waiting (nack, ack timeout,
changeVisibility 0) and what releases it (ack, delete, expiry, retries used up), how getMsg and
getTopicInfo show the blocked messages, the groupId rules, and a camellia client that never
sends groupId seeing no change."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from support import conformance as api
from support import wait_until

MINUTE = 60_000


def ids(messages):
    return [m["msgId"] for m in messages]


def send_batch(server, topic, msgs):
    status_code, reply = api.post_json(server, "sendMsgBatch", {"topic": topic, "msgs": msgs})
    assert status_code == 200 and reply["code"] == 200, reply
    return reply["results"]


def sizes(server, topic):
    """(waiting, ready, consuming, group blocked) of getTopicInfo; checks the buckets add up."""
    data = api.info(server, topic)
    assert sum(data["waitingQueueInfo"].values()) == data["waitingQueueSize"]
    return (data["waitingQueueSize"], data["readyQueueSize"], data["ackQueueSize"],
            data["groupBlockedSize"])


def ack_ok(server, topic, message):
    assert api.ack(server, topic, message["msgId"], message["receipt"]) == \
        {"code": 200, "msg": "success"}


# -- one at a time, in order -------------------------------------------------------------
def test_a_pull_hands_out_one_message_per_group_and_the_next_only_after_the_ack(node, topic):
    entries = [("a1", "a"), ("b1", "b"), ("u1", None), ("a2", "a"), ("b2", "b"), ("u2", None),
               ("a3", "a")]
    results = send_batch(node, topic, [{"msgId": m, "msg": m, **({"groupId": g} if g else {})}
                                       for m, g in entries])
    assert [r["delayMsg"].get("groupId") for r in results] == [g for _, g in entries]
    assert sizes(node, topic) == (0, 4, 0, 3)     # a1 b1 u1 u2 ready; a2 b2 a3 blocked

    first = api.pull(node, topic, batch=100)
    assert ids(first) == ["a1", "b1", "u1", "u2"]
    assert [m.get("groupId") for m in first] == ["a", "b", None, None]
    assert api.pull(node, topic, batch=100) == []
    assert sizes(node, topic) == (0, 0, 4, 3)

    by_id = {m["msgId"]: m for m in first}
    ack_ok(node, topic, by_id["a1"])
    (a2,) = api.pull(node, topic, batch=100)
    assert (a2["msgId"], a2["groupId"], a2["retry"]) == ("a2", "a", 1)
    assert api.pull(node, topic, batch=100) == []
    ack_ok(node, topic, by_id["b1"])
    ack_ok(node, topic, a2)
    second = api.pull(node, topic, batch=100)
    assert ids(second) == ["b2", "a3"]        # both due since the batch: acceptance order
    assert sizes(node, topic) == (0, 0, 4, 0)
    for m in [by_id["u1"], by_id["u2"], *second]:
        ack_ok(node, topic, m)
    assert sizes(node, topic) == (0, 0, 0, 0)
    assert api.pull(node, topic, batch=100) == []


def test_a_group_delivers_by_trigger_time_then_acceptance_whatever_the_send_order(
        node, topic, raw_redis):
    due = api.redis_now_ms(raw_redis) + 2000
    plan = [("late", due + 600), ("tie-1", due), ("early", due - 400), ("tie-2", due)]
    for msg_id, trigger in plan:
        m = api.send(node, topic, msgId=msg_id, triggerTime=trigger, groupId="g")
        assert (m["triggerTime"], m["groupId"]) == (trigger, "g")
    delivered = []
    for _ in range(4):
        got = wait_until(lambda: api.pull(node, topic, batch=10), 10)
        assert len(got) == 1, got
        assert api.redis_now_ms(raw_redis) >= got[0]["triggerTime"]     # never early
        delivered.append(got[0]["msgId"])
        ack_ok(node, topic, got[0])
    assert delivered == ["early", "tie-1", "tie-2", "late"]


def test_a_held_long_poll_gets_the_groups_next_message_when_the_head_is_acked(hint_node,
                                                                              topic):
    """hint_node re-checks held polls only every 30 s: the wake-up is the ack's."""
    api.send(hint_node, topic, msgId="h", groupId="g")
    api.send(hint_node, topic, msgId="n", groupId="g")
    head = api.pull_one(hint_node, topic, "h", batch=10)
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(hint_node.call, "longPollingMsg", timeout=30, topic=topic,
                             batch=10, longPollingTimeoutMillis=20_000)
        time.sleep(0.5)       # held: the registry cannot tell (see test_conformance_longpoll)
        assert not future.done(), "the long poll answered while only a blocked message was due"
        acked_at = time.monotonic()
        ack_ok(hint_node, topic, head)
        reply = future.result(timeout=25)
        assert [(m["msgId"], m["groupId"]) for m in reply["delayMsgList"]] == [("n", "g")]
        assert time.monotonic() - acked_at < 5


# -- what keeps a group waiting ----------------------------------------------------------
def test_nack_reschedule_and_visibility_zero_keep_the_group_behind_its_head(node, topic):
    api.send(node, topic, msgId="h", groupId="g")
    api.send(node, topic, msgId="n", groupId="g")
    head = api.pull_one(node, topic, "h", batch=10)
    assert api.nack(node, topic, "h", head["receipt"], delayMillis=0)["code"] == 200
    head = api.pull_one(node, topic, "h", batch=10)             # not n: h is still the head
    assert head["retry"] == 2

    assert api.nack(node, topic, "h", head["receipt"], delayMillis=10 * MINUTE)["code"] == 200
    assert api.pull(node, topic, batch=10) == []                # n is due, but blocked
    assert api.get_msg(node, topic, "h")["status"] == 1
    blocked = api.get_msg(node, topic, "n")
    assert (blocked["status"], blocked["groupId"], blocked["retry"]) == (2, "g", 0)
    assert sizes(node, topic) == (1, 0, 0, 1)

    rescheduled = api.call(node, "rescheduleMsg", topic=topic, msgId="h", delayMillis=0)
    assert rescheduled["code"] == 200 and rescheduled["delayMsg"]["groupId"] == "g"
    head = api.pull_one(node, topic, "h", batch=10)             # a delivered head stays head
    assert head["retry"] == 3

    changed = api.change_visibility(node, topic, "h", 0, head["receipt"])
    assert changed["code"] == 200 and changed["delayMsg"]["groupId"] == "g"
    head = api.pull_one(node, topic, "h", batch=10)
    assert head["retry"] == 4
    assert sizes(node, topic) == (0, 0, 1, 1)
    ack_ok(node, topic, head)
    assert api.pull_one(node, topic, "n", batch=10)["groupId"] == "g"


def test_an_ack_timeout_keeps_the_group_behind_its_head(node, topic):
    api.send(node, topic, msgId="t1", groupId="g")
    api.send(node, topic, msgId="t2", groupId="g")
    api.pull_one(node, topic, "t1", ackTimeoutMillis=300)
    wait_until(lambda: api.status(node, topic, "t1") == 2, 10)     # timed out: ready again
    assert api.status(node, topic, "t2") == 2
    assert sizes(node, topic) == (0, 1, 0, 1)
    again = api.pull_one(node, topic, "t1", batch=10)
    assert again["retry"] == 2
    ack_ok(node, topic, again)
    assert api.pull_one(node, topic, "t2", batch=10)["retry"] == 1


def test_reschedule_reorders_the_waiting_messages_of_a_group(node, topic):
    api.send(node, topic, msgId="r1", groupId="g", delayMillis=MINUTE)
    api.send(node, topic, msgId="r2", groupId="g", delayMillis=2 * MINUTE)
    assert api.pull(node, topic, batch=10) == []
    moved = api.call(node, "rescheduleMsg", topic=topic, msgId="r2", delayMillis=0)
    assert moved["code"] == 200 and moved["delayMsg"]["groupId"] == "g"
    first = api.pull_one(node, topic, "r2", batch=10)           # now the group's first
    assert api.get_msg(node, topic, "r1")["status"] == 1
    moved = api.call(node, "rescheduleMsg", topic=topic, msgId="r1", delayMillis=0)
    assert moved["code"] == 200
    assert api.pull(node, topic, batch=10) == []                # r2 is delivered: r1 waits
    assert sizes(node, topic) == (0, 0, 1, 1)
    ack_ok(node, topic, first)
    api.pull_one(node, topic, "r1", batch=10)


def test_a_first_message_rescheduled_later_lets_the_next_one_go_first(node, topic):
    api.send(node, topic, msgId="s1", groupId="g")
    api.send(node, topic, msgId="s2", groupId="g")
    moved = api.call(node, "rescheduleMsg", topic=topic, msgId="s1", delayMillis=MINUTE)
    assert (moved["code"], moved["delayMsg"]["status"]) == (200, 1)
    assert sizes(node, topic) == (1, 1, 0, 0)
    api.pull_one(node, topic, "s2", batch=10)
    assert sizes(node, topic) == (1, 0, 1, 0)     # s1 waits behind the delivered s2


# -- what releases a group ---------------------------------------------------------------
def test_deleting_the_head_releases_its_group_and_deleting_a_blocked_one_does_not(
        node, topic):
    for msg_id in ("d1", "d2", "d3"):
        api.send(node, topic, msgId=msg_id, groupId="g")
    api.pull_one(node, topic, "d1", batch=10)
    assert api.call(node, "deleteMsg", topic=topic, msgId="d3") == \
        {"code": 200, "msg": "success"}
    assert api.status(node, topic, "d3") == 7
    assert api.pull(node, topic, batch=10) == []                # d1 still consuming
    assert api.call(node, "deleteMsg", topic=topic, msgId="d1")["code"] == 200
    d2 = api.pull_one(node, topic, "d2", batch=10)
    ack_ok(node, topic, d2)
    assert sizes(node, topic) == (0, 0, 0, 0)


def test_a_blocked_message_expires_while_blocked(node, topic):
    api.send(node, topic, msgId="x1", groupId="g")
    api.send(node, topic, msgId="x2", groupId="g", ttlMillis=400)
    head = api.pull_one(node, topic, "x1", batch=10)
    wait_until(lambda: api.status(node, topic, "x2") == 5, 10)
    assert sizes(node, topic) == (0, 0, 1, 0)
    ack_ok(node, topic, head)
    assert api.pull(node, topic, batch=10) == []


def test_a_dead_head_releases_its_group_and_a_redriven_one_rejoins_it(node, topic):
    api.send(node, topic, msgId="k1", groupId="k", maxRetry=0)
    api.send(node, topic, msgId="k2", groupId="k")
    k1 = api.pull_one(node, topic, "k1", batch=10)
    assert api.nack(node, topic, "k1", k1["receipt"])["code"] == 200     # retries used up
    assert api.status(node, topic, "k1") == 6
    k2 = api.pull_one(node, topic, "k2", batch=10)
    (dead,) = api.list_dead(node, topic)["delayMsgList"]
    assert (dead["msgId"], dead["groupId"], dead["status"]) == ("k1", "k", 6)

    assert api.call(node, "redriveDeadMsg", topic=topic, msgId="k1")["count"] == 1
    redriven = api.get_msg(node, topic, "k1")
    assert (redriven["status"], redriven["groupId"], redriven["retry"]) == (2, "k", 0)
    assert sizes(node, topic) == (0, 0, 1, 1)                   # behind k2, like a new send
    assert api.pull(node, topic, batch=10) == []
    ack_ok(node, topic, k2)
    again = api.pull_one(node, topic, "k1", batch=10)
    assert (again["groupId"], again["retry"]) == ("k", 1)


# -- how blocked messages are shown ------------------------------------------------------
def test_topic_info_counts_due_blocked_messages_apart_and_not_yet_due_ones_as_waiting(
        node, topic):
    api.send(node, topic, msgId="g1", groupId="g")
    api.send(node, topic, msgId="g2", groupId="g")
    api.send(node, topic, msgId="g3", groupId="g", delayMillis=5 * MINUTE)
    api.send(node, topic, msgId="u")
    assert sizes(node, topic) == (1, 2, 0, 1)
    assert api.info(node, topic)["waitingQueueInfo"]["sizeOf1minTo10min"] == 1
    assert ids(api.pull(node, topic, batch=100)) == ["g1", "u"]
    assert sizes(node, topic) == (1, 0, 2, 1)
    shown = {m: api.get_msg(node, topic, m) for m in ("g2", "g3")}
    assert [(m["status"], m["groupId"]) for m in shown.values()] == [(2, "g"), (1, "g")]

    # A blocked message whose triggerTime comes moves from waiting to groupBlockedSize.
    api.send(node, topic, msgId="g4", groupId="g", delayMillis=1000)
    assert sizes(node, topic) == (2, 0, 2, 1)
    assert api.status(node, topic, "g4") == 1
    wait_until(lambda: sizes(node, topic) == (1, 0, 2, 2), 10,
               message=lambda: f"sizes {sizes(node, topic)}")
    assert api.status(node, topic, "g4") == 2
    entry = next(e for e in api.call(node, "getTopicInfoList")["data"] if e["topic"] == topic)
    assert (entry["readyQueueSize"], entry["groupBlockedSize"]) == (0, 2)


def test_every_answer_about_a_grouped_message_carries_its_group_id(node, topic):
    sent = api.send(node, topic, msgId="m", groupId="grp-1", delayMillis=MINUTE)
    assert sent["groupId"] == "grp-1"
    assert list(sent) == ["topic", "msgId", "msg", "produceTime", "triggerTime", "expireTime",
                          "maxRetry", "retry", "status", "groupId"]
    duplicate = api.call(node, "sendMsg", topic=topic, msgId="m", msg="again")
    assert duplicate["duplicate"] is True and duplicate["delayMsg"]["groupId"] == "grp-1"
    (batch_dup,) = send_batch(node, topic, [{"msgId": "m", "msg": "again"}])
    assert batch_dup["delayMsg"]["groupId"] == "grp-1"
    assert api.call(node, "rescheduleMsg", topic=topic, msgId="m",
                    delayMillis=0)["delayMsg"]["groupId"] == "grp-1"
    (polled,) = api.call(node, "longPollingMsg", topic=topic,
                         longPollingTimeoutMillis=2000)["delayMsgList"]
    assert (polled["msgId"], polled["groupId"]) == ("m", "grp-1")
    assert api.get_msg(node, topic, "m")["groupId"] == "grp-1"
    ack_ok(node, topic, polled)
    assert api.get_msg(node, topic, "m")["groupId"] == "grp-1"    # ended: still shown
    # Its msgId sent again once it ended: a new message, in the new request's group or none.
    assert api.send(node, topic, msgId="m", groupId="grp-2")["groupId"] == "grp-2"
    assert api.call(node, "deleteMsg", topic=topic, msgId="m")["code"] == 200
    assert "groupId" not in api.send(node, topic, msgId="m")


# -- the groupId rules -------------------------------------------------------------------
BAD_GROUP_IDS = [("x" * 257, "groupId: must be at most 256 characters, got 257"),
                 ("a\tb", "groupId: must not contain control characters"),
                 ("nul\x00", "groupId: must not contain control characters"),
                 ("\x9f", "groupId: must not contain control characters")]


@pytest.mark.parametrize("group_id, error", BAD_GROUP_IDS,
                         ids=["257-chars", "tab", "nul", "c1-control"])
def test_a_bad_group_id_is_refused_naming_group_id_and_writes_nothing(node, topic, raw_redis,
                                                                      group_id, error):
    status_code, reply = api.post(node, "sendMsg", topic=topic, msgId="m", msg="x",
                                  groupId=group_id)
    assert (status_code, reply) == (200, {"code": 400, "msg": error})
    status_code, reply = api.post_json(node, "sendMsg", {"topic": topic, "msgId": "m",
                                                         "msg": "x", "groupId": group_id})
    assert (status_code, reply) == (200, {"code": 400, "msg": error})
    api.assert_nothing_written(raw_redis, topic)


def test_a_batch_refuses_a_bad_group_id_in_that_entry_alone(node, topic):
    results = send_batch(node, topic, [
        {"msgId": "ok-1", "msg": "x", "groupId": "g"},
        {"msgId": "long", "msg": "x", "groupId": "y" * 257},
        {"msgId": "ctl", "msg": "x", "groupId": "g\n"},
        {"msgId": "ok-2", "msg": "x", "groupId": "g" * 256}])      # exactly the limit
    assert [r["code"] for r in results] == [200, 400, 400, 200]
    assert results[1]["msg"] == "msgs[1].groupId: must be at most 256 characters, got 257"
    assert results[2]["msg"] == "msgs[2].groupId: must not contain control characters"
    assert results[3]["delayMsg"]["groupId"] == "g" * 256
    assert [api.status(node, topic, m) for m in ("ok-1", "long", "ctl", "ok-2")] == \
        [2, 404, 404, 2]


def test_a_group_id_at_the_limit_is_taken_and_an_empty_one_is_no_group(node, topic):
    assert api.send(node, topic, msgId="max", groupId="z" * 256)["groupId"] == "z" * 256
    for msg_id in ("e1", "e2"):
        assert "groupId" not in api.send(node, topic, msgId=msg_id, groupId="")
    results = send_batch(node, topic, [{"msgId": "e3", "msg": "x", "groupId": ""},
                                       {"msgId": "e4", "msg": "x", "groupId": None}])
    assert all("groupId" not in r["delayMsg"] for r in results)
    got = api.pull(node, topic, batch=10)           # ungrouped: all at once
    assert ids(got) == ["max", "e1", "e2", "e3", "e4"]
    assert [m.get("groupId") for m in got] == ["z" * 256] + [None] * 4
    assert sizes(node, topic) == (0, 0, 5, 0)


# -- a camellia client -------------------------------------------------------------------
def test_a_camellia_client_that_never_sends_group_id_sees_no_change(node, topic):
    answers = []

    def form(endpoint, **params):
        status_code, reply = api.post(node, endpoint, topic=topic, **params)
        assert status_code == 200 and reply["code"] == 200, reply
        answers.append(reply)
        return reply

    for i in range(5):
        sent = form("sendMsg", msgId=f"c{i}", msg="body", delayMillis=0, ttlMillis=60_000,
                    maxRetry=3)["delayMsg"]
        assert set(sent) == api.CAMELLIA_FIELDS
    pulled = form("pullMsg", batch=10, ackTimeoutMillis=30_000)["delayMsgList"]
    assert ids(pulled) == [f"c{i}" for i in range(5)]            # no group holds any back
    assert all(set(m) == api.CAMELLIA_FIELDS | {"receipt"} for m in pulled)
    form("ackMsg", msgId="c0", ack="false")
    assert set(form("getMsg", msgId="c0")["delayMsg"]) == api.CAMELLIA_FIELDS
    form("ackMsg", msgId="c1", ack="true")
    form("deleteMsg", msgId="c2")
    data = form("getTopicInfo")["data"]
    assert (data["readyQueueSize"], data["ackQueueSize"], data["groupBlockedSize"]) == (1, 2, 0)
    assert not any("groupId" in json.dumps(reply) for reply in answers)
