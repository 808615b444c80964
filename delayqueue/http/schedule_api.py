"""The recurring schedules' views (ours): createSchedule, listSchedules, getSchedule,
deleteSchedule, pauseSchedule, resumeSchedule. Each reads its parameters, makes one call on
``Schedules`` (core/schedules.py) and answers the envelope; rows in endpoints.py.

The answer's shape is the contract of the object endpoints (getTopicConfig's): the schedule,
or the page of schedules, under ``data``; what is about the call rather than the object
(``changed``, ``nextCursor``, ``deleted``) beside it, at the top level."""

from __future__ import annotations

from flask import Blueprint, Response, g

from delayqueue.core.errors import BadRequest, Forbidden, MissingParameter
from delayqueue.core.schedules import ScheduleSpec
from delayqueue.settings.value import MAX_DURATION_MS

from .endpoints import route
from .params import Params
from .request import params, runtime, success

schedules = Blueprint("schedules", __name__)


def schedule_id(p: Params) -> str:
    value = p.identifier("scheduleId", required=True)
    assert value is not None
    return value


def epoch_ms(p: Params, name: str) -> int | None:
    value = p.integer(name)
    if value is not None and not 0 <= value <= MAX_DURATION_MS * 3:
        raise BadRequest(f"{name}: must be milliseconds since the epoch "
                         f"(0..{MAX_DURATION_MS * 3}), got {value}")
    return value


def schedule_spec(p: Params) -> ScheduleSpec:
    """createSchedule's parameters, each read and checked (the recurrence rules are checked
    by ``Schedules.create``)."""
    sid, body = schedule_id(p), p.body()
    cron, every_ms = p.string("cron"), p.integer("everyMillis")
    if cron is None and every_ms is None:
        raise MissingParameter("cron, everyMillis: give one of them")
    if cron is not None and every_ms is not None:
        raise BadRequest("cron, everyMillis: give cron or everyMillis, not both")
    if every_ms is not None and not 1000 <= every_ms <= MAX_DURATION_MS:
        raise BadRequest(f"everyMillis: must be an integer >= 1000 and at most "
                         f"{MAX_DURATION_MS} (100 years), got {every_ms}")
    timezone = p.string("timezone")
    if timezone is not None and cron is None:
        raise BadRequest("timezone: applies to cron only; an everyMillis schedule has none")
    return ScheduleSpec(
        sid, body, cron=cron, timezone=timezone, every_ms=every_ms,
        attributes=p.attributes(), group_id=p.group_id(), ttl_ms=p.duration("ttlMillis"),
        max_retry=p.max_retry(), start_ms=epoch_ms(p, "startTime"),
        end_ms=epoch_ms(p, "endTime"), limit=p.integer("limit"),
        misfire=p.string("misfire"))


@route(schedules, "createSchedule")
def create_schedule() -> Response:
    p = params()
    topic = p.topic()
    return success(data=runtime().schedules.create(topic, schedule_spec(p)))


@route(schedules, "listSchedules")
def list_schedules() -> Response:
    p = params()
    topic = p.topic() if p.string("topic") is not None else None
    limit, cursor = p.limit(100), p.string("cursor") or None
    token = g.get("token")
    if topic is None and token is not None and not token.all_topics:
        raise Forbidden(f"topic: required for token {token.name!r}, which is limited to "
                        f"topics {list(token.topics)}")
    page = runtime().schedules.list(topic, cursor, limit)
    extra = {"nextCursor": page.next_cursor} if page.next_cursor else {}
    return success(data=page.schedules, **extra)


@route(schedules, "getSchedule")
def get_schedule() -> Response:
    p = params()
    topic = p.topic()
    return success(data=runtime().schedules.get(topic, schedule_id(p)))


@route(schedules, "deleteSchedule")
def delete_schedule() -> Response:
    p = params()
    topic = p.topic()
    dropped = runtime().schedules.delete(topic, schedule_id(p))
    return success(deleted=True, occurrenceDeleted=dropped)


@route(schedules, "pauseSchedule")
def pause_schedule() -> Response:
    p = params()
    topic = p.topic()
    answer = runtime().schedules.pause(topic, schedule_id(p))
    changed = answer.pop("changed")
    return success(data=answer, changed=changed)


@route(schedules, "resumeSchedule")
def resume_schedule() -> Response:
    p = params()
    topic = p.topic()
    answer = runtime().schedules.resume(topic, schedule_id(p))
    changed = answer.pop("changed")
    return success(data=answer, changed=changed)
