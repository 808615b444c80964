"""The topic page's "Schedules" section: the topic's recurring schedules, a page at a time.

Each row is one schedule as ``Schedules.list`` shows it (core/schedules.py: listSchedules's
pages, by scheduleId) with its next fire times worked out here from its rule
(``recurrence_of``: pure Python, no Redis), so a page costs ``Schedules.list``'s round trips
whatever it shows. Pages go forward by listSchedules's cursor (the page's ``schedCursor``);
there is no "previous" but the first page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from delayqueue.core.errors import BadRequest
from delayqueue.core.recurrence import RecurrenceError
from delayqueue.core.schedules import decode_cursor, recurrence_of, remaining
from delayqueue.http.params import Params
from delayqueue.http.request import runtime

SCHEDULE_PAGE = 25     # schedules a page shows
NEXT_SHOWN = 3         # fire times a row shows (getSchedule's answer has five)


@dataclass(frozen=True)
class ScheduleRow:
    info: dict[str, Any]     # the schedule as listSchedules answers it
    upcoming: list[int]      # its next fire times: none while paused or once finished


@dataclass(frozen=True)
class SchedulesSection:
    rows: list[ScheduleRow]
    cursor: str | None       # the cursor this page starts after (None: the first page)
    next_cursor: str | None  # the next page's, None on the last


def upcoming(info: Mapping[str, Any], count: int = NEXT_SHOWN) -> list[int]:
    """The schedule's next ``count`` fire times from its waiting occurrence's, as many as
    its limit still allows."""
    pending = info.get("nextFireTime")
    if pending is None or info.get("paused"):
        return []
    left = remaining(info)            # occurrences the limit allows after the waiting one
    more = count - 1 if left is None else min(count - 1, left)
    if more <= 0:
        return [pending]
    try:
        return [pending, *recurrence_of(info).fire_times(pending, more)]
    except RecurrenceError:          # a rule this version no longer takes: show what is known
        return [pending]


def read_schedules(p: Params, topic: str) -> SchedulesSection:
    """The page's ``schedCursor``, checked, and the page of the topic's schedules it asks
    for (the topic is known: the page checked it)."""
    cursor = p.string("schedCursor") or None
    if cursor is not None:
        try:
            decode_cursor(cursor)
        except BadRequest as exc:     # the core names listSchedules's parameter; ours is
            raise BadRequest("schedCursor" + exc.msg.removeprefix("cursor")) from None
    page = runtime().schedules.list(topic, cursor, SCHEDULE_PAGE)
    return SchedulesSection([ScheduleRow(info, upcoming(info)) for info in page.schedules],
                            cursor, page.next_cursor)
