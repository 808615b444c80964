"""Receipts (ours): a new one on every delivery; any other of the receipt's form is stale
(409), one that cannot be a receipt is malformed (400), and neither changes anything; the
latest one acks even after an ack timeout."""

from __future__ import annotations

from support import conformance as api
from support import wait_until


def test_pull_and_long_poll_carry_a_new_receipt_on_every_delivery(node, topic):
    sent = api.send(node, topic, msgId="r")
    assert "receipt" not in sent
    receipts = []
    first = api.pull_one(node, topic, "r")
    receipts.append(first["receipt"])
    assert api.nack(node, topic, "r")["code"] == 200
    reply = api.call(node, "longPollingMsg", topic=topic, longPollingTimeoutMillis=2000)
    assert [m["msgId"] for m in reply["delayMsgList"]] == ["r"]
    receipts.append(reply["delayMsgList"][0]["receipt"])
    assert api.nack(node, topic, "r")["code"] == 200
    receipts.append(api.pull_one(node, topic, "r")["receipt"])
    assert all(isinstance(r, str) and r for r in receipts)
    assert len(set(receipts)) == 3
    # The answers that hand a delivery out show it, and getMsg of the consuming message
    # (an operator's look: listMsg too); a duplicate send and changeVisibility do not.
    assert api.get_msg(node, topic, "r")["receipt"] == receipts[-1]
    dup = api.call(node, "sendMsg", topic=topic, msgId="r", msg="again")
    assert dup["duplicate"] is True and "receipt" not in dup["delayMsg"]
    cv = api.change_visibility(node, topic, "r", 60_000, receipts[-1])
    assert cv["code"] == 200 and "receipt" not in cv["delayMsg"]


def test_stale_receipt_after_a_timeout_redelivery_is_409_and_changes_nothing(
        node, topic, raw_redis):
    api.send(node, topic, msgId="s")
    old = api.pull_one(node, topic, "s", ackTimeoutMillis=300)["receipt"]
    wait_until(lambda: api.status(node, topic, "s") == 2, 10)
    new = api.pull_one(node, topic, "s", ackTimeoutMillis=60_000)
    assert new["retry"] == 2 and new["receipt"] != old
    before = api.dump(raw_redis, topic)
    for reply in (api.ack(node, topic, "s", old), api.nack(node, topic, "s", old),
                  api.change_visibility(node, topic, "s", 0, old)):
        api.assert_stale(reply)
    status_code, reply = api.post(node, "ackMsg", topic=topic, msgId="s", receipt=old)
    assert status_code == 200 and reply["code"] == 409
    assert api.dump(raw_redis, topic) == before
    m = api.get_msg(node, topic, "s")
    assert m["status"] == 3 and m["retry"] == 2
    # The latest receipt acks; afterwards it still answers 200, the old one 409.
    assert api.ack(node, topic, "s", new["receipt"])["code"] == 200
    assert api.status(node, topic, "s") == 4
    assert api.ack(node, topic, "s", new["receipt"])["code"] == 200
    api.assert_stale(api.ack(node, topic, "s", old))
    assert api.status(node, topic, "s") == 4


def test_any_receipt_of_the_form_not_of_the_latest_delivery_is_409(node, topic, raw_redis):
    """A receipt of the form the server makes (hex.hex) that is not the latest delivery's
    is stale (409), however far from it."""
    api.send(node, topic, msgId="s")
    api.pull_one(node, topic, "s", ackTimeoutMillis=60_000)
    before = api.dump(raw_redis, topic)
    for receipt in ("0.1", "ffffffffffffffff.ffffffffffffffff", "1.0"):
        api.assert_stale(api.ack(node, topic, "s", receipt))
    assert api.dump(raw_redis, topic) == before


def test_a_receipt_that_cannot_be_one_is_400_malformed_and_changes_nothing(node, topic,
                                                                           raw_redis):
    """Not of the form (hex.hex, lowercase, at most 16 digits each): no delivery ever had
    it, so it is not stale but malformed, code 400 in HTTP 200, on every endpoint taking
    a receipt, a batch entry's named with its place."""
    api.send(node, topic, msgId="s")
    latest = api.pull_one(node, topic, "s", ackTimeoutMillis=60_000)["receipt"]
    before = api.dump(raw_redis, topic)
    for receipt in ("not-a-receipt", "x" * 200, "a\tb", "é", latest.upper() + "X",
                    latest + ".1", latest.replace(".", ""), "1-7c2e", " " + latest,
                    "1" * 17 + ".1"):
        for reply in (api.ack(node, topic, "s", receipt), api.nack(node, topic, "s", receipt),
                      api.change_visibility(node, topic, "s", 0, receipt)):
            assert reply["code"] == 400, (receipt, reply)
            assert reply["msg"].startswith("receipt: malformed: "), reply
    status_code, reply = api.post(node, "ackMsg", topic=topic, msgId="s", receipt="nope")
    assert status_code == 200 and reply["code"] == 400
    status_code, reply = api.post_json(node, "ackMsgBatch", {"topic": topic, "acks": [
        {"msgId": "s", "receipt": "nope"}]})
    assert status_code == 200, reply
    [entry] = reply["results"]
    assert entry["code"] == 400 and entry["msg"].startswith("acks[0].receipt: malformed: ")
    assert api.dump(raw_redis, topic) == before
    assert api.ack(node, topic, "s", latest)["code"] == 200


def test_late_ack_with_the_latest_receipt_after_a_timeout_is_accepted(node, topic):
    api.send(node, topic, msgId="late")
    receipt = api.pull_one(node, topic, "late", ackTimeoutMillis=300)["receipt"]
    m = wait_until(lambda: (lambda x: x if x["status"] == 2 else None)(
        api.get_msg(node, topic, "late")), 10)
    assert m["retry"] == 1
    assert api.ack(node, topic, "late", receipt)["code"] == 200
    assert api.status(node, topic, "late") == 4
    assert api.pull(node, topic) == []
    assert api.info(node, topic)["readyQueueSize"] == 0


def test_late_ack_with_the_latest_receipt_while_the_redelivery_waits_out_its_backoff(
        node, topic):
    """Decision: a timed-out delivery waiting for its backoff (status 1, delivered before)
    is "after the ack timeout, before the redelivery": its latest receipt acks it."""
    api.set_config(node, topic, redeliveryDelayMillis=60_000)
    api.send(node, topic, msgId="b")
    receipt = api.pull_one(node, topic, "b", ackTimeoutMillis=300)["receipt"]
    m = wait_until(lambda: (lambda x: x if x["status"] != 3 else None)(
        api.get_msg(node, topic, "b")), 5)
    assert m["status"] == 1 and m["retry"] == 1
    assert api.ack(node, topic, "b", receipt)["code"] == 200
    assert api.status(node, topic, "b") == 4
    assert api.info(node, topic)["waitingQueueSize"] == 0


def test_receipt_of_an_unknown_message_is_404(node, topic):
    assert api.ack(node, topic, "ghost", "1a.1")["code"] == 404
    assert api.nack(node, topic, "ghost", "1a.1")["code"] == 404
    assert api.change_visibility(node, topic, "ghost", 1000, "1a.1")["code"] == 404
    # The parameters are checked before the message is looked for: malformed comes first.
    assert api.ack(node, topic, "ghost", "whatever")["code"] == 400
