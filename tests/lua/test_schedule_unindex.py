"""lua/schedule_unindex.lua: the schedule index entry goes only if its score is unchanged."""

from __future__ import annotations

from delayqueue.core.outcome import Outcome

from support.lua import NS


def test_unindex_removes_only_the_entry_it_read(scripts, redis_client):
    redis_client.zadd(NS.schedule_index, {"t\na": 100, "t\nb": 100})
    redis_client.zadd(NS.schedule_index, {"t\nb": 200})       # indexed again meanwhile
    assert scripts.schedule_unindex(NS, "t\nb", 100) == Outcome.KEPT
    assert scripts.schedule_unindex(NS, "t\na", 100) == Outcome.OK
    assert redis_client.zrange(NS.schedule_index, 0, -1, withscores=True) == [("t\nb", 200)]
    assert scripts.schedule_unindex(NS, "t\ngone", 100) == Outcome.KEPT
