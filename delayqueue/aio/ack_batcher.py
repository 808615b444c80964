"""AsyncAckBatcher: the asyncio consumer's acks and nacks, sent together in ackMsgBatch.

The threaded AckBatcher's rules (client/ack_batcher.py), through the same ``SettlementQueue``:
each settlement waits at most ``linger_ms``; a batch that fails as a whole is sent again
after a back-off; what each entry's answer means; one ackMsg a settlement where the server
has no ackMsgBatch. One task sends, one request at a time.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Callable

from delayqueue.client.ack_batcher import (
    ACK_LINGER_MS,
    OnDone,
    Settlement,
    SettlementQueue,
)
from delayqueue.client.batch import MAX_BATCH
from delayqueue.client.entries import AckEntry
from delayqueue.client.errors import DelayQueueError
from delayqueue.client.model import DelayMsg
from delayqueue.client.subscriptions import subscription_kw

if TYPE_CHECKING:
    from .client import AsyncDelayQueueClient

logger = logging.getLogger(__name__)


class AsyncAckBatcher:
    """Batches the settlements of one topic's consumer; ``on_done`` hears each one's end."""

    def __init__(self, client: "AsyncDelayQueueClient", topic: str, on_done: OnDone, *,
                 linger_ms: float = ACK_LINGER_MS, max_batch: int = MAX_BATCH,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._queue = SettlementQueue(topic, on_done, linger_ms=linger_ms,
                                      max_batch=max_batch, clock=clock)
        self.client, self.topic = client, topic
        self.requests = 0  # ackMsgBatch requests answered
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def submit(self, msg: DelayMsg, ack: bool, handled: bool = True,
                     subscription: str | None = None) -> None:
        """Queue an ack (``ack``) or a nack of ``msg`` with its receipt, in the subscription
        it was delivered in (None: the default one); after ``close``, send it alone at once."""
        settlement = Settlement(msg, ack, handled, self._queue.clock(), subscription)
        if self._queue.closed:
            self._queue.finish(settlement, await self._send_alone(settlement))
            return
        self._queue.pending.append(settlement)
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"dq-ack-{self.topic}")
        self._wake.set()

    async def close(self, timeout_s: float) -> None:
        """Send what is waiting, trying for up to ``timeout_s``; then give up on the rest."""
        self._queue.close(timeout_s)
        self._wake.set()
        if self._task is not None:
            # A request in flight may outlast the deadline by its own timeouts.
            await asyncio.wait({self._task}, timeout=timeout_s + 2 * self.client.timeout + 1)

    async def _run(self) -> None:
        while True:
            batch, give_up, wait_s = self._queue.next_step()
            if batch is None:
                if self._queue.ended():
                    self._task = None
                    return
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), wait_s)
                except TimeoutError:
                    pass
                continue
            if give_up:
                for settlement in batch:
                    self._queue.finish(settlement, None)
                continue
            try:
                retry = await self._deliver(batch)
            except Exception:  # noqa: BLE001 - the sending task must never die
                logger.exception("%s: sending %d ack(s)/nack(s) failed", self.topic, len(batch))
                retry = batch
            self._queue.sent(retry)

    async def _deliver(self, batch: list[Settlement]) -> list[Settlement]:
        """Send one batch; returns the settlements to send again."""
        codes: list[int | None] | None = None
        if self._queue.batched():
            entries = [AckEntry(s.msg.msg_id, s.msg.receipt, s.ack) for s in batch]
            try:
                codes = [r.code for r in await self.client.ack_batch(
                    self.topic, entries, **subscription_kw(batch[0].subscription))]
                self.requests += 1
            except DelayQueueError as exc:
                if self._queue.batch_failed(exc, len(batch)):
                    return batch
        if codes is None:
            codes = [await self._send_alone(s) for s in batch]
        return self._queue.answered(batch, codes)

    async def _send_alone(self, settlement: Settlement) -> int | None:
        """ackMsg for one settlement: the code answered (None when no server answered)."""
        msg = settlement.msg
        verb = self.client.ack if settlement.ack else self.client.nack
        try:
            await verb(msg.topic, msg.msg_id, receipt=msg.receipt,
                       **subscription_kw(settlement.subscription))
        except DelayQueueError as exc:
            return exc.code
        return 200
