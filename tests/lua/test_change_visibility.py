"""changeVisibility's script, lua/change_visibility.lua: a consuming message's deadline moves
(a heartbeat), or timeout 0 gives the delivery up at once: ready at the tail with no backoff,
or retry exhausted (a dead letter) when its deliveries or its life are used up."""

from __future__ import annotations

import pytest

from delayqueue.core.outcome import Outcome

from support.lua import (
    CHANNEL,
    DEFAULTS,
    END_LIFE,
    T0,
    assert_one_place,
    configure,
    hints,
    nack,
    pull,
    pulled_ids,
    ready_score,
    receipt_of,
    send,
    slot_of,
    snapshot,
)


def change_visibility(scripts, tk, msg_id, now, timeout, receipt=""):
    return scripts.change_visibility(tk, msg_id, now, timeout, END_LIFE, CHANNEL, DEFAULTS,
                                     receipt)


# -- change visibility ---------------------------------------------------------------------------
def test_change_visibility_moves_the_deadline_or_gives_the_message_up(scripts, tk,
                                                                       redis_client):
    send(scripts, tk, "a", T0, T0)
    send(scripts, tk, "b", T0, T0 + 1)
    receipt = receipt_of(pull(scripts, tk, T0 + 1))
    assert scripts.change_visibility(tk, "a", T0 + 2, 5000, END_LIFE, CHANNEL, DEFAULTS,
                                     receipt)[0] == Outcome.OK
    assert redis_client.zscore(tk.ack, slot_of(redis_client, tk, "a")) == T0 + 5002
    assert_one_place(redis_client, tk, "a", 3)
    outcome, fields, _, _ = scripts.change_visibility(tk, "a", T0 + 3, 0, END_LIFE, CHANNEL,
                                                      DEFAULTS, receipt)
    assert (outcome, fields[6]) == (Outcome.OK, "2")
    assert_one_place(redis_client, tk, "a", 2)
    assert pulled_ids(pull(scripts, tk, T0 + 3, batch=2)) == ["b", "a"]   # behind b
    assert scripts.change_visibility(tk, "ghost", T0, 10, END_LIFE, CHANNEL,
                                     DEFAULTS)[0] == Outcome.NO_MESSAGE
    send(scripts, tk, "w", T0, T0 + 100)
    assert scripts.change_visibility(tk, "w", T0, 10, END_LIFE, CHANNEL,
                                     DEFAULTS)[0] == Outcome.NOT_CONSUMING
    assert_one_place(redis_client, tk, "w", 1)

def test_a_new_deadline_reports_the_due_time_only_when_it_comes_earlier(scripts, tk,
                                                                        redis_client):
    send(scripts, tk, "a", T0, T0)
    pull(scripts, tk, T0, ack_timeout=30_000)                    # due: its deadline T0 + 30 s
    outcome, fields, lowered_due, dead = change_visibility(scripts, tk, "a", T0 + 1, 5_000)
    assert (outcome, fields[6], lowered_due, dead) == (Outcome.OK, "3", T0 + 5_001, 0)
    assert change_visibility(scripts, tk, "a", T0 + 2, 60_000)[2] == -1      # later: not lowered
    assert redis_client.zscore(tk.ack, slot_of(redis_client, tk, "a")) == T0 + 60_002
    assert_one_place(redis_client, tk, "a", 3)


def test_timeout_zero_gives_the_delivery_back_without_the_topic_backoff(scripts, tk,
                                                                         redis_client):
    configure(scripts, tk, redeliveryDelayMillis=10_000)
    send(scripts, tk, "a", T0, T0)
    pull(scripts, tk, T0)
    with hints(redis_client) as published:
        outcome, fields, _, dead = change_visibility(scripts, tk, "a", T0 + 5, 0)
    assert (outcome, fields[6], fields[2], dead) == (Outcome.OK, "2", str(T0), 0)
    assert published == ["1 topic-a"]
    assert ready_score(redis_client, tk, slot_of(redis_client, tk, "a")) == T0 + 5
    assert_one_place(redis_client, tk, "a", 2)


def test_a_heartbeat_publishes_nothing(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0)
    pull(scripts, tk, T0)
    with hints(redis_client) as published:
        assert change_visibility(scripts, tk, "a", T0 + 1, 1_000)[0] == Outcome.OK
    assert published == []


@pytest.mark.parametrize("dead_letters", [1, 0])
def test_timeout_zero_of_the_last_delivery_ends_it_retry_exhausted(scripts, tk, redis_client,
                                                                     dead_letters):
    configure(scripts, tk, deadLetter=dead_letters)
    send(scripts, tk, "a", T0, T0, max_retry=0)
    pull(scripts, tk, T0)
    with hints(redis_client) as published:
        outcome, fields, _, dead = change_visibility(scripts, tk, "a", T0 + 1, 0)
    assert (outcome, fields[6], dead) == (Outcome.OK, "6", dead_letters)
    assert published == []
    assert_one_place(redis_client, tk, "a", 6)
    assert redis_client.zcard(tk.dead) == dead_letters


def test_timeout_zero_past_the_expire_time_ends_it_retry_exhausted(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0, ttl=100)
    pull(scripts, tk, T0)
    outcome, fields, _, dead = change_visibility(scripts, tk, "a", T0 + 100, 0)
    assert (outcome, fields[6], dead) == (Outcome.OK, "6", 1)
    assert_one_place(redis_client, tk, "a", 6)


def test_every_refusal_writes_nothing(scripts, tk, redis_client):
    send(scripts, tk, "consuming", T0, T0)
    stale = receipt_of(pull(scripts, tk, T0, ack_timeout=10))
    scripts.timeout(tk, T0 + 10, 1000, END_LIFE, CHANNEL, DEFAULTS)
    assert pulled_ids(pull(scripts, tk, T0 + 10)) == ["consuming"]      # its next delivery
    send(scripts, tk, "acked", T0 + 10, T0 + 10)
    assert pulled_ids(pull(scripts, tk, T0 + 10)) == ["acked"]
    scripts.ack(tk, "acked", T0 + 10, END_LIFE)
    send(scripts, tk, "given back", T0 + 10, T0 + 10)                  # delivered, nacked
    assert pulled_ids(pull(scripts, tk, T0 + 10)) == ["given back"]
    nack(scripts, tk, "given back", T0 + 10)
    send(scripts, tk, "waiting", T0 + 10, T0 + 100)
    before = snapshot(redis_client)
    for msg_id, receipt, expected in [("ghost", "", Outcome.NO_MESSAGE),
                                      ("acked", "", Outcome.NO_MESSAGE),
                                      ("waiting", "", Outcome.NOT_CONSUMING),
                                      ("given back", "", Outcome.NOT_CONSUMING),
                                      ("consuming", stale, Outcome.STALE_RECEIPT)]:
        for timeout in (0, 500):
            outcome, fields, lowered_due, dead = change_visibility(scripts, tk, msg_id, T0 + 11,
                                                                   timeout, receipt)
            assert (outcome, lowered_due, dead) == (expected, -1, 0), (msg_id, timeout)
            assert (fields == []) == (msg_id == "ghost")
    assert snapshot(redis_client) == before


def test_giving_a_delivery_back_twice_is_refused_the_second_time(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0)
    receipt = receipt_of(pull(scripts, tk, T0))
    assert change_visibility(scripts, tk, "a", T0 + 1, 0, receipt)[0] == Outcome.OK
    before = snapshot(redis_client)
    assert change_visibility(scripts, tk, "a", T0 + 2, 0, receipt)[0] == Outcome.NOT_CONSUMING
    assert snapshot(redis_client) == before
    assert_one_place(redis_client, tk, "a", 2)
