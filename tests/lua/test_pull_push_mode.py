"""lua/pull.lua in push mode (the push delivery loop's pull) and a consumer's pull of a push
subscription: the fleet-wide cap taken from the ack queue itself, the push deadline, the
refusal, and nothing handed out where no pushUrl is set."""

from __future__ import annotations

import pytest
import redis

from delayqueue.core.errors import BadRequest, as_error

from support.lua import (
    CHANNEL,
    DEFAULTS,
    END_LIFE,
    T0,
    assert_one_place,
    configure,
    pull,
    pulled_ids,
    send,
)

PUSH = "push 16 10000"   # the server's pushConcurrency and pushTimeoutMillis


def push_pull(scripts, tk, now, batch=100, push=PUSH):
    return scripts.pull(tk, now, batch, -1, END_LIFE, 1000, CHANNEL, DEFAULTS, push)


def make_push(scripts, tk, **values):
    configure(scripts, tk, pushUrl="http://receiver.example/hook", **values)


def test_a_consumer_pull_of_a_push_subscription_is_refused_before_anything_moves(
        scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0)
    make_push(scripts, tk)
    before = redis_client.zrange(tk.ready, 0, -1) + redis_client.zrange(tk.waiting, 0, -1)
    with pytest.raises(redis.ResponseError) as caught:
        pull(scripts, tk, T0 + 1)
    error = as_error(caught.value)
    assert isinstance(error, BadRequest) and "'default' is a push subscription" in str(error)
    assert redis_client.zrange(tk.ready, 0, -1) + redis_client.zrange(tk.waiting, 0, -1) \
        == before
    assert redis_client.zcard(tk.ack) == 0


def test_push_mode_hands_out_at_most_concurrency_minus_those_consuming(scripts, tk,
                                                                       redis_client):
    make_push(scripts, tk, pushConcurrency=3)
    for i in range(10):
        send(scripts, tk, f"m{i}", T0, T0)
    assert pulled_ids(push_pull(scripts, tk, T0)) == ["m0", "m1", "m2"]
    assert pulled_ids(push_pull(scripts, tk, T0 + 1)) == []          # three in flight
    scripts.ack(tk, "m1", T0 + 2, END_LIFE)
    assert pulled_ids(push_pull(scripts, tk, T0 + 3, batch=5)) == ["m3"]
    assert redis_client.zcard(tk.ack) == 3
    assert pulled_ids(push_pull(scripts, tk, T0 + 4, batch=5)) == []


def test_the_server_concurrency_applies_where_the_subscription_sets_none(scripts, tk):
    make_push(scripts, tk)
    for i in range(5):
        send(scripts, tk, f"m{i}", T0, T0)
    assert len(pulled_ids(push_pull(scripts, tk, T0, push="push 2 10000"))) == 2


def test_the_push_deadline_is_the_later_of_ack_timeout_and_push_timeout_plus_a_second(
        scripts, tk, redis_client):
    make_push(scripts, tk, ackTimeoutMillis=3000, pushTimeoutMillis=5000)
    send(scripts, tk, "a", T0, T0)
    push_pull(scripts, tk, T0)
    assert redis_client.zscore(tk.ack, redis_client.zrange(tk.ack, 0, 0)[0]) == T0 + 6000
    configure(scripts, tk, ackTimeoutMillis=60_000)
    send(scripts, tk, "b", T0, T0)
    push_pull(scripts, tk, T0 + 10)
    assert sorted(redis_client.zrange(tk.ack, 0, -1, withscores=True), key=lambda x: x[1])[-1][1] \
        == T0 + 10 + 60_000
    assert_one_place(redis_client, tk, "b", 3)


def test_push_mode_where_no_push_url_is_set_hands_out_nothing(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0 + 5)
    reply = push_pull(scripts, tk, T0 + 10)
    assert pulled_ids(reply) == [] and redis_client.zcard(tk.ready) == 1   # promoted, kept
    assert pulled_ids(pull(scripts, tk, T0 + 11)) == ["a"]                  # a consumer's


def test_push_mode_never_hands_out_early_nor_while_paused(scripts, tk, redis_client):
    make_push(scripts, tk)
    send(scripts, tk, "a", T0, T0 + 100)
    assert pulled_ids(push_pull(scripts, tk, T0 + 99)) == []
    redis_client.hset(tk.config, "paused", "1")
    assert pulled_ids(push_pull(scripts, tk, T0 + 100)) == []
    redis_client.hdel(tk.config, "paused")
    assert pulled_ids(push_pull(scripts, tk, T0 + 100)) == ["a"]


def test_a_named_subscription_pushes_on_its_own_settings_not_the_topics(scripts, tk,
                                                                        redis_client):
    scripts.subscription_put(tk, "s1", T0, 32)
    make_push(scripts, tk)                    # the default subscription pushes
    sk = tk.subscription("s1")
    send(scripts, tk, "a", T0, T0)
    assert pulled_ids(pull(scripts, sk, T0 + 1)) == ["a"]   # s1 is pulled: not inherited
    make_push(scripts, sk, pushConcurrency=1)
    send(scripts, tk, "b", T0 + 2, T0 + 2)
    with pytest.raises(redis.ResponseError, match="PUSHSUBSCRIPTION s1"):
        pull(scripts, sk, T0 + 3)
    assert pulled_ids(push_pull(scripts, sk, T0 + 3)) == []  # a is still consuming there
    scripts.ack(sk, "a", T0 + 4, END_LIFE)
    assert pulled_ids(push_pull(scripts, sk, T0 + 5)) == ["b"]


def test_a_topic_reset_keeps_the_default_subscriptions_push_settings(scripts, tk,
                                                                     redis_client):
    configure(scripts, tk, ttlMillis=5000, pushUrl="http://r.example/", pushSecret="k")
    redis_client.hset(tk.config, "paused", "1")
    assert scripts.topic_config(tk, True, ["maxRetry", "2"]).name == "OK"
    assert redis_client.hgetall(tk.config) == {
        "pushUrl": "http://r.example/", "pushSecret": "k", "paused": "1", "maxRetry": "2"}
    assert scripts.topic_config(tk, True, [], ["pushUrl", "pushSecret"]).name == "OK"
    assert redis_client.hgetall(tk.config) == {"paused": "1", "maxRetry": "2"}
