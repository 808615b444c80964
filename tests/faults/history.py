"""The history of a fault run: every send, pull and ack a client made, with its outcome and
the subscription it was made in, each topic's pause (the topic-pause nemesis's calls are
recorded like a client's) and each named subscription's creation.

An outcome is ``ok`` (the server answered code 200), ``fail`` (it answered a refusal that
wrote nothing: a 4xx code, or Redis over maxmemory) or ``unknown`` (a 500 envelope, a broken
connection or a timeout: the call may or may not have taken effect). Times are client wall
clock in ms (``time.time()``): Redis runs on this machine and the nodes follow its clock, so
a receive stamp taken after an answer arrived is never before the server handed it out.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

OK, FAIL, UNKNOWN = "ok", "fail", "unknown"


def now_ms() -> float:
    return time.time() * 1000.0


@dataclass(frozen=True)
class Op:
    kind: str                  # send, pull, ack, nack, pause, resume
    topic: str
    msg_id: str | None         # None for a pull, a pause or a resume
    start_ms: float
    end_ms: float
    outcome: str
    http_status: int | None = None
    detail: str = ""
    group: str | None = None        # a send's groupId
    trigger_ms: int | None = None   # a send answered 200: the triggerTime it was given
    subscription: str | None = None  # a pull's, ack's or nack's named subscription; None:
                                     # the default one (and every send, pause, resume)


@dataclass(frozen=True)
class Delivery:
    """One message in a pull's answer."""

    topic: str
    msg_id: str
    retry: int
    trigger_ms: int
    pull_start_ms: float       # when the pull that returned it was sent
    received_ms: float
    group: str | None = None
    subscription: str | None = None  # the named subscription it was pulled in; None: default


@dataclass(frozen=True)
class Pause:
    """One topic's pause as the clients saw it: from the arrival of pauseTopic's 200 answer to
    the start of the first resumeTopic call, when the server promised to hand none of the
    topic's messages out (a pull sent within it answers nothing until the resume)."""

    topic: str
    from_ms: float             # the pause call's answer arrived
    until_ms: float            # the first resume call was sent


@dataclass(frozen=True)
class SubscriptionRun:
    """One named subscription of a run, created by createSubscription calls retried until one
    answered 200: a message accepted after the first was sent may be delivered in it; one
    whose send started after the 200 answer arrived was accepted after its creation, so it
    must be."""

    topic: str
    name: str
    created_from_ms: float     # the first createSubscription call was sent
    created_ms: float          # the call that answered 200 answered


@dataclass
class ScheduleRun:
    """One recurring schedule of a run (everyMillis): its fire times are first_fire_ms + k *
    every_ms until its deleteSchedule, each an occurrence with msgId ``<schedule_id>:<fire>``."""

    topic: str
    schedule_id: str
    every_ms: int
    first_fire_ms: int            # createSchedule's nextFireTimes[0]
    deleted_from_ms: float = float("inf")   # the deleteSchedule call that answered 200 was sent
    deleted_ms: float = float("inf")        # ... and answered

    def fire_time(self, msg_id: str) -> int | None:
        """The fire time an occurrence's msgId carries, or None for another message."""
        head, _, fire = msg_id.rpartition(":")
        return int(fire) if head == self.schedule_id and fire.isdigit() else None


@dataclass
class History:
    ops: list[Op] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)
    hangs: list[Op] = field(default_factory=list)
    faults: list[tuple[float, float, str]] = field(default_factory=list)  # start, end, what
    pauses: list[Pause] = field(default_factory=list)
    schedules: list[ScheduleRun] = field(default_factory=list)
    subscriptions: list[SubscriptionRun] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, op: Op) -> None:
        with self.lock:
            self.ops.append(op)

    def deliver(self, delivery: Delivery) -> None:
        with self.lock:
            self.deliveries.append(delivery)

    def hang(self, op: Op) -> None:
        with self.lock:
            self.hangs.append(op)

    def fault(self, start_ms: float, end_ms: float, what: str) -> None:
        with self.lock:
            self.faults.append((start_ms, end_ms, what))

    def pause(self, pause: Pause) -> None:
        with self.lock:
            self.pauses.append(pause)

    def subscribe(self, run: SubscriptionRun) -> None:
        with self.lock:
            self.subscriptions.append(run)

    def of(self, kind: str) -> list[Op]:
        with self.lock:
            return [op for op in self.ops if op.kind == kind]

    def trace(self, msg_id: str) -> list[str]:
        """Every call and delivery about one message, in time order: what a violation shows."""
        with self.lock:
            rows = [(op.start_ms, (f"{op.kind} {op.outcome} {op.start_ms:.0f}-{op.end_ms:.0f} "
                                   + (f"in {op.subscription} " if op.subscription else "")
                                   + (f"group {op.group} " if op.group else "")
                                   + (f"trigger {op.trigger_ms} " if op.trigger_ms else "")
                                   + op.detail).strip())
                    for op in self.ops if op.msg_id == msg_id]
            rows += [(d.pull_start_ms, "delivered "
                      + (f"in {d.subscription} " if d.subscription else "")
                      + f"retry={d.retry} pull {d.pull_start_ms:.0f}-{d.received_ms:.0f} "
                      f"trigger {d.trigger_ms}")
                     for d in self.deliveries if d.msg_id == msg_id]
        return [text for _, text in sorted(rows)]
