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



def _calls(cluster, name: str) -> int:
    return sum(redis.Redis(port=port).info("commandstats").get(f"cmdstat_{name}", {})
               .get("calls", 0) for port in cluster.masters())


def test_a_cluster_round_trip_sends_evalsha_to_each_slot_and_loads_scripts_a_master_lacks(
        redis_cluster):
    """On a Cluster a round trip of calls in several slots is one pipeline of EVALSHAs, not
    EVALs of the whole source, nor a COMMAND GETKEYS per call; a master without the script
    (flushed: as after a failover) answers NOSCRIPT, and those calls alone run again."""
    client = redis_cluster.client()
    scripts = Scripts(client)
    ns = NamespaceKeys("dq", "trip-cluster")
    topics = [f"t{i}" for i in range(12)]   # spread over the three masters
    for port in redis_cluster.masters():
        redis.Redis(port=port).script_flush()
    before = {name: _calls(redis_cluster, name)
              for name in ("eval", "evalsha", "command|getkeys")}
    for _ in range(2):   # the first meets NOSCRIPT everywhere, the second none
        trip = scripts.round_trip()
        for topic in topics:
            scripts.send_many(ns.topic(topic), T0, ns.hint_channel, DEFAULTS,
                              [SendArgs(f"m{_}", "body", T0, -1, -1, "")], trip=trip)
        trip.command("ZADD", ns.registry_of("t0"), "1", "t0")
        answers = trip.execute()
        assert [a.outcome for a in answers[:-1]] == [Outcome.OK] * len(topics)
        assert answers[-1] in (0, 1)
    assert _calls(redis_cluster, "eval") == before["eval"]
    assert _calls(redis_cluster, "command|getkeys") == before["command|getkeys"]
    # 12 refused NOSCRIPT and run again, then 12: the registry ZADD ran once per trip
    assert _calls(redis_cluster, "evalsha") - before["evalsha"] == 36
    assert client.zcard(ns.topic("t3").ready) == 2
