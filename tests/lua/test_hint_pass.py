"""lua/hint_pass.lua: a routed hint its hub could not take goes to every hub; a hub with no
idle waiter at all leaves the topic's hub set."""

from __future__ import annotations

from support.lua import CHANNEL, hints


def test_a_hub_with_no_idle_waiter_leaves_and_the_hint_goes_to_every_hub(
        scripts, tk, redis_client):
    redis_client.zadd(tk.hubs, {"a1": 10**13, "b2": 10**13})
    with hints(redis_client) as published:
        scripts.hint_pass(tk, "a1", True, CHANNEL, 3)
    assert published == ["3 topic-a"]
    assert redis_client.zrange(tk.hubs, 0, -1) == ["b2"]


def test_a_hub_that_woke_some_waiters_passes_the_rest_on_and_stays(scripts, tk, redis_client):
    redis_client.zadd(tk.hubs, {"a1": 10**13})
    with hints(redis_client) as published:
        scripts.hint_pass(tk, "a1", False, CHANNEL, 2)
    assert published == ["2 topic-a"]
    assert redis_client.zrange(tk.hubs, 0, -1) == ["a1"]
