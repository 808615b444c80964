"""Recurring schedules: a message sent again and again, on a cron expression or every n ms.

A schedule lives in its topic's ``schedules`` hash (``TopicKeys.schedules``: scheduleId ->
JSON, lua/includes/schedule.lua): its definition, written here, and its state, written only
by the schedule scripts. Each fire time becomes an *occurrence*: an ordinary message of the
topic, msgId ``<scheduleId>:<fireTime>``, written by the same ``accept()`` as sendMsg's
messages (without sendMsg's backlog check). The next occurrence is always written ahead,
waiting (getMsg and listMsg see it); when its fire time comes, the schedules loop
(background/recurring.py) writes the one after it.

Exactly once: every write of occurrences and of the schedule's cursor is one script in the
topic's slot, a compare-and-set on the schedule's generation and cursor, so two nodes, or a
retry after a kill, never write an occurrence twice or skip one; the msgId is deterministic,
so a repeated write finds the live occurrence and writes nothing.

The namespace's schedule index (``NamespaceKeys.schedule_index``, "<topic>\\n<scheduleId>"
-> the pending fire time) tells the loop which schedule to look at when. It is in another
Cluster slot than the topic, so it is written around the scripts: before a create (score
now: a crash leaves an entry the loop looks at, never a schedule without one) and after
each script; the loop removes an entry only when the schedule is gone, paused or finished,
and only if its score is still the one it read (lua/schedule_unindex.lua). The repair pass
(``repair``) puts back what a crash between the two slots lost, and writes again a waiting
occurrence deleted or purged before its fire time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

import redis

from .cursor import decode_pair, encode_pair
from .errors import BadRequest, NotFound, redis_errors
from .keys import TopicKeys
from .outcome import Outcome
from .queue import DelayQueue
from .recurrence import (
    Advance,
    Recurrence,
    RecurrenceError,
    check_limit,
    check_misfire,
    plan_advance,
    plan_start,
    recurrence,
)
from .refusal import refusal
from .scripts import SchedulePlan

FIRE_TIME_DIGITS = 14        # an occurrence's msgId ends with ':' and its fire time in ms
NEXT_FIRE_TIMES = 5          # fire times getSchedule and createSchedule show
RESUME_ATTEMPTS = 5          # a resume planned from a state that changed meanwhile plans again
REPAIR_CHUNK = 500           # schedule topics per pipelined round trip (repair, list)
REPAIR_SCAN = 200            # schedules per HSCAN slice of the repair pass
REPAIR_CALLS = 100           # repair script calls per round trip
LIST_ROUNDS = 20             # rounds of a list page (more only when schedules go meanwhile)


@dataclass(frozen=True)
class ScheduleSpec:
    """createSchedule's parameters, converted (validated by ``Schedules.create``)."""
    schedule_id: str
    body: str
    cron: str | None = None
    timezone: str | None = None
    every_ms: int | None = None
    attributes: Mapping[str, str] | None = None
    group_id: str | None = None
    ttl_ms: int | None = None
    max_retry: int | None = None
    start_ms: int | None = None
    end_ms: int | None = None
    limit: int | None = None
    misfire: str | None = None


@dataclass(frozen=True)
class SchedulePage:
    schedules: list[dict[str, Any]]
    next_cursor: str | None


def member(topic: str, schedule_id: str) -> str:
    """A schedule's entry in the namespace's schedule index: "<topic>\\n<scheduleId>"
    (neither may hold a control character, so the newline parts them)."""
    return f"{topic}\n{schedule_id}"


def split_member(entry: str) -> tuple[str, str]:
    """The topic and scheduleId of an index entry."""
    topic, _, schedule_id = entry.partition("\n")
    return topic, schedule_id


def encode_cursor(topic: str, schedule_id: str) -> str:
    return encode_pair(topic, schedule_id)


def decode_cursor(cursor: str) -> tuple[str, str]:
    try:
        topic, schedule_id = decode_pair(cursor)
        if not isinstance(topic, str) or not isinstance(schedule_id, str):
            raise ValueError
    except ValueError:
        raise BadRequest(f"cursor: not a nextCursor of a listSchedules page, got "
                         f"{cursor[:64]!r}") from None
    return topic, schedule_id


def rule_error(error: RecurrenceError) -> BadRequest:
    """A recurrence rule broken, as the API answers it: the parameter, then the rule
    ("everyMillis must be ..." becomes "everyMillis: must be ...")."""
    param, rule = error.param, str(error)
    if rule.startswith(f"{param} "):
        rule = rule[len(param) + 1:]
    return BadRequest(f"{param}: {rule}")


def recurrence_of(record: Mapping[str, Any]) -> Recurrence:
    return recurrence(cron=record.get("cron"), timezone=record.get("timezone") or "UTC",
                      every_ms=record.get("everyMillis"), start_ms=record.get("startTime"),
                      end_ms=record.get("endTime"), created_ms=record["createdTime"])


def remaining(record: Mapping[str, Any]) -> int | None:
    """Occurrences the schedule's limit still allows (None: no limit)."""
    limit = record.get("limit")
    return None if limit is None else max(limit - int(record.get("sentCount") or 0), 0)


def as_plan(advance: Advance, last_fire: int = -1) -> SchedulePlan:
    return SchedulePlan(tuple((int(f), int(t)) for f, t in advance.occurrences),
                        -1 if advance.cursor_ms is None else int(advance.cursor_ms),
                        -1 if advance.pending_ms is None else int(advance.pending_ms),
                        int(advance.missed), last_fire)


INFO_FIELDS = ("scheduleId", "topic", "cron", "timezone", "everyMillis", "msg", "attributes",
               "groupId", "ttlMillis", "maxRetry", "startTime", "endTime", "limit", "misfire",
               "paused", "createdTime", "sentCount", "missedCount", "lastFireTime",
               "nextFireTime")


def info(record: Mapping[str, Any], next_fire_times: list[int] | None = None
         ) -> dict[str, Any]:
    """A schedule as the API shows it (``INFO_FIELDS``, then ``nextFireTimes`` if given)."""
    attributes = record.get("attributes")
    shown = {**record, "attributes": json.loads(attributes) if attributes else None,
             "nextFireTime": record.get("pending"), "paused": bool(record.get("paused"))}
    answer = {name: shown.get(name) for name in INFO_FIELDS}
    if next_fire_times is not None:
        answer["nextFireTimes"] = next_fire_times
    return answer


def next_fire_times(record: Mapping[str, Any], count: int = NEXT_FIRE_TIMES) -> list[int]:
    """The pending fire time and those after it, as many as the limit allows: none while
    paused or finished."""
    pending = record.get("pending")
    if pending is None or record.get("paused"):
        return []
    left = remaining(record)
    more = count - 1 if left is None else min(count - 1, left)
    return [pending, *recurrence_of(record).fire_times(pending, more)] if more > 0 \
        else [pending]


class Schedules:
    """The schedules of a namespace's topics: create, list, get, delete, pause, resume (the
    API's and the console's), and the loop's advance and repair."""

    def __init__(self, queue: DelayQueue) -> None:
        self.queue = queue
        self.client = queue.client
        self.scripts = queue.scripts
        self.clock = queue.clock
        self.monitor = queue.monitor
        self.keys = queue.keys
        self.max_id_length = queue.settings.max_msg_id_length - 1 - FIRE_TIME_DIGITS
        self._empty_last_pass: set[str] = set()   # topics the last repair found without any

    # -- the API --------------------------------------------------------------------------
    def create(self, topic: str, spec: ScheduleSpec) -> dict[str, Any]:
        """Create the schedule, or replace the one with its id; its first occurrence is
        written at once."""
        now = self.clock.now_ms()
        record = self._definition(topic, spec, now)
        try:
            rec = recurrence_of(record)
        except RecurrenceError as error:
            raise rule_error(error) from None
        record["startTime"] = rec.start_ms
        plan = as_plan(plan_start(rec, now_ms=now, remaining=record["limit"]))
        tk = self.queue.topic_keys(topic)
        entry = member(topic, spec.schedule_id)
        with redis_errors():
            pipe = self.client.pipeline(transaction=False)
            pipe.zadd(self.keys.registry_of(topic), {topic: now})
            pipe.sadd(self.keys.schedule_topics, topic)
            pipe.zadd(self.keys.schedule_index, {entry: now})
            pipe.execute()
            reply = self.scripts.schedule_put(
                tk, now, self.keys.hint_channel, spec.schedule_id, self.queue.end_life_ms,
                json.dumps(record, ensure_ascii=False, separators=(",", ":")), plan,
                self.queue.defaults)
            self._index(entry, plan.pending, now)
            self.queue.bookkeep(topic, now, reply.lowered_due)
        self.monitor.incr(topic, "scheduleSent", reply.written)
        return self.get(topic, spec.schedule_id)

    def get(self, topic: str, schedule_id: str) -> dict[str, Any]:
        record = self._read(topic, schedule_id)
        try:
            return info(record, next_fire_times(record))
        except RecurrenceError:
            return info(record, [])

    def list(self, topic: str | None = None, cursor: str | None = None, limit: int = 100
             ) -> SchedulePage:
        """A page of schedules by (topic, scheduleId): the topic's, or every topic's.

        Cost O(page), whatever a topic holds: each topic's ids are a sorted set
        (``schedule_ids``), counted (``ZCARD``, or ``ZLEXCOUNT`` after the cursor's id) 500
        topics a round trip, then read by ``ZRANGEBYLEX`` only as many as the page takes,
        and their records by ``HGET``. An unfiltered page also reads the namespace's SET of
        topics holding schedules (``schedule_topics``)."""
        after = decode_cursor(cursor) if cursor else ("", "")
        with redis_errors():
            if topic is not None:
                self._known(topic)
                topics = [topic] if topic >= after[0] else []
            else:
                topics = [t for t in sorted(self.client.smembers(self.keys.schedule_topics))
                          if t >= after[0]]
            found = self._page_ids(topics, after, limit + 1)
            page, more = found[:limit], len(found) > limit
            pipe = self.client.pipeline(transaction=False)
            for t, i in page:
                pipe.hget(self.queue.topic_keys(t).schedules, i)
            records = pipe.execute() if page else []
        schedules = [info(json.loads(r)) for r in records if r is not None]
        return SchedulePage(schedules, encode_cursor(*page[-1]) if more else None)

    def _page_ids(self, topics: list[str], after: tuple[str, str], want: int
                  ) -> list[tuple[str, str]]:
        """The first ``want`` (topic, scheduleId) after ``after`` among ``topics`` (sorted,
        none before ``after``'s topic). A round counts a chunk of topics and reads the ids
        of those the page reaches; a schedule deleted between the two leaves the round
        short, and the next round goes on after the last id read."""
        found: list[tuple[str, str]] = []
        start = 0
        for _ in range(LIST_ROUNDS):
            if len(found) >= want or start >= len(topics):
                break
            part = topics[start:start + REPAIR_CHUNK]
            pipe = self.client.pipeline(transaction=False)
            for t in part:
                key = self.queue.topic_keys(t).schedule_ids
                if t == after[0]:
                    pipe.zlexcount(key, f"({after[1]}", "+")
                else:
                    pipe.zcard(key)
            asked: list[tuple[int, str, int]] = []   # (place in part, topic, most ids)
            need, examined = want - len(found), 0
            for t, n in zip(part, pipe.execute()):
                if need <= 0:
                    break
                if n:
                    asked.append((examined, t, need))
                    need -= n
                examined += 1
            pipe = self.client.pipeline(transaction=False)
            for _, t, most in asked:
                low = f"({after[1]}" if t == after[0] else "-"
                pipe.zrangebylex(self.queue.topic_keys(t).schedule_ids, low, "+", 0, most)
            read = pipe.execute() if asked else []
            for (_, t, _), ids in zip(asked, read):
                found += [(t, i) for i in ids]
            if asked and len(found) < want and len(read[-1]) == asked[-1][2]:
                # Short (a schedule went between the count and the read), and the last
                # topic read was cut at the page's end: go on after its last id.
                start += asked[-1][0]
                after = found[-1]
            else:
                start += examined
        return found[:want]

    def delete(self, topic: str, schedule_id: str) -> bool:
        """Delete the schedule; True when its waiting occurrence was ended with it."""
        self._read(topic, schedule_id)   # 404 for an unknown topic or schedule
        with redis_errors():
            reply = self.scripts.schedule_delete(self.queue.topic_keys(topic),
                                                 self.clock.now_ms(), schedule_id,
                                                 self.queue.end_life_ms)
            self._refused("schedule_delete", reply.outcome, topic, schedule_id)
            self.client.zrem(self.keys.schedule_index, member(topic, schedule_id))
        return reply.dropped == 1

    def pause(self, topic: str, schedule_id: str) -> dict[str, Any]:
        """Pause: the waiting occurrence is ended, no fire time is written until resumed."""
        self._read(topic, schedule_id)
        now = self.clock.now_ms()
        with redis_errors():
            reply = self.scripts.schedule_pause(
                self.queue.topic_keys(topic), now, self.keys.hint_channel, schedule_id,
                self.queue.end_life_ms, True, 0, None, self.queue.defaults)
            self._refused("schedule_pause", reply.outcome, topic, schedule_id)
            self.client.zrem(self.keys.schedule_index, member(topic, schedule_id))
        return {**self.get(topic, schedule_id), "changed": reply.changed == 1}

    def resume(self, topic: str, schedule_id: str) -> dict[str, Any]:
        """Resume: the first fire time from now is written; those the pause covered are
        skipped, not missed."""
        tk = self.queue.topic_keys(topic)
        entry = member(topic, schedule_id)
        for _ in range(RESUME_ATTEMPTS):
            record = self._read(topic, schedule_id)
            if not record.get("paused"):
                return {**self.get(topic, schedule_id), "changed": False}
            now = self.clock.now_ms()
            # A cursor still ahead is the occurrence the pause deleted before its time: it
            # may be written again. One that has come may have been delivered: after it.
            cursor = int(record.get("cursor", -1))
            after = now if cursor > now else max(now, cursor + 1)
            plan = as_plan(plan_start(recurrence_of(record), now_ms=after,
                                      remaining=remaining(record)))
            with redis_errors():
                self.client.zadd(self.keys.schedule_index, {entry: now})
                reply = self.scripts.schedule_pause(
                    tk, now, self.keys.hint_channel, schedule_id, self.queue.end_life_ms,
                    False, int(record["gen"]), plan, self.queue.defaults)
                self._refused("schedule_pause", reply.outcome, topic, schedule_id)
                if reply.outcome == Outcome.KEPT:
                    continue
                self._index(entry, plan.pending if reply.changed else -1, now)
                self.queue.bookkeep(topic, now, reply.lowered_due)
            self.monitor.incr(topic, "scheduleSent", reply.written)
            return {**self.get(topic, schedule_id), "changed": reply.changed == 1}
        raise BadRequest(f"scheduleId: schedule '{schedule_id}' changed {RESUME_ATTEMPTS} "
                         f"times while being resumed; try again")

    # -- the loop's side ---------------------------------------------------------------------
    def advance(self, entry: str, seen_ms: float) -> int:
        """Look at the schedule of an index entry whose time has come: write its occurrences
        due by now and the next one (a compare-and-set: a plan made from a state that
        changed meanwhile writes nothing, and is made again on the next tick). Returns the
        occurrences written."""
        topic, schedule_id = split_member(entry)
        tk = self.queue.topic_keys(topic)
        raw = self.client.hget(tk.schedules, schedule_id)
        record = json.loads(raw) if raw else None
        if record is None or record.get("paused") or record.get("pending") is None:
            self.scripts.schedule_unindex(self.keys, entry, seen_ms)
            return 0
        now = self.clock.now_ms()
        pending = int(record["pending"])
        if pending > now:
            # Indexed early (a create's first entry): look again at its fire time.
            self.client.zadd(self.keys.schedule_index, {entry: pending}, xx=True)
            return 0
        advance = plan_advance(recurrence_of(record), after_ms=int(record["cursor"]),
                               now_ms=now, misfire=record.get("misfire") or "once",
                               remaining=remaining(record))
        come = [pending, *(f for f, _ in advance.occurrences if f <= now)]
        plan = as_plan(advance, max(come))
        reply = self.scripts.schedule_advance(tk, now, self.keys.hint_channel, schedule_id,
                                              int(record["gen"]), int(record["cursor"]), plan,
                                              self.queue.defaults)
        if reply.outcome == Outcome.OK:
            self.queue.bookkeep(topic, now, reply.lowered_due)
            self.monitor.incr(topic, "scheduleSent", reply.written)
            self.monitor.incr(topic, "scheduleMissed", plan.missed)
        if reply.outcome == Outcome.NO_MESSAGE or reply.pending < 0:
            self.scripts.schedule_unindex(self.keys, entry, seen_ms)
        else:
            self.client.zadd(self.keys.schedule_index, {entry: reply.pending})
        return reply.written if reply.outcome == Outcome.OK else 0

    def repair(self) -> int:
        """Every schedule that has a pending fire time gets back its index entry if a crash
        lost it, and its waiting occurrence if it was deleted or purged before its fire
        time (same msgId, same fire time). Returns the occurrences written again.

        Cost: one HLEN and one ZCARD per topic of ``schedule_topics`` (pipelined), never per
        registered topic: idle topics without schedules cost the pass nothing. Then per
        topic holding schedules HSCAN slices and one script call per schedule waiting for a
        future fire time, ``REPAIR_CALLS`` a round trip. A topic found without schedules on
        two passes in a row leaves ``schedule_topics`` (one pass could fall between a
        create's SADD and its script). A topic whose ids (``schedule_ids``) do not count its
        schedules has them written again from the HSCAN (schedules created before the ids
        were kept, or an id a rebuild raced)."""
        repaired = 0
        topics = sorted(self.client.smembers(self.keys.schedule_topics))
        empty: set[str] = set()
        for part in _chunks(topics, REPAIR_CHUNK):
            pipe = self.client.pipeline(transaction=False)
            for topic in part:
                tk = self.queue.topic_keys(topic)
                pipe.hlen(tk.schedules)
                pipe.zcard(tk.schedule_ids)
            counts = pipe.execute()
            for topic, held, ids in zip(part, counts[0::2], counts[1::2]):
                if held:
                    repaired += self._repair_topic(topic, rebuild_ids=held != ids)
                else:
                    empty.add(topic)
                    if ids:
                        self._rebuild_ids(self.queue.topic_keys(topic), set())
        gone = empty & self._empty_last_pass
        if gone:
            self.client.srem(self.keys.schedule_topics, *gone)
        self._empty_last_pass = empty - gone
        return repaired

    def _repair_topic(self, topic: str, rebuild_ids: bool = False) -> int:
        tk = self.queue.topic_keys(topic)
        now = self.clock.now_ms()
        waiting: list[tuple[str, dict[str, Any]]] = []
        seen: set[str] = set()
        index = self.client.pipeline(transaction=False)
        for schedule_id, raw in _hscan(self.client, tk.schedules):
            seen.add(schedule_id)
            record = json.loads(raw)
            pending = record.get("pending")
            if pending is None or record.get("paused"):
                continue
            index.zadd(self.keys.schedule_index, {member(topic, schedule_id): pending},
                       nx=True)
            if pending > now:
                waiting.append((schedule_id, record))
        index.execute()
        if rebuild_ids:
            self._rebuild_ids(tk, seen)
        written = 0
        for part in _chunks(waiting, REPAIR_CALLS):
            # Each call's own now: the script writes only an occurrence still ahead of it.
            now = self.clock.now_ms()
            trip = self.scripts.round_trip()
            for schedule_id, record in part:
                self.scripts.schedule_advance(tk, now, self.keys.hint_channel, schedule_id,
                                              int(record["gen"]), int(record["cursor"]),
                                              None, self.queue.defaults, trip=trip)
            replies = trip.execute()
            done = [r for r in replies if not isinstance(r, Exception)
                    and r.outcome == Outcome.OK]
            written += sum(r.written for r in done)
            lowered = [r.lowered_due for r in done if r.lowered_due >= 0]
            self.queue.bookkeep(topic, now, min(lowered, default=-1))
        return written

    def _rebuild_ids(self, tk: TopicKeys, seen: set[str]) -> None:
        """Make the topic's ids those of its schedules: add the ids ``seen`` (an HSCAN), drop
        those without a schedule. Not atomic with the scripts: a create or delete racing it
        can leave one id wrong, which the next pass finds by its count and puts right."""
        for part in _chunks(sorted(seen), REPAIR_SCAN):
            self.client.zadd(tk.schedule_ids, dict.fromkeys(part, 0))
        ids = [i for i, _ in self.client.zscan_iter(tk.schedule_ids, count=REPAIR_SCAN)]
        for part in _chunks(ids, REPAIR_SCAN):
            pipe = self.client.pipeline(transaction=False)
            for i in part:
                pipe.hexists(tk.schedules, i)
            gone = [i for i, held in zip(part, pipe.execute()) if not held]
            if gone:
                self.client.zrem(tk.schedule_ids, *gone)

    # -- helpers -------------------------------------------------------------------------
    def _definition(self, topic: str, spec: ScheduleSpec, now: int) -> dict[str, Any]:
        """The schedule's definition as stored, every parameter checked (400 naming it)."""
        if len(spec.schedule_id) > self.max_id_length:
            raise BadRequest(f"scheduleId: must be at most {self.max_id_length} characters "
                             f"(max-msg-id-length less {1 + FIRE_TIME_DIGITS} for "
                             f"':<fireTime>' of its occurrences' msgIds), got "
                             f"{len(spec.schedule_id)}")
        if spec.ttl_ms is not None and spec.ttl_ms < 1:
            raise BadRequest(f"ttlMillis: must be >= 1 (absent: the topic's), got "
                             f"{spec.ttl_ms}")
        if spec.max_retry is not None and spec.max_retry < 0:
            raise BadRequest(f"maxRetry: must be >= 0 (absent: the topic's), got "
                             f"{spec.max_retry}")
        try:
            misfire = check_misfire(spec.misfire or "once")
            limit = check_limit(spec.limit)
        except RecurrenceError as error:
            raise rule_error(error) from None
        return {
            "scheduleId": spec.schedule_id, "topic": topic, "cron": spec.cron,
            "timezone": (spec.timezone or "UTC") if spec.cron is not None else spec.timezone,
            "everyMillis": spec.every_ms, "msg": spec.body,
            "attributes": json.dumps(dict(spec.attributes), ensure_ascii=False,
                                     separators=(",", ":")) if spec.attributes else None,
            "groupId": spec.group_id, "ttlMillis": spec.ttl_ms, "maxRetry": spec.max_retry,
            "startTime": spec.start_ms, "endTime": spec.end_ms, "limit": limit,
            "misfire": misfire, "createdTime": now,
        }

    def _read(self, topic: str, schedule_id: str) -> dict[str, Any]:
        """The schedule's record; 404 naming the topic when the topic is unknown, else the
        scheduleId when it has no such schedule."""
        tk = self.queue.topic_keys(topic)
        with redis_errors():
            pipe = self.client.pipeline(transaction=False)
            pipe.hget(tk.schedules, schedule_id)
            _known_reads(pipe, self.keys.registry_of(topic), topic, tk)
            raw, score, held = pipe.execute()
        if raw is not None:
            return json.loads(raw)
        if score is None and held == 0:
            raise _no_topic(topic)
        raise refusal("schedule_delete", Outcome.NO_MESSAGE, topic, schedule_id)

    def _known(self, topic: str) -> None:
        tk = self.queue.topic_keys(topic)
        pipe = self.client.pipeline(transaction=False)
        _known_reads(pipe, self.keys.registry_of(topic), topic, tk)
        score, held = pipe.execute()
        if score is None and held == 0:
            raise _no_topic(topic)

    def _index(self, entry: str, pending: int, seen_ms: int) -> None:
        """After a script: the entry's score becomes the pending fire time, or the entry goes
        (finished or paused) if it is still the one written before the script."""
        if pending >= 0:
            self.client.zadd(self.keys.schedule_index, {entry: pending})
        else:
            self.scripts.schedule_unindex(self.keys, entry, seen_ms)

    @staticmethod
    def _refused(script: str, outcome: Outcome, topic: str, schedule_id: str) -> None:
        error = refusal(script, outcome, topic, schedule_id)
        if error is not None:
            raise error


def _known_reads(pipe: Any, topics_key: str, topic: str, tk: TopicKeys) -> None:
    """What makes a topic known (TopicControls.known): registered, or holding a record, a
    sequence, settings or a schedule."""
    pipe.zscore(topics_key, topic)
    pipe.exists(tk.msgs, tk.seq, tk.config, tk.schedules)


def _no_topic(topic: str) -> NotFound:
    return NotFound(f"topic: no topic '{topic}': it holds no message, no schedule and has "
                    f"no settings")


def _chunks(items: list, size: int) -> Iterator[list]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def _hscan(client: redis.Redis, key: str) -> Iterator[tuple[str, str]]:
    """Every field of a hash, REPAIR_SCAN a slice (a field present throughout the scan is
    seen at least once; the repair is idempotent, so a repeat costs only a call)."""
    cursor = 0
    while True:
        cursor, fields = client.hscan(key, cursor, count=REPAIR_SCAN)
        yield from fields.items()
        if cursor == 0:
            return
