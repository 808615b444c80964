"""The reschedule script, lua/reschedule.lua: a waiting or ready message gets a new
triggerTime, waiting again or ready at the tail when due now; its expireTime moves with it
(the same ttl). A consuming or ended message is refused."""

from __future__ import annotations

import pytest

from delayqueue.core.outcome import Outcome

from support.lua import (
    CHANNEL,
    END_LIFE,
    HOUR,
    T0,
    assert_one_place,
    hints,
    pull,
    pulled_ids,
    read,
    ready_score,
    send,
    slot_of,
    snapshot,
)


# -- reschedule ----------------------------------------------------------------------------------
def test_reschedule_moves_trigger_and_expire_time_together(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0 + 1000, ttl=HOUR)
    outcome, fields, lowered = scripts.reschedule(tk, "a", T0, T0 + 5000, CHANNEL)
    assert (outcome, fields[2], fields[3]) == (Outcome.OK, str(T0 + 5000), str(T0 + 5000 + HOUR))
    assert_one_place(redis_client, tk, "a", 1)
    outcome, fields, lowered = scripts.reschedule(tk, "a", T0 + 10, T0 - 99, CHANNEL)  # past
    assert (fields[6], fields[2], fields[3]) == ("2", str(T0 + 10), str(T0 + 10 + HOUR))
    assert_one_place(redis_client, tk, "a", 2)
    pull(scripts, tk, T0 + 10)
    assert scripts.reschedule(tk, "a", T0 + 11, T0 + 99, CHANNEL)[0] == Outcome.CONSUMING
    assert_one_place(redis_client, tk, "a", 3)
    assert scripts.reschedule(tk, "ghost", T0, T0, CHANNEL)[0] == Outcome.NO_MESSAGE
    assert read(redis_client, tk, "ghost") == (None, None) and redis_client.hlen(tk.msgs) == 1

@pytest.mark.parametrize("state", [1, 2])
def test_a_due_reschedule_queues_ready_at_the_tail_and_publishes_one_hint(scripts, tk,
                                                                          redis_client, state):
    send(scripts, tk, "a", T0, T0 if state == 2 else T0 + 1_000, ttl=HOUR)
    send(scripts, tk, "ahead", T0, T0 + 3)
    with hints(redis_client) as published:
        outcome, fields, _ = scripts.reschedule(tk, "a", T0 + 5, T0 + 5, CHANNEL)
    assert (outcome, fields[6], fields[2], fields[3]) == \
        (Outcome.OK, "2", str(T0 + 5), str(T0 + 5 + HOUR))
    assert published == ["1 topic-a"]
    assert ready_score(redis_client, tk, slot_of(redis_client, tk, "a")) == T0 + 5
    assert redis_client.zscore(tk.expire, slot_of(redis_client, tk, "a")) == T0 + 5 + HOUR
    assert_one_place(redis_client, tk, "a", 2)
    assert pulled_ids(pull(scripts, tk, T0 + 5, batch=2)) == ["ahead", "a"]


def test_a_ready_message_rescheduled_later_waits_outside_the_expiry_index(scripts, tk,
                                                                          redis_client):
    send(scripts, tk, "a", T0, T0, ttl=HOUR)
    with hints(redis_client) as published:
        outcome, fields, lowered_due = scripts.reschedule(tk, "a", T0, T0 + 500, CHANNEL)
    assert (outcome, fields[6], lowered_due) == (Outcome.OK, "1", T0 + 500)
    assert published == []
    assert redis_client.zscore(tk.expire, slot_of(redis_client, tk, "a")) is None
    assert_one_place(redis_client, tk, "a", 1)
    assert pull(scripts, tk, T0 + 499)[0] == []                 # never early
    assert pulled_ids(pull(scripts, tk, T0 + 500)) == ["a"]


def test_the_due_time_is_reported_only_when_it_comes_earlier(scripts, tk):
    send(scripts, tk, "a", T0, T0 + 1_000)
    assert scripts.reschedule(tk, "a", T0, T0 + 400, CHANNEL)[2] == T0 + 400
    assert scripts.reschedule(tk, "a", T0, T0 + 900, CHANNEL)[2] == -1


def test_a_consuming_or_ended_message_is_refused_and_nothing_is_written(scripts, tk,
                                                                        redis_client):
    send(scripts, tk, "consuming", T0, T0)
    pull(scripts, tk, T0)
    send(scripts, tk, "acked", T0, T0)
    pull(scripts, tk, T0)
    scripts.ack(tk, "acked", T0, END_LIFE)
    before = snapshot(redis_client)
    with hints(redis_client) as published:
        consuming = scripts.reschedule(tk, "consuming", T0 + 1, T0 + 1, CHANNEL)
        acked = scripts.reschedule(tk, "acked", T0 + 1, T0 + 1, CHANNEL)
        ghost = scripts.reschedule(tk, "ghost", T0 + 1, T0 + 1, CHANNEL)
    assert (consuming[0], consuming[1][6], consuming[2]) == (Outcome.CONSUMING, "3", -1)
    assert (acked[0], acked[1][6], acked[2]) == (Outcome.NO_MESSAGE, "4", -1)
    assert ghost == [Outcome.NO_MESSAGE, [], -1]
    assert published == []
    assert snapshot(redis_client) == before


def test_the_same_reschedule_twice_leaves_the_same_message(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0 + 1_000)
    first = scripts.reschedule(tk, "a", T0, T0 + 5_000, CHANNEL)
    state = snapshot(redis_client)
    second = scripts.reschedule(tk, "a", T0, T0 + 5_000, CHANNEL)
    assert second[:2] == first[:2] and second[2] == -1
    assert snapshot(redis_client) == state
    assert read(redis_client, tk, "a")[0] == first[1]
