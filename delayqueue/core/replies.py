"""What each script answers, by name: one typed reply per script, built from Redis's raw list.

A reply is the list Redis answered, as it answered it (so a test of a script compares it with
the script's exact answer: ``reply == [Outcome.OK, 1]``), whose values are read by the names
of the script's header (``Returns: {...}`` in ``lua/<script>.lua``): ``reply.lowered_due``
reads what the script calls ``lowered_due``, and no caller counts positions
(tests/core/test_replies.py keeps the names and the headers equal). The values are the
script's own (-1 for "none" where the header says so), except an ``outcome``, which becomes
an ``Outcome``. ``fields`` are a message's values in ``MESSAGE_FIELDS`` order;
``DelayMsg.from_fields`` is the one place that turns them into a message.

A script that takes many entries (send, ack) answers a plain list with one reply per entry,
or the error that entry's own writes failed with in its place (the others stand).
"""

from __future__ import annotations

import inspect
from operator import itemgetter
from typing import Any, Callable

from .outcome import Outcome


class Reply(list):
    """A script's raw reply whose positions are read by name: each annotation of a subclass,
    in order, names the value at its position (as a NamedTuple's fields do). A list rather
    than a NamedTuple because a tuple is never equal to the list a test of the Lua expects."""

    names: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.names = tuple(inspect.get_annotations(cls))   # its own, in declaration order
        for position, name in enumerate(cls.names):
            setattr(cls, name, property(itemgetter(position)))

    def __repr__(self) -> str:
        if len(self) != len(self.names):
            return f"{type(self).__name__}({list.__repr__(self)})"
        values = ", ".join(f"{name}={value!r}" for name, value in zip(self.names, self))
        return f"{type(self).__name__}({values})"


class SendReply(Reply):
    """One message of send.lua: OK accepted, or DUPLICATE (a live message has the msgId)."""
    outcome: Outcome
    fields: list[str]    # the message now stored (the live one, for a DUPLICATE)
    lowered_due: int     # the topic's new due time if this message brought it forward, else -1


class PromoteReply(Reply):
    moved: int           # waiting -> ready; the caller repeats while it equals the limit
    gaps: list[int]      # each moved message's promotion gap (ms)
    due: int             # the topic's next due time, -1 when it holds nothing


class Delivery(Reply):
    """One message pull.lua handed out, as stored after the pull (its receipt included):
    its msgId, then its fields."""
    msg_id: str

    @property
    def fields(self) -> list[str]:
        return self[1:]


class PullReply(Reply):
    messages: list[Delivery]
    promoted: int        # moved waiting -> ready by this call
    gaps: list[int]      # their promotion gaps (ms)
    ended: int           # ended here (expired or out of deliveries) instead of handed out
    next_trigger: int    # triggerTime of the earliest waiting message, -1 if none
    ready_left: int      # ready messages still queued
    lowered_due: int     # the topic's new due time if this pull brought it forward, else -1
    dead: int            # how many of the ended became dead letters


class AckReply(Reply):
    """One ack of ack.lua: OK, ACKED_LATE, ALREADY_ACKED, or a refusal."""
    outcome: Outcome
    fields: list[str]    # the message after the ack, or [] when there is none
    lowered_due: int     # triggerTime of its group's next message put into waiting, else -1


class NackReply(Reply):
    outcome: Outcome     # OK: the status in fields says where it went (1, 2 or 6)
    fields: list[str]
    lowered_due: int
    dead: int            # 1 when it became a dead letter


class DeleteReply(Reply):
    outcome: Outcome
    fields: list[str]    # the message as of the delete, or []
    lowered_due: int     # triggerTime of its group's next message put into waiting, else -1


class GetReply(Reply):
    """The message's fields, then its slot (where its record is, for tests and tools), its
    ack deadline (consuming) and its death time (a dead letter), each -1 when it has none,
    then (in the default subscription) where each named subscription holding it has it;
    empty (false) when there is no such message."""

    @property
    def fields(self) -> list[str]:
        return self[:-4]

    @property
    def slot(self) -> str:
        return self[-4]

    @property
    def ack_deadline(self) -> int:
        return self[-3]

    @property
    def dead_time(self) -> int:
        return self[-2]

    @property
    def held(self) -> dict[str, dict[str, int]]:
        """name -> {"status", "retry"} of each named subscription that holds the message."""
        flat = self[-1]
        return {flat[i]: {"status": int(flat[i + 1]), "retry": int(flat[i + 2])}
                for i in range(0, len(flat), 3)}


class SubscriptionPutReply(Reply):
    outcome: Outcome     # OK created, DUPLICATE existed, BACKLOG the topic has the most
    created_time: int


class SubscriptionDropReply(Reply):
    left: int            # entries still to free (0: done)
    cursor: str          # the records' HSCAN cursor for the next slice


class TimeoutReply(Reply):
    requeued: int        # given back; the caller repeats while requeued + ended is the limit
    ended: int           # out of deliveries
    due: int
    dead: int            # how many of the ended became dead letters


class ExpireReply(Reply):
    expired: int
    exhausted: int
    scanned: int         # the caller repeats while scanned or purged equals the limit
    due: int
    dead: int            # how many of the exhausted became dead letters
    purged: int          # ended records past their retention, removed


class ChangeVisibilityReply(Reply):
    outcome: Outcome
    fields: list[str]
    lowered_due: int
    dead: int


class RescheduleReply(Reply):
    outcome: Outcome     # OK, CONSUMING or NO_MESSAGE
    fields: list[str]
    lowered_due: int


class DeadEntry(Reply):
    """One dead letter of dead_list.lua: its msgId and death time, then its fields."""
    msg_id: str
    death_time: int

    @property
    def fields(self) -> list[str]:
        return self[2:]


class DeadListReply(Reply):
    entries: list[DeadEntry]
    next_time: int       # the next page's cursor: next_time and next_slot; -1 at the end
    next_slot: str


class DeadRedriveReply(Reply):
    outcome: Outcome     # OK, or NO_MESSAGE when the msgId given is not a dead letter
    count: int
    lowered_due: int


class ListEntry(Reply):
    """One message of list.lua: its msgId, its place in the view (triggerTime, ready time,
    ack deadline) and its member there, then its fields."""
    msg_id: str
    score: int
    member: str

    @property
    def fields(self) -> list[str]:
        return self[3:]


class ListReply(Reply):
    entries: list[ListEntry]
    next_score: int      # the next page's cursor: next_score and next_member; -1 at the end
    next_member: str


class PurgeReply(Reply):
    ended: int           # messages ended (status 7) by this slice
    next_cursor: str     # the next slice's HSCAN cursor; "0" when every record was visited
    cutoff: int          # the last acceptance sequence purged (pass it to the next slice)
    lowered_due: int
    live: int            # the topic's live messages after this slice


class PauseReply(Reply):
    outcome: Outcome     # OK, or NO_TOPIC (nothing written)
    changed: int         # 1 when the pause state changed
    ready: int           # ready messages now (announced on resume)


class DeadPurgeReply(Reply):
    outcome: Outcome
    count: int


class MigrateReply(Reply):
    converted: int
    skipped: int


class MigrateOrderReply(Reply):
    converted: int
    skipped: int


class SchedulePutReply(Reply):
    outcome: Outcome     # OK
    gen: int             # the schedule's generation now
    written: int         # occurrences written (0: finished at once)
    replaced: int        # 1 when a schedule with this id was replaced
    lowered_due: int


class ScheduleAdvanceReply(Reply):
    outcome: Outcome     # OK; KEPT: planned from a stale state, nothing written; NO_MESSAGE
    pending: int         # the pending fire time now, -1: none (finished, paused or gone)
    written: int
    paused: int
    lowered_due: int


class SchedulePauseReply(Reply):
    outcome: Outcome     # OK; KEPT (resume): planned from a stale gen; NO_MESSAGE
    gen: int
    changed: int         # 1 when the pause state changed
    written: int
    lowered_due: int


class ScheduleDeleteReply(Reply):
    outcome: Outcome     # OK, or NO_MESSAGE when there is no such schedule
    dropped: int         # 1 when its waiting occurrence was ended


class DueClaimReply(Reply):
    topics: list[str]    # claimed for this tick, earliest due first
    head: int            # with no topic due: the earliest unclaimed due time, -1 if none


def _typed(reply_type: type[Reply]) -> Callable[[list], Reply]:
    """The builder of a reply read in order, its ``outcome`` (where it has one) typed."""
    def build(raw: list) -> Reply:
        reply = reply_type(raw)
        if reply_type.names[:1] == ("outcome",):
            reply[0] = Outcome(reply[0])
        return reply
    return build


def _each(reply_type: type[Reply]) -> Callable[[list], list]:
    """The builder of a many-entry reply: one typed reply per entry, or its error in place."""
    one = _typed(reply_type)

    def build(raw: list) -> list:
        return [entry if isinstance(entry, Exception) else one(entry) for entry in raw]
    return build


def _pull(raw: list) -> PullReply:
    messages, *counts = raw
    return PullReply([[Delivery(m) for m in messages], *counts])


def _dead_list(raw: list) -> DeadListReply:
    entries, *cursor = raw
    return DeadListReply([[DeadEntry(e) for e in entries], *cursor])


def _list(raw: list) -> ListReply:
    entries, *cursor = raw
    return ListReply([[ListEntry(e) for e in entries], *cursor])


# Script name -> the builder of its typed reply. Scripts answering a single number give an
# Outcome (due_set, recycle, topic_config, schedule_unindex) or a count (dead_trim, monitor_flush,
# hint_pass).
BUILDERS: dict[str, Callable[[Any], Any]] = {
    "send": _each(SendReply),
    "promote": _typed(PromoteReply),
    "pull": _pull,
    "ack": _each(AckReply),
    "nack": _typed(NackReply),
    "delete": _typed(DeleteReply),
    "get": GetReply,
    "timeout": _typed(TimeoutReply),
    "expire": _typed(ExpireReply),
    "change_visibility": _typed(ChangeVisibilityReply),
    "reschedule": _typed(RescheduleReply),
    "dead_list": _dead_list,
    "list": _list,
    "purge": _typed(PurgeReply),
    "pause": _typed(PauseReply),
    "dead_redrive": _typed(DeadRedriveReply),
    "dead_purge": _typed(DeadPurgeReply),
    "dead_trim": int,
    "topic_config": Outcome,
    "migrate": _typed(MigrateReply),
    "migrate_order": _typed(MigrateOrderReply),
    "drop_sequence": Outcome,
    "due_claim": _typed(DueClaimReply),
    "due_set": Outcome,
    "recycle": Outcome,
    "hint_pass": int,
    "monitor_flush": int,
    "schedule_put": _typed(SchedulePutReply),
    "schedule_advance": _typed(ScheduleAdvanceReply),
    "schedule_pause": _typed(SchedulePauseReply),
    "schedule_delete": _typed(ScheduleDeleteReply),
    "schedule_unindex": Outcome,
    "subscription_put": _typed(SubscriptionPutReply),
    "subscription_delete": Outcome,
    "subscription_drop": _typed(SubscriptionDropReply),
}
