"""When a recurring schedule fires: its fire times, and what to write after a wait or an outage.

Pure Python, no Redis: the schedule scripts and loop (on top of this module) store a
``Recurrence``'s parameters and a cursor, and ask ``plan_start`` / ``plan_advance`` which
occurrences to write. Every rule below is stated once here, so it can be copied into
the API documents as it is.

**Two kinds of schedule**, exactly one per schedule:

- ``everyMillis`` (an integer >= 1000): fire times ``startTime + k * everyMillis`` for
  k = 0, 1, 2, ...: a fixed interval of real time, so the time zone and its clock changes
  play no part.
- ``cron``: exactly 5 fields, ``minute hour day-of-month month day-of-week``, read as wall
  clock times in ``timezone`` (an IANA name such as ``Europe/Paris``; ``UTC`` by default).
  Accepted, as standard cron: numbers, ``*``, ranges ``a-b`` (low to high), steps ``*/n``
  and ``a-b/n``, lists ``a,b``, month names ``JAN``-``DEC`` and day names ``SUN``-``SAT``
  (any case), 0 or 7 for Sunday. Refused: a seconds or year field, croniter's extensions
  (``L``, ``W``, ``#``, ``H``, ``?``), macros (``@daily``, ...), a range from high to low,
  and an expression that matches no date (``0 0 30 2 *``). When both day-of-month and
  day-of-week are restricted, a day matches when either does, as in cron; otherwise both
  must. A field is restricted unless it is ``*`` (or ``*/1``), as croniter decides: so
  ``0 0 */2 * 1`` fires on odd days and on Mondays (Vixie cron, which looks for a leading
  ``*``, would fire on odd Mondays).
  croniter parses the expression (its ``expanded`` fields); the wall times are then walked
  day by day here, which counts an outage of a year of per-minute fire times in
  milliseconds, where croniter's ``get_next`` takes about 60 us a fire time.

**Daylight saving time** (cron only): a wall time that does not exist, skipped when the
clocks go forward, fires at the first instant after the gap (``30 2 * * *`` in Europe/Paris
on 2026-03-29 fires at 03:00 CEST, 01:00 UTC); a wall time that occurs twice, when the
clocks go back, fires once, at its first occurrence (02:30 CEST on 2026-10-25, 00:30 UTC,
not 02:30 CET). Fire times are instants, strictly increasing and never repeated: two wall
times that land on one instant (02:00 and 03:00 on the spring-forward day of
``0 * * * *``) are one fire time.

**Bounds.** ``startTime`` (default: the schedule's creation time) is the earliest fire
time; ``endTime``, when given, is the latest (inclusive) and must be after ``startTime``;
``limit`` caps the number of occurrences written over the schedule's life. Fire times end
with year 9999.

**Misfires.** A fire time is *missed* when the schedule is looked at more than the grace
(``MISFIRE_GRACE_MS``, 60 s) after it, as after an outage of every node (one exactly the
grace late is within it). What
``misfire`` does with the missed fire times of one look:

- ``once``: one occurrence for the latest missed fire time, triggered now;
- ``skip``: none;
- ``all``: one occurrence per missed fire time, triggered now, but only the latest
  ``MAX_MISFIRE_ALL`` (1000): the earlier ones are skipped.

A fire time late but within the grace is written as usual, triggered now; the next fire
time in the future is written as a waiting occurrence triggered at its fire time (the
*pending* one); when ``endTime`` or ``limit`` leaves none, the schedule is finished. An
occurrence is (fireTime, triggerTime); ``limit`` counts the occurrences
written, in fire time order, so skipped fire times use none of it. ``missed`` counts the
fire times not sent at their own time because they were past the grace: with ``once`` the
one sent late counts too, and so do the ones ``all`` sends late; the late ones within the
grace do not. The count is exact, for cron too, and never costs an iteration per missed
fire time. A schedule created with a past ``startTime`` does not catch up: its first
occurrence is its first fire time from now on, and nothing counts as missed.
"""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterator

from croniter import CroniterError, croniter

from delayqueue.settings.value import ValueProblem, parse_int

MISFIRE_GRACE_MS = 60_000
MISFIRE_POLICIES = ("once", "skip", "all")
MAX_MISFIRE_ALL = 1000
MIN_EVERY_MS = 1000
# The last millisecond of year 9999: Python's datetimes end there, and so do fire times.
MAX_TIME_MS = 253_402_300_799_999

CRON_FIELDS = "minute hour day-of-month month day-of-week"
_UTC = dt.timezone.utc
_EPOCH = dt.datetime(1970, 1, 1)
_MS = dt.timedelta(milliseconds=1)
_SECOND = dt.timedelta(seconds=1)
_DAY = dt.timedelta(days=1)
_LAST_DAY = dt.date.max
_CRON_WORD = re.compile(r"[A-Za-z]+")
_CRON_CHARS = re.compile(r"[0-9A-Za-z*,/\-]+")
_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)   # February in a leap year
_NAMES = {3: dict(zip(_MONTHS, range(1, 13))), 4: dict(zip(_DAYS, range(7)))}


class RecurrenceError(ValueError):
    """A bad schedule parameter: .param (the API parameter name: cron, timezone, everyMillis,
    startTime, endTime, limit, misfire) and str() the rule, for the 400 answer."""

    def __init__(self, param: str, rule: str) -> None:
        super().__init__(rule)
        self.param = param
        self.rule = rule


@dataclass(frozen=True)
class _Cron:
    """A cron expression's expanded fields, as sets, and how its two day fields combine."""

    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int] | None      # None: every day of the month
    months: frozenset[int] | None
    weekdays: frozenset[int] | None  # cron's numbering: 0 is Sunday
    day_or: bool

    def day_matches(self, day: dt.date) -> bool:
        if self.months is not None and day.month not in self.months:
            return False
        dom = self.days is None or day.day in self.days
        dow = self.weekdays is None or day.isoweekday() % 7 in self.weekdays
        return (dom or dow) if self.day_or else (dom and dow)

    def matches_some_date(self) -> bool:
        """False for a day of the month that no month allowed has (``0 0 30 2 *``): the
        only way a valid expression never fires, since every month has every weekday."""
        if self.day_or or self.days is None:
            return True
        months = self.months or range(1, 13)
        return any(day <= _MONTH_DAYS[month - 1] for month in months for day in self.days)

    def times(self, day: dt.date, reverse: bool = False) -> Iterator[dt.datetime]:
        """The day's wall times that match, as naive datetimes (the day must match)."""
        hours = reversed(self.hours) if reverse else self.hours
        for hour in hours:
            minutes = reversed(self.minutes) if reverse else self.minutes
            for minute in minutes:
                yield dt.datetime(day.year, day.month, day.day, hour, minute)


@dataclass(frozen=True)
class Recurrence:
    cron: str | None          # 5 fields (minute hour day-of-month month day-of-week)
    timezone: str             # IANA name, "UTC" by default
    every_ms: int | None      # exactly one of cron / every_ms
    start_ms: int             # startTime, else the creation time
    end_ms: int | None        # endTime (inclusive), None: no end

    def fire_times(self, after_ms: int, n: int) -> list[int]:
        """The first n fire times strictly after after_ms (and >= start_ms, <= end_ms), in ms."""
        out: list[int] = []
        if n <= 0:
            return out
        for fire in self._after(after_ms):
            out.append(fire)
            if len(out) >= n:
                break
        return out

    # The three walks the plans need. Each honours start_ms and end_ms.

    def _after(self, after_ms: int) -> Iterator[int]:
        """Fire times > after_ms, ascending, to the end (a generator: take what you need)."""
        low = max(after_ms, self.start_ms - 1)
        high = MAX_TIME_MS if self.end_ms is None else self.end_ms
        if self.every_ms is not None:
            k = _first_k_after(self.start_ms, self.every_ms, low)
            while True:
                fire = self.start_ms + k * self.every_ms
                if fire > high:
                    return
                yield fire
                k += 1
        yield from _cron_after(_parsed_cron(self.cron), _zone(self.timezone), low, high)

    def _count(self, after_ms: int, upto_ms: int) -> int:
        """How many fire times lie in (after_ms, upto_ms]: arithmetic, or a walk by day."""
        low, high = self._window(after_ms, upto_ms)
        if high <= low:
            return 0
        if self.every_ms is not None:
            first = _first_k_after(self.start_ms, self.every_ms, low)
            last = (high - self.start_ms) // self.every_ms
            return max(0, last - first + 1)
        return _cron_count(_parsed_cron(self.cron), _zone(self.timezone), low, high)

    def _last(self, after_ms: int, upto_ms: int, n: int) -> list[int]:
        """The latest n fire times in (after_ms, upto_ms], ascending."""
        low, high = self._window(after_ms, upto_ms)
        if n <= 0 or high <= low:
            return []
        if self.every_ms is not None:
            first = _first_k_after(self.start_ms, self.every_ms, low)
            last = (high - self.start_ms) // self.every_ms
            ks = range(max(first, last - n + 1), last + 1)
            return [self.start_ms + k * self.every_ms for k in ks]
        out = []
        for fire in _cron_before(_parsed_cron(self.cron), _zone(self.timezone), low, high):
            out.append(fire)
            if len(out) >= n:
                break
        out.reverse()
        return out

    def _window(self, after_ms: int, upto_ms: int) -> tuple[int, int]:
        low = max(after_ms, self.start_ms - 1)
        high = upto_ms if self.end_ms is None else min(upto_ms, self.end_ms)
        return low, min(high, MAX_TIME_MS)


def recurrence(*, cron: Any, timezone: Any, every_ms: Any, start_ms: Any, end_ms: Any,
               created_ms: int) -> Recurrence:
    """Validate and build (raises RecurrenceError naming the parameter).

    Absent parameters are None (an empty text counts as absent). Integers may come as
    ints, integral floats or their text, as every request parameter (settings/value.py).
    """
    cron = _absent(cron)
    every_ms = _absent(every_ms)
    if cron is not None and every_ms is not None:
        raise RecurrenceError("cron", "give cron or everyMillis, not both")
    if cron is None and every_ms is None:
        raise RecurrenceError("cron", "give cron or everyMillis")
    zone_name = _absent(timezone)
    zone_name = "UTC" if zone_name is None else zone_name
    _zone_checked(zone_name)
    if every_ms is not None:
        every_ms = _integer("everyMillis", every_ms, MIN_EVERY_MS, None,
                            f"everyMillis must be an integer >= {MIN_EVERY_MS}")
    else:
        cron = _cron_checked(cron)
    start = _absent(start_ms)
    start = created_ms if start is None else _integer("startTime", start, 0, MAX_TIME_MS)
    end = _absent(end_ms)
    if end is not None:
        end = _integer("endTime", end, 0, MAX_TIME_MS)
        if end <= start:
            raise RecurrenceError("endTime", "endTime must be after startTime")
    return Recurrence(cron=cron, timezone=zone_name, every_ms=every_ms, start_ms=start,
                      end_ms=end)


def check_misfire(value: str) -> str:
    """The misfire policy, or RecurrenceError(param="misfire") unless it is one."""
    if value not in MISFIRE_POLICIES:
        raise RecurrenceError("misfire", "misfire must be one of " + ", ".join(MISFIRE_POLICIES))
    return value


def check_limit(value: Any) -> int | None:
    """The number of occurrences a schedule writes over its life: None (absent) is no limit."""
    value = _absent(value)
    if value is None:
        return None
    return _integer("limit", value, 1, None, "limit must be an integer >= 1")


@dataclass(frozen=True)
class Advance:
    occurrences: tuple[tuple[int, int], ...]  # (fireTime, triggerTime) to write now, in order
    cursor_ms: int          # the last fire time this advance accounts for (written or missed)
    pending_ms: int | None  # fire time of the occurrence left waiting (> now), None: finished
    missed: int             # fire times more than the grace late: sent late, collapsed or
    #                         skipped (counted up to cursor_ms, whatever the policy)


def plan_advance(rec: Recurrence, *, after_ms: int, now_ms: int, misfire: str,
                 remaining: int | None, grace_ms: int = MISFIRE_GRACE_MS) -> Advance:
    """The occurrences to write for the fire times after the cursor ``after_ms``, at now_ms.

    The fire times before ``now_ms - grace_ms`` are missed and go as ``misfire`` says; the
    ones up to now_ms are written triggered now; the first after now_ms is the pending one.
    ``remaining`` (None: no limit) caps the occurrences written, in order: when it runs out
    the advance stops there (cursor at the last written, pending None) and the missed
    count covers the fire times up to the cursor. Bounded: every step is arithmetic or a
    walk by day, never one iteration per missed fire time.
    """
    check_misfire(misfire)
    if grace_ms < 0:
        raise ValueError("grace_ms must be >= 0")
    if remaining is not None and remaining <= 0:
        return Advance((), after_ms, None, 0)
    budget = MAX_TIME_MS if remaining is None else remaining
    written: list[tuple[int, int]] = []
    cursor = after_ms
    missed = 0
    late_before = now_ms - grace_ms           # a fire time < this one is missed
    count = rec._count(after_ms, late_before - 1)
    if count:
        kept = {"once": 1, "skip": 0, "all": min(count, MAX_MISFIRE_ALL)}[misfire]
        tail = rec._last(after_ms, late_before - 1, max(kept, 1))
        sent = tail[len(tail) - kept:] if kept else []
        if len(sent) > budget:               # the limit ends the schedule among the missed
            sent = sent[:budget]
            written = [(fire, now_ms) for fire in sent]
            return Advance(tuple(written), sent[-1], None, count - kept + len(sent))
        written = [(fire, now_ms) for fire in sent]
        budget -= len(sent)
        cursor = tail[-1]
        missed = count
    for fire in rec._after(cursor):
        if budget <= 0:
            return Advance(tuple(written), cursor, None, missed)
        if fire > now_ms:
            written.append((fire, fire))
            return Advance(tuple(written), fire, fire, missed)
        written.append((fire, now_ms))      # late, but within the grace
        budget -= 1
        cursor = fire
    return Advance(tuple(written), cursor, None, missed)


def plan_start(rec: Recurrence, *, now_ms: int, remaining: int | None) -> Advance:
    """A new schedule's first occurrence: its first fire time >= max(startTime, now), as the
    pending one. Nothing before now is written or counted missed (no catching up). With
    nothing to write (remaining 0, or no fire time left before endTime) the cursor is
    max(startTime, now) - 1 and pending_ms None."""
    after = max(rec.start_ms, now_ms) - 1
    if remaining is not None and remaining <= 0:
        return Advance((), after, None, 0)
    for fire in rec._after(after):
        return Advance(((fire, fire),), fire, fire, 0)
    return Advance((), after, None, 0)


# Validation.

def _absent(value: Any) -> Any:
    return None if value is None or (isinstance(value, str) and value.strip() == "") else value


def _integer(param: str, raw: Any, low: int, high: int | None, rule: str | None = None) -> int:
    """The request's integer rules (settings/value.py), refused under this parameter's name."""
    rule = rule or f"{param} must be an integer time in ms from {low} to {high}"
    try:
        return parse_int(raw, low, high, rule)
    except ValueProblem:
        raise RecurrenceError(param, rule) from None


def _zone_checked(name: Any) -> zoneinfo.ZoneInfo:
    rule = "timezone must be an IANA time zone name"
    if not isinstance(name, str) or name not in _zone_names():
        raise RecurrenceError("timezone", rule)
    try:
        return _zone(name)
    except (KeyError, ValueError, OSError):
        raise RecurrenceError("timezone", rule) from None


@lru_cache(maxsize=1)
def _zone_names() -> frozenset[str]:
    # The names tzdata (or the system) lists: a file path or "localtime" is not a zone name.
    return frozenset(zoneinfo.available_timezones())


@lru_cache(maxsize=512)
def _zone(name: str) -> zoneinfo.ZoneInfo:
    return zoneinfo.ZoneInfo(name)


def _cron_checked(expr: Any) -> str:
    if not isinstance(expr, str):
        raise RecurrenceError("cron", f"cron must have 5 fields: {CRON_FIELDS}")
    fields = expr.split()
    if len(fields) != 5:
        raise RecurrenceError("cron", f"cron must have 5 fields: {CRON_FIELDS}")
    standard = ("cron must use standard cron only: numbers, *, ranges a-b, steps /n, lists "
                "a,b, month names JAN-DEC and day names SUN-SAT (no L, W, #, H, ? or @)")
    for position, field in enumerate(fields):
        if not _CRON_CHARS.fullmatch(field):
            raise RecurrenceError("cron", standard)
        for word in _CRON_WORD.findall(field):
            if word.upper() not in _NAMES.get(position, {}):
                raise RecurrenceError("cron", standard)
        for item in field.split(","):
            span = item.split("/")[0]
            if "-" in span:
                low, _, high = span.partition("-")
                if _cron_number(position, low) > _cron_number(position, high):
                    raise RecurrenceError("cron", "cron ranges must go from low to high")
    text = " ".join(fields)
    try:
        _parsed_cron(text)
    except (CroniterError, ValueError, KeyError, IndexError) as problem:
        raise RecurrenceError("cron", f"cron must be a valid cron expression: {problem}") from None
    if not _parsed_cron(text).matches_some_date():
        raise RecurrenceError("cron", "cron must match at least one date")
    return text


def _cron_number(position: int, text: str) -> int:
    names = _NAMES.get(position, {})
    if text.upper() in names:
        return names[text.upper()]
    try:
        return int(text)
    except ValueError:
        return -1       # croniter refuses it below, with its own words


@lru_cache(maxsize=512)
def _parsed_cron(expr: str) -> _Cron:
    expanded = croniter(expr, dt.datetime(2000, 1, 1, tzinfo=_UTC)).expanded

    def values(i: int, span: range) -> tuple[int, ...]:
        return tuple(span) if expanded[i][0] == "*" else tuple(sorted(set(expanded[i])))

    def subset(i: int) -> frozenset[int] | None:
        return None if expanded[i][0] == "*" else frozenset(int(v) % 7 if i == 4 else int(v)
                                                            for v in expanded[i])

    return _Cron(minutes=values(0, range(60)), hours=values(1, range(24)),
                 days=subset(2), months=subset(3), weekdays=subset(4),
                 # croniter's rule: both day fields restricted -> either may match
                 day_or=expanded[2][0] != "*" and expanded[4][0] != "*")


# Time arithmetic.

def _first_k_after(start: int, every: int, after: int) -> int:
    """The smallest k with start + k * every > after."""
    return 0 if after < start else (after - start) // every + 1


def _ms(instant: dt.datetime) -> int:
    return (instant.astimezone(_UTC).replace(tzinfo=None) - _EPOCH) // _MS


def _wall(ms: int, zone: zoneinfo.ZoneInfo) -> dt.datetime:
    """The zone's wall time at an instant, naive, with its fold."""
    aware = (_EPOCH + ms * _MS).replace(tzinfo=_UTC).astimezone(zone)
    return aware.replace(tzinfo=None, fold=aware.fold)


def _instant(naive: dt.datetime, zone: zoneinfo.ZoneInfo) -> int:
    """The instant (ms) a wall time fires at: its first occurrence when it occurs twice, the
    first instant after the gap when it does not exist."""
    before = zone.utcoffset(naive)               # fold=0 reads the offset before a change
    after = zone.utcoffset(_folded(naive))       # fold=1 the offset after it
    if after <= before:
        # One offset, or a wall time the clocks pass twice: fold=0 is its first pass.
        return _ms_naive(naive) - before // _MS
    # A gap: wall times [gap, gap + jump) do not exist, and the first instant after them is
    # the transition, gap - before. Find gap (a whole second in tzdata) by halving between
    # naive - jump (before the gap) and naive (in it).
    jump = (after - before) // _SECOND
    base = naive - (after - before)
    low, high = 0, jump
    while high - low > 1:
        mid = (low + high) // 2
        probe = base + mid * _SECOND
        if zone.utcoffset(probe) < zone.utcoffset(_folded(probe)):
            high = mid
        else:
            low = mid
    return _ms_naive(base + high * _SECOND) - before // _MS


def _folded(naive: dt.datetime) -> dt.datetime:
    # The constructor: datetime.replace(fold=1) costs ten times as much.
    return dt.datetime(naive.year, naive.month, naive.day, naive.hour, naive.minute,
                       naive.second, naive.microsecond, None, fold=1)


def _near_day(ms: int, days: int) -> dt.date:
    """The UTC day of an instant moved by ``days``, kept inside datetime's range: a wall
    day is within a day of the UTC one (offsets stay under 24 h), so two days cover it."""
    ms = min(max(ms, -86_400_000 * 365), MAX_TIME_MS)
    day = (_EPOCH + ms * _MS).date()
    room = (_LAST_DAY - day).days
    return day + dt.timedelta(days=min(days, room))


def _plain_day(day: dt.date, zone: zoneinfo.ZoneInfo) -> dt.timedelta | None:
    """The day's one UTC offset when no clock change falls inside it (from its midnight to
    the next), else None."""
    midnight = dt.datetime(day.year, day.month, day.day)
    if day == _LAST_DAY:
        return None                      # no next midnight to look at: walk its times
    offsets = {zone.utcoffset(midnight), zone.utcoffset(_folded(midnight)),
               zone.utcoffset(midnight + _DAY)}
    return offsets.pop() if len(offsets) == 1 else None


def _day_fires(cron: _Cron, day: dt.date, zone: zoneinfo.ZoneInfo,
               offset: dt.timedelta | None | bool = False, reverse: bool = False
               ) -> Iterator[int]:
    """The instants of a matching day's wall times, in wall order (ascending, or descending
    with ``reverse``): arithmetic on a day with one offset, ``_instant`` on a day the clocks
    change. ``offset`` is the day's ``_plain_day`` when the caller has it already."""
    if offset is False:
        offset = _plain_day(day, zone)
    if offset is None:
        for naive in cron.times(day, reverse):
            yield _instant(naive, zone)
        return
    base = _ms_naive(dt.datetime(day.year, day.month, day.day)) - offset // _MS
    hours = reversed(cron.hours) if reverse else cron.hours
    minutes = tuple(reversed(cron.minutes)) if reverse else cron.minutes
    for hour in hours:
        at = base + hour * 3_600_000
        for minute in minutes:
            yield at + minute * 60_000


def _cron_after(cron: _Cron, zone: zoneinfo.ZoneInfo, low: int, high: int) -> Iterator[int]:
    """The cron's fire times in (low, high], ascending.

    The wall-to-instant map is non-decreasing (a gap's times all land on its end; a repeated
    hour's times on their first pass), so walking wall times in order and keeping the
    instants above the last one given yields each fire time once. Walking starts two days
    before low's wall day: a gap ending after midnight may map earlier days' times above low.
    """
    if low >= high:
        return
    last = low
    for day in _days(_near_day(low, -2), _near_day(high, 2)):
        if cron.day_matches(day):
            for fire in _day_fires(cron, day, zone):
                if fire > high:
                    return
                if fire > last:
                    last = fire
                    yield fire


def _cron_before(cron: _Cron, zone: zoneinfo.ZoneInfo, low: int, high: int) -> Iterator[int]:
    """The cron's fire times in (low, high], descending (the mirror of _cron_after)."""
    if low >= high:
        return
    previous = None
    for day in _days(_near_day(high, 2), _near_day(low, -2), backwards=True):
        if cron.day_matches(day):
            for fire in _day_fires(cron, day, zone, reverse=True):
                if fire <= low:
                    return
                if fire <= high and fire != previous:
                    previous = fire
                    yield fire


def _cron_count(cron: _Cron, zone: zoneinfo.ZoneInfo, low: int, high: int) -> int:
    """How many cron fire times lie in (low, high], without a step per fire time: a day with
    no clock change that lies wholly inside counts hours x minutes at once; the rest (the
    two ends, the days the clocks change) walk their wall times."""
    count = 0
    last = low
    per_day = len(cron.hours) * len(cron.minutes)
    for day in _days(_near_day(low, -2), _near_day(high, 2)):
        if not cron.day_matches(day):
            continue
        offset = _plain_day(day, zone)
        if offset is not None:
            start = _ms_naive(dt.datetime(day.year, day.month, day.day)) - offset // _MS
            if start > last and start + 86_400_000 - 1 <= high:
                count += per_day
                last = _ms_naive(next(cron.times(day, reverse=True))) - offset // _MS
                continue
        for fire in _day_fires(cron, day, zone, offset):
            if fire > high:
                return count
            if fire > last:
                last = fire
                count += 1
    return count


def _days(first: dt.date, last: dt.date, backwards: bool = False) -> Iterator[dt.date]:
    """The days from first to last, both included (stepping past date.max would raise)."""
    step = -_DAY if backwards else _DAY
    day = first
    while (day >= last) if backwards else (day <= last):
        yield day
        if day == last:
            return
        day += step


def _ms_naive(naive: dt.datetime) -> int:
    return (naive - _EPOCH) // _MS
