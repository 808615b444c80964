"""ackMsg's script, lua/ack.lua: consuming -> acked, late acks, refusals, and the receipt of
each delivery (only the latest acks, nacks or extends it)."""

from __future__ import annotations

from delayqueue.core.outcome import Outcome

from support.lua import (
    CHANNEL,
    DEFAULTS,
    END_LIFE,
    T0,
    assert_one_place,
    configure,
    nack,
    pull,
    receipt_of,
    send,
)


def test_ack_of_consuming_message_ends_it_acked(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0)
    pull(scripts, tk, T0)
    outcome, fields, _ = scripts.ack(tk, "a", T0, END_LIFE)
    assert outcome == 1 and fields[6] == "4"
    assert_one_place(redis_client, tk, "a", 4)
    assert scripts.ack(tk, "a", T0, END_LIFE)[0] == Outcome.ALREADY_ACKED       # idempotent
    assert_one_place(redis_client, tk, "a", 4)


def test_ack_of_missing_id_creates_nothing(scripts, tk, redis_client):
    assert scripts.ack(tk, "ghost", T0, END_LIFE) == [Outcome.NO_MESSAGE, [], -1]
    assert redis_client.exists(tk.msgs) == 0
    assert redis_client.keys("*ghost*") == []


def test_ack_of_waiting_or_never_delivered_ready_message_is_refused(scripts, tk,
                                                                  redis_client):
    send(scripts, tk, "w", T0, T0 + 100)
    send(scripts, tk, "r", T0, T0)
    assert scripts.ack(tk, "w", T0, END_LIFE)[0] == Outcome.NOT_DELIVERED
    assert scripts.ack(tk, "r", T0, END_LIFE)[0] == Outcome.NOT_DELIVERED
    assert_one_place(redis_client, tk, "w", 1)
    assert_one_place(redis_client, tk, "r", 2)


def test_late_ack_after_timeout_ends_it_acked_and_stops_redelivery(scripts, tk,
                                                                   redis_client):
    send(scripts, tk, "a", T0, T0)
    pull(scripts, tk, T0, ack_timeout=10)
    assert scripts.timeout(tk, T0 + 10, 1000, END_LIFE, CHANNEL, DEFAULTS)[0] == 1
    assert_one_place(redis_client, tk, "a", 2)
    assert scripts.ack(tk, "a", T0, END_LIFE)[0] == Outcome.ACKED_LATE
    assert_one_place(redis_client, tk, "a", 4)
    assert pull(scripts, tk, T0 + 20)[0] == []


def test_ack_of_otherwise_ended_message_is_not_found(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0)
    scripts.delete(tk, "a", T0, END_LIFE, False)
    assert scripts.ack(tk, "a", T0, END_LIFE)[0] == Outcome.NO_MESSAGE
    assert_one_place(redis_client, tk, "a", 7)


# -- receipts --------------------------------------------------------------------------------
def test_each_delivery_has_a_new_receipt_and_only_the_latest_acks(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0)
    first = receipt_of(pull(scripts, tk, T0, ack_timeout=10))
    scripts.timeout(tk, T0 + 10, 1000, END_LIFE, CHANNEL, DEFAULTS)
    second = receipt_of(pull(scripts, tk, T0 + 11))
    assert first != second
    assert scripts.ack(tk, "a", T0, END_LIFE, first)[0] == Outcome.STALE_RECEIPT
    assert nack(scripts, tk, "a", T0 + 12, first)[0] == Outcome.STALE_RECEIPT
    assert scripts.change_visibility(tk, "a", T0 + 12, 0, END_LIFE, CHANNEL, DEFAULTS,
                                     first)[0] == Outcome.STALE_RECEIPT
    assert_one_place(redis_client, tk, "a", 3)                   # nothing changed
    assert scripts.ack(tk, "a", T0, END_LIFE, second)[0] == Outcome.OK
    assert scripts.ack(tk, "a", T0, END_LIFE, second)[0] == Outcome.ALREADY_ACKED
    assert scripts.ack(tk, "a", T0, END_LIFE, first)[0] == Outcome.STALE_RECEIPT
    assert_one_place(redis_client, tk, "a", 4)


def test_a_late_ack_with_the_latest_receipt_is_accepted_before_the_redelivery(
        scripts, tk, redis_client):
    configure(scripts, tk, redeliveryDelayMillis=1000)
    send(scripts, tk, "a", T0, T0)
    receipt = receipt_of(pull(scripts, tk, T0, ack_timeout=10))
    scripts.timeout(tk, T0 + 10, 1000, END_LIFE, CHANNEL, DEFAULTS)
    assert_one_place(redis_client, tk, "a", 1)                   # waiting out its backoff
    assert scripts.ack(tk, "a", T0, END_LIFE, receipt)[0] == Outcome.ACKED_LATE
    assert_one_place(redis_client, tk, "a", 4)
