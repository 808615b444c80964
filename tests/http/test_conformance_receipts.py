"""Receipts (ours): a new one on every delivery; any other is stale (409) and changes
nothing; the latest one acks even after an ack timeout."""

from __future__ import annotations

from support import wait_until
from support.conformance import (
    ack,
    assert_stale,
    call,
    change_visibility,
    dump,
    get_msg,
    info,
    nack,
    post,
    pull,
    pull_one,
    send,
    set_config,
    status,
)


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
