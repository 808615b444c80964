"""lua/subscription_delete.lua: the subscription is gone at once, its keys moved aside."""

from __future__ import annotations

import pytest
import redis

from support.lua import CHANNEL, DEFAULTS, HOUR, T0


def test_its_keys_move_to_the_dropping_name_and_it_is_unknown(scripts, tk, redis_client):
    scripts.subscription_put(tk, "s1", T0, 32)
    scripts.send(tk, "a", "body", T0, T0, HOUR, 3, "", CHANNEL, DEFAULTS)
    sk = tk.subscription("s1")
    assert redis_client.zcard(sk.ready) == 1
    scripts.subscription_delete(sk, "d1")
    assert redis_client.hkeys(tk.subs) == []
    assert redis_client.exists(sk.ready) == 0
    assert redis_client.zcard(tk.dropping("d1").ready) == 1
    with pytest.raises(redis.ResponseError, match="NOSUBSCRIPTION s1"):
        scripts.subscription_delete(sk, "d2")
