"""Heartbeats: keep the ack deadline of a long-running handler's delivery ahead of it.

A Consumer pulls with an ack timeout; a handler still running when half of it has passed
gets its deadline pushed to now + the ack timeout again (``changeVisibility`` with the
delivery's receipt), every half ack timeout, until it returns. One thread serves every
in-flight delivery of a consumer, and is only busy when a handler runs that long.

What an answer means:

- 409 (stale receipt) or 404 (deleted, ended): the delivery is lost, someone else may be
  handling the message now; the Consumer neither acks nor nacks it when the handler returns.
- 400 (not consuming: the deadline passed before the beat arrived): no more beats; the ack
  with the receipt still succeeds if the message has not been redelivered since.
- anything else (server unreachable, code 500): tried again soon, the deadline is not yet lost.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

from .errors import BadRequestError, DelayQueueError, NotFoundError, StaleReceiptError
from .model import DelayMsg
from .subscriptions import subscription_kw

if TYPE_CHECKING:
    from .delay_queue_client import DelayQueueClient

logger = logging.getLogger(__name__)

RETRY_AFTER_FAILURE_S = 1.0


class Delivery:
    """One in-flight delivery. ``lost`` is set once a heartbeat learns it was taken away."""

    def __init__(self, msg: DelayMsg, next_at: float) -> None:
        self.msg = msg
        self.next_at = next_at
        self.beats = 0
        self.lost: str | None = None  # why, when the delivery is lost
        self.stopped = False
        self.beating = False


class HeartbeatsBase:
    """A consumer's heartbeats: every ``interval_s`` (half the ack timeout) from the pull, in
    the consumer's ``subscription`` (None: the default one); the threaded ones here and the
    asyncio ones (delayqueue.aio) beat the same way."""

    def __init__(self, client: Any, topic: str, ack_timeout_ms: int, *,
                 subscription: str | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.topic = topic
        self.subscription = subscription
        self.ack_timeout_ms = int(ack_timeout_ms)
        self.interval_s = self.ack_timeout_ms / 2000
        self._clock = clock

    def _after_beat(self, delivery: Delivery, error: Exception | None,
                    sent_at: float) -> float | None:
        """What a beat's answer (``error`` None: extended) means (the module's docstring), for
        the threaded Heartbeats and the asyncio ones (delayqueue.aio): the monotonic time of
        the next beat, or None for no more (``delivery.lost`` set when it was taken away)."""
        msg = delivery.msg
        if error is None:
            delivery.beats += 1
            logger.debug("%s: extended the ack deadline of %s by %d ms", msg.topic, msg.msg_id,
                         self.ack_timeout_ms)
            return sent_at + self.interval_s
        if isinstance(error, StaleReceiptError):
            delivery.lost = f"delivered again since ({error})"
        elif isinstance(error, NotFoundError):
            delivery.lost = f"message is gone ({error})"
        elif isinstance(error, BadRequestError):
            logger.warning("%s: heartbeat of %s came too late, its ack deadline had passed: "
                           "%s; the ack may still succeed", msg.topic, msg.msg_id, error)
            return None
        else:
            if isinstance(error, DelayQueueError):
                logger.warning("%s: heartbeat of %s failed: %s; retrying", msg.topic,
                               msg.msg_id, error)
            else:
                logger.error("%s: heartbeat of %s failed; retrying", msg.topic, msg.msg_id,
                             exc_info=error)
            return self._clock() + min(RETRY_AFTER_FAILURE_S, self.interval_s / 4)
        logger.warning("%s: delivery of %s lost while its handler ran: %s; it will be "
                       "neither acked nor nacked", msg.topic, msg.msg_id, delivery.lost)
        return None


class Heartbeats(HeartbeatsBase):
    """Beat every tracked delivery each ``interval_s`` (half the ack timeout) from its pull,
    from one thread.

    The thread sleeps until the earliest beat due (a delivery's pull + half its ack
    timeout, the margin left before its deadline) and is woken early only by a delivery
    due sooner than that, or by ``close``; tracking and untracking a delivery that returns
    before its beat wake nobody, so a consumer of short handlers costs it no wake-up per
    message. ``wakeups`` counts the times it woke.
    """

    client: "DelayQueueClient"

    def __init__(self, client: "DelayQueueClient", topic: str, ack_timeout_ms: int, *,
                 subscription: str | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(client, topic, ack_timeout_ms, subscription=subscription, clock=clock)
        self._live: dict[Delivery, None] = {}  # tracked, not stopped, not being beaten
        self._cond = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None
        # When the sleeping thread wakes by itself (monotonic); -inf while it is awake (it
        # looks at every delivery before it sleeps again).
        self._wake_at = float("-inf")
        self.wakeups = 0

    def track(self, msg: DelayMsg, pulled_at: float) -> Delivery:
        """Start beating ``msg``, pulled (the request sent) at ``pulled_at`` (monotonic)."""
        delivery = Delivery(msg, pulled_at + self.interval_s)
        with self._cond:
            self._live[delivery] = None
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name=f"dq-heartbeat-{self.topic}")
                self._wake_at = float("-inf")
                self._thread.start()
            elif delivery.next_at < self._wake_at:  # due before the thread would look
                self._cond.notify_all()
        return delivery

    def untrack(self, delivery: Delivery) -> None:
        """Stop beating; waits for a beat in flight, so ``delivery.lost`` is final after it."""
        with self._cond:
            delivery.stopped = True
            while delivery.beating:
                self._cond.wait()
            self._live.pop(delivery, None)
            if self._closed and not self._live:
                self._cond.notify_all()  # the thread may end now

    def close(self) -> None:
        """Let the thread end once no delivery is tracked (beats go on for those that are)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _next_due(self) -> Delivery | None:
        """The delivery to beat now (lock held), or None after sleeping until one may be
        due; None too when the thread is to end (``_thread`` None)."""
        if self._closed and not self._live:
            self._thread = None
            return None
        first = min(self._live, key=lambda d: d.next_at, default=None)
        now = self._clock()
        if first is not None and first.next_at <= now:
            return first
        # With nothing tracked, sleep half an interval, not until woken: a delivery pulled
        # since is not due before then, so tracking it wakes nobody. (Sleeping until woken
        # made every track wake the thread whenever the handler had returned before the
        # thread looked: a wake-up per message.)
        self._wake_at = now + self.interval_s / 2 if first is None else first.next_at
        self._cond.wait(self._wake_at - now)
        self._wake_at = float("-inf")
        self.wakeups += 1
        return None

    def _run(self) -> None:
        while True:
            with self._cond:
                delivery = self._next_due()
                while delivery is None:
                    if self._thread is None:
                        return
                    delivery = self._next_due()
                del self._live[delivery]
                delivery.beating = True
            retry_s: float | None = None
            try:
                retry_s = self._beat(delivery)
            finally:
                with self._cond:
                    delivery.beating = False
                    if retry_s is not None and not delivery.stopped:
                        delivery.next_at = retry_s
                        self._live[delivery] = None
                    self._cond.notify_all()  # an untrack waiting for this beat

    def _beat(self, delivery: Delivery) -> float | None:
        """One changeVisibility; the monotonic time of the next beat, or None for no more."""
        msg = delivery.msg
        sent_at = self._clock()
        try:
            self.client.change_visibility(msg.topic, msg.msg_id, self.ack_timeout_ms,
                                          receipt=msg.receipt,
                                          **subscription_kw(self.subscription))
        except Exception as exc:  # noqa: BLE001 - the heartbeat thread must not die
            return self._after_beat(delivery, exc, sent_at)
        return self._after_beat(delivery, None, sent_at)
