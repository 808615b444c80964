"""The SDK's recurring schedules against a live node, blocking and asyncio: create (every and
cron), the waiting occurrence, replace, list and its pages, get, pause, resume, delete, the
occurrences delivered on time and once each, and every refusal as the SDK raises it."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from delayqueue.aio import AsyncDelayQueueClient
from delayqueue.client import (
    BadRequestError,
    DelayQueueClient,
    NotFoundError,
    Schedule,
    SchedulePage,
    Status,
)

from support.sdk import node, run_async, topic  # noqa: F401 - fixtures
from support.wait import wait_until

MINUTE = 60_000


@pytest.fixture
def client(node):
    with DelayQueueClient(node.url, timeout=5) as c:
        yield c


def later(minutes: int = 10) -> int:
    """A whole-second epoch ms ``minutes`` from now: a start no fire time reaches meanwhile."""
    return (int(time.time()) + minutes * 60) * 1000


# ---- create ----------------------------------------------------------------------------------
def test_an_every_schedule_fires_from_its_start_and_keeps_its_next_occurrence_waiting(
        client, topic):
    start = later()
    s = client.create_schedule(topic, "tick", "tock", every_ms=timedelta(minutes=1),
                               start_time=start, attributes={"kind": "tick"},
                               group_id="g-1", max_retry=2, ttl_ms=3_600_000)
    assert isinstance(s, Schedule)
    assert (s.topic, s.schedule_id, s.msg, s.every_ms, s.cron) == \
        (topic, "tick", "tock", MINUTE, None)
    assert (s.attributes, s.group_id, s.max_retry, s.ttl_ms) == \
        ({"kind": "tick"}, "g-1", 2, 3_600_000)
    assert (s.start_time, s.end_time, s.limit, s.misfire, s.paused) == \
        (start, None, None, "once", False)
    assert s.next_fire_times == tuple(start + k * MINUTE for k in range(5))
    assert s.next_fire_time == start
    assert (s.sent_count, s.missed_count) == (1, 0)         # the waiting one is written
    assert s.recurrence == "every 1m"
    assert s.to_json() == s.raw                 # every field of the server's object is read
    waiting = client.get(topic, f"tick:{start}")
    assert waiting is not None and waiting.status == Status.WAITING
    assert (waiting.trigger_time, waiting.msg, waiting.attributes, waiting.group_id,
            waiting.max_retry) == (start, "tock", {"kind": "tick"}, "g-1", 2)
    assert waiting.expire_time == start + 3_600_000
    assert [m.msg_id for m in client.list_messages(topic, Status.WAITING).messages] == \
        [f"tick:{start}"]


def test_a_cron_schedule_fires_at_the_local_wall_time_of_its_zone(client, topic):
    s = client.create_schedule(topic, "paris-9", "morning", cron="0 9 * * *",
                               timezone="Europe/Paris")
    assert (s.cron, s.timezone, s.every_ms) == ("0 9 * * *", "Europe/Paris", None)
    assert s.recurrence == "cron 0 9 * * * Europe/Paris"
    zone = ZoneInfo("Europe/Paris")
    now = datetime.now(zone)
    first = now.replace(hour=9, minute=0, second=0, microsecond=0)
    if first <= now:
        first += timedelta(days=1)
    # Wall-clock days: the same 09:00 each day, whatever the offset (a DST change between).
    expected = [int(datetime.combine(first.date() + timedelta(days=k), first.time(),
                                     zone).timestamp() * 1000) for k in range(5)]
    assert list(s.next_fire_times) == expected
    assert s.next_fire_time == expected[0]
    assert client.get(topic, f"paris-9:{expected[0]}").trigger_time == expected[0]
    assert client.get_schedule(topic, "paris-9").next_fire_times == tuple(expected)


def test_create_again_replaces_the_schedule_and_its_waiting_occurrence(client, topic):
    start = later()
    client.create_schedule(topic, "r", "first", every_ms=MINUTE, start_time=start)
    s = client.create_schedule(topic, "r", "second", every_ms=2 * MINUTE, start_time=start,
                               limit=3)
    assert (s.msg, s.every_ms, s.limit) == ("second", 2 * MINUTE, 3)
    assert s.next_fire_times == tuple(start + k * 2 * MINUTE for k in range(3))
    occurrence = client.get(topic, f"r:{start}")
    assert (occurrence.status, occurrence.msg) == (Status.WAITING, "second")
    assert [x.schedule_id for x in client.iter_schedules(topic)] == ["r"]
    assert client.topic_info(topic).waiting_queue_size == 1


# ---- list, get -------------------------------------------------------------------------------
def test_list_schedules_pages_through_a_topic_and_across_topics(client, topic):
    other = topic + "-other"
    ids = [f"s{i}" for i in range(5)]
    for i in ids:
        client.create_schedule(topic, i, f"body {i}", every_ms=MINUTE, start_time=later())
    client.create_schedule(other, "elsewhere", "x", cron="0 0 1 1 *")
    seen: list[str] = []
    cursor = None
    for _ in range(10):
        page = client.list_schedules(topic, cursor, limit=2)
        assert isinstance(page, SchedulePage) and len(page.schedules) <= 2
        assert all(s.topic == topic and s.next_fire_times == () for s in page.schedules)
        seen += [s.schedule_id for s in page.schedules]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert sorted(seen) == ids and len(seen) == len(ids)
    assert sorted(s.schedule_id for s in client.iter_schedules(topic, page_size=2)) == ids
    everywhere = {(s.topic, s.schedule_id) for s in client.iter_schedules(page_size=3)}
    assert {(topic, i) for i in ids} | {(other, "elsewhere")} <= everywhere
    listed = next(s for s in client.iter_schedules(other))
    assert (listed.cron, listed.timezone, listed.msg) == ("0 0 1 1 *", "UTC", "x")
    assert listed.to_json() == listed.raw and "nextFireTimes" not in listed.raw


def test_get_schedule_answers_none_for_an_unknown_schedule_or_topic(client, topic):
    assert client.get_schedule(topic, "nope") is None
    client.create_schedule(topic, "known", "x", every_ms=MINUTE, start_time=later())
    assert client.get_schedule(topic, "nope") is None
    assert client.get_schedule(topic, "known").schedule_id == "known"


# ---- pause, resume, delete ---------------------------------------------------------------------
def test_pause_removes_the_waiting_occurrence_and_resume_writes_the_next_from_now(client,
                                                                                    topic):
    start = later()
    client.create_schedule(topic, "p", "x", every_ms=MINUTE, start_time=start)
    assert client.pause_schedule(topic, "p") is True
    assert client.pause_schedule(topic, "p") is False              # paused already
    paused = client.get_schedule(topic, "p")
    assert paused.paused is True and paused.next_fire_time is None
    assert paused.next_fire_times == ()
    assert client.get(topic, f"p:{start}").status == Status.DELETED
    assert client.topic_info(topic).waiting_queue_size == 0

    assert client.resume_schedule(topic, "p") is True
    assert client.resume_schedule(topic, "p") is False             # not paused
    resumed = client.get_schedule(topic, "p")
    assert resumed.paused is False and resumed.next_fire_time == start  # the first from now
    assert resumed.next_fire_times == tuple(start + k * MINUTE for k in range(5))
    assert client.get(topic, f"p:{start}").status == Status.WAITING   # written again
    assert client.topic_info(topic).waiting_queue_size == 1


def test_a_pause_and_resume_keep_every_occurrence_of_the_limit(client, topic):
    start = later()
    client.create_schedule(topic, "lim", "x", every_ms=MINUTE, start_time=start, limit=2)
    client.pause_schedule(topic, "lim")
    client.resume_schedule(topic, "lim")
    s = client.get_schedule(topic, "lim")
    assert s.next_fire_times == (start, start + MINUTE)        # still two in all
    assert s.sent_count == 1                                   # one written and waiting


def test_delete_removes_the_schedule_and_its_waiting_occurrence(client, topic):
    start = later()
    client.create_schedule(topic, "d", "x", every_ms=MINUTE, start_time=start)
    assert client.delete_schedule(topic, "d") is True           # its occurrence with it
    assert client.get_schedule(topic, "d") is None
    assert client.get(topic, f"d:{start}").status == Status.DELETED
    assert list(client.iter_schedules(topic)) == []
    with pytest.raises(NotFoundError) as caught:
        client.delete_schedule(topic, "d")
    assert caught.value.code == 404


def test_an_unknown_schedule_or_topic_raises_not_found(client, topic):
    for call in (client.delete_schedule, client.pause_schedule, client.resume_schedule):
        with pytest.raises(NotFoundError) as caught:
            call(topic, "ghost")
        assert caught.value.code == 404, call.__name__
    client.create_schedule(topic, "real", "x", every_ms=MINUTE, start_time=later())
    for call in (client.delete_schedule, client.pause_schedule, client.resume_schedule):
        with pytest.raises(NotFoundError):
            call(topic, "ghost")


# ---- refusals ----------------------------------------------------------------------------------
def test_our_checks_refuse_before_anything_is_sent(client, topic):
    with pytest.raises(ValueError, match="exactly one of cron and every_ms"):
        client.create_schedule(topic, "x", "m")
    with pytest.raises(ValueError, match="exactly one of cron and every_ms"):
        client.create_schedule(topic, "x", "m", cron="* * * * *", every_ms=MINUTE)
    with pytest.raises(ValueError, match="misfire: must be one of once, skip, all"):
        client.create_schedule(topic, "x", "m", every_ms=MINUTE, misfire="sometimes")
    with pytest.raises(NotFoundError):                  # nothing created the topic either
        client.list_schedules(topic)


@pytest.mark.parametrize("options, param", [
    ({"cron": "* * * *"}, "cron"),
    ({"cron": "61 * * * *"}, "cron"),
    ({"cron": "0 9 * * *", "timezone": "Mars/Olympus_Mons"}, "timezone"),
    ({"every_ms": 999}, "everyMillis"),
    ({"every_ms": MINUTE, "start_time": 2_000_000_000_000, "end_time": 1_000_000_000_000},
     "endTime"),
])
def test_the_servers_refusals_raise_bad_request_naming_the_parameter(client, topic, options,
                                                                      param):
    with pytest.raises(BadRequestError) as caught:
        client.create_schedule(topic, "bad", "m", **options)
    assert caught.value.code == 400
    assert caught.value.msg.startswith(param), caught.value.msg
    assert client.get_schedule(topic, "bad") is None


def test_a_bad_page_size_or_cursor_raises_bad_request_naming_it(client, topic):
    client.create_schedule(topic, "one", "m", every_ms=MINUTE, start_time=later())
    for options, param in (({"limit": 0}, "limit"), ({"cursor": "bad!"}, "cursor")):
        with pytest.raises(BadRequestError) as caught:
            client.list_schedules(topic, **options)
        assert caught.value.msg.startswith(param + ":"), caught.value.msg


# ---- delivery ----------------------------------------------------------------------------------
def test_occurrences_are_delivered_once_each_never_before_their_fire_time(client, topic):
    start = (int(time.time()) + 2) * 1000
    client.create_schedule(topic, "each-s", "beat", every_ms=1000, start_time=start, limit=3)
    expected = [f"each-s:{start + k * 1000}" for k in range(3)]
    got: list[tuple[str, int, int]] = []        # (msgId, fire time, pulled at)
    deadline = time.monotonic() + 15
    while len(got) < 3 and time.monotonic() < deadline:
        for m in client.long_poll(topic, batch=10, timeout_ms=1000):
            got.append((m.msg_id, m.trigger_time, int(time.time() * 1000)))
            client.ack(m)
    assert [g[0] for g in got] == expected
    for msg_id, trigger, pulled in got:
        assert trigger == int(msg_id.rsplit(":", 1)[1])
        assert pulled >= trigger, f"{msg_id} pulled {trigger - pulled} ms early"
    # The recurring loop marks the schedule done on its next tick after the last occurrence
    # was written, not when that occurrence is delivered: wait for it.
    done = wait_until(lambda: (lambda d: d if d.next_fire_time is None else None)(
        client.get_schedule(topic, "each-s")), 10, 0.05, "the schedule never ended")
    assert (done.sent_count, done.missed_count, done.next_fire_time) == (3, 0, None)
    assert done.last_fire_time == start + 2000 and done.next_fire_times == ()
    assert client.long_poll(topic, batch=10, timeout_ms=1500) == []     # no fourth


# ---- asyncio -----------------------------------------------------------------------------------
@run_async
async def test_the_asyncio_client_has_every_schedule_call(node, topic):
    start = later()
    async with AsyncDelayQueueClient(node.url, timeout=5) as client:
        s = await client.create_schedule(topic, "a1", "x", every_ms=MINUTE, start_time=start)
        assert s.next_fire_times == tuple(start + k * MINUTE for k in range(5))
        await client.create_schedule(topic, "a2", "y", cron="15 4 * * 1-5",
                                     timezone="America/New_York")
        page = await client.list_schedules(topic, limit=1)
        assert len(page.schedules) == 1 and page.next_cursor
        assert sorted([x.schedule_id async for x in client.iter_schedules(topic, 1)]) == \
            ["a1", "a2"]
        assert (await client.get_schedule(topic, "a2")).timezone == "America/New_York"
        assert await client.get_schedule(topic, "none") is None
        assert await client.pause_schedule(topic, "a1") is True
        assert (await client.get_schedule(topic, "a1")).paused is True
        assert await client.resume_schedule(topic, "a1") is True
        assert (await client.get_schedule(topic, "a1")).next_fire_time == start
        assert await client.delete_schedule(topic, "a1") is True
        with pytest.raises(NotFoundError):
            await client.pause_schedule(topic, "a1")
        with pytest.raises(BadRequestError) as caught:
            await client.create_schedule(topic, "bad", "m", cron="0 9 * *")
        assert caught.value.msg.startswith("cron")
        with pytest.raises(ValueError, match="exactly one"):
            await client.create_schedule(topic, "bad", "m")
        assert [x.schedule_id async for x in client.iter_schedules(topic)] == ["a2"]
