"""What the queue service takes and answers besides messages: a send, an ack or nack, a
deadline change (each a single call's parameters or one batch entry), a pull's result and a
topic's sizes. Apart from queue.py so that its users name them without the service."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, NamedTuple

from .message import DelayMsg


@dataclass(frozen=True)
class SendResult:
    message: DelayMsg
    duplicate: bool            # a namesake answered: live (keep), or ended inside the window
    replaced: bool = False     # onDuplicate=replace began a waiting or ready namesake again


ON_DUPLICATE = ("keep", "replace")   # sendMsg's onDuplicate: what a live namesake meets


@dataclass(frozen=True)
class SendRequest:
    """One message to send: sendMsg's parameters, or one entry of sendMsgBatch."""
    body: str
    msg_id: str | None = None
    delay_ms: int | None = None
    trigger_time_ms: int | None = None
    ttl_ms: int | None = None
    max_retry: int | None = None
    attributes: Mapping[str, str] | None = None
    group_id: str | None = None
    on_duplicate: str = "keep"     # ON_DUPLICATE: "replace" debounces a live namesake


@dataclass(frozen=True)
class AckRequest:
    """One ack (or, ``ack=False``, a nack): ackMsg's parameters, or one entry of ackMsgBatch."""
    msg_id: str
    receipt: str | None = None
    ack: bool = True
    delay_ms: int | None = None


@dataclass(frozen=True)
class VisibilityRequest:
    """One ack-deadline change: changeVisibility's parameters, or one entry of
    changeVisibilityBatch (``timeout_ms`` >= 0; 0 gives the delivery up)."""
    msg_id: str
    timeout_ms: int
    receipt: str | None = None


class TopicSizes(NamedTuple):
    """A topic's queue sizes (``queue_sizes``), whether it is paused, its dead letters and
    how long its oldest ready message has waited."""
    waiting: int          # not yet due, blocked ones included
    ready: int
    consuming: int
    group_blocked: int    # due, behind their group's head
    paused: bool = False
    dead: int = 0         # dead letters kept for redrive: not live, not in the backlog
    oldest_ready_age_ms: int = 0   # now - when the ready queue's head became ready; 0: none

    @property
    def backlog(self) -> int:
        """Every live message."""
        return self.waiting + self.ready + self.consuming + self.group_blocked


@dataclass(frozen=True)
class PullResult:
    messages: list[DelayMsg]
    next_due_ms: int | None      # triggerTime of the earliest waiting message
    ready_left: int              # ready messages still queued
