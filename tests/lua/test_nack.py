"""ackMsg with ack=false, lua/nack.lua: consuming -> ready at once, or retry exhausted."""

from __future__ import annotations

from delayqueue.core.outcome import Outcome

from support.lua import (
    CHANNEL,
    DEFAULTS,
    END_LIFE,
    T0,
    assert_one_place,
    pull,
    pulled_ids,
    read,
    send,
    slot_of,
)


def test_nack_returns_consuming_message_to_the_tail_of_ready_keeping_its_trigger_time(
        scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0 + 5)
    pull(scripts, tk, T0 + 5)
    send(scripts, tk, "older", T0, T0 + 10)              # ready before the nack
    outcome, fields, _, _ = scripts.nack(tk, "a", T0 + 20, END_LIFE, CHANNEL, DEFAULTS)
    assert outcome == Outcome.OK and fields[6] == "2" and fields[5] == "1"
    assert fields[2] == str(T0 + 5)                       # triggerTime unchanged
    # queued behind, as of the nack
    assert redis_client.zscore(tk.ready, slot_of(redis_client, tk, "a")) == T0 + 20
    assert_one_place(redis_client, tk, "a", 2)
    assert pulled_ids(pull(scripts, tk, T0 + 21, batch=2)) == ["older", "a"]


def test_double_nack_answers_not_consuming_and_queues_the_id_once(scripts, tk,
                                                                  redis_client):
    send(scripts, tk, "a", T0, T0)
    pull(scripts, tk, T0)
    assert scripts.nack(tk, "a", T0, END_LIFE, CHANNEL, DEFAULTS)[:1] == [Outcome.OK]
    assert scripts.nack(tk, "a", T0, END_LIFE, CHANNEL, DEFAULTS)[0] == Outcome.NOT_CONSUMING
    assert redis_client.zrange(tk.ready, 0, -1) == [slot_of(redis_client, tk, "a")]
    assert_one_place(redis_client, tk, "a", 2)


def test_nack_of_last_delivery_ends_it_retry_exhausted(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0, max_retry=0)
    pull(scripts, tk, T0)
    assert scripts.nack(tk, "a", T0, END_LIFE, CHANNEL, DEFAULTS)[1][6] == "6"
    assert_one_place(redis_client, tk, "a", 6)


def test_nack_past_expire_time_ends_it_retry_exhausted(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0, ttl=100)
    pull(scripts, tk, T0)
    assert scripts.nack(tk, "a", T0 + 100, END_LIFE, CHANNEL, DEFAULTS)[1][6] == "6"
    assert_one_place(redis_client, tk, "a", 6)


def test_nack_of_missing_or_waiting_message_changes_nothing(scripts, tk, redis_client):
    send(scripts, tk, "w", T0, T0 + 100)
    assert scripts.nack(tk, "ghost", T0, END_LIFE, CHANNEL, DEFAULTS)[:2] == [
        Outcome.NO_MESSAGE, []]
    assert read(redis_client, tk, "ghost") == (None, None) and redis_client.hlen(tk.msgs) == 1
    assert scripts.nack(tk, "w", T0, END_LIFE, CHANNEL, DEFAULTS)[0] == Outcome.NOT_CONSUMING
    assert_one_place(redis_client, tk, "w", 1)
