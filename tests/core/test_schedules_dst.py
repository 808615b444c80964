"""A cron schedule driven through both of Europe/Paris's 2026 clock changes by the schedules
loop on a hand-set clock, on a real Redis: each occurrence is written for the instant the
contract's DST rule names (a wall time skipped in spring fires at the first instant after the
gap; one repeated in autumn fires once, at its first occurrence), and a pull never hands one
out before it."""

from __future__ import annotations

import datetime as dt

import pytest
import redis

from delayqueue.background.recurring import Recurring
from delayqueue.background.runtime import Runtime
from delayqueue.core.clock import ManualClock
from delayqueue.core.schedules import ScheduleSpec
from delayqueue.settings.config import load_settings


def ms(text: str) -> int:
    return int(dt.datetime.fromisoformat(text).timestamp() * 1000)


@pytest.mark.parametrize("start, fires", [
    # 02:30 does not exist on 2026-03-29 (02:00 CET -> 03:00 CEST): 03:00 CEST, 01:00 UTC.
    ("2026-03-27T12:00:00+00:00", ["2026-03-28T01:30:00+00:00", "2026-03-29T01:00:00+00:00",
                                   "2026-03-30T00:30:00+00:00"]),
    # 02:30 happens twice on 2026-10-25 (03:00 CEST -> 02:00 CET): the first, 00:30 UTC.
    ("2026-10-23T12:00:00+00:00", ["2026-10-24T00:30:00+00:00", "2026-10-25T00:30:00+00:00",
                                   "2026-10-26T01:30:00+00:00"]),
])
def test_a_paris_cron_through_a_clock_change_fires_once_at_the_rules_instant(
        redis_url, start, fires):
    clock = ManualClock(ms(start))
    settings = load_settings(overrides={"redis_url": redis_url, "snapshot_dir": ""})
    rt = Runtime(settings, client=redis.Redis.from_url(redis_url, decode_responses=True),
                 clock=clock)
    loop = Recurring(rt.schedules, rt.clock, rt.keys)
    rt.schedules.create("t", ScheduleSpec("night", "b", cron="30 2 * * *",
                                          timezone="Europe/Paris"))
    delivered = []
    for fire in map(ms, fires):
        clock.advance(fire - 1 - clock.now_ms())
        loop.advance_due()
        assert rt.queue.pull("t", 10).messages == []              # never before its time
        clock.advance(1)
        loop.advance_due()
        delivered += [(m.msg_id, m.trigger_time) for m in rt.queue.pull("t", 10).messages]
        for msg_id, _ in delivered[-1:]:
            rt.queue.ack("t", msg_id)
    assert delivered == [(f"night:{fire}", fire) for fire in map(ms, fires)]
    assert rt.schedules.get("t", "night")["sentCount"] == len(fires) + 1   # + the waiting one
