"""Recurring schedules in core (core/schedules.py, the schedule scripts and the schedules
loop), on a real Redis with a hand-set clock: every occurrence is written once, never early,
by the loop's compare-and-set; replace, delete, pause, resume, limit and end; the repair."""

from __future__ import annotations

import json

import pytest
import redis

from delayqueue.background.recurring import SCHEDULES_PER_TICK, Recurring
from delayqueue.background.runtime import Runtime
from delayqueue.core.clock import ManualClock
from delayqueue.core.errors import BadRequest, NotFound
from delayqueue.core.outcome import Outcome
from delayqueue.core.recurrence import plan_advance
from delayqueue.core.schedules import ScheduleSpec, as_plan, member, recurrence_of
from delayqueue.core.status import Status
from delayqueue.settings.config import load_settings

from support.node import REPO
from support.redis_server import RedisServer

T0 = 1_800_000_000_000          # a whole minute: 2027-01-15T08:00:00Z


def make_runtime(redis_url: str, clock: ManualClock) -> Runtime:
    settings = load_settings(overrides={"redis_url": redis_url, "snapshot_dir": ""})
    return Runtime(settings, client=redis.Redis.from_url(redis_url, decode_responses=True),
                   clock=clock)


@pytest.fixture
def clock():
    return ManualClock(T0)


@pytest.fixture
def rt(redis_url, clock):
    return make_runtime(redis_url, clock)


def every(sid: str = "s", ms: int = 1000, **extra) -> ScheduleSpec:
    return ScheduleSpec(sid, "tick", every_ms=ms, **extra)


def loop(rt: Runtime) -> Recurring:
    return Recurring(rt.schedules, rt.clock, rt.keys)


def occurrence(rt: Runtime, topic: str, sid: str, fire: int):
    return rt.queue.get(topic, f"{sid}:{fire}")


def occurrences(rt: Runtime, topic: str, sid: str, step: int = 1000, count: int = 40
                ) -> dict[int, tuple[int, int]]:
    """The schedule's occurrences among the fire times T0 + k * step: fire time ->
    (triggerTime, status)."""
    found = {}
    for k in range(count):
        fire = T0 + k * step
        try:
            message = occurrence(rt, topic, sid, fire)
        except NotFound:
            continue
        found[fire] = (message.trigger_time, int(message.status))
    return found


def test_create_every_writes_the_first_occurrence_waiting_and_shows_the_next_five(rt):
    created = rt.schedules.create("t", every(start_ms=T0 + 500))
    assert created["nextFireTimes"] == [T0 + 500 + k * 1000 for k in range(5)]
    assert created["nextFireTime"] == T0 + 500 and created["sentCount"] == 1
    assert (created["everyMillis"], created["cron"], created["misfire"]) == (1000, None, "once")
    waiting = occurrence(rt, "t", "s", T0 + 500)
    assert (waiting.status, waiting.trigger_time, waiting.msg) == (Status.WAITING, T0 + 500,
                                                                    "tick")
    assert rt.client.zscore(rt.keys.schedule_index, member("t", "s")) == T0 + 500


def test_create_cron_in_a_time_zone(rt):
    created = rt.schedules.create("t", ScheduleSpec("c", "b", cron="30 2 * * *",
                                                    timezone="Europe/Paris"))
    # 02:30 in Paris (CET, UTC+1) is 01:30 UTC; T0 is 08:00 UTC, so the first is tomorrow.
    first = T0 - 8 * 3_600_000 + 86_400_000 + 90 * 60_000
    assert created["nextFireTimes"] == [first + day * 86_400_000 for day in range(5)]
    assert occurrence(rt, "t", "c", first).trigger_time == first


def test_the_loop_writes_the_next_occurrence_when_the_pending_one_comes_never_before(rt,
                                                                                    clock):
    rt.schedules.create("t", every())                       # T0 is due at once
    recurring = loop(rt)
    assert recurring.advance_due() == 1                     # so T0 + 1000 is written
    assert occurrences(rt, "t", "s") == {T0: (T0, Status.READY),
                                          T0 + 1000: (T0 + 1000, Status.WAITING)}
    clock.advance(999)
    assert recurring.advance_due() == 0                     # T0 + 1000 has not come
    assert [m.msg_id for m in rt.queue.pull("t", 10).messages] == [f"s:{T0}"]
    clock.advance(1)
    assert [m.msg_id for m in rt.queue.pull("t", 10).messages] == [f"s:{T0 + 1000}"]
    for _ in range(3):
        recurring.advance_due()
        recurring.advance_due()                             # a second look writes nothing
        clock.advance(1000)
    assert list(occurrences(rt, "t", "s")) == [T0 + k * 1000 for k in range(5)]
    info = rt.schedules.get("t", "s")
    assert (info["sentCount"], info["missedCount"], info["lastFireTime"],
            info["nextFireTime"]) == (5, 0, T0 + 3000, T0 + 4000)


def test_replace_deletes_the_waiting_occurrence_and_starts_again(rt, clock):
    rt.schedules.create("t", every(start_ms=T0 + 5000))
    clock.advance(10)
    replaced = rt.schedules.create("t", every(ms=2000, start_ms=T0 + 3000))
    assert occurrence(rt, "t", "s", T0 + 5000).status == Status.DELETED
    assert occurrence(rt, "t", "s", T0 + 3000).status == Status.WAITING
    assert (replaced["everyMillis"], replaced["sentCount"], replaced["nextFireTime"]) == \
        (2000, 1, T0 + 3000)


def test_replace_with_the_same_first_fire_time_writes_it_anew(rt):
    rt.schedules.create("t", every(start_ms=T0 + 5000))
    rt.schedules.create("t", ScheduleSpec("s", "new body", every_ms=1000, start_ms=T0 + 5000))
    again = occurrence(rt, "t", "s", T0 + 5000)
    assert (again.status, again.msg) == (Status.WAITING, "new body")


def test_delete_removes_the_waiting_occurrence_and_the_index_entry(rt):
    rt.schedules.create("t", every(start_ms=T0 + 5000))
    assert rt.schedules.delete("t", "s") is True
    assert occurrence(rt, "t", "s", T0 + 5000).status == Status.DELETED
    assert rt.client.zscore(rt.keys.schedule_index, member("t", "s")) is None
    with pytest.raises(NotFound, match="scheduleId: no schedule 's' in topic 't'"):
        rt.schedules.get("t", "s")


def test_pause_removes_the_waiting_occurrence_and_resume_skips_the_paused_fire_times(
        rt, clock):
    rt.schedules.create("t", every())                       # T0 is due at once
    clock.advance(1000)
    loop(rt).advance_due()                                  # T0 + 1000 due, T0 + 2000 waits
    paused = rt.schedules.pause("t", "s")
    assert paused["paused"] is True and paused["changed"] is True
    assert paused["nextFireTime"] is None and paused["nextFireTimes"] == []
    assert occurrence(rt, "t", "s", T0 + 2000).status == Status.DELETED
    assert rt.schedules.pause("t", "s")["changed"] is False
    clock.advance(5500)                                     # T0 + 6500
    assert loop(rt).advance_due() == 0
    resumed = rt.schedules.resume("t", "s")
    assert resumed["changed"] is True and resumed["nextFireTime"] == T0 + 7000
    assert resumed["missedCount"] == 0
    assert {f: s for f, (_, s) in occurrences(rt, "t", "s").items()} == {
        T0: Status.READY, T0 + 1000: Status.READY, T0 + 2000: Status.DELETED,
        T0 + 7000: Status.WAITING}
    assert rt.schedules.resume("t", "s")["changed"] is False


def test_a_pause_and_resume_use_up_none_of_the_limit(rt, clock):
    created = rt.schedules.create("t", every(start_ms=T0 + 5000, limit=2))
    assert (created["sentCount"], created["nextFireTimes"]) == (1, [T0 + 5000, T0 + 6000])
    paused = rt.schedules.pause("t", "s")
    assert (paused["sentCount"], paused["nextFireTimes"]) == (0, [])   # ended, never sent
    resumed = rt.schedules.resume("t", "s")                  # the same fire time, again
    assert (resumed["sentCount"], resumed["nextFireTimes"]) == (1, [T0 + 5000, T0 + 6000])
    recurring = loop(rt)
    for _ in range(10):
        clock.advance(1000)
        recurring.advance_due()
    assert occurrences(rt, "t", "s", count=10) == {         # both of the limit, once each
        T0 + 5000: (T0 + 5000, Status.WAITING), T0 + 6000: (T0 + 6000, Status.WAITING)}
    info = rt.schedules.get("t", "s")
    assert (info["sentCount"], info["nextFireTime"]) == (2, None)


def test_limit_finishes_the_schedule(rt, clock):
    rt.schedules.create("t", every(limit=3))
    recurring = loop(rt)
    for _ in range(6):
        clock.advance(1000)
        recurring.advance_due()
    assert list(occurrences(rt, "t", "s")) == [T0, T0 + 1000, T0 + 2000]
    info = rt.schedules.get("t", "s")
    assert (info["sentCount"], info["nextFireTime"], info["nextFireTimes"]) == (3, None, [])
    assert rt.client.zscore(rt.keys.schedule_index, member("t", "s")) is None


def test_end_time_finishes_the_schedule(rt, clock):
    created = rt.schedules.create("t", every(end_ms=T0 + 2500))
    assert created["nextFireTimes"] == [T0, T0 + 1000, T0 + 2000]
    recurring = loop(rt)
    for _ in range(5):
        clock.advance(1000)
        recurring.advance_due()
    assert list(occurrences(rt, "t", "s")) == [T0, T0 + 1000, T0 + 2000]
    assert rt.schedules.get("t", "s")["nextFireTime"] is None


def test_an_end_time_already_past_is_finished_at_once(rt):
    created = rt.schedules.create("t", every(start_ms=T0 - 10_000, end_ms=T0 - 1))
    assert (created["sentCount"], created["nextFireTime"], created["nextFireTimes"]) == (
        0, None, [])
    assert rt.client.zscore(rt.keys.schedule_index, member("t", "s")) is None
    assert occurrences(rt, "t", "s") == {}


def test_resume_never_writes_again_an_occurrence_whose_time_had_come(rt, clock):
    rt.schedules.create("t", every())                       # T0, due at once
    [delivered] = rt.queue.pull("t").messages
    rt.queue.ack("t", delivered.msg_id, delivered.receipt)
    rt.schedules.pause("t", "s")                            # T0 is not waiting: left alone
    resumed = rt.schedules.resume("t", "s")                 # the same millisecond
    assert resumed["nextFireTime"] == T0 + 1000
    assert occurrences(rt, "t", "s") == {T0: (T0, Status.ACKED),
                                          T0 + 1000: (T0 + 1000, Status.WAITING)}


MINUTE = 60_000


@pytest.mark.parametrize("misfire, late_fires, missed", [
    ("once", [3], 3), ("skip", [], 3), ("all", [1, 2, 3], 3)])
def test_misfire_after_the_loop_stopped_across_three_fire_times(rt, clock, misfire,
                                                                late_fires, missed):
    """Every minute; the loop stops after T0 and comes back at T0 + 4.5 min: T0+1..3 min are
    past the 60 s grace (missed), T0+4 min is late within it, T0+5 min waits."""
    rt.schedules.create("t", every(ms=MINUTE, misfire=misfire))
    clock.advance(4 * MINUTE + 30_000)
    now = clock.now_ms()
    loop(rt).advance_due()
    written = occurrences(rt, "t", "s", MINUTE, 10)
    expected = {T0: (T0, Status.READY)}
    expected.update({T0 + k * MINUTE: (now, Status.READY) for k in [*late_fires, 4]})
    expected[T0 + 5 * MINUTE] = (T0 + 5 * MINUTE, Status.WAITING)
    assert written == dict(sorted(expected.items()))
    info = rt.schedules.get("t", "s")
    assert (info["missedCount"], info["sentCount"]) == (missed, 2 + len(late_fires) + 1)
    assert info["lastFireTime"] == T0 + 4 * MINUTE


def test_a_deleted_waiting_occurrence_is_written_again_by_the_repair(rt):
    rt.schedules.create("t", every(start_ms=T0 + 5000))
    rt.queue.delete("t", f"s:{T0 + 5000}")
    assert rt.schedules.repair() == 1
    again = occurrence(rt, "t", "s", T0 + 5000)
    assert (again.status, again.trigger_time) == (Status.WAITING, T0 + 5000)
    assert rt.schedules.repair() == 0                      # live: nothing to write
    assert rt.schedules.get("t", "s")["sentCount"] == 1


def test_the_repair_puts_back_a_lost_index_entry(rt):
    rt.schedules.create("t", every(start_ms=T0 + 5000))
    rt.client.delete(rt.keys.schedule_index)
    rt.schedules.repair()
    assert rt.client.zscore(rt.keys.schedule_index, member("t", "s")) == T0 + 5000


def test_the_repair_visits_the_topics_with_schedules_not_every_registered_topic(rt):
    rt.client.zadd(rt.keys.topics, {f"idle-{i}": T0 for i in range(500)})
    rt.schedules.create("t", every(start_ms=T0 + 5000))
    rt.schedules.create("u", every(start_ms=T0 + 5000))
    rt.client.config_resetstat()
    rt.schedules.repair()
    stats = rt.client.info("commandstats")
    assert (stats["cmdstat_hlen"]["calls"], stats["cmdstat_zcard"]["calls"]) == (2, 2)  # t, u
    assert [s["topic"] for s in rt.schedules.list().schedules] == ["t", "u"]


def test_a_topic_left_without_schedules_leaves_the_set_on_the_second_repair(rt):
    rt.schedules.create("t", every(start_ms=T0 + 5000))
    rt.schedules.delete("t", "s")
    rt.schedules.repair()           # one pass may fall between a create's SADD and its script
    assert rt.client.sismember(rt.keys.schedule_topics, "t")
    rt.schedules.repair()
    assert not rt.client.sismember(rt.keys.schedule_topics, "t")
    rt.schedules.create("t", every(start_ms=T0 + 5000))
    assert rt.client.sismember(rt.keys.schedule_topics, "t")


def test_two_advances_planned_from_one_state_write_once(rt, clock):
    rt.schedules.create("t", every())
    clock.advance(1000)
    tk = rt.queue.topic_keys("t")
    record = json.loads(rt.client.hget(tk.schedules, "s"))
    plan = as_plan(plan_advance(recurrence_of(record), after_ms=record["cursor"],
                                now_ms=clock.now_ms(), misfire="once", remaining=None),
                   T0 + 1000)
    replies = [rt.scripts.schedule_advance(tk, clock.now_ms(), rt.keys.hint_channel, "s",
                                           record["gen"], record["cursor"], plan,
                                           rt.queue.defaults) for _ in range(2)]
    assert [(r.outcome, r.written) for r in replies] == [(Outcome.OK, 2), (Outcome.KEPT, 0)]
    assert list(occurrences(rt, "t", "s")) == [T0, T0 + 1000, T0 + 2000]


def test_two_loops_racing_write_every_occurrence_once(redis_url, clock):
    nodes = [make_runtime(redis_url, clock) for _ in range(2)]
    nodes[0].schedules.create("t", every())
    loops = [loop(rt) for rt in nodes]
    for _ in range(20):
        clock.advance(1000)
        for recurring in loops:
            recurring.advance_due()
    assert list(occurrences(nodes[0], "t", "s")) == [T0 + k * 1000 for k in range(22)]
    assert nodes[0].schedules.get("t", "s")["sentCount"] == 22


def test_occurrences_bypass_max_backlog_and_take_the_topics_settings(rt):
    rt.admin.set_config("t", {"maxBacklog": 1, "ttlMillis": 7000, "maxRetry": 4})
    rt.queue.send("t", "fills the backlog", delay_ms=60_000)
    rt.schedules.create("t", every(start_ms=T0 + 5000))
    waiting = occurrence(rt, "t", "s", T0 + 5000)
    assert (waiting.expire_time, waiting.max_retry) == (T0 + 12_000, 4)
    rt.schedules.create("t", every("own", start_ms=T0 + 5000, ttl_ms=100, max_retry=0,
                                   attributes={"k": "v"}, group_id="g"))
    own = occurrence(rt, "t", "own", T0 + 5000)
    assert (own.expire_time, own.max_retry, own.attributes, own.group_id) == (
        T0 + 5100, 0, {"k": "v"}, "g")


def test_a_topic_holding_a_schedule_is_never_recycled(rt, clock):
    rt.schedules.create("t", every(limit=1))
    clock.advance(10_000)
    loop(rt).advance_due()
    rt.queue.pull("t")
    rt.client.delete(*rt.queue.topic_keys("t").queues)      # as if its messages were purged
    rt.client.zadd(rt.keys.topics, {"t": 0})
    assert rt.scheduler.recycle_topics() == []
    assert rt.client.zscore(rt.keys.topics, "t") == 0


def test_unknown_topic_and_unknown_schedule_answer_404(rt):
    with pytest.raises(NotFound, match="topic: no topic 'nowhere'"):
        rt.schedules.get("nowhere", "s")
    for call in (rt.schedules.delete, rt.schedules.pause, rt.schedules.resume):
        with pytest.raises(NotFound, match="topic: no topic 'nowhere'"):
            call("nowhere", "s")
    rt.queue.send("t", "x")
    for call in (rt.schedules.get, rt.schedules.delete, rt.schedules.pause,
                 rt.schedules.resume):
        with pytest.raises(NotFound, match="scheduleId: no schedule 'ghost' in topic 't'"):
            call("t", "ghost")
    with pytest.raises(NotFound, match="topic: no topic 'nowhere'"):
        rt.schedules.list("nowhere")


@pytest.mark.parametrize("spec, text", [
    (ScheduleSpec("s", "b"), "cron: give cron or everyMillis"),
    (ScheduleSpec("s", "b", every_ms=999), "everyMillis: must be an integer >= 1000"),
    (ScheduleSpec("s", "b", cron="* * *"), "cron: "),
    (ScheduleSpec("s", "b", cron="* * * * *", timezone="Mars/Olympus"), "timezone: "),
    (ScheduleSpec("s", "b", every_ms=1000, start_ms=T0, end_ms=T0), "endTime: "),
    (ScheduleSpec("s", "b", every_ms=1000, limit=0), "limit: "),
    (ScheduleSpec("s", "b", every_ms=1000, misfire="never"), "misfire: "),
    (ScheduleSpec("s", "b", every_ms=1000, ttl_ms=0), "ttlMillis: "),
    (ScheduleSpec("s", "b", every_ms=1000, max_retry=-1), "maxRetry: "),
    (ScheduleSpec("x" * 242, "b", every_ms=1000), "scheduleId: must be at most 241"),
])
def test_every_bad_parameter_is_refused_naming_it_and_nothing_is_written(rt, spec, text):
    with pytest.raises(BadRequest) as refused:
        rt.schedules.create("t", spec)
    assert refused.value.msg.startswith(text)
    assert rt.client.exists(rt.queue.topic_keys("t").schedules, rt.keys.schedule_index) == 0


def test_list_pages_by_topic_and_schedule_id(rt):
    for topic, sid in [("a", "2"), ("a", "1"), ("b", "1"), ("c", "9")]:
        rt.schedules.create(topic, every(sid, start_ms=T0 + 5000))
    first = rt.schedules.list(limit=3)
    assert [(s["topic"], s["scheduleId"]) for s in first.schedules] == [
        ("a", "1"), ("a", "2"), ("b", "1")]
    rest = rt.schedules.list(cursor=first.next_cursor, limit=3)
    assert [(s["topic"], s["scheduleId"]) for s in rest.schedules] == [("c", "9")]
    assert rest.next_cursor is None
    assert [s["scheduleId"] for s in rt.schedules.list("a").schedules] == ["1", "2"]


def all_pages(rt: Runtime, topic: str | None, limit: int) -> list[tuple[str, str]]:
    listed, cursor = [], None
    for _ in range(1000):
        page = rt.schedules.list(topic, cursor, limit)
        listed += [(s["topic"], s["scheduleId"]) for s in page.schedules]
        assert len(page.schedules) == limit or page.next_cursor is None
        cursor = page.next_cursor
        if cursor is None:
            return listed
    raise AssertionError("no last page")


def test_pages_of_every_size_list_every_schedule_once_in_order(rt):
    made = [(t, f"s{k:02}") for t, n in [("a", 7), ("b", 1), ("c", 0), ("d", 12)]
            for k in range(n)] + [("e", "x")]
    for topic, sid in made:
        rt.schedules.create(topic, every(sid, start_ms=T0 + 5000))
    rt.schedules.create("c", every("gone", start_ms=T0 + 5000))
    rt.schedules.delete("c", "gone")                     # c: a topic left without any
    for limit in (1, 2, 3, 7, 8, 20, 21, 100):
        assert all_pages(rt, None, limit) == sorted(made), limit
        assert all_pages(rt, "d", limit) == [("d", f"s{k:02}") for k in range(12)], limit


def put_behind_the_scripts(rt: Runtime, topic: str, count: int, ids: bool = True) -> None:
    """``count`` schedules written straight into the topic's hash (and its ids), copies of
    a real one: the size of a topic a list must not read whole."""
    rt.schedules.create(topic, every("s00000", start_ms=T0 + 5000))
    tk = rt.queue.topic_keys(topic)
    record = json.loads(rt.client.hget(tk.schedules, "s00000"))
    pipe = rt.client.pipeline(transaction=False)
    for k in range(1, count):
        sid = f"s{k:05}"
        pipe.hset(tk.schedules, sid, json.dumps({**record, "scheduleId": sid}))
        if ids:
            pipe.zadd(tk.schedule_ids, {sid: 0})
    pipe.execute()


def test_a_page_of_a_large_topic_reads_only_the_page(rt):
    put_behind_the_scripts(rt, "big", 10_000)
    first = rt.schedules.list("big", limit=25)
    rt.client.config_resetstat()
    page = rt.schedules.list("big", first.next_cursor, limit=25)
    assert [s["scheduleId"] for s in page.schedules] == [f"s{k:05}" for k in range(25, 50)]
    stats = rt.client.info("commandstats")
    assert "cmdstat_hkeys" not in stats and "cmdstat_hscan" not in stats
    assert (stats["cmdstat_zlexcount"]["calls"], stats["cmdstat_zrangebylex"]["calls"],
            stats["cmdstat_hget"]["calls"]) == (1, 1, 25)
    unfiltered = rt.schedules.list(None, page.next_cursor, limit=25)
    assert [s["scheduleId"] for s in unfiltered.schedules] == [
        f"s{k:05}" for k in range(50, 75)]


def test_the_repair_writes_the_ids_of_schedules_created_before_they_were_kept(rt):
    put_behind_the_scripts(rt, "old", 30, ids=False)
    rt.client.delete(rt.queue.topic_keys("old").schedule_ids)
    rt.client.zadd(rt.queue.topic_keys("old").schedule_ids, {"stale": 0})   # no schedule
    rt.client.zadd(rt.queue.topic_keys("empty").schedule_ids, {"stale": 0})
    rt.client.sadd(rt.keys.schedule_topics, "empty")
    assert all_pages(rt, None, 10) == []        # only stale ids: their records are none
    rt.schedules.repair()
    assert all_pages(rt, None, 10) == [("old", f"s{k:05}") for k in range(30)]
    assert rt.client.exists(rt.queue.topic_keys("empty").schedule_ids) == 0
    rt.client.config_resetstat()
    rt.schedules.repair()                                     # counts agree: no rebuild
    assert "cmdstat_zscan" not in rt.client.info("commandstats")


def test_every_schedule_call_runs_as_the_restricted_redis_user(tmp_path, clock):
    """config/delayqueue.acl allows every command the schedules send (the lists' ZLEXCOUNT,
    the repair's HLEN and ZSCAN, the SET of schedule topics)."""
    acl = tmp_path / "users.acl"
    acl.write_text((REPO / "config" / "delayqueue.acl").read_text().replace(
        ">CHANGE-ME", ">acl-test-password-1"))
    server = RedisServer(tmp_path, extra_args=["--aclfile", str(acl)]).start()
    try:
        url = f"redis://delayqueue:acl-test-password-1@127.0.0.1:{server.port}/0"
        rt = make_runtime(url, clock)
        for sid in ("a", "b", "c"):
            rt.schedules.create("t", every(sid, start_ms=T0 + 5000, limit=2))
        assert all_pages(rt, None, 2) == [("t", "a"), ("t", "b"), ("t", "c")]
        rt.schedules.pause("t", "a")
        assert rt.schedules.resume("t", "a")["nextFireTimes"] == [T0 + 5000, T0 + 6000]
        assert rt.schedules.delete("t", "b") is True
        rt.client.delete(rt.queue.topic_keys("t").schedule_ids)   # the ids to rebuild
        rt.schedules.repair()
        clock.advance(5000)
        assert loop(rt).advance_due() == 2                        # a's and c's next
        assert all_pages(rt, "t", 10) == [("t", "a"), ("t", "c")]
        rt.client.close()
    finally:
        server.stop()


def test_a_tick_advances_at_most_its_limit_and_then_asks_to_run_again(rt, clock):
    for i in range(SCHEDULES_PER_TICK + 50):
        rt.schedules.create("t", every(f"s{i}"))              # each due at once
    recurring = loop(rt)
    recurring._repaired_at = float("inf")                     # the repair pass aside
    assert recurring.tick() == 0.0                            # a full tick: again at once
    assert rt.client.zcount(rt.keys.schedule_index, "-inf", clock.now_ms()) == 50
    assert 0 < recurring.tick() <= 0.1
    assert rt.client.zcount(rt.keys.schedule_index, "-inf", clock.now_ms()) == 0


def test_sent_and_missed_occurrences_are_counted_for_the_topic(rt, clock):
    rt.schedules.create("t", every(ms=MINUTE))                # T0: one written
    clock.advance(4 * MINUTE + 30_000)
    loop(rt).advance_due()                                    # 3 missed, 3 written (once)
    rt.monitor.flush()
    total = rt.client.hgetall(rt.keys.monitor_total)
    assert (total["t\tscheduleSent"], total["t\tscheduleMissed"]) == ("4", "3")
