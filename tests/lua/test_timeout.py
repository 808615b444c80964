"""Ack timeouts, lua/timeout.lua: consuming past its deadline -> ready, waiting out the
topic's backoff, or retry exhausted."""

from __future__ import annotations

from support.lua import (
    CHANNEL,
    DEFAULTS,
    END_LIFE,
    T0,
    assert_one_place,
    configure,
    field,
    pull,
    pulled_ids,
    ready_score,
    send,
    slot_of,
    waiting_score,
)


def test_timeout_requeues_at_the_tail_of_ready_keeping_its_trigger_time(scripts, tk,
                                                                          redis_client):
    send(scripts, tk, "a", T0, T0 + 7)
    pull(scripts, tk, T0 + 7, ack_timeout=100)
    assert scripts.timeout(tk, T0 + 106, 1000, END_LIFE, CHANNEL, DEFAULTS)[:2] == [0, 0]
    assert_one_place(redis_client, tk, "a", 3)
    requeued, ended, _, _ = scripts.timeout(tk, T0 + 107, 1000, END_LIFE, CHANNEL, DEFAULTS)
    assert (requeued, ended) == (1, 0)
    # the tail, as of the timeout
    assert ready_score(redis_client, tk, slot_of(redis_client, tk, "a")) == T0 + 107
    assert field(redis_client, tk, "a", "t") == str(T0 + 7)   # triggerTime unchanged
    assert_one_place(redis_client, tk, "a", 2)
    again = pull(scripts, tk, T0 + 200)
    assert pulled_ids(again) == ["a"] and again[0][0][6] == "2"


def test_timeout_ends_message_when_deliveries_are_used_up(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0, max_retry=1)
    pull(scripts, tk, T0, ack_timeout=10)
    assert scripts.timeout(tk, T0 + 10, 1000, END_LIFE, CHANNEL, DEFAULTS)[:2] == [1, 0]
    pull(scripts, tk, T0 + 10, ack_timeout=10)
    assert scripts.timeout(tk, T0 + 20, 1000, END_LIFE, CHANNEL, DEFAULTS)[:2] == [0, 1]
    assert_one_place(redis_client, tk, "a", 6)
    assert field(redis_client, tk, "a", "n") == "2"


def test_timeout_ends_message_past_its_expire_time(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0, ttl=50)
    pull(scripts, tk, T0, ack_timeout=60)
    assert scripts.timeout(tk, T0 + 60, 1000, END_LIFE, CHANNEL, DEFAULTS)[:2] == [0, 1]
    assert_one_place(redis_client, tk, "a", 6)


def test_timeout_at_exactly_the_expire_time_ends_the_message(scripts, tk, redis_client):
    """expireTime is the first instant a message is expired (``now >= e``): an ack deadline
    falling exactly on it ends the message instead of requeueing it for one more delivery."""
    send(scripts, tk, "a", T0, T0, ttl=50)                  # expireTime T0 + 50
    pull(scripts, tk, T0, ack_timeout=50)                   # ack deadline T0 + 50 too
    assert redis_client.zscore(tk.ack, slot_of(redis_client, tk, "a")) == T0 + 50
    assert field(redis_client, tk, "a", "e") == str(T0 + 50)
    assert scripts.timeout(tk, T0 + 50, 1000, END_LIFE, CHANNEL, DEFAULTS)[:2] == [0, 1]
    assert_one_place(redis_client, tk, "a", 6)


def test_timeout_one_ms_before_the_expire_time_requeues(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0, ttl=50)                  # expireTime T0 + 50
    pull(scripts, tk, T0, ack_timeout=49)                   # ack deadline T0 + 49
    assert scripts.timeout(tk, T0 + 49, 1000, END_LIFE, CHANNEL, DEFAULTS)[:2] == [1, 0]
    assert_one_place(redis_client, tk, "a", 2)


def test_timeout_applies_the_backoff_too(scripts, tk, redis_client):
    configure(scripts, tk, redeliveryDelayMillis=300)
    send(scripts, tk, "a", T0, T0)
    pull(scripts, tk, T0, ack_timeout=10)
    assert scripts.timeout(tk, T0 + 10, 1000, END_LIFE, CHANNEL, DEFAULTS)[:2] == [1, 0]
    assert waiting_score(redis_client, tk, slot_of(redis_client, tk, "a")) == T0 + 310
    assert_one_place(redis_client, tk, "a", 1)
