"""AsyncConsumer: the threaded Consumer's semantics (client/consumer.py) on asyncio tasks.

Back-pressure: at most ``concurrency`` handlers run at once, and a pull asks for as many
messages as there are idle handler slots (at most ``batch``), so every message pulled starts
at once; ``pullers`` pull loops share the count of idle slots and never over-commit.

Acks and nacks carry the delivery's receipt and go out in ackMsgBatch requests (each waits
at most ``ack_linger_ms``), sent again after a back-off when a request fails as a whole. A
handler still running at half the ack timeout has its ack deadline extended every half ack
timeout until it returns (``heartbeat=False`` turns that off); one whose delivery a heartbeat
found lost (409, 404) is neither acked nor nacked. At most one message of a group runs at a
time; one that arrives while another of its group runs waits, in order (GroupGate). A
consumer of a named ``subscription`` pulls, acks, nacks and beats in it.

stop(): pulling stops (a poll in flight finishes, at most ``poll_timeout_ms``, and what it
brings back is nacked), running handlers get ``grace_s`` to finish (one still running
afterwards settles its message when it returns), messages waiting behind their group are
nacked, and the acks and nacks still waiting are sent (for up to ``ACK_FLUSH_AT_STOP_S``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import logging
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from delayqueue.client.ack_batcher import ACK_LINGER_MS
from delayqueue.client.consumer import ACK_FLUSH_AT_STOP_S, Pulled
from delayqueue.client.consumer_base import ConsumerBase
from delayqueue.client.group_gate import GroupGate
from delayqueue.client.model import DelayMsg

from .ack_batcher import AsyncAckBatcher
from .heartbeat import AsyncHeartbeats

if TYPE_CHECKING:
    from .client import AsyncDelayQueueClient

logger = logging.getLogger(__name__)

# A coroutine function (a plain function is accepted too: its result is awaited if it can be).
AsyncHandler = Callable[[DelayMsg], "Awaitable[Any] | Any"]
# The consumer whose handler the current task runs (stop() from inside a handler).
_handling: contextvars.ContextVar["AsyncConsumer | None"] = contextvars.ContextVar(
    "dq_handling", default=None)


class AsyncConsumer(ConsumerBase):
    """Pull messages of ``topic`` and await ``handler`` on each: True acks, False/raise
    nacks. Created (and started) by ``AsyncDelayQueueClient.listen``.

    Args:
        subscription: the named subscription to consume (None: the topic's default one).
        pullers: pull loops (polls in flight at most); the threaded Consumer's pull_threads.
        concurrency: handlers running at once; the threaded Consumer's consume_threads.
        Others as the threaded Consumer's: batch, limit, ack_timeout_ms, long_polling,
        poll_timeout_ms, pull_interval_ms, backoff_base_s, backoff_max_s, grace_s,
        heartbeat, ack_linger_ms.
    """

    _logger = logger

    def __init__(self, client: "AsyncDelayQueueClient", topic: str, handler: AsyncHandler, *,
                 subscription: str | None = None, pullers: int = 1, concurrency: int = 1,
                 batch: int | None = None,
                 ack_timeout_ms: int = 30_000, long_polling: bool = True,
                 poll_timeout_ms: int = 3_000, pull_interval_ms: int = 100,
                 backoff_base_s: float = 0.1, backoff_max_s: float = 10.0,
                 grace_s: float = 30.0, limit: int | None = None,
                 heartbeat: bool = True, ack_linger_ms: float = ACK_LINGER_MS) -> None:
        if min(pullers, concurrency, 1 if batch is None else batch) < 1:
            raise ValueError("pullers, concurrency and batch must be at least 1")
        super().__init__(client, topic, handler, workers=concurrency, batch=batch,
                         ack_timeout_ms=ack_timeout_ms, long_polling=long_polling,
                         poll_timeout_ms=poll_timeout_ms, pull_interval_ms=pull_interval_ms,
                         backoff_base_s=backoff_base_s, backoff_max_s=backoff_max_s,
                         grace_s=grace_s, limit=limit, subscription=subscription)
        self.pullers, self.concurrency = pullers, concurrency
        self.running = 0  # handlers running now (never above ``concurrency``)
        self._heartbeats = AsyncHeartbeats(client, topic, ack_timeout_ms,
                                           subscription=self.subscription) if heartbeat else None
        self._acks = AsyncAckBatcher(client, topic, self._settled_one, linger_ms=ack_linger_ms)
        self._counts_lock = contextlib.nullcontext()  # one event loop: no other thread counts
        self._cond = asyncio.Condition()
        self._stopping = asyncio.Event()
        self._done = asyncio.Event()
        self._groups: GroupGate[Pulled] = GroupGate()  # messages blocked behind their head
        self._handlers: set[asyncio.Task[None]] = set()
        self._pull_tasks: list[asyncio.Task[None]] = []

    # ---- lifecycle -------------------------------------------------------------------
    def start(self) -> "AsyncConsumer":
        """Start the pull loops in the running event loop (RuntimeError outside one)."""
        asyncio.get_running_loop()  # before any coroutine is made that would never run
        if not self._pull_tasks:
            self._pull_tasks = [asyncio.create_task(self._pull_loop(),
                                                    name=f"dq-pull-{self.topic}-{i}")
                                for i in range(self.pullers)]
        return self

    async def __aenter__(self) -> "AsyncConsumer":
        return self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def wait(self, timeout: float | None = None) -> bool:
        """Wait until stopped or, with ``limit``, until every message is handled."""
        if self._done.is_set():
            return True
        try:
            await asyncio.wait_for(self._done.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def stop(self, grace_s: float | None = None) -> None:
        """Stop pulling, let running handlers finish, nack what will not be handled."""
        grace = self.grace_s if grace_s is None else grace_s
        self._stopping.set()
        async with self._cond:
            self._cond.notify_all()
        me = asyncio.current_task()
        pulls = {t for t in self._pull_tasks if t is not me and not t.done()}
        if pulls:
            _, late = await asyncio.wait(pulls, timeout=self.poll_timeout_ms / 1000
                                         + self.client.timeout)
            for task in late:
                task.cancel()
        running = {t for t in self._handlers if t is not me and not t.done()}
        if _handling.get() is self:  # stop() from inside a handler
            grace = 0.0
        if running:
            _, late = await asyncio.wait(running, timeout=grace) if grace > 0 else \
                (set(), running)
            if late:
                logger.warning("%s: %d handler(s) still running after %.1fs grace; each "
                               "settles its message when it returns", self.topic, len(late),
                               grace)
        for pulled in self._groups.drain():  # waiting behind their group's head
            await self._drop(pulled)
        await self._acks.close(ACK_FLUSH_AT_STOP_S)  # later settlements are sent one by one
        self._done.set()

    # ---- pulling ---------------------------------------------------------------------
    async def _take_slots(self) -> int:
        """Wait for idle handler slots; promise up to ``batch`` of them to one pull."""
        async with self._cond:
            while not self._stopping.is_set():
                n = self._promise()
                if n is not None:
                    return n
                await self._cond.wait()
            return 0

    async def _give_back(self, n: int, untaken: int = 0) -> None:
        async with self._cond:
            self._release(n, untaken)
            self._cond.notify_all()

    async def _pull(self, n: int) -> list[DelayMsg]:
        if self.long_polling:
            return await self.client.long_poll(self.topic, n, self.poll_timeout_ms,
                                               self.ack_timeout_ms, **self._in_subscription)
        return await self.client.pull(self.topic, n, self.ack_timeout_ms,
                                      **self._in_subscription)

    async def _pause(self, seconds: float) -> None:
        """Sleep, or less when the consumer stops meanwhile."""
        try:
            await asyncio.wait_for(self._stopping.wait(), seconds)
        except TimeoutError:
            pass

    async def _pull_loop(self) -> None:
        backoff = self._backoff()
        while True:
            n = await self._take_slots()
            if n == 0:
                return
            pulled_at = time.monotonic()
            try:
                messages = await self._pull(n)
            except Exception as exc:  # noqa: BLE001 - a pull loop must never die
                await self._give_back(n, n)
                await self._pause(self._pull_failed(exc, backoff))
                continue
            backoff.reset()
            await self._give_back(n - len(messages), n - len(messages))
            for msg in messages:
                await self._dispatch(msg, pulled_at)
            if not messages and not self.long_polling:
                await self._pause(self.pull_interval_ms / 1000)

    async def _dispatch(self, msg: DelayMsg, pulled_at: float) -> None:
        if self._stopping.is_set():
            await self._give_back(1)
            await self._settle(msg, False, "consumer stopping")
            return
        delivery = None
        if self._heartbeats is not None and msg.receipt:
            # Without a receipt the server has no changeVisibility (camellia): no beats.
            delivery = self._heartbeats.track(msg, pulled_at)
        pulled: Pulled = (msg, pulled_at, delivery)
        if self._groups.enter(msg.group_id, pulled):
            self._start(pulled)
        # else blocked: it runs once its group's head has returned

    def _start(self, pulled: Pulled) -> None:
        task = asyncio.create_task(self._consume(pulled), name=f"dq-handle-{pulled[0].msg_id}")
        self._handlers.add(task)
        task.add_done_callback(self._handlers.discard)

    async def _drop(self, pulled: Pulled, reason: str = "consumer stopped before handling it"
                    ) -> None:
        """Nack a message pulled but not to be handled, and free its handler slot."""
        msg, _, delivery = pulled
        if delivery is not None and self._heartbeats is not None:
            await self._heartbeats.untrack(delivery)
        await self._give_back(1)
        await self._settle(msg, False, reason)

    async def _next_of_group(self, group_id: str | None) -> None:
        """The head of ``group_id`` returned: start the next message blocked behind it (or,
        when stopping, nack every one)."""
        pulled = self._groups.leave(group_id)
        while pulled is not None:
            if not self._stopping.is_set():
                self._start(pulled)
                return
            await self._drop(pulled)
            pulled = self._groups.leave(group_id)

    # ---- consuming -------------------------------------------------------------------
    async def _consume(self, pulled: Pulled) -> None:
        msg, _, delivery = pulled
        _handling.set(self)
        self.running += 1
        try:
            if delivery is not None and delivery.lost:  # while it waited behind its head
                self._lost_one(msg, delivery)
                return
            ok, reason = await self._run_handler(msg)
            if delivery is not None and self._heartbeats is not None:
                await self._heartbeats.untrack(delivery)
                if delivery.lost:
                    self._lost_one(msg, delivery, ok)
                    return
            await self._settle(msg, ok, reason, handled=True)
        finally:
            self.running -= 1
            if delivery is not None and self._heartbeats is not None:
                await self._heartbeats.untrack(delivery)
            await self._next_of_group(msg.group_id)  # before its slot is given back
            await self._give_back(1)

    async def _run_handler(self, msg: DelayMsg) -> tuple[bool, str]:
        """(ack?, why): the handler's answer, False when it raised."""
        try:
            ok = self.handler(msg)
            if inspect.isawaitable(ok):
                ok = await ok
        except Exception as exc:  # noqa: BLE001 - any handler failure means nack
            return self._handler_failed(msg, exc)
        return bool(ok), "handler returned %r" % (ok,)

    async def _settle(self, msg: DelayMsg, ok: bool, reason: str, handled: bool = False) -> None:
        """Queue the ack or nack; ``_settled_one`` counts it once it is answered."""
        if not ok:
            logger.info("%s: nacking %s (%s)", msg.topic, msg.msg_id, reason)
        await self._acks.submit(msg, ok, handled, self.subscription)
