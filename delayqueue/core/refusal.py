"""What the API answers when a script refuses: one table from (script, outcome) to an error.

A refusing outcome (negative, ``outcome.py``) means nothing was written; which error it
becomes depends on the script only where the words must: "no live message" for a nack, but
"no live or acked message" for an ack (an acked one answers 200 again), "no message" for a
read (an ended one within its retention is found), "no dead letter" for the dead-letter
scripts. Every text starts with the parameter it is about. A refusing outcome without a row
here is a bug between Python and Lua, and answers 500 rather than pass for a success.
"""

from __future__ import annotations

from typing import NamedTuple

from .errors import BacklogExceeded, BadRequest, Conflict, DelayQueueError, NotFound, Unavailable
from .message import DelayMsg
from .outcome import Outcome


class Refusal(NamedTuple):
    error: type[DelayQueueError]
    text: str      # a str.format template of msg_id, topic, and the message's status, retry


_NOT_LIVE = Refusal(NotFound, "msgId: no live message '{msg_id}' in topic '{topic}'")
_NOT_DEAD = Refusal(NotFound, "msgId: no dead letter '{msg_id}' in topic '{topic}'")
_NO_SCHEDULE = Refusal(NotFound, "scheduleId: no schedule '{msg_id}' in topic '{topic}'")
_STALE = Refusal(Conflict, "receipt: stale receipt: message '{msg_id}' was delivered again "
                           "since (status {status}, retry {retry})")

REFUSALS: dict[tuple[str, Outcome], Refusal] = {
    ("ack", Outcome.NO_MESSAGE): Refusal(
        NotFound, "msgId: no live or acked message '{msg_id}' in topic '{topic}'"),
    ("ack", Outcome.NOT_DELIVERED): Refusal(
        BadRequest, "msgId: message '{msg_id}' has not been delivered yet (status {status}); "
                    "use deleteMsg to drop it"),
    ("ack", Outcome.STALE_RECEIPT): _STALE,
    ("nack", Outcome.NO_MESSAGE): _NOT_LIVE,
    ("nack", Outcome.NOT_CONSUMING): Refusal(
        BadRequest, "msgId: message '{msg_id}' is not being consumed (status {status}); only "
                    "status 3 can be nacked"),
    ("nack", Outcome.STALE_RECEIPT): _STALE,
    ("change_visibility", Outcome.NO_MESSAGE): _NOT_LIVE,
    ("change_visibility", Outcome.NOT_CONSUMING): Refusal(
        BadRequest, "msgId: message '{msg_id}' is not being consumed (status {status}); only "
                    "status 3 has an ack deadline"),
    ("change_visibility", Outcome.STALE_RECEIPT): _STALE,
    ("reschedule", Outcome.NO_MESSAGE): _NOT_LIVE,
    ("reschedule", Outcome.CONSUMING): Refusal(
        BadRequest, "msgId: message '{msg_id}' is being consumed (status {status}); only "
                    "waiting or ready messages can be rescheduled"),
    ("delete", Outcome.NO_MESSAGE): _NOT_LIVE,
    # get.lua answers no outcome: an empty reply is its NO_MESSAGE.
    ("get", Outcome.NO_MESSAGE): Refusal(NotFound, "msgId: no message '{msg_id}' in topic "
                                                   "'{topic}'"),
    ("send", Outcome.BACKLOG): Refusal(
        BacklogExceeded, "topic: backlog quota exceeded: topic '{topic}' holds its maxBacklog "
                         "live messages; nothing was written"),
    ("send", Outcome.CONSUMING): Refusal(
        Conflict, "msgId: message '{msg_id}' is being consumed (status {status}); "
                  "onDuplicate=replace replaces only a waiting or ready message; nothing "
                  "was written"),
    ("send", Outcome.OTHER_GROUP): Refusal(
        BadRequest, "groupId: onDuplicate=replace must keep the groupId of message "
                    "'{msg_id}' in topic '{topic}'; nothing was written"),
    ("send", Outcome.NO_SUBSCRIPTION): Refusal(
        BadRequest, "defaultSubscription: topic '{topic}' has defaultSubscription=false and no "
                    "named subscription: nobody would receive the message; nothing was "
                    "written"),
    ("subscription_put", Outcome.BACKLOG): Refusal(
        BadRequest, "subscription: topic '{topic}' has the most named subscriptions "
                    "max-subscriptions-per-topic allows; nothing was written"),
    ("send", Outcome.NOT_WRITTEN): Refusal(
        Conflict, "not written: another entry of this atomic batch was refused"),
    # purge answers it from Python (purge.lua is never called for an unknown topic).
    ("pause", Outcome.NO_TOPIC): Refusal(NotFound, "topic: no topic '{topic}': it holds no "
                                                   "message and has no settings"),
    ("dead_redrive", Outcome.NO_MESSAGE): _NOT_DEAD,
    ("dead_purge", Outcome.NO_MESSAGE): _NOT_DEAD,
    # The schedule scripts: msg_id is the scheduleId.
    ("schedule_advance", Outcome.NO_MESSAGE): _NO_SCHEDULE,
    ("schedule_pause", Outcome.NO_MESSAGE): _NO_SCHEDULE,
    ("schedule_delete", Outcome.NO_MESSAGE): _NO_SCHEDULE,
}


def refusal(script: str, outcome: int, topic: str, msg_id: str | None,
            message: DelayMsg | None = None) -> DelayQueueError | None:
    """The error a script's refusing outcome answers (``message``: the one it refused, where
    the reply carries it), or None when the outcome is not a refusal."""
    if outcome >= 0:
        return None
    row = REFUSALS.get((script, Outcome(outcome)))
    if row is None:
        return Unavailable(f"{script}.lua refused with {Outcome(outcome).name}, which the "
                           f"server has no answer for")
    return row.error(row.text.format(
        msg_id=msg_id, topic=topic, status=None if message is None else int(message.status),
        retry=None if message is None else message.retry))
