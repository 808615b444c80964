"""Invariant 5: no script and no tick costs O(backlog); idle topics cost the scheduler nothing."""

from __future__ import annotations

import redis

from delayqueue.background.runtime import Runtime
from delayqueue.background.scheduler import REGISTRY_CHUNK
from delayqueue.core.clock import ManualClock
from delayqueue.core.keys import NamespaceKeys
from delayqueue.core.queue import SCRIPT_LIMIT
from delayqueue.core.scripts import SendArgs
from delayqueue.settings.config import load_settings


def make_runtime(redis_url: str, clock=None) -> Runtime:
    settings = load_settings(overrides={"redis_url": redis_url, "snapshot_dir": ""})
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    return Runtime(settings, client=client, clock=clock)


def fill_waiting(client: redis.Redis, rt: Runtime, topic: str, count: int, trigger_ms: int):
    """Send ``count`` messages through the send script, all due at ``trigger_ms``."""
    tk = rt.queue.topic_keys(topic)
    trip = rt.scripts.round_trip(client)
    for start in range(0, count, 100):
        rt.scripts.send_many(tk, trigger_ms - 1, rt.keys.hint_channel, rt.queue.defaults,
                             [SendArgs(f"m{i}", "body", trigger_ms, 3_600_000, 3, "")
                              for i in range(start, min(start + 100, count))], trip=trip)
    trip.execute(raise_on_error=True)


def test_one_promote_call_moves_at_most_its_limit(redis_url, redis_client):
    clock = ManualClock()
    rt = make_runtime(redis_url, clock)
    fill_waiting(redis_client, rt, "big", 2500, clock.now_ms())
    tk = rt.queue.topic_keys("big")
    moved, gaps, _ = rt.scripts.promote(tk, clock.now_ms(), SCRIPT_LIMIT, rt.keys.hint_channel)
    assert moved == SCRIPT_LIMIT and len(gaps) == SCRIPT_LIMIT
    assert redis_client.zcard(tk.ready) == SCRIPT_LIMIT
    assert redis_client.zcard(tk.waiting) == 1500


def test_a_scheduler_visit_drains_a_large_backlog_in_bounded_rounds(redis_url, redis_client):
    clock = ManualClock()
    rt = make_runtime(redis_url, clock)
    fill_waiting(redis_client, rt, "big", 2500, clock.now_ms())
    tk = rt.queue.topic_keys("big")
    rt.scheduler.visit(["big"])
    assert redis_client.zcard(tk.ready) == 2500
    assert redis_client.zcard(tk.waiting) == 0


def test_pull_skips_a_bounded_number_of_dead_entries_per_call(redis_url, redis_client):
    clock = ManualClock()
    rt = make_runtime(redis_url, clock)
    fill_waiting(redis_client, rt, "dead", 300, clock.now_ms())
    tk = rt.queue.topic_keys("dead")
    rt.scheduler.visit(["dead"])
    clock.advance(3_600_000)  # every message is now past its expireTime
    result = rt.queue.pull("dead", count=10)
    assert result.messages == []
    # batch 10 may skip at most 2 * 10 dead entries in one call; the rest wait for expiry.
    assert redis_client.zcard(tk.ready) == 300 - 20


def test_idle_topics_cost_the_scheduler_nothing_per_tick(redis_url, redis_client):
    """camellia scans every topic 10x a second; the due index visits only due topics."""
    clock = ManualClock()
    rt = make_runtime(redis_url, clock)
    for n in range(200):
        fill_waiting(redis_client, rt, f"idle-{n}", 1, clock.now_ms() + 3_600_000)
    redis_client.zadd(rt.keys.topics, {f"idle-{n}": clock.now_ms() for n in range(200)})
    assert redis_client.zcard(rt.keys.due) == 200     # the sends' scripts wrote the index
    redis_client.config_resetstat()
    assert rt.scheduler.repair_due_index() == 0       # and the repair sweep reads none of them
    assert "cmdstat_zrange" not in redis_client.info("commandstats")
    rt.scheduler.run_due()            # loads the claim script, so no tick below meets NOSCRIPT
    redis_client.config_resetstat()
    for _ in range(50):  # 5 seconds' worth of ticks at msg-schedule-millis = 100
        rt.scheduler.run_due()
    stats = redis_client.info("commandstats")
    calls = sum(v["calls"] for k, v in stats.items() if not k.startswith("cmdstat_config"))
    # one call of due_claim.lua (EVALSHA) and its one ZRANGE per tick, whatever the topics
    assert calls <= 50 * 2, stats


def test_due_index_points_at_each_topics_next_event(redis_url, redis_client):
    clock = ManualClock()
    rt = make_runtime(redis_url, clock)
    now = clock.now_ms()
    rt.queue.send("a", "x", delay_ms=5000)
    rt.queue.send("b", "x", delay_ms=1000)
    keys = NamespaceKeys("dq", "default")
    assert redis_client.zscore(keys.due, "a") == now + 5000
    assert redis_client.zscore(keys.due, "b") == now + 1000
    clock.advance(1000)
    assert rt.scheduler.run_due() == now + 5000
    # b's message was promoted; b's next event is its expiry, an hour after the trigger time
    assert redis_client.zscore(keys.due, "b") == now + 1000 + 3_600_000
    assert rt.queue.get("b", rt.queue.pull("b").messages[0].msg_id).status == 3



def test_one_scheduler_tick_costs_the_same_round_trips_for_one_or_fifty_due_topics(
        redis_url, redis_client, monkeypatch):
    clock = ManualClock()
    rt = make_runtime(redis_url, clock)
    for n in range(50):
        fill_waiting(redis_client, rt, f"due-{n}", 3, clock.now_ms() + 1000)
    redis_client.zadd(rt.keys.due, {f"due-{n}": clock.now_ms() + 1000 for n in range(50)})
    assert rt.scheduler.run_due() == clock.now_ms() + 1000   # none due yet; loads the claim
    clock.advance(1000)

    pipelines, commands = [], []
    real_execute, real_command = redis.client.Pipeline.execute, redis.Redis.execute_command
    monkeypatch.setattr(redis.client.Pipeline, "execute",
                        lambda self, *a, **k: pipelines.append(1) or real_execute(self, *a, **k))
    monkeypatch.setattr(redis.Redis, "execute_command",
                        lambda self, *a, **k: (isinstance(self, redis.client.Pipeline)
                                               or commands.append(a[0]))
                        and False or real_command(self, *a, **k))
    rt.scheduler.run_due()
    monkeypatch.undo()
    assert all(redis_client.zcard(rt.queue.topic_keys(f"due-{n}").ready) == 3
               for n in range(50))
    assert len(pipelines) == 2, pipelines            # scripts; due-index updates + head
    assert commands == ["EVALSHA"], commands         # the claim, due_claim.lua


def test_scheduler_ticks_are_at_least_the_min_gap_apart_even_when_a_topic_is_due_sooner(
        redis_url, redis_client):
    """schedule-min-gap-millis: with a message due every millisecond the scheduler would
    otherwise tick every millisecond; the sleep it asks for never goes below the gap."""
    clock = ManualClock()
    for gap_ms in (10, 0):
        settings = load_settings(overrides={"redis_url": redis_url, "snapshot_dir": "",
                                            "schedule_min_gap_millis": gap_ms})
        rt = Runtime(settings, client=redis.Redis.from_url(redis_url, decode_responses=True),
                     clock=clock)
        rt.queue.send(f"soon{gap_ms}", "x", delay_ms=1)   # due 1 ms from now
        sleep_s = rt.scheduler.tick()
        if gap_ms:
            assert 0.009 <= sleep_s <= 0.010
        else:
            assert sleep_s == clock.seconds_until(clock.now_ms() + 2)  # due + 1 ms, exact


def _lost_due_times(client: redis.Redis, rt: Runtime, topics: list[str], trigger_ms: int,
                    used_ms: int) -> None:
    """Each topic holds one message due at ``trigger_ms`` and was last used at ``used_ms``,
    and its due-index write was lost (a process killed after the script)."""
    trip = rt.scripts.round_trip(client)
    for topic in topics:
        rt.scripts.send_many(rt.queue.topic_keys(topic), trigger_ms - 1, rt.keys.hint_channel,
                             rt.queue.defaults, [SendArgs("m", "body", trigger_ms, -1, -1, "")],
                             trip=trip)
    trip.execute(raise_on_error=True)
    client.zadd(rt.keys.topics, dict.fromkeys(topics, used_ms))
    client.zrem(rt.keys.due, *topics)


def test_on_a_cluster_the_repair_sweep_visits_the_recently_used_topics_and_a_slice_of_the_rest(
        redis_url, redis_client):
    """Where the due index is in another slot than the topics (a Cluster), a process killed
    between a script and its index write leaves the index too late. The first sweep reads
    every registered topic; later ones the topics used since the previous one started and a
    page of REGISTRY_CHUNK of the others, walked with a cursor: idle topics cost a bounded
    slice per sweep, and every lost write is still found."""
    clock = ManualClock()
    rt = make_runtime(redis_url, clock)
    rt.scripts.lowers_due_index = False
    due = clock.now_ms() + 3_600_000
    first = [f"first-{n}" for n in range(20)]
    _lost_due_times(redis_client, rt, first, due, clock.now_ms() - 7_200_000)
    assert rt.scheduler.repair_due_index() == 20          # no mark yet: every topic
    assert redis_client.zscore(rt.keys.due, "first-7") == due

    idle = [f"idle-{n:04}" for n in range(1200)]
    _lost_due_times(redis_client, rt, idle, due, clock.now_ms() - 3_600_000)
    clock.advance(5000)
    _lost_due_times(redis_client, rt, ["busy"], due, clock.now_ms())   # used since the mark
    visited = []
    real = rt.scheduler.client.pipeline

    def counting_pipeline(*args, **kwargs):
        pipe = real(*args, **kwargs)
        original = pipe.zrange
        pipe.zrange = lambda key, *a, **k: visited.append(key) or original(key, *a, **k)
        return pipe

    rt.scheduler.client.pipeline = counting_pipeline
    repaired = []
    for _ in range(3):
        visited.clear()
        repaired.append(rt.scheduler.repair_due_index())
        assert len(visited) <= 6 * (1 + REGISTRY_CHUNK)   # six heads per visited topic
        clock.advance(5000)
    # busy in every sweep (used at the second one's mark, inside the third's margin, then at
    # the end of the walk); the 20 + 1,200 unused ones (first's used longest ago) 500, 500,
    # 220: every lost write found within three sweeps
    assert repaired == [1 + REGISTRY_CHUNK, 1 + REGISTRY_CHUNK, 1 + 220]
    assert redis_client.zscore(rt.keys.due, "busy") == due
    assert {redis_client.zscore(rt.keys.due, t) for t in idle} == {due}
