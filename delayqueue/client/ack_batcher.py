"""AckBatcher: a Consumer's acks and nacks, sent together in ackMsgBatch requests.

A settlement (an ack or a nack, with the delivery's receipt) waits at most ``linger_ms``, or
until ``max_batch`` are waiting, and goes out with every other one waiting then. One request
is in flight at a time; what arrives meanwhile goes in the next.

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
from .errors import BadRequestError, DelayQueueError, UnsupportedError
from .model import AckEntry, DelayMsg

if TYPE_CHECKING:
    from .delay_queue_client import DelayQueueClient

logger = logging.getLogger(__name__)

ACK_LINGER_MS = 5            # the default longest wait of a settlement before it is sent
MAX_ENTRY_ATTEMPTS = 5       # sends of one entry the server keeps answering 5xx
RETRY_BASE_S, RETRY_MAX_S = 0.05, 2.0
UNBATCHED_RETRY_S = 60.0


class Settlement:
    """One ack or nack of a delivered message; ``handled``: settles a handler's run."""

    __slots__ = ("msg", "ack", "handled", "queued_at", "attempts")

    def __init__(self, msg: DelayMsg, ack: bool, handled: bool, queued_at: float) -> None:
        self.msg, self.ack, self.handled = msg, ack, handled
        self.queued_at = queued_at
        self.attempts = 0

    @property
    def verb(self) -> str:
        return "ack" if self.ack else "nack"


# Called once per settlement with the code it was answered (None: given up, never answered).
OnDone = Callable[[Settlement, "int | None"], None]


class AckBatcher:
    """Batches the settlements of one topic's consumer; ``on_done`` hears each one's end."""

    def __init__(self, client: "DelayQueueClient", topic: str, on_done: OnDone, *,
                 linger_ms: float = ACK_LINGER_MS, max_batch: int = MAX_BATCH,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if linger_ms < 0 or not 1 <= max_batch <= MAX_BATCH:
            raise ValueError(f"need linger_ms >= 0 and 1 <= max_batch <= {MAX_BATCH}")
        self.client, self.topic, self.on_done = client, topic, on_done
        self.linger_s = linger_ms / 1000
        self.max_batch = max_batch
        self.requests = 0  # ackMsgBatch requests answered (for tests and curiosity)
        self._clock = clock
        self._pending: list[Settlement] = []
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._give_up_at = float("inf")
        self._retry_at = 0.0
        self._backoff = Backoff(RETRY_BASE_S, RETRY_MAX_S)
        self._unbatched_until = 0.0

    def submit(self, msg: DelayMsg, ack: bool, handled: bool = True) -> None:
        """Queue an ack (``ack``) or a nack of ``msg`` with its receipt."""
        settlement = Settlement(msg, ack, handled, self._clock())
        with self._cond:
            if not self._closed:
                self._pending.append(settlement)
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, daemon=True,
                                                    name=f"dq-ack-{self.topic}")
                    self._thread.start()
                self._cond.notify_all()
                return
        self._finish(settlement, self._send_alone(settlement))

    def close(self, timeout_s: float) -> None:
        """Send what is waiting, trying for up to ``timeout_s``; then give up on the rest."""
        with self._cond:
            self._closed = True
            self._give_up_at = min(self._give_up_at, self._clock() + timeout_s)
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
                    self._finish(settlement, None)
                continue
            try:
                retry = self._deliver(batch)
            except Exception:  # noqa: BLE001 - the sending thread must never die
                logger.exception("%s: sending %d ack(s)/nack(s) failed", self.topic, len(batch))
                retry = batch
            with self._cond:
                if retry:
                    self._pending[:0] = retry
                    self._retry_at = self._clock() + self._backoff.next()
                else:
                    self._backoff.reset()
                    self._retry_at = 0.0
                self._cond.notify_all()

    def _next_batch(self) -> tuple[list[Settlement] | None, bool]:
        """Wait (lock held) for the next batch to send, or to give up; (None, _) to end."""
        while True:
            now = self._clock()
            if self._closed and self._pending and now >= self._give_up_at:
                batch, self._pending = self._pending, []
                return batch, True
            if not self._pending:
                if self._closed:
                    self._thread = None
                    self._cond.notify_all()
                    return None, False
                self._cond.wait()
                continue
            due = self._retry_at
            if not self._closed and len(self._pending) < self.max_batch:
                due = max(due, self._pending[0].queued_at + self.linger_s)
            if now >= due:
                batch = self._pending[:self.max_batch]
                del self._pending[:self.max_batch]
                return batch, False
            self._cond.wait(min(due, self._give_up_at) - now)

    def _deliver(self, batch: list[Settlement]) -> list[Settlement]:
        """Send one batch; returns the settlements to send again."""
        codes: list[int | None] | None = None
        if self._clock() >= self._unbatched_until:
            entries = [AckEntry(s.msg.msg_id, s.msg.receipt, s.ack) for s in batch]
            try:
                results = self.client.ack_batch(self.topic, entries)
                codes = [r.code for r in results]
                self.requests += 1
            except UnsupportedError:
                logger.info("%s: the server has no ackMsgBatch; acking one message a request",
                            self.topic)
                self._unbatched_until = self._clock() + UNBATCHED_RETRY_S
            except BadRequestError as exc:  # the whole request refused: never loop on it
                logger.error("%s: ackMsgBatch refused: %s; acking one message a request",
                             self.topic, exc)
            except DelayQueueError as exc:
                log = logger.warning if self._backoff.attempts == 0 else logger.debug
                log("%s: %d ack(s)/nack(s) not sent: %s; sending them again after a back-off",
                    self.topic, len(batch), exc)
                return batch
        if codes is None:
            codes = [self._send_alone(s) for s in batch]
        retry = []
        for settlement, code in zip(batch, codes):
            if code is None or code >= 500:
                settlement.attempts += 1
                if code is None or settlement.attempts < MAX_ENTRY_ATTEMPTS:
                    retry.append(settlement)
                    continue
            self._finish(settlement, code)
        return retry

    def _send_alone(self, settlement: Settlement) -> int | None:
        """ackMsg for one settlement: the code answered (None when no server answered)."""
        msg = settlement.msg
        try:
            if settlement.ack:
                self.client.ack(msg.topic, msg.msg_id, receipt=msg.receipt)
            else:
                self.client.nack(msg.topic, msg.msg_id, receipt=msg.receipt)
        except DelayQueueError as exc:
            return exc.code
        return 200

    def _finish(self, settlement: Settlement, code: int | None) -> None:
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
