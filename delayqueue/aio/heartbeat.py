"""AsyncHeartbeats: the asyncio consumer's heartbeats, one task per long-running delivery.

What a beat does and what its answer means are the threaded Heartbeats' (client/heartbeat.py,
``HeartbeatsBase._after_beat``): every half ack timeout from the pull, a changeVisibility with
the delivery's receipt until the handler returns; a 409 or 404 marks the delivery lost.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Callable

from delayqueue.client.heartbeat import Delivery, HeartbeatsBase
from delayqueue.client.model import DelayMsg
from delayqueue.client.subscriptions import subscription_kw

if TYPE_CHECKING:
    from .client import AsyncDelayQueueClient


class AsyncHeartbeats(HeartbeatsBase):
    """Beat every tracked delivery each half ``ack_timeout_ms`` from its pull, a task each."""

    client: "AsyncDelayQueueClient"

    def __init__(self, client: "AsyncDelayQueueClient", topic: str, ack_timeout_ms: int, *,
                 subscription: str | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(client, topic, ack_timeout_ms, subscription=subscription, clock=clock)
        self._tasks: dict[Delivery, asyncio.Task[None]] = {}

    def track(self, msg: DelayMsg, pulled_at: float) -> Delivery:
        """Start beating ``msg``, pulled (the request sent) at ``pulled_at`` (monotonic)."""
        delivery = Delivery(msg, pulled_at + self.interval_s)
        self._tasks[delivery] = asyncio.create_task(self._run(delivery),
                                                    name=f"dq-heartbeat-{msg.msg_id}")
        return delivery

    async def untrack(self, delivery: Delivery) -> None:
        """Stop beating; waits for a beat in flight, so ``delivery.lost`` is final after it."""
        delivery.stopped = True
        task = self._tasks.pop(delivery, None)
        if task is None or task.done():
            return
        if not delivery.beating:
            task.cancel()
        await asyncio.wait({task})

    async def _run(self, delivery: Delivery) -> None:
        while not delivery.stopped:
            await asyncio.sleep(max(0.0, delivery.next_at - self._clock()))
            if delivery.stopped:
                return
            delivery.beating = True
            try:
                next_at = await self._beat(delivery)
            finally:
                delivery.beating = False
            if next_at is None:
                return
            delivery.next_at = next_at

    async def _beat(self, delivery: Delivery) -> float | None:
        """One changeVisibility; the monotonic time of the next beat, or None for no more."""
        msg = delivery.msg
        sent_at = self._clock()
        try:
            await self.client.change_visibility(msg.topic, msg.msg_id, self.ack_timeout_ms,
                                                receipt=msg.receipt,
                                                **subscription_kw(self.subscription))
        except Exception as exc:  # noqa: BLE001 - a beat's failure is an answer too
            return self._after_beat(delivery, exc, sent_at)
        return self._after_beat(delivery, None, sent_at)
