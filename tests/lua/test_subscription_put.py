"""lua/subscription_put.lua: a named subscription's creation sequence and the cap."""

from __future__ import annotations

from delayqueue.core.outcome import Outcome

from support.lua import CHANNEL, DEFAULTS, HOUR, T0


def test_a_subscription_starts_after_the_last_acceptance_sequence(scripts, tk, redis_client):
    scripts.send(tk, "a", "body", T0, T0, HOUR, 3, "", CHANNEL, DEFAULTS)
    reply = scripts.subscription_put(tk, "s1", T0 + 5, 32)
    assert (reply.outcome, reply.created_time) == (Outcome.OK, T0 + 5)
    assert redis_client.hget(tk.subs, "s1") == f"1 {T0 + 5}"
    again = scripts.subscription_put(tk, "s1", T0 + 9, 32)
    assert (again.outcome, again.created_time) == (Outcome.DUPLICATE, T0 + 5)


def test_beyond_the_most_nothing_is_written(scripts, tk, redis_client):
    assert scripts.subscription_put(tk, "s1", T0, 1).outcome == Outcome.OK
    assert scripts.subscription_put(tk, "s2", T0, 1).outcome == Outcome.BACKLOG
    assert redis_client.hkeys(tk.subs) == ["s1"]
