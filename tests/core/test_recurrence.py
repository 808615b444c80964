"""Fire times of recurring schedules and the plans written from them (core/recurrence.py).

Expected instants are written out in UTC by hand, not computed by the module's own
helpers; the DST cases are also checked against an oracle built another way (croniter's
own walk for the wall times, and "the first instant whose wall time is at or after it" for
where each one fires), over the clock changes of four zones.
"""

from __future__ import annotations

import bisect
import calendar
import datetime as dt
import zoneinfo

import pytest
from croniter import croniter

from delayqueue.core import recurrence as recurrence_module
from delayqueue.core.recurrence import (
    MAX_MISFIRE_ALL,
    MISFIRE_GRACE_MS,
    Advance,
    RecurrenceError,
    check_limit,
    check_misfire,
    plan_advance,
    plan_start,
    recurrence,
)

MINUTE = 60_000
HOUR = 3_600_000
DAY = 86_400_000


def utc(year, month, day, hour=0, minute=0, second=0) -> int:
    """An instant in ms, from its UTC wall time."""
    return calendar.timegm((year, month, day, hour, minute, second)) * 1000


def make(cron=None, timezone=None, every_ms=None, start_ms=None, end_ms=None, created_ms=0):
    return recurrence(cron=cron, timezone=timezone, every_ms=every_ms, start_ms=start_ms,
                      end_ms=end_ms, created_ms=created_ms)


# -- everyMillis ---------------------------------------------------------------------------

def test_every_fires_at_start_plus_multiples_strictly_after_the_cursor():
    rec = make(every_ms=1500, start_ms=10_000)
    assert rec.fire_times(0, 3) == [10_000, 11_500, 13_000]
    assert rec.fire_times(9_999, 2) == [10_000, 11_500]
    assert rec.fire_times(10_000, 2) == [11_500, 13_000]        # strictly after
    assert rec.fire_times(11_499, 1) == [11_500]
    assert rec.fire_times(11_500, 1) == [13_000]
    assert rec.fire_times(10_000 + 1500 * 10**9 - 1, 1) == [10_000 + 1500 * 10**9]
    assert rec.fire_times(0, 0) == []


def test_every_without_start_time_starts_at_creation():
    rec = make(every_ms=1000, created_ms=5_000)
    assert rec.start_ms == 5_000
    assert rec.fire_times(0, 2) == [5_000, 6_000]


def test_every_stops_at_the_end_time_inclusive():
    rec = make(every_ms=1000, start_ms=0, end_ms=3_000)
    assert rec.fire_times(-1, 10) == [0, 1_000, 2_000, 3_000]
    rec = make(every_ms=1000, start_ms=0, end_ms=2_999)
    assert rec.fire_times(-1, 10) == [0, 1_000, 2_000]
    assert rec.fire_times(2_000, 10) == []


def test_integers_may_come_as_text_or_integral_floats_as_every_request_parameter():
    rec = make(every_ms="2000", start_ms=1000.0, end_ms=" 9000 ")
    assert (rec.every_ms, rec.start_ms, rec.end_ms) == (2000, 1000, 9000)
    assert rec.timezone == "UTC" and rec.cron is None


# -- cron in UTC ---------------------------------------------------------------------------

def test_cron_in_utc_fires_at_its_wall_times():
    rec = make(cron="30 2 * * *", start_ms=0)
    after = utc(2026, 5, 1, 2, 30)
    assert rec.fire_times(after, 3) == [utc(2026, 5, 2, 2, 30), utc(2026, 5, 3, 2, 30),
                                        utc(2026, 5, 4, 2, 30)]
    assert rec.fire_times(after - 1, 1) == [after]


def test_cron_names_lists_ranges_steps_and_sunday_as_0_or_7():
    rec = make(cron="0 9 * jan,JUL mon-FRI", start_ms=0)
    # 2026-01-01 is a Thursday.
    assert rec.fire_times(utc(2026, 1, 1), 3) == [utc(2026, 1, 1, 9), utc(2026, 1, 2, 9),
                                                  utc(2026, 1, 5, 9)]
    sunday = [make(cron=f"0 0 * * {d}", start_ms=0).fire_times(utc(2026, 1, 1), 2)
              for d in ("0", "7", "SUN")]
    assert sunday == [[utc(2026, 1, 4), utc(2026, 1, 11)]] * 3


@pytest.mark.parametrize("expr", [
    "*/15 9-10 * * MON-FRI", "0 0 1 * 1", "0 0 */2 * 1", "0 12 29 2 *", "5,10-20/5 */6 * * *",
    "0 0 13 * 5", "59 23 31 * *", "0 0 * * 1,7", "* * * * *", "0 0 1-31 * 0-7",
])
def test_cron_in_utc_agrees_with_croniter(expr):
    """Both day fields restricted: a day matches when either does, as croniter decides."""
    start = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    it = croniter(expr, start)
    expected = [int(it.get_next(dt.datetime).timestamp() * 1000) for _ in range(300)]
    assert make(cron=expr, start_ms=0).fire_times(utc(2026, 1, 1), 300) == expected


def test_cron_respects_start_and_end():
    rec = make(cron="0 * * * *", start_ms=utc(2026, 1, 1, 5, 30), end_ms=utc(2026, 1, 1, 8))
    assert rec.fire_times(0, 10) == [utc(2026, 1, 1, h) for h in (6, 7, 8)]
    assert rec.fire_times(utc(2026, 1, 1, 8), 1) == []


def test_a_cron_on_february_29th_waits_for_the_leap_year():
    rec = make(cron="0 12 29 2 *", start_ms=0)
    assert rec.fire_times(utc(2026, 1, 1), 2) == [utc(2028, 2, 29, 12), utc(2032, 2, 29, 12)]
    assert rec.fire_times(utc(2096, 3, 1), 1) == [utc(2104, 2, 29, 12)]    # 2100 is not one


# -- daylight saving time ------------------------------------------------------------------
# Europe/Paris 2026: 03-29 02:00 CET (+1) -> 03:00 CEST (+2), at 01:00 UTC;
#                    10-25 03:00 CEST -> 02:00 CET, at 01:00 UTC (02:00-02:59 twice).
# America/New_York 2026: 03-08 02:00 EST (-5) -> 03:00 EDT (-4), at 07:00 UTC;
#                        11-01 02:00 EDT -> 01:00 EST, at 06:00 UTC (01:00-01:59 twice).

def paris(expr):
    return make(cron=expr, timezone="Europe/Paris", start_ms=0)


def new_york(expr):
    return make(cron=expr, timezone="America/New_York", start_ms=0)


def test_paris_spring_forward_a_skipped_time_fires_at_the_end_of_the_gap():
    assert paris("30 2 * * *").fire_times(utc(2026, 3, 28), 3) == [
        utc(2026, 3, 28, 1, 30),         # 02:30 CET
        utc(2026, 3, 29, 1, 0),          # 02:30 does not exist: 03:00 CEST
        utc(2026, 3, 30, 0, 30),         # 02:30 CEST
    ]


def test_paris_spring_forward_hourly_02_00_and_03_00_are_one_fire_time():
    assert paris("0 * * * *").fire_times(utc(2026, 3, 28, 23, 30), 5) == [
        utc(2026, 3, 29, 0), utc(2026, 3, 29, 1),      # 01:00 CET; 02:00 -> 03:00 CEST
        utc(2026, 3, 29, 2), utc(2026, 3, 29, 3), utc(2026, 3, 29, 4)]


def test_paris_spring_forward_half_hourly():
    assert paris("*/30 * * * *").fire_times(utc(2026, 3, 29, 0, 0), 5) == [
        utc(2026, 3, 29, 0, 30),         # 01:30 CET
        utc(2026, 3, 29, 1, 0),          # 02:00, 02:30 and 03:00 are 03:00 CEST
        utc(2026, 3, 29, 1, 30), utc(2026, 3, 29, 2, 0), utc(2026, 3, 29, 2, 30)]


def test_paris_fall_back_a_repeated_time_fires_once_at_its_first_pass():
    assert paris("30 2 * * *").fire_times(utc(2026, 10, 24), 3) == [
        utc(2026, 10, 24, 0, 30),        # 02:30 CEST
        utc(2026, 10, 25, 0, 30),        # 02:30 CEST, not 02:30 CET (01:30 UTC)
        utc(2026, 10, 26, 1, 30),        # 02:30 CET
    ]


def test_paris_fall_back_hourly_skips_the_second_pass():
    assert paris("0 * * * *").fire_times(utc(2026, 10, 24, 23, 30), 4) == [
        utc(2026, 10, 25, 0),            # 02:00 CEST
        utc(2026, 10, 25, 2),            # 03:00 CET: 02:00 CET (01:00 UTC) was already fired
        utc(2026, 10, 25, 3), utc(2026, 10, 25, 4)]


def test_paris_fall_back_half_hourly():
    assert paris("*/30 * * * *").fire_times(utc(2026, 10, 24, 23, 45), 5) == [
        utc(2026, 10, 25, 0, 0), utc(2026, 10, 25, 0, 30),    # 02:00, 02:30 CEST
        utc(2026, 10, 25, 2, 0), utc(2026, 10, 25, 2, 30),    # 03:00, 03:30 CET
        utc(2026, 10, 25, 3, 0)]


def test_new_york_spring_forward_and_fall_back():
    assert new_york("30 2 * * *").fire_times(utc(2026, 3, 7, 8), 2) == [
        utc(2026, 3, 8, 7, 0),           # 02:30 does not exist: 03:00 EDT
        utc(2026, 3, 9, 6, 30)]          # 02:30 EDT
    assert new_york("30 1 * * *").fire_times(utc(2026, 10, 31, 6), 2) == [
        utc(2026, 11, 1, 5, 30),         # 01:30 EDT, the first pass
        utc(2026, 11, 2, 6, 30)]         # 01:30 EST
    assert new_york("0 * * * *").fire_times(utc(2026, 11, 1, 4, 30), 3) == [
        utc(2026, 11, 1, 5), utc(2026, 11, 1, 7), utc(2026, 11, 1, 8)]   # 01:00 EST skipped
    assert new_york("*/30 * * * *").fire_times(utc(2026, 3, 8, 6, 15), 3) == [
        utc(2026, 3, 8, 6, 30), utc(2026, 3, 8, 7, 0), utc(2026, 3, 8, 7, 30)]


def oracle(expr: str, zone_name: str, first_day: dt.date, days: int) -> list[int]:
    """Fire times of the wall times of ``days`` days, by brute force: every wall time of
    the days croniter gives fires at the first UTC minute whose wall time is at or after
    it; equal instants count once."""
    zone = zoneinfo.ZoneInfo(zone_name)
    origin = utc(first_day.year, first_day.month, first_day.day) - 2 * DAY
    instants = [origin + i * MINUTE for i in range((days + 4) * 1440)]
    walls, highest = [], None
    for instant in instants:
        wall = dt.datetime.fromtimestamp(instant / 1000, zone).replace(tzinfo=None, fold=0)
        highest = wall if highest is None or wall > highest else highest
        walls.append(highest)            # running highest wall time: non-decreasing
    fires = set()
    # croniter walks the wall times as if they were UTC ones: no zone, no clock change.
    first = dt.datetime.combine(first_day, dt.time(), dt.timezone.utc)
    walk = croniter(expr, first - dt.timedelta(seconds=1))
    while (wall := walk.get_next(dt.datetime)) < first + dt.timedelta(days=days):
        naive = wall.replace(tzinfo=None)
        fires.add(instants[bisect.bisect_left(walls, naive)])
    return sorted(fires)


ZONE_CHANGES = [
    ("Europe/Paris", dt.date(2026, 3, 28)), ("Europe/Paris", dt.date(2026, 10, 24)),
    ("America/New_York", dt.date(2026, 3, 7)), ("America/New_York", dt.date(2026, 10, 31)),
    ("Australia/Lord_Howe", dt.date(2026, 4, 4)),      # back 30 minutes at 02:00
    ("Australia/Lord_Howe", dt.date(2026, 10, 3)),     # forward 30 minutes at 02:00
    ("Pacific/Apia", dt.date(2011, 12, 28)),           # 2011-12-30 skipped whole
]


@pytest.mark.parametrize("zone,first_day", ZONE_CHANGES)
@pytest.mark.parametrize("expr", ["30 2 * * *", "0 * * * *", "*/30 * * * *",
                                  "15,45 1-3 * * *", "* 2 * * *", "0 0 * * *"])
def test_fire_times_across_clock_changes_match_the_brute_force_oracle(expr, zone, first_day):
    expected = oracle(expr, zone, first_day, 4)
    rec = make(cron=expr, timezone=zone, start_ms=0)
    low = utc(first_day.year, first_day.month, first_day.day) + DAY // 2   # inside the days
    high = low + 2 * DAY
    want = [f for f in expected if low < f <= high]
    got = [f for f in rec.fire_times(low, len(want) + 1) if f <= high]
    assert got == want and want
    # The counting and the backward walk the plans use see the same fire times.
    assert rec._count(low, high) == len(want)
    assert rec._last(low, high, 3) == want[-3:]
    assert rec._last(low, high, len(want) + 5) == want


@pytest.mark.parametrize("zone", ["Europe/Paris", "America/New_York", "Australia/Lord_Howe",
                                  "America/Santiago", "Asia/Kolkata"])
@pytest.mark.parametrize("expr", ["15,45 1-3 * * *", "*/7 * * 3,4,10,11 *", "0 0 1 * 1",
                                  "* 0,23 * * *"])
def test_the_count_by_day_agrees_with_the_walk_over_months_at_any_window(zone, expr):
    """The count takes whole plain days at once; its edges and clock-change days walk. A
    window starting and ending at odd milliseconds checks both against the plain walk."""
    rec = make(cron=expr, timezone=zone, start_ms=0)
    tz = zoneinfo.ZoneInfo(zone)

    def local(*wall):
        return int(dt.datetime(*wall, tzinfo=tz).timestamp() * 1000)
    windows = [(utc(2026, 2, 27, 13, 17, 11) + 123, utc(2026, 11, 9, 22, 3, 59) + 987),
               # just inside the local days at both ends, and just outside them
               (local(2026, 2, 27, 0, 0, 30), local(2026, 11, 9, 23, 58, 30)),
               (local(2026, 2, 26, 23, 59, 30), local(2026, 11, 10, 0, 0, 30))]
    for low, high in windows:
        within = []
        for fire in rec._after(low):              # at most 60 * 24 * 257 of them
            if fire > high:
                break
            within.append(fire)
        assert rec._count(low, high) == len(within) > 0
        assert rec._last(low, high, 50) == within[-50:]


def test_fire_times_strictly_increase_over_a_year_of_a_zone():
    rec = make(cron="*/20 * * * *", timezone="America/New_York", start_ms=0)
    fires = rec.fire_times(utc(2026, 1, 1), 3 * 366 * 24)
    assert all(a < b for a, b in zip(fires, fires[1:]))
    # A year of 20-minute wall times, less the repeated hour's second pass (3 of them).
    in_2026 = [f for f in fires if utc(2026, 1, 1) + 5 * HOUR <= f < utc(2027, 1, 1) + 5 * HOUR]
    assert len(in_2026) == 365 * 72 - 3


# -- plan_start -----------------------------------------------------------------------------

def test_plan_start_takes_the_first_fire_time_from_now_without_catching_up():
    rec = make(every_ms=1000, start_ms=100_000)
    assert plan_start(rec, now_ms=110_500, remaining=None) == Advance(
        ((111_000, 111_000),), 111_000, 111_000, 0)
    assert plan_start(rec, now_ms=111_000, remaining=None) == Advance(     # >= now
        ((111_000, 111_000),), 111_000, 111_000, 0)
    assert plan_start(rec, now_ms=50_000, remaining=None) == Advance(      # start later
        ((100_000, 100_000),), 100_000, 100_000, 0)


def test_plan_start_with_no_limit_left_or_no_fire_time_left_is_finished():
    rec = make(every_ms=1000, start_ms=0, end_ms=5_000)
    assert plan_start(rec, now_ms=2_500, remaining=0) == Advance((), 2_499, None, 0)
    assert plan_start(rec, now_ms=5_001, remaining=3) == Advance((), 5_000, None, 0)
    assert plan_start(rec, now_ms=5_000, remaining=1) == Advance(
        ((5_000, 5_000),), 5_000, 5_000, 0)


def test_plan_start_of_a_cron():
    rec = paris("30 2 * * *")
    assert plan_start(rec, now_ms=utc(2026, 3, 28, 12), remaining=None) == Advance(
        ((utc(2026, 3, 29, 1), utc(2026, 3, 29, 1)),), utc(2026, 3, 29, 1),
        utc(2026, 3, 29, 1), 0)


# -- plan_advance ---------------------------------------------------------------------------
# A schedule every minute from S; its cursor at S (that occurrence was written). The
# nodes come back at S + 4.5 min: S+1, S+2 and S+3 min are more than the grace late
# (missed), S+4 is late within the grace, S+5 is the next one, in the future.

S = utc(2026, 6, 1, 12)
F1, F2, F3, F4, F5 = (S + k * MINUTE for k in range(1, 6))
NOW = S + 4 * MINUTE + 30_000


def every_minute(end_ms=None):
    return make(every_ms=MINUTE, start_ms=S, end_ms=end_ms)


def advance(rec, misfire, remaining=None, after=S, now=NOW, **kw):
    return plan_advance(rec, after_ms=after, now_ms=now, misfire=misfire,
                        remaining=remaining, **kw)


def test_once_sends_the_latest_missed_fire_time_now_and_counts_all_three_missed():
    assert advance(every_minute(), "once") == Advance(
        ((F3, NOW), (F4, NOW), (F5, F5)), F5, F5, 3)


def test_skip_sends_none_of_the_missed():
    assert advance(every_minute(), "skip") == Advance(((F4, NOW), (F5, F5)), F5, F5, 3)


def test_all_sends_every_missed_fire_time_now():
    assert advance(every_minute(), "all") == Advance(
        ((F1, NOW), (F2, NOW), (F3, NOW), (F4, NOW), (F5, F5)), F5, F5, 3)


def test_the_grace_is_inclusive_at_now_minus_grace():
    rec = every_minute()
    now = F3 + MISFIRE_GRACE_MS             # F3 exactly a grace late: still within it
    assert advance(rec, "skip", now=now) == Advance(((F3, now), (F4, now), (F5, F5)), F5, F5, 2)
    now = F3 + MISFIRE_GRACE_MS + 1         # a millisecond more: missed
    assert advance(rec, "skip", now=now) == Advance(((F4, now), (F5, F5)), F5, F5, 3)
    assert advance(rec, "skip", now=F4, grace_ms=0) == Advance(((F4, F4), (F5, F5)), F5, F5, 3)


def test_on_time_the_advance_writes_only_the_next_pending_one():
    assert advance(every_minute(), "once", after=F1, now=F1 + 5) == Advance(
        ((F2, F2),), F2, F2, 0)
    # Called before the cursor's time (a clock behind): the next one after the cursor.
    assert advance(every_minute(), "all", after=F1, now=F1 - 10_000) == Advance(
        ((F2, F2),), F2, F2, 0)


@pytest.mark.parametrize("misfire,remaining,expected", [
    ("all", 2, Advance(((F1, NOW), (F2, NOW)), F2, None, 2)),
    ("all", 3, Advance(((F1, NOW), (F2, NOW), (F3, NOW)), F3, None, 3)),
    ("all", 4, Advance(((F1, NOW), (F2, NOW), (F3, NOW), (F4, NOW)), F4, None, 3)),
    ("all", 5, Advance(((F1, NOW), (F2, NOW), (F3, NOW), (F4, NOW), (F5, F5)), F5, F5, 3)),
    ("once", 1, Advance(((F3, NOW),), F3, None, 3)),
    ("once", 2, Advance(((F3, NOW), (F4, NOW)), F4, None, 3)),
    ("skip", 1, Advance(((F4, NOW),), F4, None, 3)),
    ("skip", 2, Advance(((F4, NOW), (F5, F5)), F5, F5, 3)),
    ("once", 0, Advance((), S, None, 0)),
])
def test_remaining_caps_the_occurrences_written_in_order(misfire, remaining, expected):
    assert advance(every_minute(), misfire, remaining=remaining) == expected


@pytest.mark.parametrize("misfire,expected", [
    ("all", Advance(((F1, NOW), (F2, NOW)), F2, None, 2)),
    ("once", Advance(((F2, NOW),), F2, None, 2)),
    ("skip", Advance((), F2, None, 2)),
])
def test_the_end_time_caps_the_fire_times_among_the_missed(misfire, expected):
    assert advance(every_minute(end_ms=F2), misfire) == expected


def test_the_end_time_caps_the_fire_times_after_the_missed():
    assert advance(every_minute(end_ms=F4), "once") == Advance(
        ((F3, NOW), (F4, NOW)), F4, None, 3)
    assert advance(every_minute(end_ms=F5), "skip") == Advance(
        ((F4, NOW), (F5, F5)), F5, F5, 3)
    assert advance(every_minute(end_ms=F5), "skip", after=F5, now=F5 + 1) == Advance(
        (), F5, None, 0)


def test_all_keeps_only_the_latest_max_misfire_all():
    rec = make(every_ms=1000, start_ms=0)
    now = 5000 * 1000 + 500                  # 5000 s down
    plan = plan_advance(rec, after_ms=0, now_ms=now, misfire="all", remaining=None)
    # Missed: 1000 .. 4_940_000 (before now - grace = 4_940_500); the latest 1000 of them
    # sent; 4_941_000 .. 5_000_000 within the grace; 5_001_000 next.
    assert plan.missed == 4940
    assert plan.occurrences == tuple(
        [(f, now) for f in range(3_941_000, 5_001_000, 1000)] + [(5_001_000, 5_001_000)])
    assert (plan.cursor_ms, plan.pending_ms) == (5_001_000, 5_001_000)
    # A limit cutting among the kept ones counts the skipped ones before it as missed.
    plan = plan_advance(rec, after_ms=0, now_ms=now, misfire="all", remaining=10)
    assert plan == Advance(tuple((f, now) for f in range(3_941_000, 3_951_000, 1000)),
                           3_950_000, None, 3940 + 10)


def test_cron_misfires_across_a_clock_change():
    # Hourly in Paris, down from 00:00 UTC to 05:10 UTC on the spring-forward day: fire
    # times 01:00 (03:00 CEST, which 02:00 became), 02:00, 03:00, 04:00 UTC missed;
    # 05:00 within the grace; 06:00 next.
    rec = paris("0 * * * *")
    now = utc(2026, 3, 29, 5, 0, 50)
    plan = plan_advance(rec, after_ms=utc(2026, 3, 29), now_ms=now, misfire="once",
                        remaining=None)
    assert plan == Advance(((utc(2026, 3, 29, 4), now), (utc(2026, 3, 29, 5), now),
                            (utc(2026, 3, 29, 6), utc(2026, 3, 29, 6))),
                           utc(2026, 3, 29, 6), utc(2026, 3, 29, 6), 4)


def test_misfire_policy_is_checked():
    with pytest.raises(RecurrenceError) as err:
        plan_advance(every_minute(), after_ms=S, now_ms=NOW, misfire="later", remaining=None)
    assert err.value.param == "misfire"


# -- bounded work after huge outages ---------------------------------------------------------

@pytest.fixture
def walked(monkeypatch):
    """Counts the cron wall times the module turns into instants."""
    seen = [0]
    real = recurrence_module._day_fires

    def counting(*args, **kwargs):
        for fire in real(*args, **kwargs):
            seen[0] += 1
            yield fire
    monkeypatch.setattr(recurrence_module, "_day_fires", counting)
    return seen


def test_a_month_down_on_a_per_second_schedule_plans_arithmetically():
    rec = make(every_ms=1000, start_ms=0)
    month = 30 * DAY
    for misfire, written in (("once", 1), ("skip", 0), ("all", MAX_MISFIRE_ALL)):
        plan = plan_advance(rec, after_ms=0, now_ms=month, misfire=misfire, remaining=None)
        assert plan.missed == (month - MISFIRE_GRACE_MS) // 1000 - 1
        assert len(plan.occurrences) == written + 61 + 1
        assert plan.pending_ms == month + 1000


@pytest.mark.parametrize("misfire", ["once", "skip", "all"])
def test_a_year_down_on_a_per_minute_cron_counts_exactly_without_walking_each(misfire, walked):
    rec = paris("* * * * *")
    plan = plan_advance(rec, after_ms=utc(2026, 1, 1), now_ms=utc(2027, 1, 1),
                        misfire=misfire, remaining=None)
    # Every UTC minute of 2026 after 00:00 and before 23:59 (a grace before the new
    # year), but the 60 of the repeated hour's second pass on 10-25.
    assert plan.missed == 365 * 1440 - 2 - 60
    kept = {"once": 1, "skip": 0, "all": MAX_MISFIRE_ALL}[misfire]
    late = tuple((utc(2027, 1, 1) - k * MINUTE, utc(2027, 1, 1)) for k in (1, 0))
    assert plan.occurrences[kept:] == late + ((utc(2027, 1, 1, 0, 1),) * 2,)
    assert plan.occurrences[:kept] == tuple(
        (utc(2027, 1, 1) - k * MINUTE, utc(2027, 1, 1)) for k in range(kept + 1, 1, -1))
    assert walked[0] < 12 * 1440        # a few days' wall times, not 525,000


# -- bad input --------------------------------------------------------------------------------

FIELDS = "cron must have 5 fields: minute hour day-of-month month day-of-week"
STANDARD = ("cron must use standard cron only: numbers, *, ranges a-b, steps /n, lists a,b, "
            "month names JAN-DEC and day names SUN-SAT (no L, W, #, H, ? or @)")


def refusal(**kw):
    with pytest.raises(RecurrenceError) as err:
        make(**kw)
    assert isinstance(err.value, ValueError)
    return err.value.param, str(err.value)


@pytest.mark.parametrize("kw,param,rule", [
    ({"cron": "* * * * *", "every_ms": 1000}, "cron", "give cron or everyMillis, not both"),
    ({}, "cron", "give cron or everyMillis"),
    ({"cron": " ", "every_ms": ""}, "cron", "give cron or everyMillis"),
    ({"cron": "* * * *"}, "cron", FIELDS),
    ({"cron": "0 * * * * *"}, "cron", FIELDS),
    ({"cron": "0 0 * * * 2026"}, "cron", FIELDS),
    ({"cron": 5}, "cron", FIELDS),
    ({"cron": "@daily"}, "cron", FIELDS),
    ({"cron": "@daily * * * *"}, "cron", STANDARD),
    ({"cron": "0 0 L * *"}, "cron", STANDARD),
    ({"cron": "0 0 1W * *"}, "cron", STANDARD),
    ({"cron": "0 0 * * 5#2"}, "cron", STANDARD),
    ({"cron": "H * * * *"}, "cron", STANDARD),
    ({"cron": "0 0 ? * *"}, "cron", STANDARD),
    ({"cron": "0 0 * MON *"}, "cron", STANDARD),
    ({"cron": "0 0 * * JAN"}, "cron", STANDARD),
    ({"cron": "0 0 * * FRIDAY"}, "cron", STANDARD),
    ({"cron": "5-2 * * * *"}, "cron", "cron ranges must go from low to high"),
    ({"cron": "0 0 * * SAT-SUN"}, "cron", "cron ranges must go from low to high"),
    ({"cron": "0 0 30 2 *"}, "cron", "cron must match at least one date"),
    ({"cron": "0 0 31 4,6,9,11 *"}, "cron", "cron must match at least one date"),
    ({"cron": "* * * * *", "timezone": "Mars/Olympus"}, "timezone",
     "timezone must be an IANA time zone name"),
    ({"cron": "* * * * *", "timezone": "/etc/passwd"}, "timezone",
     "timezone must be an IANA time zone name"),
    ({"cron": "* * * * *", "timezone": "../../etc/localtime"}, "timezone",
     "timezone must be an IANA time zone name"),
    ({"cron": "* * * * *", "timezone": "europe/paris"}, "timezone",
     "timezone must be an IANA time zone name"),
    ({"every_ms": 1000, "timezone": 3}, "timezone", "timezone must be an IANA time zone name"),
    ({"every_ms": 999}, "everyMillis", "everyMillis must be an integer >= 1000"),
    ({"every_ms": 0}, "everyMillis", "everyMillis must be an integer >= 1000"),
    ({"every_ms": -5000}, "everyMillis", "everyMillis must be an integer >= 1000"),
    ({"every_ms": 1500.5}, "everyMillis", "everyMillis must be an integer >= 1000"),
    ({"every_ms": "1s"}, "everyMillis", "everyMillis must be an integer >= 1000"),
    ({"every_ms": True}, "everyMillis", "everyMillis must be an integer >= 1000"),
    ({"every_ms": 1000, "start_ms": -1}, "startTime",
     "startTime must be an integer time in ms from 0 to 253402300799999"),
    ({"every_ms": 1000, "start_ms": "soon"}, "startTime",
     "startTime must be an integer time in ms from 0 to 253402300799999"),
    ({"every_ms": 1000, "start_ms": 253402300800000}, "startTime",
     "startTime must be an integer time in ms from 0 to 253402300799999"),
    ({"every_ms": 1000, "end_ms": "x"}, "endTime",
     "endTime must be an integer time in ms from 0 to 253402300799999"),
    ({"every_ms": 1000, "start_ms": 5000, "end_ms": 5000}, "endTime",
     "endTime must be after startTime"),
    ({"every_ms": 1000, "created_ms": 5000, "end_ms": 4000}, "endTime",
     "endTime must be after startTime"),
])
def test_every_bad_input_names_its_parameter_and_rule(kw, param, rule):
    assert refusal(**kw) == (param, rule)


@pytest.mark.parametrize("expr", ["60 * * * *", "*/0 * * * *", "0 24 * * *", "0 0 0 * *",
                                  "0 0 * 13 *", "0 0 * * 8", "1,,2 * * * *", "-1 * * * *"])
def test_a_cron_value_out_of_its_field_is_refused_naming_cron(expr):
    param, rule = refusal(cron=expr)
    assert param == "cron" and rule.startswith("cron must be a valid cron expression: ")


def test_valid_edges_are_accepted():
    assert make(cron="0 0 29 2 *").cron == "0 0 29 2 *"
    assert make(cron="  0   0 * * 1-5 ").cron == "0 0 * * 1-5"           # spaces tidied
    assert make(cron="* * * * *", timezone="").timezone == "UTC"
    assert make(cron="* * * * *", timezone="Etc/GMT+5").timezone == "Etc/GMT+5"
    assert make(every_ms=1000, start_ms=0, end_ms=1).end_ms == 1


def test_misfire_and_limit_checks():
    assert [check_misfire(p) for p in ("once", "skip", "all")] == ["once", "skip", "all"]
    for bad in ("ONCE", "", "later", None):
        with pytest.raises(RecurrenceError) as err:
            check_misfire(bad)
        assert (err.value.param, str(err.value)) == ("misfire",
                                                     "misfire must be one of once, skip, all")
    assert check_limit(None) is None and check_limit("") is None
    assert check_limit(1) == 1 and check_limit("25") == 25
    for bad in (0, -1, "x", 2.5, True):
        with pytest.raises(RecurrenceError) as err:
            check_limit(bad)
        assert (err.value.param, str(err.value)) == ("limit", "limit must be an integer >= 1")


# -- the ends of time and stored schedules ----------------------------------------------------

def test_fire_times_stop_at_the_end_of_year_9999_in_any_zone():
    last_ms = 253_402_300_799_999
    assert make(every_ms=1000, start_ms=0).fire_times(last_ms - 2_500, 5) == [
        last_ms - 1_999, last_ms - 999]
    # 00:00 on Dec 31st 9999 in UTC+14 is Dec 30th 10:00 UTC; nothing follows it.
    rec = make(cron="0 0 * * *", timezone="Pacific/Kiritimati", start_ms=0)
    assert rec.fire_times(last_ms - 2 * DAY, 5) == [last_ms + 1 - DAY - 14 * HOUR]
    assert plan_advance(rec, after_ms=last_ms - DAY, now_ms=last_ms, misfire="all",
                        remaining=None) == Advance((), last_ms - DAY, None, 0)


def test_a_stored_recurrence_rebuilt_without_validation_plans_the_same():
    made = make(cron="*/30 * * * *", timezone="Europe/Paris", start_ms=utc(2026, 3, 1))
    again = recurrence_module.Recurrence(cron=made.cron, timezone=made.timezone, every_ms=None,
                                         start_ms=made.start_ms, end_ms=None)
    assert again == made
    kwargs = dict(after_ms=utc(2026, 3, 29), now_ms=utc(2026, 3, 29, 3), misfire="all",
                  remaining=None)
    assert plan_advance(again, **kwargs) == plan_advance(made, **kwargs)


def test_a_cursor_before_the_start_time_counts_nothing_before_it_missed():
    rec = make(every_ms=MINUTE, start_ms=S)
    now = S + 2 * MINUTE + 30_000            # S, S+1 missed; S+2 within the grace
    assert plan_advance(rec, after_ms=0, now_ms=now, misfire="all", remaining=None) == Advance(
        ((S, now), (F1, now), (F2, now), (F3, F3)), F3, F3, 2)
