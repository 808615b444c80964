"""Conformance of "Failure handling and topic settings (ours)" (docs/api.md) on live nodes.

Receipts, changeVisibility, nack with a delay, the tail requeue, dead letters (list, redrive,
purge, size and retention), topic settings, message attributes, rescheduleMsg and past
trigger times; and that a camellia client that sends none of the new parameters sees no
change. The nodes and helpers are shared with test_api_conformance.py (tests/http/conftest.py,
tests/support/conformance.py): form POSTs like camellia's SDK, a topic per test, and
"nothing written" checked on refusals. The measured redelivery backoff is in
test_redelivery_timing.py.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from support import wait_until
from support.conformance import (
    API,
    CAMELLIA_FIELDS,
    CLOCK_SLACK,
    DAY,
    HOUR,
    SESSION,
    ack,
    ack_deadline,
    assert_nothing_written,
    assert_stale,
    call,
    change_visibility,
    dead_ids,
    dead_size,
    dump,
    get,
    get_config,
    get_msg,
    info,
    kill,
    list_dead,
    nack,
    post,
    post_json,
    pull,
    pull_one,
    redis_now_ms,
    send,
    set_config,
    status,
)
from support.lua import NS, read
from support.node import ServerProcess
from support.redis_server import RedisServer

SERVER_DEFAULTS = {
    "ttlMillis": HOUR, "maxRetry": 10, "ackTimeoutMillis": 30_000,
    "redeliveryDelayMillis": 0, "redeliveryBackoffMultiplier": 1,
    "redeliveryMaxDelayMillis": HOUR, "deadLetter": True,
    "deadLetterRetentionMillis": 7 * DAY, "deadLetterMaxSize": 100_000,
}


# -- receipts ----------------------------------------------------------------------------
def test_pull_and_long_poll_carry_a_new_receipt_on_every_delivery(node, topic):
    sent = send(node, topic, msgId="r")
    assert "receipt" not in sent
    receipts = []
    first = pull_one(node, topic, "r")
    receipts.append(first["receipt"])
    assert nack(node, topic, "r")["code"] == 200
    reply = call(node, "longPollingMsg", topic=topic, longPollingTimeoutMillis=2000)
    assert [m["msgId"] for m in reply["delayMsgList"]] == ["r"]
    receipts.append(reply["delayMsgList"][0]["receipt"])
    assert nack(node, topic, "r")["code"] == 200
    receipts.append(pull_one(node, topic, "r")["receipt"])
    assert all(isinstance(r, str) and r for r in receipts)
    assert len(set(receipts)) == 3
    # Only the answers that hand a delivery out show it.
    assert "receipt" not in get_msg(node, topic, "r")
    dup = call(node, "sendMsg", topic=topic, msgId="r", msg="again")
    assert dup["duplicate"] is True and "receipt" not in dup["delayMsg"]
    cv = change_visibility(node, topic, "r", 60_000, receipts[-1])
    assert cv["code"] == 200 and "receipt" not in cv["delayMsg"]


def test_stale_receipt_after_a_timeout_redelivery_is_409_and_changes_nothing(
        node, topic, raw_redis):
    send(node, topic, msgId="s")
    old = pull_one(node, topic, "s", ackTimeoutMillis=300)["receipt"]
    wait_until(lambda: status(node, topic, "s") == 2, 10)
    new = pull_one(node, topic, "s", ackTimeoutMillis=60_000)
    assert new["retry"] == 2 and new["receipt"] != old
    before = dump(raw_redis, topic)
    for reply in (ack(node, topic, "s", old), nack(node, topic, "s", old),
                  change_visibility(node, topic, "s", 0, old),
                  ack(node, topic, "s", "not-a-receipt")):
        assert_stale(reply)
    status_code, reply = post(node, "ackMsg", topic=topic, msgId="s", receipt=old)
    assert status_code == 200 and reply["code"] == 409
    assert dump(raw_redis, topic) == before
    m = get_msg(node, topic, "s")
    assert m["status"] == 3 and m["retry"] == 2
    # The latest receipt acks; afterwards it still answers 200, the old one 409.
    assert ack(node, topic, "s", new["receipt"])["code"] == 200
    assert status(node, topic, "s") == 4
    assert ack(node, topic, "s", new["receipt"])["code"] == 200
    assert_stale(ack(node, topic, "s", old))
    assert status(node, topic, "s") == 4


def test_any_receipt_not_of_the_latest_delivery_is_409(node, topic, raw_redis):
    """The contract names no format for a receipt: any string that is not the latest
    delivery's receipt is stale (409), however long or odd."""
    send(node, topic, msgId="s")
    pull_one(node, topic, "s", ackTimeoutMillis=60_000)
    before = dump(raw_redis, topic)
    for receipt in ("x" * 200, "a\tb", "é"):
        assert_stale(ack(node, topic, "s", receipt))
    assert dump(raw_redis, topic) == before


def test_late_ack_with_the_latest_receipt_after_a_timeout_is_accepted(node, topic):
    send(node, topic, msgId="late")
    receipt = pull_one(node, topic, "late", ackTimeoutMillis=300)["receipt"]
    m = wait_until(lambda: (lambda x: x if x["status"] == 2 else None)(
        get_msg(node, topic, "late")), 10)
    assert m["retry"] == 1
    assert ack(node, topic, "late", receipt)["code"] == 200
    assert status(node, topic, "late") == 4
    assert pull(node, topic) == []
    assert info(node, topic)["readyQueueSize"] == 0


def test_late_ack_with_the_latest_receipt_while_the_redelivery_waits_out_its_backoff(
        node, topic):
    """Decision: a timed-out delivery waiting for its backoff (status 1, delivered before)
    is "after the ack timeout, before the redelivery": its latest receipt acks it."""
    set_config(node, topic, redeliveryDelayMillis=60_000)
    send(node, topic, msgId="b")
    receipt = pull_one(node, topic, "b", ackTimeoutMillis=300)["receipt"]
    m = wait_until(lambda: (lambda x: x if x["status"] != 3 else None)(
        get_msg(node, topic, "b")), 5)
    assert m["status"] == 1 and m["retry"] == 1
    assert ack(node, topic, "b", receipt)["code"] == 200
    assert status(node, topic, "b") == 4
    assert info(node, topic)["waitingQueueSize"] == 0


def test_receipt_of_an_unknown_message_is_404(node, topic):
    assert ack(node, topic, "ghost", "whatever")["code"] == 404
    assert nack(node, topic, "ghost", "whatever")["code"] == 404
    assert change_visibility(node, topic, "ghost", 1000, "whatever")["code"] == 404


# -- changeVisibility ------------------------------------------------------------------------
def test_change_visibility_zero_gives_it_up_for_immediate_redelivery(node, topic):
    set_config(node, topic, redeliveryDelayMillis=60_000)   # no backoff for a give-up
    m = send(node, topic, msgId="v")
    receipt = pull_one(node, topic, "v", ackTimeoutMillis=60_000)["receipt"]
    reply = change_visibility(node, topic, "v", 0, receipt)
    assert reply["code"] == 200 and reply["msg"] == "success"
    assert reply["delayMsg"]["status"] == 2 and reply["delayMsg"]["msgId"] == "v"
    assert reply["delayMsg"]["triggerTime"] == m["triggerTime"]
    again = pull_one(node, topic, "v")
    assert again["retry"] == 2 and again["receipt"] != receipt


def test_change_visibility_extends_the_ack_deadline(node, topic, raw_redis):
    send(node, topic, msgId="x")
    receipt = pull_one(node, topic, "x", ackTimeoutMillis=300)["receipt"]
    before = redis_now_ms(raw_redis)
    reply = change_visibility(node, topic, "x", 1500, receipt)
    after = redis_now_ms(raw_redis)
    assert reply["code"] == 200 and reply["delayMsg"]["status"] == 3
    deadline = ack_deadline(raw_redis, topic, "x")
    assert before + 1500 - CLOCK_SLACK <= deadline <= after + 1500
    # Well past the original 300 ms: still consuming, nothing to pull.
    while redis_now_ms(raw_redis) < before + 900:
        assert pull(node, topic) == []
        time.sleep(0.05)
    assert status(node, topic, "x") == 3
    # After the new deadline it is redelivered, never before it.
    again = wait_until(lambda: pull(node, topic, ackTimeoutMillis=60_000), 5)
    delivered_at = ack_deadline(raw_redis, topic, "x") - 60_000
    assert [m["msgId"] for m in again] == ["x"] and again[0]["retry"] == 2
    assert delivered_at >= deadline
    assert_stale(ack(node, topic, "x", receipt))


def test_heartbeat_keeps_a_handler_three_times_the_ack_timeout_from_redelivery(node, topic):
    timeout_ms = 400
    send(node, topic, msgId="h")
    receipt = pull_one(node, topic, "h", ackTimeoutMillis=timeout_ms)["receipt"]
    started = time.monotonic()
    competitor = []
    beats = 0
    while time.monotonic() - started < 3 * timeout_ms / 1000:
        time.sleep(timeout_ms / 2000)
        reply = change_visibility(node, topic, "h", timeout_ms, receipt)
        assert reply["code"] == 200 and reply["delayMsg"]["status"] == 3, reply
        beats += 1
        competitor += pull(node, topic, batch=10)       # another consumer polling
    assert beats >= 5 and competitor == []
    assert ack(node, topic, "h", receipt)["code"] == 200
    m = get_msg(node, topic, "h")
    assert m["status"] == 4 and m["retry"] == 1


def test_change_visibility_refusals(node, topic, raw_redis):
    send(node, topic, msgId="r")
    pull_one(node, topic, "r")
    assert ack(node, topic, "r")["code"] == 200       # acked: ended
    send(node, topic, msgId="c")
    c = pull_one(node, topic, "c", ackTimeoutMillis=60_000)
    send(node, topic, msgId="w", delayMillis=60_000)
    send(node, topic, msgId="ready")
    before = dump(raw_redis, topic)
    for msg_id, code in (("w", 400), ("ready", 400), ("r", 404), ("ghost", 404)):
        status_code, reply = post(node, "changeVisibility", topic=topic, msgId=msg_id,
                                  ackTimeoutMillis=1000)
        assert status_code == 200 and reply["code"] == code, (msg_id, reply)
        assert reply["msg"] != "success"
    status_code, reply = post(node, "changeVisibility", topic=topic, msgId="c",
                              ackTimeoutMillis=-1, receipt=c["receipt"])
    assert reply["code"] == 400 and reply["msg"].startswith("ackTimeoutMillis"), reply
    status_code, reply = post(node, "changeVisibility", topic=topic, msgId="c",
                              receipt=c["receipt"])
    assert status_code == 400 and reply["code"] == 400
    assert reply["msg"].startswith("ackTimeoutMillis"), reply
    status_code, reply = post(node, "changeVisibility", topic=topic, msgId="c",
                              ackTimeoutMillis=3_153_600_000_001, receipt=c["receipt"])
    assert reply["code"] == 400 and reply["msg"].startswith("ackTimeoutMillis"), reply
    status_code, reply = post(node, "changeVisibility", topic=topic, msgId="c",
                              ackTimeoutMillis="soon")
    assert status_code == 400 and reply["code"] == 400
    assert dump(raw_redis, topic) == before
    status_code, reply = post(node, "changeVisibility", topic=topic + "{",
                              msgId="c", ackTimeoutMillis=5)
    assert reply["code"] == 400 and reply["msg"].startswith("topic")


def test_change_visibility_zero_out_of_deliveries_ends_it_dead(node, topic):
    send(node, topic, msgId="z", maxRetry=0)
    receipt = pull_one(node, topic, "z")["receipt"]
    reply = change_visibility(node, topic, "z", 0, receipt)
    assert reply["code"] == 200 and reply["delayMsg"]["status"] == 6
    assert dead_ids(node, topic) == ["z"]
    assert pull(node, topic) == []


# -- nack with a delay, requeue at the tail ----------------------------------------------
def test_nack_with_delay_waits_then_redelivers_never_early(node, topic, raw_redis):
    sent = send(node, topic, msgId="n")
    receipt = pull_one(node, topic, "n")["receipt"]
    before = redis_now_ms(raw_redis)
    assert nack(node, topic, "n", receipt, delayMillis=800)["code"] == 200
    after = redis_now_ms(raw_redis)
    m = get_msg(node, topic, "n")
    assert m["status"] == 1 and m["retry"] == 1
    assert before + 800 - CLOCK_SLACK <= m["triggerTime"] <= after + 800
    assert m["expireTime"] == sent["expireTime"]          # a redelivery never lengthens life
    data = info(node, topic)
    assert (data["waitingQueueSize"], data["readyQueueSize"], data["ackQueueSize"]) == \
        (1, 0, 0)
    assert pull(node, topic) == []
    reply = call(node, "longPollingMsg", topic=topic, longPollingTimeoutMillis=5000,
                 ackTimeoutMillis=60_000)
    assert [x["msgId"] for x in reply["delayMsgList"]] == ["n"]
    delivered_at = ack_deadline(raw_redis, topic, "n") - 60_000
    assert delivered_at >= m["triggerTime"]
    assert reply["delayMsgList"][0]["retry"] == 2
    assert reply["delayMsgList"][0]["triggerTime"] == m["triggerTime"]


def test_nack_with_delay_zero_is_ready_at_once_whatever_the_backoff(node, topic):
    set_config(node, topic, redeliveryDelayMillis=60_000)
    m = send(node, topic, msgId="z")
    receipt = pull_one(node, topic, "z")["receipt"]
    assert nack(node, topic, "z", receipt, delayMillis=0)["code"] == 200
    got = get_msg(node, topic, "z")
    assert got["status"] == 2 and got["triggerTime"] == m["triggerTime"]
    assert pull_one(node, topic, "z")["retry"] == 2


def test_nack_without_delay_waits_the_topic_backoff(node, topic, raw_redis):
    set_config(node, topic, redeliveryDelayMillis=60_000)
    send(node, topic, msgId="b")
    pull_one(node, topic, "b")
    before = redis_now_ms(raw_redis)
    assert nack(node, topic, "b")["code"] == 200
    after = redis_now_ms(raw_redis)
    m = get_msg(node, topic, "b")
    assert m["status"] == 1
    assert before + 60_000 - CLOCK_SLACK <= m["triggerTime"] <= after + 60_000


def test_nack_with_a_negative_or_bad_delay_is_refused_and_changes_nothing(node, topic,
                                                                         raw_redis):
    send(node, topic, msgId="n")
    pull_one(node, topic, "n", ackTimeoutMillis=60_000)
    before = dump(raw_redis, topic)
    status_code, reply = post(node, "ackMsg", topic=topic, msgId="n", ack="false",
                              delayMillis=-1)
    assert status_code == 200 and reply["code"] == 400
    assert reply["msg"].startswith("delayMillis"), reply
    status_code, reply = post(node, "ackMsg", topic=topic, msgId="n", ack="false",
                              delayMillis="later")
    assert status_code == 400 and reply["code"] == 400
    assert dump(raw_redis, topic) == before
    assert status(node, topic, "n") == 3


def test_a_redelivery_due_at_or_after_expire_time_ends_the_message(node, topic):
    send(node, topic, msgId="d", ttlMillis=2000)
    pull_one(node, topic, "d")
    assert nack(node, topic, "d", delayMillis=5000)["code"] == 200
    assert status(node, topic, "d") == 6
    set_config(node, topic, redeliveryDelayMillis=5000)
    send(node, topic, msgId="b", ttlMillis=2000)
    pull_one(node, topic, "b")
    assert nack(node, topic, "b")["code"] == 200
    assert status(node, topic, "b") == 6
    assert set(dead_ids(node, topic)) == {"d", "b"}


@pytest.mark.parametrize("requeue", ["nack", "ack_timeout", "change_visibility_0"])
def test_a_requeued_poison_message_queues_behind_older_siblings(node, topic, requeue):
    # Sent in this order, so ready in this order whether or not they share a millisecond
    # (ties go by msgId). camellia put a requeued message back at the head: the poison
    # would be redelivered before every sibling.
    poison = send(node, topic, msgId="a-poison")
    send(node, topic, msgId="a-sibling-equal")
    send(node, topic, msgId="b-sibling-later")
    first = pull_one(node, topic, "a-poison", ackTimeoutMillis=300)
    send(node, topic, msgId="c-sibling-after-delivery")     # due later than the poison
    if requeue == "nack":
        assert nack(node, topic, "a-poison", first["receipt"])["code"] == 200
    elif requeue == "ack_timeout":
        wait_until(lambda: status(node, topic, "a-poison") == 2, 10)
    else:
        reply = change_visibility(node, topic, "a-poison", 0, first["receipt"])
        assert reply["code"] == 200
    order, second = [], []
    for _ in range(4):
        got = pull(node, topic, batch=1, ackTimeoutMillis=60_000)
        order += [m["msgId"] for m in got]
        second = got
    assert order == ["a-sibling-equal", "b-sibling-later", "c-sibling-after-delivery",
                     "a-poison"]
    assert second[0]["retry"] == 2
    assert second[0]["triggerTime"] == poison["triggerTime"]   # unchanged when ready at once


# -- dead letters ------------------------------------------------------------------------
def test_messages_that_end_with_status_6_enter_the_dead_letter_queue(node, topic):
    send(node, topic, msgId="n", maxRetry=1, attributes=json.dumps({"k": "v"}))
    pull_one(node, topic, "n")
    assert nack(node, topic, "n")["code"] == 200
    pull_one(node, topic, "n")
    assert nack(node, topic, "n")["code"] == 200            # deliveries used up
    send(node, topic, msgId="c", maxRetry=0)
    change_visibility(node, topic, "c", 0, pull_one(node, topic, "c")["receipt"])
    send(node, topic, msgId="t", maxRetry=0)
    pull_one(node, topic, "t", ackTimeoutMillis=300)           # times out, none left
    send(node, topic, msgId="e", ttlMillis=300)
    pull_one(node, topic, "e", ackTimeoutMillis=600)           # life ends while consumed
    send(node, topic, msgId="a")
    pull_one(node, topic, "a")
    assert ack(node, topic, "a")["code"] == 200                # 4
    send(node, topic, msgId="d", delayMillis=60_000)
    assert call(node, "deleteMsg", topic=topic, msgId="d")["code"] == 200   # 7
    send(node, topic, msgId="x", ttlMillis=200)                # 5, never delivered
    wait_until(lambda: [status(node, topic, i) for i in "tex"] == [6, 6, 5], 10)
    assert status(node, topic, "n") == 6 and status(node, topic, "c") == 6
    assert dead_size(node, topic) == 4
    reply = list_dead(node, topic)
    entries = {m["msgId"]: m for m in reply["delayMsgList"]}
    assert set(entries) == {"n", "c", "t", "e"}
    assert "nextCursor" not in reply
    for m in entries.values():
        assert m["status"] == 6 and isinstance(m["deadTime"], int)
        assert "receipt" not in m and CAMELLIA_FIELDS <= set(m)
    assert entries["n"]["retry"] == 2 and entries["n"]["attributes"] == {"k": "v"}
    dead_times = [m["deadTime"] for m in reply["delayMsgList"]]
    assert dead_times == sorted(dead_times)
    assert [m["msgId"] for m in reply["delayMsgList"]][:2] == ["n", "c"]   # oldest death first
    assert get_msg(node, topic, "n")["status"] == 6


def test_dead_letters_outlive_end_life_retention_unless_dead_letter_is_off(short_node,
                                                                           topic):
    off = topic + "-off"
    set_config(short_node, off, deadLetter="false")
    kill(short_node, topic, "kept")
    kill(short_node, off, "dropped")
    assert list_dead(short_node, off)["delayMsgList"] == []
    assert dead_size(short_node, off) == 0
    # end-life-msg-expire-millis is 500 ms on this node.
    wait_until(lambda: get(short_node, off, "dropped")["code"] == 404, 10)
    assert get_msg(short_node, topic, "kept")["status"] == 6
    assert dead_ids(short_node, topic) == ["kept"]
    assert dead_size(short_node, topic) == 1


def test_a_resend_of_a_dead_msg_id_replaces_the_dead_letter(node, topic):
    """Decision: a dead letter is an ended message, so a send of its msgId replaces it (as
    for any retained ended message) and it leaves the dead-letter queue; a redrive never
    touches the new, live message."""
    kill(node, topic, "x")
    reply = call(node, "sendMsg", topic=topic, msgId="x", msg="second", delayMillis=60_000)
    assert reply["code"] == 200 and "duplicate" not in reply
    assert reply["delayMsg"]["status"] == 1 and reply["delayMsg"]["retry"] == 0
    assert dead_ids(node, topic) == [] and dead_size(node, topic) == 0
    assert call(node, "redriveDeadMsg", topic=topic, msgId="x")["code"] == 404
    assert call(node, "redriveDeadMsg", topic=topic)["count"] == 0
    assert call(node, "purgeDeadMsg", topic=topic)["count"] == 0
    m = get_msg(node, topic, "x")
    assert (m["status"], m["msg"]) == (1, "second")
    data = info(node, topic)
    assert (data["waitingQueueSize"], data["readyQueueSize"]) == (1, 0)


def test_delete_with_release_of_a_dead_letter_removes_it_from_the_dead_letter_queue(
        node, topic, raw_redis):
    """Decision: deleteMsg of a dead letter answers 404 (an ended message, as documented);
    with release=true its body goes, and so does its dead-letter entry (no phantom)."""
    kill(node, topic, "x")
    kill(node, topic, "y")
    assert call(node, "deleteMsg", topic=topic, msgId="x")["code"] == 404
    assert dead_ids(node, topic) == ["x", "y"]
    assert call(node, "deleteMsg", topic=topic, msgId="x", release="true")["code"] == 404
    assert get(node, topic, "x")["code"] == 404
    assert dead_ids(node, topic) == ["y"] and dead_size(node, topic) == 1
    assert call(node, "redriveDeadMsg", topic=topic)["count"] == 1
    assert [m["msgId"] for m in pull(node, topic, batch=10)] == ["y"]
    assert read(raw_redis, NS.topic(topic), "x") == (None, None)     # not even retained


def test_list_dead_msg_pages_with_a_cursor_without_gaps_or_repeats(node, topic):
    together = [f"t{i:02d}" for i in range(15)]
    for msg_id in together:
        send(node, topic, msgId=msg_id, maxRetry=0)
    assert len(pull(node, topic, batch=15, ackTimeoutMillis=300)) == 15
    wait_until(lambda: dead_size(node, topic) == 15, 10)   # one timeout sweep: equal deadTimes
    one_by_one = [f"n{i:02d}" for i in range(10)]
    for msg_id in one_by_one:
        kill(node, topic, msg_id)
    first = list_dead(node, topic, limit=10)
    assert len(first["delayMsgList"]) == 10 and first["nextCursor"]
    late = [f"z{i}" for i in range(3)]
    for msg_id in late:                           # more deaths while paging: at the end
        kill(node, topic, msg_id)
    pages = [first["delayMsgList"]]
    cursor = first["nextCursor"]
    while cursor:
        reply = list_dead(node, topic, limit=10, cursor=cursor)
        pages.append(reply["delayMsgList"])
        cursor = reply.get("nextCursor")
        assert len(pages) < 10
    assert [len(p) for p in pages] == [10, 10, 8]
    seen = [m["msgId"] for page in pages for m in page]
    assert len(seen) == len(set(seen)) == 28
    assert set(seen) == set(together + one_by_one + late)
    assert seen[-3:] == late
    dead_times = [m["deadTime"] for page in pages for m in page]
    assert dead_times == sorted(dead_times)
    assert dead_size(node, topic) == 28


def test_list_dead_msg_validates_limit_and_cursor(node, topic):
    kill(node, topic, "a")
    reply = list_dead(node, topic)
    assert [m["msgId"] for m in reply["delayMsgList"]] == ["a"] and "nextCursor" not in reply
    for bad in (0, 1001, -1):
        status_code, reply = post(node, "listDeadMsg", topic=topic, limit=bad)
        assert reply["code"] == 400 and reply["msg"].startswith("limit"), (bad, reply)
    status_code, reply = post(node, "listDeadMsg", topic=topic, limit="ten")
    assert status_code == 400 and reply["code"] == 400
    status_code, reply = post(node, "listDeadMsg", topic=topic, cursor="not a cursor")
    assert reply["code"] == 400 and reply["msg"].startswith("cursor"), reply
    empty = list_dead(node, topic + "-unknown")
    assert empty["delayMsgList"] == [] and "nextCursor" not in empty


def test_redrive_one_then_the_oldest_then_the_rest(node, topic, raw_redis):
    receipts = {msg_id: kill(node, topic, msg_id, ttlMillis=5000,
                             attributes=json.dumps({"id": msg_id})) for msg_id in "abcde"}
    set_config(node, topic, ttlMillis=120_000)
    send(node, topic, msgId="sibling")                     # ready before the redrive
    before = redis_now_ms(raw_redis)
    reply = call(node, "redriveDeadMsg", topic=topic, msgId="c")
    after = redis_now_ms(raw_redis)
    assert reply == {"code": 200, "msg": "success", "count": 1}
    m = get_msg(node, topic, "c")
    assert m["status"] == 2 and m["retry"] == 0 and m["maxRetry"] == 0
    assert before - CLOCK_SLACK <= m["triggerTime"] <= after
    assert m["expireTime"] == m["triggerTime"] + 120_000
    assert m["attributes"] == {"id": "c"}
    assert dead_ids(node, topic) == ["a", "b", "d", "e"]
    assert call(node, "redriveDeadMsg", topic=topic, msgId="c")["code"] == 404
    assert call(node, "redriveDeadMsg", topic=topic, msgId="ghost")["code"] == 404
    assert call(node, "redriveDeadMsg", topic=topic, limit=2)["count"] == 2   # the oldest
    assert dead_ids(node, topic) == ["d", "e"]
    assert call(node, "redriveDeadMsg", topic=topic)["count"] == 2
    assert call(node, "redriveDeadMsg", topic=topic)["count"] == 0
    assert dead_size(node, topic) == 0
    got = pull(node, topic, batch=10)
    # Redriven ones queue at the tail, in the order they were redriven (oldest death first).
    assert [x["msgId"] for x in got] == ["sibling", "c", "a", "b", "d", "e"]
    assert all(x["retry"] == 1 for x in got)
    # The receipt of the delivery before the death is stale now.
    assert_stale(ack(node, topic, "b", receipts["b"]))
    # A redriven maxRetry-0 message dies again on its nack.
    a = next(x for x in got if x["msgId"] == "a")
    assert nack(node, topic, "a", a["receipt"])["code"] == 200
    assert dead_ids(node, topic) == ["a"]


def test_redrive_all_in_slices_of_1000_and_purge_the_rest(node, topic):
    count = 1100
    url = node.url + API + "sendMsg"

    def send_slice(start):
        with requests.Session() as session:
            for i in range(start, count, 8):
                reply = session.post(url, data={"topic": topic, "msgId": f"m{i:04d}",
                                                "msg": "x", "maxRetry": 0}, timeout=15).json()
                assert reply["code"] == 200, reply

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(send_slice, range(8)))
    assert len(pull(node, topic, batch=1000, ackTimeoutMillis=300)) == 1000
    assert len(pull(node, topic, batch=100, ackTimeoutMillis=300)) == 100
    wait_until(lambda: dead_size(node, topic) == count, 15)
    assert call(node, "redriveDeadMsg", topic=topic, limit=1001)["code"] == 400
    assert call(node, "redriveDeadMsg", topic=topic)["count"] == 1000
    assert dead_size(node, topic) == 100
    assert info(node, topic)["readyQueueSize"] == 1000
    reply = call(node, "purgeDeadMsg", topic=topic)
    assert reply == {"code": 200, "msg": "success", "count": 100}
    assert dead_size(node, topic) == 0


def test_redrive_works_after_every_node_restarted(tmp_path, topic):
    server = RedisServer(tmp_path / "redis").start()
    try:
        with ThreadPoolExecutor(2) as pool:
            first = list(pool.map(lambda _: ServerProcess(server.url).start(), range(2)))
        try:
            kill(first[0], topic, "r1")
            kill(first[1], topic, "r2")
        finally:
            SESSION.close()
            with ThreadPoolExecutor(2) as pool:
                list(pool.map(lambda n: n.stop(), first))
        with ServerProcess(server.url) as fresh:
            assert dead_ids(fresh, topic) == ["r1", "r2"]
            assert call(fresh, "redriveDeadMsg", topic=topic, msgId="r2")["count"] == 1
            assert call(fresh, "redriveDeadMsg", topic=topic)["count"] == 1
            got = pull(fresh, topic, batch=10)
            assert [m["msgId"] for m in got] == ["r2", "r1"]
            assert dead_size(fresh, topic) == 0
            SESSION.close()
    finally:
        server.stop()


def test_purge_one_and_all(node, topic, raw_redis):
    for msg_id in "abcd":
        kill(node, topic, msg_id)
    reply = call(node, "purgeDeadMsg", topic=topic, msgId="b")
    assert reply == {"code": 200, "msg": "success", "count": 1}
    assert get(node, topic, "b")["code"] == 404               # decision: purged = gone
    assert call(node, "purgeDeadMsg", topic=topic, msgId="b")["code"] == 404
    assert dead_ids(node, topic) == ["a", "c", "d"]
    assert call(node, "purgeDeadMsg", topic=topic)["count"] == 3
    assert dead_ids(node, topic) == [] and dead_size(node, topic) == 0
    assert all(get(node, topic, i)["code"] == 404 for i in "acd")
    assert call(node, "purgeDeadMsg", topic=topic)["count"] == 0
    assert raw_redis.exists(NS.topic(topic).msgs, NS.topic(topic).ended) == 0


def test_dead_letter_max_size_drops_the_oldest(node, topic):
    set_config(node, topic, deadLetterMaxSize=3)
    for msg_id in "abcde":
        kill(node, topic, msg_id)
    assert dead_ids(node, topic) == ["c", "d", "e"]
    assert dead_size(node, topic) == 3
    set_config(node, topic, deadLetterMaxSize=1)               # lowering drops at once
    assert dead_ids(node, topic) == ["e"]
    assert dead_size(node, topic) == 1
    set_config(node, topic, deadLetterMaxSize=10)
    assert dead_ids(node, topic) == ["e"]


def test_dead_letter_retention_drops_it_when_it_passes(node, topic):
    set_config(node, topic, deadLetterRetentionMillis=500)
    kill(node, topic, "old")
    assert dead_ids(node, topic) == ["old"] and dead_size(node, topic) == 1
    killed = time.monotonic()
    wait_until(lambda: dead_size(node, topic) == 0 and dead_ids(node, topic) == [],
               15, interval_s=0.05)
    gone_after = time.monotonic() - killed
    print(f"\ndead letter with a 500 ms retention gone after {gone_after:.2f} s")
    assert get(node, topic, "old")["code"] == 404
    assert gone_after >= 0.4


# -- topic settings ----------------------------------------------------------------------
def test_get_topic_config_of_a_fresh_topic_shows_the_server_defaults(node, topic,
                                                                    raw_redis):
    status_code, reply = post(node, "getTopicConfig", topic=topic)
    assert status_code == 200 and reply["code"] == 200 and reply["msg"] == "success"
    assert reply["data"] == SERVER_DEFAULTS
    assert reply["source"] == {name: "server" for name in SERVER_DEFAULTS}
    assert_nothing_written(raw_redis, topic)


def test_set_topic_config_sets_every_setting_merges_and_resets(node, topic):
    values = {"ttlMillis": 120_000, "maxRetry": 3, "ackTimeoutMillis": 5000,
              "redeliveryDelayMillis": 250, "redeliveryBackoffMultiplier": 1.5,
              "redeliveryMaxDelayMillis": 4000, "deadLetter": False,
              "deadLetterRetentionMillis": 60_000, "deadLetterMaxSize": 50}
    form = {k: ("false" if v is False else v) for k, v in values.items()}
    reply = set_config(node, topic, **form)
    assert reply["data"] == values
    assert reply["source"] == {name: "topic" for name in values}
    assert get_config(node, topic) == reply
    # Another call merges: the values not given stay.
    reply = set_config(node, topic, maxRetry=0, deadLetter="true")
    assert reply["data"] == {**values, "maxRetry": 0, "deadLetter": True}
    # reset=true drops every topic value first, then applies the given ones.
    reply = set_config(node, topic, reset="true", ackTimeoutMillis=900)
    assert reply["data"] == {**SERVER_DEFAULTS, "ackTimeoutMillis": 900}
    assert reply["source"] == {name: "topic" if name == "ackTimeoutMillis" else "server"
                               for name in SERVER_DEFAULTS}
    reply = set_config(node, topic, reset="true")
    assert reply["data"] == SERVER_DEFAULTS
    assert set(reply["source"].values()) == {"server"}
    # A JSON body with JSON types.
    status_code, reply = post_json(node, "setTopicConfig",
                                   {"topic": topic, "deadLetter": False, "maxRetry": 2,
                                    "redeliveryBackoffMultiplier": 2})
    assert reply["code"] == 200, reply
    assert reply["data"]["deadLetter"] is False and reply["data"]["maxRetry"] == 2
    assert reply["data"]["redeliveryBackoffMultiplier"] == 2


BAD_SETTINGS = [
    # (setting, value, HTTP status): rule broken -> 200, unconvertible -> 400
    ("ttlMillis", 0, 200), ("ttlMillis", -5, 200), ("ttlMillis", 3_153_600_000_001, 200),
    ("ttlMillis", "abc", 400), ("ttlMillis", "1.5", 400),
    ("maxRetry", -1, 200), ("maxRetry", 1_000_001, 200), ("maxRetry", "many", 400),
    ("ackTimeoutMillis", 0, 200), ("ackTimeoutMillis", -1, 200),
    ("ackTimeoutMillis", 3_153_600_000_001, 200),
    ("redeliveryDelayMillis", -1, 200),
    ("redeliveryBackoffMultiplier", 0.5, 200), ("redeliveryBackoffMultiplier", "x", 400),
    ("redeliveryBackoffMultiplier", "nan", None), ("redeliveryBackoffMultiplier", "inf", None),
    ("redeliveryMaxDelayMillis", -1, 200),
    ("deadLetter", "perhaps", 400),
    ("deadLetterRetentionMillis", 0, 200),
    ("deadLetterMaxSize", 0, 200), ("deadLetterMaxSize", "lots", 400),
]


@pytest.mark.parametrize("setting,value,http", BAD_SETTINGS,
                         ids=[f"{s}={v}" for s, v, _ in BAD_SETTINGS])
def test_set_topic_config_refuses_a_bad_value_naming_it_and_writes_nothing(
        node, topic, raw_redis, setting, value, http):
    valid = {"deadLetterMaxSize": 5} if setting != "deadLetterMaxSize" else {"maxRetry": 2}
    status_code, reply = post(node, "setTopicConfig", topic=topic, **valid,
                              **{setting: value})
    assert reply["code"] == 400, reply
    assert reply["msg"].startswith(setting), reply
    if http is not None:
        assert status_code == http
    assert_nothing_written(raw_redis, topic)
    # On a topic with settings, a refused call changes none of them.
    set_config(node, topic, maxRetry=4)
    before = dump(raw_redis, topic)
    post(node, "setTopicConfig", topic=topic, reset="true", **{setting: value})
    assert dump(raw_redis, topic) == before
    assert get_config(node, topic)["data"]["maxRetry"] == 4


def test_set_topic_config_accepts_the_edges_of_every_rule(node, topic):
    edges = {"ttlMillis": 1, "maxRetry": 0, "ackTimeoutMillis": 1, "redeliveryDelayMillis": 0,
             "redeliveryBackoffMultiplier": 1, "redeliveryMaxDelayMillis": 0,
             "deadLetterRetentionMillis": 1, "deadLetterMaxSize": 1}
    assert set_config(node, topic, **edges)["data"] == {**edges, "deadLetter": True}
    reply = set_config(node, topic, redeliveryBackoffMultiplier=1000)     # its upper edge
    assert reply["data"]["redeliveryBackoffMultiplier"] == 1000
    status_code, reply = post(node, "setTopicConfig", topic=topic,
                              redeliveryBackoffMultiplier=1000.5)
    assert status_code == 200 and reply["code"] == 400


def test_set_topic_config_refuses_a_bad_topic(node, topic, raw_redis):
    status_code, reply = post(node, "setTopicConfig", topic=topic + "}", maxRetry=1)
    assert reply["code"] == 400 and reply["msg"].startswith("topic")
    status_code, reply = post(node, "setTopicConfig", maxRetry=1)
    assert status_code == 400 and reply["msg"].startswith("topic")
    assert_nothing_written(raw_redis, topic)


def test_send_and_pull_without_values_use_the_topic_settings(node, topic, raw_redis):
    set_config(node, topic, ttlMillis=120_000, maxRetry=2, ackTimeoutMillis=700)
    for params in ({}, {"ttlMillis": 0, "maxRetry": -1}):
        m = send(node, topic, **params)
        assert m["maxRetry"] == 2 and m["expireTime"] == m["triggerTime"] + 120_000
    explicit = send(node, topic, msgId="explicit", ttlMillis=5000, maxRetry=7,
                    delayMillis=60_000)
    assert explicit["maxRetry"] == 7
    assert explicit["expireTime"] == explicit["triggerTime"] + 5000
    for endpoint in ("pullMsg", "longPollingMsg"):
        before = redis_now_ms(raw_redis)
        reply = call(node, endpoint, topic=topic, longPollingTimeoutMillis=1000)
        after = redis_now_ms(raw_redis)
        (m,) = reply["delayMsgList"]
        deadline = ack_deadline(raw_redis, topic, m["msgId"])
        assert before + 700 - CLOCK_SLACK <= deadline <= after + 700
    # An explicit ackTimeoutMillis still wins; the topic's maxRetry counts deliveries.
    wait_until(lambda: info(node, topic)["readyQueueSize"] == 2, 5)
    got = pull(node, topic, batch=2, ackTimeoutMillis=60_000)
    assert all(ack_deadline(raw_redis, topic, m["msgId"]) >= redis_now_ms(raw_redis)
               + 50_000 for m in got)


# -- attributes --------------------------------------------------------------------------
ATTRS = {"trace-id": "abc-123", "ключ": "значение ✓", "emoji": "🎉 中文", "empty": ""}


@pytest.mark.parametrize("transport", ["form", "json", "query"])
def test_attributes_round_trip_with_unicode(node, topic, transport):
    if transport == "form":
        reply = call(node, "sendMsg", topic=topic, msgId="a", msg="x", maxRetry=0,
                     attributes=json.dumps(ATTRS, ensure_ascii=False))
    elif transport == "json":
        reply = post_json(node, "sendMsg", {"topic": topic, "msgId": "a", "msg": "x",
                                            "maxRetry": 0, "attributes": ATTRS})[1]
    else:
        reply = SESSION.get(node.url + API + "sendMsg", timeout=10, params={
            "topic": topic, "msgId": "a", "msg": "x", "maxRetry": 0,
            "attributes": json.dumps(ATTRS)}).json()
    assert reply["code"] == 200, reply
    assert reply["delayMsg"]["attributes"] == ATTRS
    assert get_msg(node, topic, "a")["attributes"] == ATTRS
    dup = call(node, "sendMsg", topic=topic, msgId="a", msg="y",
               attributes=json.dumps({"other": "1"}))
    assert dup["duplicate"] is True and dup["delayMsg"]["attributes"] == ATTRS
    delivered = pull_one(node, topic, "a")
    assert delivered["attributes"] == ATTRS
    assert nack(node, topic, "a", delivered["receipt"])["code"] == 200
    (dead,) = list_dead(node, topic)["delayMsgList"]
    assert dead["attributes"] == ATTRS


def test_attributes_absent_when_none_were_given(node, topic):
    for params in ({}, {"attributes": "{}"}):
        m = send(node, topic, **params)
        assert "attributes" not in m
        assert "attributes" not in get_msg(node, topic, m["msgId"])
    assert all("attributes" not in m for m in pull(node, topic, batch=10))


def test_attributes_at_the_limits_are_accepted(node, topic):
    keys32 = {f"k{i}": "v" for i in range(32)}
    assert send(node, topic, attributes=json.dumps(keys32))["attributes"] == keys32
    exact = {"k": "v" * 8191}                                 # 8192 bytes
    assert send(node, topic, attributes=json.dumps(exact))["attributes"] == exact
    multibyte = {"é": "é" * 4095}                              # 2 + 8190 bytes
    assert send(node, topic, attributes=json.dumps(multibyte))["attributes"] == multibyte


BAD_ATTRIBUTES = {
    "33_keys": json.dumps({f"k{i}": "v" for i in range(33)}),
    "8193_bytes": json.dumps({"k": "v" * 8192}),
    "8194_bytes_multibyte": json.dumps({"é": "é" * 4096}),
    "number_value": json.dumps({"k": 1}),
    "null_value": json.dumps({"k": None}),
    "bool_value": json.dumps({"k": True}),
    "list_value": json.dumps({"k": ["a"]}),
    "object_value": json.dumps({"k": {"a": "b"}}),
    "a_list": json.dumps(["a", "b"]),
    "a_string": json.dumps("text"),
    "a_number": "5",
    "not_json": "{k: v",
}


@pytest.mark.parametrize("case", list(BAD_ATTRIBUTES))
def test_bad_attributes_are_refused_and_nothing_is_written(node, topic, raw_redis, case):
    status_code, reply = post(node, "sendMsg", topic=topic, msg="x", msgId="m",
                              attributes=BAD_ATTRIBUTES[case])
    assert reply["code"] == 400, reply
    assert reply["msg"].startswith("attributes"), reply
    assert_nothing_written(raw_redis, topic)


@pytest.mark.parametrize("value", [["a"], "text", 5, {"k": 1}, {"k": None}])
def test_bad_attributes_in_a_json_body_are_refused(node, topic, raw_redis, value):
    status_code, reply = post_json(node, "sendMsg", {"topic": topic, "msg": "x",
                                                     "attributes": value})
    assert reply["code"] == 400 and reply["msg"].startswith("attributes"), reply
    assert_nothing_written(raw_redis, topic)


# -- rescheduleMsg -----------------------------------------------------------------------
def test_reschedule_a_waiting_message_later_then_now(node, topic, raw_redis):
    sent = send(node, topic, msgId="w", delayMillis=60_000, ttlMillis=10_000)
    before = redis_now_ms(raw_redis)
    reply = call(node, "rescheduleMsg", topic=topic, msgId="w", delayMillis=120_000)
    after = redis_now_ms(raw_redis)
    assert reply["code"] == 200 and reply["msg"] == "success", reply
    m = reply["delayMsg"]
    assert m["status"] == 1 and m["produceTime"] == sent["produceTime"]
    assert before + 120_000 - CLOCK_SLACK <= m["triggerTime"] <= after + 120_000
    assert m["expireTime"] == m["triggerTime"] + 10_000
    assert get_msg(node, topic, "w") == m
    target = redis_now_ms(raw_redis) + 30_000
    m = call(node, "rescheduleMsg", topic=topic, msgId="w", triggerTime=target)["delayMsg"]
    assert (m["status"], m["triggerTime"], m["expireTime"]) == (1, target, target + 10_000)
    assert pull(node, topic) == []
    before = redis_now_ms(raw_redis)
    m = call(node, "rescheduleMsg", topic=topic, msgId="w", delayMillis=0)["delayMsg"]
    after = redis_now_ms(raw_redis)
    assert m["status"] == 2
    assert before - CLOCK_SLACK <= m["triggerTime"] <= after
    assert m["expireTime"] == m["triggerTime"] + 10_000
    data = info(node, topic)
    assert (data["waitingQueueSize"], data["readyQueueSize"]) == (0, 1)
    assert pull_one(node, topic, "w")["retry"] == 1


def test_reschedule_a_ready_message_into_the_future_and_to_the_past(node, topic, raw_redis):
    send(node, topic, msgId="r", ttlMillis=20_000)
    m = call(node, "rescheduleMsg", topic=topic, msgId="r", delayMillis=60_000)["delayMsg"]
    assert m["status"] == 1 and m["expireTime"] == m["triggerTime"] + 20_000
    assert pull(node, topic) == []
    data = info(node, topic)
    assert (data["waitingQueueSize"], data["readyQueueSize"]) == (1, 0)
    before = redis_now_ms(raw_redis)
    m = call(node, "rescheduleMsg", topic=topic, msgId="r",
             triggerTime=before - 60_000)["delayMsg"]          # a past one means now
    assert m["status"] == 2 and m["triggerTime"] >= before - CLOCK_SLACK
    assert m["expireTime"] == m["triggerTime"] + 20_000
    assert pull_one(node, topic, "r")["status"] == 3


def test_reschedule_of_a_nacked_message_shifts_expire_time_by_the_same_amount(node, topic):
    """Decision: "expireTime moves with it" keeps expireTime - triggerTime. For a message whose
    triggerTime a delayed nack moved (its expireTime stays), that is less than its ttl."""
    send(node, topic, msgId="n", ttlMillis=600_000)
    pull_one(node, topic, "n")
    assert nack(node, topic, "n", delayMillis=30_000)["code"] == 200
    waiting = get_msg(node, topic, "n")
    life = waiting["expireTime"] - waiting["triggerTime"]
    assert 600_000 - 30_000 - CLOCK_SLACK <= life <= 600_000 - 30_000
    m = call(node, "rescheduleMsg", topic=topic, msgId="n", delayMillis=0)["delayMsg"]
    assert m["status"] == 2 and m["retry"] == 1
    assert m["expireTime"] - m["triggerTime"] == life
    assert pull_one(node, topic, "n")["retry"] == 2


def test_reschedule_refusals(node, topic, raw_redis):
    send(node, topic, msgId="c")
    pull_one(node, topic, "c", ackTimeoutMillis=60_000)
    send(node, topic, msgId="a")
    pull_one(node, topic, "a")
    ack(node, topic, "a")
    send(node, topic, msgId="w", delayMillis=60_000)
    before = dump(raw_redis, topic)
    for msg_id, code in (("c", 400), ("a", 404), ("ghost", 404)):
        status_code, reply = post(node, "rescheduleMsg", topic=topic, msgId=msg_id,
                                  delayMillis=1000)
        assert status_code == 200 and reply["code"] == code, (msg_id, reply)
    status_code, reply = post(node, "rescheduleMsg", topic=topic, msgId="w",
                              delayMillis=1000, triggerTime=redis_now_ms(raw_redis))
    assert reply["code"] == 400 and "delayMillis" in reply["msg"]
    status_code, reply = post(node, "rescheduleMsg", topic=topic, msgId="w")
    assert reply["code"] == 400 and ("delayMillis" in reply["msg"]
                                     or "triggerTime" in reply["msg"]), reply
    status_code, reply = post(node, "rescheduleMsg", topic=topic, msgId="w",
                              delayMillis="soon")
    assert status_code == 400 and reply["code"] == 400
    status_code, reply = post(node, "rescheduleMsg", topic=topic, delayMillis=5)
    assert status_code == 400 and reply["msg"].startswith("msgId")
    assert dump(raw_redis, topic) == before


# -- past trigger times (fix) --------------------------------------------------------------
@pytest.mark.parametrize("how", ["triggerTime", "delayMillis"])
def test_a_past_trigger_time_means_due_now_with_a_full_ttl(node, topic, raw_redis, how):
    before = redis_now_ms(raw_redis)
    params = {"triggerTime": before - 60_000} if how == "triggerTime" \
        else {"delayMillis": -60_000}
    m = send(node, topic, msgId="p", ttlMillis=1000, **params)
    after = redis_now_ms(raw_redis)
    assert m["status"] == 2
    assert before - CLOCK_SLACK <= m["triggerTime"] <= after
    assert m["triggerTime"] == m["produceTime"]
    assert m["expireTime"] == m["triggerTime"] + 1000
    got = pull_one(node, topic, "p")                          # not born expired
    assert got["status"] == 3 and got["retry"] == 1


# -- camellia clients ----------------------------------------------------------------------
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
