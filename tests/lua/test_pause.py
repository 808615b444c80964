"""pauseTopic / resumeTopic's script, lua/pause.lua, and what a pause means to pull.lua: a
paused topic hands nothing out while everything else goes on; a resume announces its ready
messages; an unknown topic is refused and not created."""

from __future__ import annotations

from delayqueue.core.outcome import Outcome

from support.lua import (
    CHANNEL,
    DEFAULTS,
    END_LIFE,
    T0,
    assert_one_place,
    configure,
    hints,
    pull,
    pulled_ids,
    send,
    snapshot,
)


def test_a_paused_topic_hands_nothing_out_but_promotes_and_resume_hands_it_out(
        scripts, tk, redis_client):
    send(scripts, tk, "due", T0, T0)
    send(scripts, tk, "later", T0, T0 + 10)
    assert scripts.pause(tk, True, False, CHANNEL) == [Outcome.OK, 1, 1]
    paused = pull(scripts, tk, T0 + 10, batch=10)
    assert (paused[0], paused[1], paused[5]) == ([], 1, 2)   # nothing; promoted; 2 ready
    assert_one_place(redis_client, tk, "later", 2)
    with hints(redis_client) as seen:
        assert scripts.pause(tk, False, False, CHANNEL) == [Outcome.OK, 1, 2]
    assert seen == [f"2 {tk.topic}"]                          # held long polls wake
    assert pulled_ids(pull(scripts, tk, T0 + 11, batch=10)) == ["due", "later"]


def test_pausing_twice_or_resuming_a_running_topic_changes_nothing_and_says_so(
        scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0)
    assert scripts.pause(tk, True, False, CHANNEL).changed == 1
    assert scripts.pause(tk, True, False, CHANNEL).changed == 0
    assert scripts.pause(tk, False, False, CHANNEL).changed == 1
    with hints(redis_client) as seen:
        assert scripts.pause(tk, False, False, CHANNEL).changed == 0
    assert seen == []                                          # no change, no hint


def test_an_unknown_topic_is_refused_and_not_created_unless_the_registry_knows_it(
        scripts, tk, redis_client):
    before = snapshot(redis_client)
    assert scripts.pause(tk, True, False, CHANNEL) == [Outcome.NO_TOPIC, 0, 0]
    assert scripts.pause(tk, False, False, CHANNEL) == [Outcome.NO_TOPIC, 0, 0]
    assert snapshot(redis_client) == before
    # Registered (a consumer pulled it) but holding nothing yet: the caller says it is known.
    assert scripts.pause(tk, True, True, CHANNEL) == [Outcome.OK, 1, 0]
    assert redis_client.hget(tk.config, "paused") == "1"


def test_a_topic_with_settings_only_is_known(scripts, tk):
    configure(scripts, tk, maxRetry=3)
    assert scripts.pause(tk, True, False, CHANNEL).outcome == Outcome.OK


def test_a_settings_reset_keeps_the_pause(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0)
    configure(scripts, tk, maxRetry=3)
    scripts.pause(tk, True, False, CHANNEL)
    assert scripts.topic_config(tk, True, []) == Outcome.OK
    assert redis_client.hgetall(tk.config) == {"paused": "1"}
    assert pull(scripts, tk, T0 + 1)[0] == []


def test_ack_timeouts_and_expiry_go_on_while_paused(scripts, tk, redis_client):
    send(scripts, tk, "slow", T0, T0)
    send(scripts, tk, "short", T0, T0, ttl=50)
    assert pulled_ids(pull(scripts, tk, T0, ack_timeout=100)) == ["slow"]
    scripts.pause(tk, True, False, CHANNEL)
    assert scripts.timeout(tk, T0 + 100, 100, END_LIFE, CHANNEL, DEFAULTS)[0] == 1
    assert_one_place(redis_client, tk, "slow", 2)             # given back, not handed out
    assert scripts.expire(tk, T0 + 50, 100, END_LIFE, DEFAULTS)[0] == 1
    assert_one_place(redis_client, tk, "short", 5)
    assert pull(scripts, tk, T0 + 101)[0] == []
