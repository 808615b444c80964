"""Expiry, lua/expire.lua: driven by the expiry index; a consuming message only leaves it."""

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
    ready_member,
    send,
    slot_of,
    status_of,
)


def test_expire_ends_waiting_and_ready_messages(scripts, tk, redis_client):
    send(scripts, tk, "waiting", T0, T0 + 1000, ttl=10)     # expires before it is due
    send(scripts, tk, "ready", T0, T0, ttl=1010)
    send(scripts, tk, "redelivered", T0, T0, ttl=1010)
    send(scripts, tk, "alive", T0, T0, ttl=5000)
    # "redelivered" first
    redis_client.zadd(tk.ready, {ready_member(redis_client, tk, slot_of(redis_client, tk, m)):
                                 T0 + 1 for m in ("ready", "alive")})
    assert pulled_ids(pull(scripts, tk, T0, ack_timeout=5)) == ["redelivered"]
    scripts.timeout(tk, T0 + 5, 1000, END_LIFE, CHANNEL, DEFAULTS)
    # The scheduler's round: promote (puts "waiting" in the expiry index), then expire.
    scripts.promote(tk, T0 + 1010, 1000, CHANNEL)
    expired, exhausted, scanned, due, _, _ = scripts.expire(tk, T0 + 1010, 1000, END_LIFE,
                                                         DEFAULTS)
    assert (expired, exhausted, scanned) == (2, 1, 3)
    assert_one_place(redis_client, tk, "waiting", 5)
    assert_one_place(redis_client, tk, "ready", 5)
    assert_one_place(redis_client, tk, "redelivered", 6)
    assert_one_place(redis_client, tk, "alive", 2)
    assert due == T0 + 5000


def test_expire_of_consuming_message_only_leaves_the_index(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0, ttl=100)
    pull(scripts, tk, T0, ack_timeout=1000)
    assert scripts.expire(tk, T0 + 100, 1000, END_LIFE, DEFAULTS)[:3] == [0, 0, 1]
    assert status_of(redis_client, tk, "a") == 3
    assert redis_client.zscore(tk.ack, slot_of(redis_client, tk, "a")) is not None
    assert redis_client.zscore(tk.expire, slot_of(redis_client, tk, "a")) is None
    # Its consumer may still ack it ...
    assert scripts.ack(tk, "a", T0, END_LIFE)[0] == Outcome.OK
    assert_one_place(redis_client, tk, "a", 4)


def test_expired_consuming_message_times_out_to_retry_exhausted(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0, ttl=100)
    pull(scripts, tk, T0, ack_timeout=1000)
    scripts.expire(tk, T0 + 100, 1000, END_LIFE, DEFAULTS)
    assert scripts.timeout(tk, T0 + 1000, 1000, END_LIFE, CHANNEL, DEFAULTS)[:2] == [0, 1]
    assert_one_place(redis_client, tk, "a", 6)
