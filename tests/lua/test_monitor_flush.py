"""The monitor's flush script, lua/monitor_flush.lua: one process's samples of one interval
added to the interval's hash and to the all-time total. (tests/core/test_monitor.py drives it
through the Monitor.)"""

from __future__ import annotations

import pytest

from delayqueue.core.outcome import Outcome

from support.lua import NS, snapshot

START = 1_700_000_040_000
TTL = 120_000


def flush(scripts, *groups, ttl=TTL):
    return scripts.monitor_flush(NS, START, ttl, [str(x) for x in groups])


def both(redis_client) -> tuple[dict, dict]:
    return redis_client.hgetall(NS.monitor(START)), redis_client.hgetall(NS.monitor_total)


def test_each_op_applies_to_the_interval_and_to_the_total(scripts, redis_client):
    assert flush(scripts, "t\tsendMsg", "i", 3, "t\tpull:sum", "f", "0.5",
                 "t\tpull:max", "m", 7) == 3
    assert flush(scripts, "t\tsendMsg", "i", 2, "t\tpull:sum", "f", "0.25",
                 "t\tpull:max", "m", 5) == 3                    # a lower max changes nothing
    expected = {"t\tsendMsg": "5", "t\tpull:sum": "0.75", "t\tpull:max": "7"}
    assert both(redis_client) == (expected, expected)


def test_the_interval_hash_expires_and_the_total_does_not(scripts, redis_client):
    flush(scripts, "t\tsendMsg", "i", 1)
    assert 0 < redis_client.pttl(NS.monitor(START)) <= TTL
    assert redis_client.pttl(NS.monitor_total) == -1
    redis_client.pexpire(NS.monitor(START), 10)
    flush(scripts, "t\tsendMsg", "i", 1)                        # re-armed on every flush
    assert redis_client.pttl(NS.monitor(START)) > 10


def test_a_max_over_a_missing_field_is_the_value_even_below_zero(scripts, redis_client):
    assert flush(scripts, "t\tgap:max", "m", -3) == 1
    assert both(redis_client) == ({"t\tgap:max": "-3"}, {"t\tgap:max": "-3"})


def test_an_empty_flush_applies_nothing_and_arms_no_ttl(scripts, redis_client):
    assert flush(scripts) == 0
    assert redis_client.exists(NS.monitor(START), NS.monitor_total) == 0
    flush(scripts, "t\tsendMsg", "i", 1)
    redis_client.pexpire(NS.monitor(START), 1_000)
    before = snapshot(redis_client)
    assert flush(scripts) == 0
    assert snapshot(redis_client) == before
    assert redis_client.pttl(NS.monitor(START)) <= 1_000       # not re-armed


@pytest.mark.parametrize("groups, ttl", [
    (("t\tx", "i", 1), 0),
    (("t\tx", "i", 1), -5),
    (("t\tx", "i", 1), "soon"),
    (("t\tx", "i"), TTL),
    (("t\tx", "i", 1, "t\ty", "z", 1), TTL),
    (("t\tx", "i", 1, "t\ty", "m", "many"), TTL),
])
def test_a_malformed_flush_is_refused_whole_before_any_write(scripts, redis_client, groups,
                                                             ttl):
    flush(scripts, "t\told", "i", 1)
    before = snapshot(redis_client)
    assert flush(scripts, *groups, ttl=ttl) == Outcome.BAD_ARGUMENT
    assert snapshot(redis_client) == before
