"""The topic registry's compare-and-set removal, lua/recycle.lua (the recycler around it:
tests/core/test_recycle.py).
"""

from __future__ import annotations

from support.lua import NS


def test_recycle_forgets_topic_only_if_unused_since_read(scripts, redis_client):
    redis_client.zadd(NS.topics, {"t": 100, "u": 100})
    redis_client.zadd(NS.due, {"t": 1000, "u": 1000})
    redis_client.zadd(NS.topics, {"u": 200})                # used meanwhile
    assert scripts.recycle(NS, "u", 100) == 0
    assert redis_client.zscore(NS.topics, "u") == 200
    assert redis_client.zscore(NS.due, "u") == 1000
    assert scripts.recycle(NS, "t", 100) == 1
    assert redis_client.zscore(NS.topics, "t") is None
    assert redis_client.zscore(NS.due, "t") is None
    assert scripts.recycle(NS, "gone", 100) == 0
