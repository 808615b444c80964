"""AckBatcher: a Consumer's acks and nacks, sent together in ackMsgBatch requests.

A settlement (an ack or a nack, with the delivery's receipt) waits at most ``linger_ms``, or
until ``max_batch`` are waiting, and goes out with every other one waiting then. One request
is in flight at a time; what arrives meanwhile goes in the next.

Each settlement keeps the subscription its delivery was made in (None: the default one), as
an ackMsgBatch request names one subscription: a batch is the waiting settlements of the
first one's subscription, and the others go in the next.

What a failure means:

- the whole request failed (no node reachable, code 500, not our answer): the same
  settlements are sent again after a back-off (doubling from 50 ms to 2 s, jittered) for as
  long as the consumer runs, so a restarting server gets them once it is back. Re-sending is
  safe: an ack of an acked message answers 200 again, and a nack carries its receipt, so a
  nack that had in fact been applied answers 400 or 409 instead of nacking a redelivery.
- an entry answered 409 (stale receipt: delivered again since), 404 (deleted or ended) or
  400 (not consuming): logged and dropped; retrying could not change the answer.
- an entry answered 5xx: sent again as above, at most ``MAX_ENTRY_ATTEMPTS`` times.
- the server has no ackMsgBatch (HTTP 404: an older delayqueue, or camellia): each
  settlement is sent alone (ackMsg), for ``UNBATCHED_RETRY_S`` before the batch is tried again.

``close(timeout_s)`` sends what is waiting, trying for up to ``timeout_s``, then drops the rest
with a warning (the server redelivers those after their ack timeout). After ``close`` a
settlement is sent alone at once, in the caller's thread.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Callable

from .backoff import Backoff
from .batch import MAX_BATCH
from .entries import AckEntry
from .errors import BadRequestError, DelayQueueError, UnsupportedError
from .model import DelayMsg
from .subscriptions import subscription_kw

if TYPE_CHECKING:
    from .delay_queue_client import DelayQueueClient

logger = logging.getLogger(__name__)

ACK_LINGER_MS = 5            # the default longest wait of a settlement before it is sent
MAX_ENTRY_ATTEMPTS = 5       # sends of one entry the server keeps answering 5xx
RETRY_BASE_S, RETRY_MAX_S = 0.05, 2.0
UNBATCHED_RETRY_S = 60.0


class Settlement:
    """One ack or nack of a delivered message, in ``subscription`` (None: the default one);
    ``handled``: settles a handler's run."""

    __slots__ = ("msg", "ack", "handled", "queued_at", "attempts", "subscription")

    def __init__(self, msg: DelayMsg, ack: bool, handled: bool, queued_at: float,
                 subscription: str | None = None) -> None:
        self.msg, self.ack, self.handled = msg, ack, handled
        self.queued_at = queued_at
        self.attempts = 0
        self.subscription = subscription

    @property
    def verb(self) -> str:
        return "ack" if self.ack else "nack"


# Called once per settlement with the code it was answered (None: given up, never answered).
OnDone = Callable[[Settlement, "int | None"], None]


class SettlementQueue:
    """What the threaded AckBatcher and the asyncio one (delayqueue.aio) share: the waiting
    settlements, when the next batch is due or given up, and what each answer means.

    Not thread-safe: AckBatcher calls it with its lock held.
    """

    def __init__(self, topic: str, on_done: OnDone, *, linger_ms: float, max_batch: int,
                 clock: Callable[[], float]) -> None:
        if linger_ms < 0 or not 1 <= max_batch <= MAX_BATCH:
            raise ValueError(f"need linger_ms >= 0 and 1 <= max_batch <= {MAX_BATCH}")
        self.topic, self.on_done = topic, on_done
        self.linger_s = linger_ms / 1000
        self.max_batch = max_batch
        self.clock = clock
        self.pending: list[Settlement] = []
        self.closed = False
        self.give_up_at = float("inf")
        self.retry_at = 0.0
        self.backoff = Backoff(RETRY_BASE_S, RETRY_MAX_S)
        self.unbatched_until = 0.0

    def close(self, timeout_s: float) -> None:
        self.closed = True
        self.give_up_at = min(self.give_up_at, self.clock() + timeout_s)

    def next_step(self) -> tuple[list[Settlement] | None, bool, float | None]:
        """(batch, give_up, wait_s): a batch to send, or to give up when ``give_up``; else
        no batch and how long to wait for one (None: until woken; ``ended()``: never)."""
        now = self.clock()
        if self.closed and self.pending and now >= self.give_up_at:
            batch, self.pending = self.pending, []
            return batch, True, None
        if not self.pending:
            return None, False, None
        due = self.retry_at
        if not self.closed and len(self.pending) < self.max_batch:
            due = max(due, self.pending[0].queued_at + self.linger_s)
        if now >= due:
            batch = self._take()
            return batch, False, None
        return None, False, min(due, self.give_up_at) - now

    def _take(self) -> list[Settlement]:
        """The first waiting settlements, at most ``max_batch``, all of one subscription (the
        first one's), out of ``pending``; the others keep their order."""
        subscription = self.pending[0].subscription
        batch: list[Settlement] = []
        rest: list[Settlement] = []
        for settlement in self.pending:
            if settlement.subscription == subscription and len(batch) < self.max_batch:
                batch.append(settlement)
            else:
                rest.append(settlement)
        self.pending = rest
        return batch

    def ended(self) -> bool:
        """Closed, and nothing left to send: the sender ends."""
        return self.closed and not self.pending

    def sent(self, retry: list[Settlement]) -> None:
        """A batch went out: ``retry`` (its settlements to send again) waits a back-off."""
        if retry:
            self.pending[:0] = retry
            self.retry_at = self.clock() + self.backoff.next()
        else:
            self.backoff.reset()
            self.retry_at = 0.0

    def batched(self) -> bool:
        """Send the next batch as ackMsgBatch (False: one ackMsg a settlement for a while)."""
        return self.clock() >= self.unbatched_until

    def batch_failed(self, exc: DelayQueueError, size: int) -> bool:
        """An ackMsgBatch failed as a whole: True to send the same batch again after the
        back-off, False to send its settlements one by one now."""
        if isinstance(exc, UnsupportedError):
            logger.info("%s: the server has no ackMsgBatch; acking one message a request",
                        self.topic)
            self.unbatched_until = self.clock() + UNBATCHED_RETRY_S
            return False
        if isinstance(exc, BadRequestError):  # the whole request refused: never loop on it
            logger.error("%s: ackMsgBatch refused: %s; acking one message a request",
                         self.topic, exc)
            return False
        log = logger.warning if self.backoff.attempts == 0 else logger.debug
        log("%s: %d ack(s)/nack(s) not sent: %s; sending them again after a back-off",
            self.topic, size, exc)
        return True

    def answered(self, batch: list[Settlement], codes: list[int | None]) -> list[Settlement]:
        """Each settlement's code (None: no server answered): the ones to send again; the
        others are finished."""
        retry = []
        for settlement, code in zip(batch, codes):
            if code is None or code >= 500:
                settlement.attempts += 1
                if code is None or settlement.attempts < MAX_ENTRY_ATTEMPTS:
                    retry.append(settlement)
                    continue
            self.finish(settlement, code)
        return retry

    def finish(self, settlement: Settlement, code: int | None) -> None:
        msg, verb = settlement.msg, settlement.verb
        if code == 409:
            logger.warning("%s: %s of %s refused, the message was delivered again since",
                           msg.topic, verb, msg.msg_id)
        elif code == 404:
            logger.warning("%s: %s of %s: message is gone (deleted or ended)", msg.topic, verb,
                           msg.msg_id)
        elif code == 400:
            logger.warning("%s: %s of %s refused: the message is not being consumed",
                           msg.topic, verb, msg.msg_id)
        elif code != 200:
            why = "no server answered" if code is None else f"code {code}"
            logger.warning("%s: %s of %s failed (%s); the server redelivers it after its ack "
                           "timeout", msg.topic, verb, msg.msg_id, why)
        self.on_done(settlement, code if code in (200, 400, 404, 409) else None)


class AckBatcher:
    """Batches the settlements of one topic's consumer; ``on_done`` hears each one's end."""

    def __init__(self, client: "DelayQueueClient", topic: str, on_done: OnDone, *,
                 linger_ms: float = ACK_LINGER_MS, max_batch: int = MAX_BATCH,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._queue = SettlementQueue(topic, on_done, linger_ms=linger_ms,
                                      max_batch=max_batch, clock=clock)
        self.client, self.topic = client, topic
        self.requests = 0  # ackMsgBatch requests answered (for tests and curiosity)
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def submit(self, msg: DelayMsg, ack: bool, handled: bool = True,
               subscription: str | None = None) -> None:
        """Queue an ack (``ack``) or a nack of ``msg`` with its receipt, in the subscription
        it was delivered in (None: the default one)."""
        settlement = Settlement(msg, ack, handled, self._queue.clock(), subscription)
        with self._cond:
            if not self._queue.closed:
                self._queue.pending.append(settlement)
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, daemon=True,
                                                    name=f"dq-ack-{self.topic}")
                    self._thread.start()
                self._cond.notify_all()
                return
        self._queue.finish(settlement, self._send_alone(settlement))

    def close(self, timeout_s: float) -> None:
        """Send what is waiting, trying for up to ``timeout_s``; then give up on the rest."""
        with self._cond:
            self._queue.close(timeout_s)
            self._cond.notify_all()
            # A request in flight may outlast the deadline by its own timeouts.
            bound = time.monotonic() + timeout_s + 2 * self.client.timeout + 1
            while self._thread is not None and time.monotonic() < bound:
                self._cond.wait(bound - time.monotonic())

    # ---- the sending thread ----------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                batch, give_up = self._next_batch()
            if batch is None:
                return
            if give_up:
                for settlement in batch:
                    self._queue.finish(settlement, None)
                continue
            try:
                retry = self._deliver(batch)
            except Exception:  # noqa: BLE001 - the sending thread must never die
                logger.exception("%s: sending %d ack(s)/nack(s) failed", self.topic, len(batch))
                retry = batch
            with self._cond:
                self._queue.sent(retry)
                self._cond.notify_all()

    def _next_batch(self) -> tuple[list[Settlement] | None, bool]:
        """Wait (lock held) for the next batch to send, or to give up; (None, _) to end."""
        while True:
            batch, give_up, wait_s = self._queue.next_step()
            if batch is not None:
                return batch, give_up
            if self._queue.ended():
                self._thread = None
                self._cond.notify_all()
                return None, False
            self._cond.wait(wait_s)

    def _deliver(self, batch: list[Settlement]) -> list[Settlement]:
        """Send one batch; returns the settlements to send again."""
        codes: list[int | None] | None = None
        if self._queue.batched():
            entries = [AckEntry(s.msg.msg_id, s.msg.receipt, s.ack) for s in batch]
            try:
                codes = [r.code for r in self.client.ack_batch(
                    self.topic, entries, **subscription_kw(batch[0].subscription))]
                self.requests += 1
            except DelayQueueError as exc:
                if self._queue.batch_failed(exc, len(batch)):
                    return batch
        if codes is None:
            codes = [self._send_alone(s) for s in batch]
        return self._queue.answered(batch, codes)

    def _send_alone(self, settlement: Settlement) -> int | None:
        """ackMsg for one settlement: the code answered (None when no server answered)."""
        msg = settlement.msg
        try:
            verb = self.client.ack if settlement.ack else self.client.nack
            verb(msg.topic, msg.msg_id, receipt=msg.receipt,
                 **subscription_kw(settlement.subscription))
        except DelayQueueError as exc:
            return exc.code
        return 200
