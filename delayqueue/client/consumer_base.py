"""ConsumerBase: what the threaded Consumer and the asyncio one (delayqueue.aio) share.

Their options and the checks on them, the back-pressure accounting (handler slots promised
to pulls, and ``limit``), the counts of settled and lost messages, and what a failed pull or
a lost delivery logs. How they wait differs (threads and a Condition, or tasks), so each
brings its own: ``_counts_lock`` guards the counts (a threading lock, or nothing on one
event loop), the slot methods are called with the subclass's lock held, and ``_done`` is
the event ``wait()`` waits for.
"""

from __future__ import annotations

import logging
from typing import Any, ContextManager

from .ack_batcher import Settlement
from .backoff import Backoff
from .batch import MAX_BATCH
from .errors import DelayQueueError
from .heartbeat import Delivery
from .model import DelayMsg
from .subscriptions import subscription_kw


class ConsumerBase:
    """Options, slots and counts of a consumer of ``topic`` (its default subscription, or the
    named ``subscription``) with ``workers`` handler slots."""

    _logger: logging.Logger  # the subclass's module's
    _counts_lock: ContextManager[Any]
    _done: Any  # threading.Event or asyncio.Event: set() once finished

    def __init__(self, client: Any, topic: str, handler: Any, *, workers: int,
                 batch: int | None, ack_timeout_ms: int, long_polling: bool,
                 poll_timeout_ms: int, pull_interval_ms: int, backoff_base_s: float,
                 backoff_max_s: float, grace_s: float, limit: int | None,
                 subscription: str | None = None) -> None:
        if batch is not None and batch > MAX_BATCH:
            raise ValueError(f"batch: must be at most {MAX_BATCH}, got {batch}")
        self.client, self.topic, self.handler, self.batch = client, topic, handler, batch
        self.subscription = subscription or None
        self._in_subscription = subscription_kw(self.subscription)  # the calls' keyword
        self.ack_timeout_ms, self.long_polling = ack_timeout_ms, long_polling
        self.poll_timeout_ms, self.pull_interval_ms = poll_timeout_ms, pull_interval_ms
        self.backoff_base_s, self.backoff_max_s = backoff_base_s, backoff_max_s
        self.grace_s = grace_s
        self.acked = self.nacked = 0
        self.lost = 0  # deliveries taken away while handled (stale receipt, gone): not settled
        self._idle = workers  # handler slots not yet promised to a message
        self._remaining = limit  # messages still to take; None = no limit
        self._settled = 0
        self._limit = limit

    def _backoff(self) -> Backoff:
        return Backoff(self.backoff_base_s, self.backoff_max_s)

    # ---- slots (the subclass's lock held) --------------------------------------------
    def _promise(self) -> int | None:
        """Promise idle slots to one pull, up to ``batch``: how many, 0 when ``limit``
        messages were taken (the pull loop ends), None when no slot is idle (wait)."""
        if self._remaining == 0:
            return 0
        if self._idle == 0:
            return None
        n = min(self.batch or MAX_BATCH, self._idle)
        if self._remaining is not None:
            n = min(n, self._remaining)
        self._idle -= n
        if self._remaining is not None:
            self._remaining -= n
        return n

    def _release(self, n: int, untaken: int = 0) -> None:
        """``n`` slots idle again; ``untaken`` of them were promised but brought nothing."""
        self._idle += n
        if self._remaining is not None:
            self._remaining += untaken

    # ---- what happened ---------------------------------------------------------------
    def _pull_failed(self, exc: Exception, backoff: Backoff) -> float:
        """Log a failed pull; the seconds to wait before the next."""
        delay = backoff.next()
        if isinstance(exc, DelayQueueError):
            self._logger.warning("%s: pull failed: %s; retrying in %.2fs", self.topic, exc, delay)
        else:
            self._logger.error("%s: pull failed; retrying in %.2fs", self.topic, delay,
                         exc_info=exc)
        return delay

    def _handler_failed(self, msg: DelayMsg, exc: Exception) -> tuple[bool, str]:
        """Log a handler's exception; (ack?, why) for its settlement: a nack."""
        self._logger.error("%s: handler raised on %s; nacking", self.topic, msg.msg_id,
                           exc_info=exc)
        return False, "handler raised"

    def _lost_one(self, msg: DelayMsg, delivery: Delivery, ok: bool | None = None) -> None:
        """A delivery a heartbeat found lost: neither acked nor nacked, counted as handled.
        ``ok`` None: found while it waited behind its group, before its handler ran."""
        if ok is None:
            self._logger.warning("%s: not handling %s: its delivery was lost while it waited for "
                           "its group (%s)", self.topic, msg.msg_id, delivery.lost)
        else:
            self._logger.warning("%s: not %s %s: its delivery was lost while handled (%s)",
                           self.topic, "acking" if ok else "nacking", msg.msg_id,
                           delivery.lost)
        with self._counts_lock:
            self.lost += 1
        self._count_handled()

    def _settled_one(self, settlement: Settlement, code: int | None) -> None:
        """The answer to one ack or nack (None: never answered; the server redelivers)."""
        with self._counts_lock:
            if code == 200:
                if settlement.ack:
                    self.acked += 1
                else:
                    self.nacked += 1
            elif code == 409:
                self.lost += 1
        if settlement.handled:
            self._count_handled()

    def _count_handled(self) -> None:
        with self._counts_lock:
            self._settled += 1
            if self._limit is not None and self._settled >= self._limit:
                self._done.set()
