"""RoundTrip: many script calls and plain commands in one round trip, one answer per entry."""

from __future__ import annotations

import pytest
import redis

from delayqueue.core.keys import NamespaceKeys
from delayqueue.core.outcome import Outcome
from delayqueue.core.scripts import Scripts, SendArgs
from delayqueue.core.topic_config import server_defaults
from delayqueue.settings.config import load_settings

NS = NamespaceKeys("dq", "default")
DEFAULTS = server_defaults(load_settings(env={}))
T0 = 1_700_000_000_000


def test_a_command_after_the_scripts_sees_their_writes_even_after_a_noscript_rerun(
        redis_client):
    """The scheduler writes each topic's due time and reads the new head in one round trip:
    after a restart or failover (scripts gone) the scripts run again, and so must the read."""
    scripts = Scripts(redis_client)
    redis_client.zadd(NS.due, {"t": 100})
    redis_client.script_flush()
    trip = scripts.round_trip()
    scripts.due_set(NS, "t", 100, 500, trip=trip)
    trip.command("ZRANGE", NS.due, 0, 0, "WITHSCORES", withscores=True)
    assert trip.execute() == [Outcome.OK, [("t", 500.0)]]


def test_a_many_entry_call_that_fails_whole_answers_its_error_for_each_entry(redis_client):
    scripts = Scripts(redis_client)
    broken, fine = NS.topic("broken"), NS.topic("fine")
    redis_client.set(broken.config, "not a hash")      # send.lua reads it before any entry
    trip = scripts.round_trip()
    scripts.send_many(broken, T0, NS.hint_channel, DEFAULTS,
                      [SendArgs(m, "body", T0, -1, -1, "") for m in ("a", "b")], trip=trip)
    scripts.send_many(fine, T0, NS.hint_channel, DEFAULTS,
                      [SendArgs("c", "body", T0, -1, -1, "")], trip=trip)
    first, second, third = trip.execute()
    assert isinstance(first, redis.ResponseError) and second is first
    assert third.outcome == Outcome.OK and third.fields[0] == "body"


def test_raise_on_error_raises_the_first_failure_once_every_call_ran(redis_client):
    scripts = Scripts(redis_client)
    broken, fine = NS.topic("broken"), NS.topic("fine")
    redis_client.set(broken.config, "not a hash")
    trip = scripts.round_trip()
    scripts.send_many(broken, T0, NS.hint_channel, DEFAULTS,
                      [SendArgs("a", "body", T0, -1, -1, "")], trip=trip)
    scripts.send_many(fine, T0, NS.hint_channel, DEFAULTS,
                      [SendArgs("c", "body", T0, -1, -1, "")], trip=trip)
    with pytest.raises(redis.ResponseError):
        trip.execute(raise_on_error=True)
    assert redis_client.hlen(fine.msgs) == 1

