"""The recurring-schedule calls of both clients, as plans (plan.py): createSchedule,
listSchedules, getSchedule, deleteSchedule, pauseSchedule, resumeSchedule.

A schedule sends its message to its topic at each fire time of a cron expression (in a time
zone) or every N ms; the server writes each occurrence as an ordinary message, msgId
``<scheduleId>:<fireTime>``, and always keeps the next one waiting (docs/api.md, Recurring
schedules). Checks the server makes (the cron's fields, the time zone's name, the bounds) are
left to it: its 400 names the parameter and the rule, raised as BadRequestError.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Mapping

from .errors import NotFoundError
from .model import (
    MISFIRE_POLICIES,
    Schedule,
    SchedulePage,
    attributes_json,
    epoch_ms,
    millis,
)
from .plan import Plan, Request


class SchedulePlans:
    """The schedule calls, mixed into ``Plans`` (one written-once plan per call)."""

    def create_schedule(self, topic: str, schedule_id: str, msg: str, *,
                        cron: str | None = None, timezone: str | None = None,
                        every_ms: int | timedelta | None = None,
                        attributes: Mapping[str, str] | None = None,
                        group_id: str | None = None,
                        ttl_ms: int | timedelta | None = None,
                        max_retry: int | None = None,
                        start_time: int | datetime | None = None,
                        end_time: int | datetime | None = None,
                        limit: int | None = None,
                        misfire: str | None = None) -> Plan[Schedule]:
        """Create the schedule ``schedule_id`` of ``topic``, or replace the one of that id
        (its waiting occurrence is deleted and the next one written anew).

        Exactly one of ``cron`` (5 fields: minute hour day-of-month month day-of-week, in
        ``timezone``, an IANA name, UTC by default) and ``every_ms`` (at least 1000; fire
        times ``start_time`` + k * ``every_ms``). Each occurrence is ``msg`` with the
        ``attributes``, ``group_id``, ``ttl_ms`` and ``max_retry`` given (the last two: the
        topic's when None). ``start_time`` / ``end_time`` (epoch ms or datetime, the end
        inclusive) bound the fire times and ``limit`` their number; ``misfire`` says what
        fire times missed while no node ran become: ``once`` (default: one occurrence, now),
        ``skip`` (none) or ``all`` (one each). Returns the schedule with its next five fire
        times (``next_fire_times``).

        Raises:
            ValueError: neither or both of ``cron`` and ``every_ms``, or a ``misfire`` that
                is no policy (nothing sent).
            BadRequestError: (400) a value the server refuses, naming the parameter.
            NotFoundError: (404) an unknown topic.
        """
        if (cron is None) == (every_ms is None):
            raise ValueError("give exactly one of cron and every_ms")
        if misfire is not None and misfire not in MISFIRE_POLICIES:
            raise ValueError(f"misfire: must be one of {', '.join(MISFIRE_POLICIES)}, "
                             f"got {misfire!r}")
        params: dict[str, Any] = {"topic": topic, "scheduleId": schedule_id, "msg": msg}
        if cron is not None:
            params["cron"] = cron
        if timezone is not None:
            params["timezone"] = timezone
        if every_ms is not None:
            params["everyMillis"] = millis(every_ms)
        if attributes:
            params["attributes"] = attributes_json(attributes)
        if group_id:
            params["groupId"] = group_id
        if ttl_ms is not None:
            params["ttlMillis"] = millis(ttl_ms)
        if max_retry is not None:
            params["maxRetry"] = int(max_retry)
        if start_time is not None:
            params["startTime"] = epoch_ms(start_time)
        if end_time is not None:
            params["endTime"] = epoch_ms(end_time)
        if limit is not None:
            params["limit"] = int(limit)
        if misfire is not None:
            params["misfire"] = misfire
        # Sent again after a lost answer: the same definition replaces itself, and its
        # occurrences keep their msgIds (<scheduleId>:<fireTime>), so nothing doubles.
        envelope = yield Request("createSchedule", params, idempotent=True)
        return Schedule.from_json(envelope["data"])

    def list_schedules(self, topic: str | None = None, cursor: str | None = None,
                       limit: int | None = None) -> Plan[SchedulePage]:
        """One page of schedules: the topic's, or every topic's when ``topic`` is None.

        ``schedules, cursor = client.list_schedules(topic)``; pass the cursor back for the
        next page; it is None on the last page. ``limit``: the page size (the server's
        default, 100, when None; at most its max-batch). The schedules carry no
        ``next_fire_times`` (``get_schedule`` does).

        Raises:
            NotFoundError: (404) an unknown topic.
            AccessDeniedError: (403) no ``topic`` with a token limited to some topics.
        """
        params: dict[str, Any] = {}
        if topic is not None:
            params["topic"] = topic
        if cursor:
            params["cursor"] = cursor
        if limit is not None:
            params["limit"] = int(limit)
        envelope = yield Request("listSchedules", params, idempotent=True)
        return SchedulePage([Schedule.from_json(s) for s in envelope.get("data") or []],
                            envelope.get("nextCursor") or None)

    def get_schedule(self, topic: str, schedule_id: str) -> Plan[Schedule | None]:
        """The schedule with its next five fire times, or None when the server has none
        (no such schedule or topic), as ``get`` answers for a message."""
        try:
            envelope = yield Request("getSchedule", {"topic": topic, "scheduleId": schedule_id},
                                     idempotent=True)
        except NotFoundError:
            return None
        return Schedule.from_json(envelope["data"])

    def delete_schedule(self, topic: str, schedule_id: str) -> Plan[bool]:
        """Delete the schedule and its waiting occurrence. Returns whether that occurrence
        was deleted with it: False when none was waiting (paused, finished) or it was
        already due or being delivered (it goes on, as any message).

        Raises:
            NotFoundError: (404) no such schedule or topic.
        """
        # Not re-sent: after a lost answer the second call would answer 404 for a success.
        envelope = yield Request("deleteSchedule", {"topic": topic, "scheduleId": schedule_id},
                                 idempotent=False)
        return bool(envelope.get("occurrenceDeleted"))

    def pause_schedule(self, topic: str, schedule_id: str) -> Plan[bool]:
        """Stop the schedule: its waiting occurrence is deleted and nothing is sent until
        ``resume_schedule``. Returns whether this call paused it (False: it was paused
        already), as ``pause_topic`` does.

        Raises:
            NotFoundError: (404) no such schedule or topic.
        """
        return (yield from self._control("pauseSchedule", topic, schedule_id))

    def resume_schedule(self, topic: str, schedule_id: str) -> Plan[bool]:
        """Start a paused schedule again from now: its first fire time from now is written
        waiting; the fire times of the pause are skipped, not missed. Returns whether this
        call resumed it (False: it was not paused); ``get_schedule`` shows its next fire
        times.

        Raises:
            NotFoundError: (404) no such schedule or topic.
        """
        return (yield from self._control("resumeSchedule", topic, schedule_id))

    @staticmethod
    def _control(endpoint: str, topic: str, schedule_id: str) -> Plan[bool]:
        params = {"topic": topic, "scheduleId": schedule_id}
        envelope = yield Request(endpoint, params, idempotent=True)
        return bool(envelope.get("changed"))
