"""ackMsg with ack=false, lua/nack.lua: consuming -> ready at once, waiting out a delay or the
topic's backoff, or retry exhausted."""

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
    pulled_ids,
    read,
    ready_score,
    ready_slots,
    send,
    slot_of,
    waiting_score,
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
    assert ready_score(redis_client, tk, slot_of(redis_client, tk, "a")) == T0 + 20
    assert_one_place(redis_client, tk, "a", 2)
    assert pulled_ids(pull(scripts, tk, T0 + 21, batch=2)) == ["older", "a"]


def test_double_nack_answers_not_consuming_and_queues_the_id_once(scripts, tk,
                                                                  redis_client):
    send(scripts, tk, "a", T0, T0)
    pull(scripts, tk, T0)
    assert scripts.nack(tk, "a", T0, END_LIFE, CHANNEL, DEFAULTS)[:1] == [Outcome.OK]
    assert scripts.nack(tk, "a", T0, END_LIFE, CHANNEL, DEFAULTS)[0] == Outcome.NOT_CONSUMING
    assert ready_slots(redis_client, tk) == [slot_of(redis_client, tk, "a")]
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


# -- nack with a delay, backoff ----------------------------------------------------------------
def test_nack_with_a_delay_waits_with_a_new_trigger_time_outside_the_expiry_index(
        scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0)
    pull(scripts, tk, T0)
    outcome, fields, lowered_due, dead = nack(scripts, tk, "a", T0 + 5, delay=500)
    assert (outcome, fields[6], fields[2], dead) == (Outcome.OK, "1", str(T0 + 505), 0)
    assert lowered_due == T0 + 505
    assert_one_place(redis_client, tk, "a", 1)
    assert pull(scripts, tk, T0 + 504)[0] == []                  # never early
    assert pulled_ids(pull(scripts, tk, T0 + 505)) == ["a"]


def test_backoff_grows_by_its_multiplier_up_to_its_max(scripts, tk, redis_client):
    configure(scripts, tk, redeliveryDelayMillis=100, redeliveryBackoffMultiplier=2,
              redeliveryMaxDelayMillis=1000)
    send(scripts, tk, "a", T0, T0, max_retry=10)
    now, gaps = T0, []
    for delivery in range(6):
        if delivery:
            assert pull(scripts, tk, now - 1)[0] == []               # never early
        assert pulled_ids(pull(scripts, tk, now)) == ["a"]
        due = int(nack(scripts, tk, "a", now)[1][2])
        assert waiting_score(redis_client, tk, slot_of(redis_client, tk, "a")) == due
        gaps.append(due - now)
        now = due
    assert gaps == [100, 200, 400, 800, 1000, 1000]


def test_a_redelivery_due_at_or_after_expire_time_ends_the_message_as_a_dead_letter(
        scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0, ttl=1000)
    pull(scripts, tk, T0)
    outcome, fields, _, dead = nack(scripts, tk, "a", T0 + 500, delay=500)   # due == expire
    assert (outcome, fields[6], dead) == (Outcome.OK, "6", 1)
    assert_one_place(redis_client, tk, "a", 6)


def test_without_dead_letters_an_exhausted_message_ends_as_before(scripts, tk, redis_client):
    configure(scripts, tk, deadLetter=0)
    send(scripts, tk, "a", T0, T0, max_retry=0)
    pull(scripts, tk, T0)
    outcome, fields, _, dead = nack(scripts, tk, "a", T0)
    assert (fields[6], dead) == ("6", 0)
    assert_one_place(redis_client, tk, "a", 6)                   # kept end_life_ms, no queue
    assert redis_client.zcard(tk.dead) == 0
