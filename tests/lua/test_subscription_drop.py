"""lua/subscription_drop.lua: a deleted subscription's keys freed in slices, each message
letting go of the topic's record."""

from __future__ import annotations

from support.lua import CHANNEL, DEFAULTS, HOUR, T0


def test_slices_free_everything_and_the_bodies_nobody_holds(scripts, tk, redis_client):
    scripts.subscription_put(tk, "s1", T0, 32)
    for i in range(5):
        scripts.send(tk, f"m{i}", "body", T0, T0, HOUR, 3, "", CHANNEL, DEFAULTS)
    sk = tk.subscription("s1")
    scripts.pull(sk, T0, 2, -1, 60_000, 1000, CHANNEL, DEFAULTS)   # two get records
    scripts.delete(tk, "m4", T0, 60_000, True, channel=CHANNEL, defaults=DEFAULTS)
    assert redis_client.hlen(tk.refs) == 4
    scripts.subscription_delete(sk, "d1")
    dk = tk.dropping("d1")
    left, cursor = None, "0"
    for _ in range(10):
        reply = scripts.subscription_drop(dk, 1, T0, cursor)
        left, cursor = reply.left, reply.cursor
        if left == 0:
            break
    assert left == 0
    assert redis_client.keys(f"{tk.base}:sd:*") == []
    assert redis_client.hlen(tk.refs) == 0
    assert redis_client.hlen(tk.msgs) == 4        # the default subscription still holds them
