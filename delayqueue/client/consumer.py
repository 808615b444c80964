"""Consumer: camellia's listener model (pull threads, consume threads, long polling).

Back-pressure: a pull asks for as many messages as there are idle consume threads (at most
``batch`` when it is given), so every message pulled starts on a free thread at once;
nothing waits in a local queue while its ack timeout runs. Pull threads share the count of
idle threads, so several of them never over-commit either.

Acks and nacks go out in batches (ackMsgBatch, see ack_batcher.py): each waits at most
``ack_linger_ms`` (5 ms) to be sent with the others, and a batch that fails as a whole (a
server restarting) is sent again after a back-off until it is answered.

stop(): pulling stops (a poll already in flight finishes, at most ``poll_timeout_ms``, and
whatever it brings back is nacked), running handlers get ``grace_s`` to finish, any message
that was pulled but not started is nacked, so it is redelivered at once instead of after its
ack timeout, and the acks and nacks still waiting are sent (for up to ``ACK_FLUSH_AT_STOP_S``).

Receipts and heartbeats: every ack and nack carries the delivery's receipt, so a consumer
whose delivery timed out and was handed to someone else cannot settle the newer delivery
(the server answers 409; it is logged and counted in ``lost``). A handler still running at
half the ack timeout gets its ack deadline extended (``changeVisibility``) every half ack
timeout until it returns (``heartbeat=False`` turns that off); a heartbeat that finds the
delivery lost makes the consumer skip its ack or nack.

Subscriptions: a consumer of a named subscription (``subscription=``) pulls from it, and its
acks, nacks and heartbeats name it, since a delivery can only be settled where it was made.
Consumers of different subscriptions of a topic each get every message.

Message groups: at most one message of a group runs at a time, whatever the consume threads.
The server delivers a group's messages one at a time already; a second one that arrives while
one of its group runs (the running one's delivery timed out and it came again, or a server
that does not know groups) waits, in the order it arrived, until the running one returned
(its ack or nack queued), then runs (group_gate.py). It keeps the consume thread it was
pulled for, and heartbeats extend its ack deadline while it waits. Ungrouped messages and
other groups are not held back.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from typing import TYPE_CHECKING, Callable

from .ack_batcher import ACK_LINGER_MS, AckBatcher
from .consumer_base import ConsumerBase
from .group_gate import GroupGate
from .heartbeat import Delivery, Heartbeats
from .model import DelayMsg

if TYPE_CHECKING:
    from .delay_queue_client import DelayQueueClient

logger = logging.getLogger(__name__)

Handler = Callable[[DelayMsg], bool]
# A pulled message: it, the monotonic time its pull was sent, its heartbeat (None: no beats).
Pulled = tuple[DelayMsg, float, "Delivery | None"]

ACK_FLUSH_AT_STOP_S = 10.0  # how long stop() keeps trying to send the last acks and nacks


class Consumer(ConsumerBase):
    """Pull messages of ``topic`` and run ``handler`` on each: True acks, False/raise nacks.

    Args:
        subscription: the named subscription to consume (None: the topic's default one).
        batch: the most messages one pull asks for (default: as many as idle consume
            threads, at most 1000).
        limit: take at most this many messages, then finish (``wait()`` returns, once
            their acks and nacks are answered).
        poll_timeout_ms: hold of each long poll; bounds how long stop() waits for a poll.
        pull_interval_ms: pause after an empty short poll (``long_polling=False``).
        backoff_base_s, backoff_max_s: back-off after a failed pull (doubling, jittered).
        grace_s: how long stop() lets running handlers finish.
        heartbeat: extend the ack deadline of handlers that run past half ``ack_timeout_ms``.
        ack_linger_ms: the longest an ack or nack waits to be sent with others (0: sent as
            soon as the request before it is answered).
    """

    _logger = logger

    def __init__(self, client: "DelayQueueClient", topic: str, handler: Handler, *,
                 subscription: str | None = None, pull_threads: int = 1,
                 consume_threads: int = 1, batch: int | None = None,
                 ack_timeout_ms: int = 30_000, long_polling: bool = True,
                 poll_timeout_ms: int = 3_000, pull_interval_ms: int = 100,
                 backoff_base_s: float = 0.1, backoff_max_s: float = 10.0,
                 grace_s: float = 30.0, limit: int | None = None,
                 heartbeat: bool = True, ack_linger_ms: float = ACK_LINGER_MS) -> None:
        if min(pull_threads, consume_threads, 1 if batch is None else batch) < 1:
            raise ValueError("pull_threads, consume_threads and batch must be at least 1")
        super().__init__(client, topic, handler, workers=consume_threads, batch=batch,
                         ack_timeout_ms=ack_timeout_ms, long_polling=long_polling,
                         poll_timeout_ms=poll_timeout_ms, pull_interval_ms=pull_interval_ms,
                         backoff_base_s=backoff_base_s, backoff_max_s=backoff_max_s,
                         grace_s=grace_s, limit=limit, subscription=subscription)
        self.pull_threads, self.consume_threads = pull_threads, consume_threads
        self._heartbeats = Heartbeats(client, topic, ack_timeout_ms,
                                      subscription=self.subscription) if heartbeat else None
        self._acks = AckBatcher(client, topic, self._settled_one, linger_ms=ack_linger_ms)
        self._cond = threading.Condition()
        self._counts_lock = self._cond
        self._stopping = threading.Event()
        self._done = threading.Event()
        self._in_handler = threading.local()
        self._pending: dict[int, tuple[Future[None], Pulled]] = {}  # token -> (work, message)
        self._groups: GroupGate[Pulled] = GroupGate()  # messages blocked behind their head
        self._tokens = itertools.count()
        # One consume thread: the handler runs on the pull thread that pulled its message
        # (no hand-off to a worker thread and back); several: on a pool of consume threads.
        self._inline = consume_threads == 1
        self._executor: ThreadPoolExecutor | None = None if self._inline else \
            self._new_executor()
        self._pullers: list[threading.Thread] = []
        self._pulling = 0  # pull threads running and not in a handler (lock held)
        self._shut_down = False  # stop() shut the consume threads down: nothing starts

    def _new_executor(self) -> ThreadPoolExecutor:
        return ThreadPoolExecutor(self.consume_threads,
                                  thread_name_prefix=f"dq-consume-{self.topic}")

    # ---- lifecycle -------------------------------------------------------------------
    def start(self) -> "Consumer":
        if self._pullers:
            return self
        self._pulling = self.pull_threads
        for i in range(self.pull_threads):
            thread = threading.Thread(target=self._pull_loop, daemon=True,
                                      name=f"dq-pull-{self.topic}-{i}")
            self._pullers.append(thread)
            thread.start()
        return self

    def __enter__(self) -> "Consumer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until stopped or, with ``limit``, until every message is handled."""
        return self._done.wait(timeout)

    def stop(self, grace_s: float | None = None) -> None:
        """Stop pulling, let running handlers finish, nack what will not be handled."""
        grace = self.grace_s if grace_s is None else grace_s
        self._stopping.set()
        with self._cond:
            self._cond.notify_all()
        poll_s = self.poll_timeout_ms / 1000 + self.client.timeout
        with self._cond:
            # Until each pull thread has ended, or runs a handler (waited for below, with
            # the others, for grace_s): a poll in flight finishes first.
            self._cond.wait_for(lambda: self._pulling == 0, poll_s)
            pending = list(self._pending.values())
        running = [f for f, _ in pending if not f.done()]
        if getattr(self._in_handler, "active", False):  # stop() from inside a handler
            grace = 0.0
        if running:
            _, not_done = wait_futures(running, timeout=grace)
            if not_done:
                logger.warning("%s: %d handler(s) still running after %.1fs grace; each "
                               "settles its message when it returns", self.topic,
                               len(not_done), grace)
        with self._cond:
            executor, self._shut_down = self._executor, True
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)
        for future, pulled in pending:
            if future.cancelled():  # pulled but never started
                self._drop(pulled)
        with self._cond:
            blocked = self._groups.drain()
        for pulled in blocked:  # waiting behind their group's head
            self._drop(pulled)
        if self._heartbeats is not None:
            self._heartbeats.close()  # its thread ends when the last running handler returns
        self._acks.close(ACK_FLUSH_AT_STOP_S)  # later settlements are sent one by one
        self._done.set()

    # ---- pulling ---------------------------------------------------------------------
    def _take_slots(self) -> int:
        """Wait for idle consume threads; promise up to ``batch`` of them to one pull."""
        with self._cond:
            while not self._stopping.is_set():
                n = self._promise()
                if n is not None:
                    return n
                self._cond.wait()
            return 0

    def _give_back(self, n: int, untaken: int = 0) -> None:
        with self._cond:
            self._release(n, untaken)
            self._cond.notify_all()

    def _pull(self, n: int) -> list[DelayMsg]:
        if self.long_polling:
            return self.client.long_poll(self.topic, n, self.poll_timeout_ms, self.ack_timeout_ms,
                                         **self._in_subscription)
        return self.client.pull(self.topic, n, self.ack_timeout_ms, **self._in_subscription)

    def _pull_loop(self) -> None:
        try:
            self._pull_until_stopped()
        finally:
            with self._cond:
                self._pulling -= 1
                self._cond.notify_all()

    def _pull_until_stopped(self) -> None:
        backoff = self._backoff()
        while True:
            n = self._take_slots()
            if n == 0:
                return
            pulled_at = time.monotonic()
            try:
                messages = self._pull(n)
            except Exception as exc:  # noqa: BLE001 - a pull loop must never die
                self._give_back(n, n)
                self._stopping.wait(self._pull_failed(exc, backoff))
                continue
            backoff.reset()
            self._give_back(n - len(messages), n - len(messages))
            for msg in messages:
                self._dispatch(msg, pulled_at)
            if not messages and not self.long_polling:
                self._stopping.wait(self.pull_interval_ms / 1000)

    def _dispatch(self, msg: DelayMsg, pulled_at: float) -> None:
        if self._stopping.is_set():
            self._give_back(1)
            self._settle(msg, False, "consumer stopping")
            return
        delivery = None
        if self._heartbeats is not None and msg.receipt:
            # Without a receipt the server has no changeVisibility (camellia): no beats.
            delivery = self._heartbeats.track(msg, pulled_at)
        pulled: Pulled = (msg, pulled_at, delivery)
        with self._cond:
            if not self._stopping.is_set():
                if not self._groups.enter(msg.group_id, pulled):
                    return  # blocked: it runs once its group's head has returned
                if self._inline:
                    token, future = next(self._tokens), Future[None]()
                    future.set_running_or_notify_cancel()
                    self._pending[token] = (future, pulled)
                    self._pulling -= 1
                elif self._submit(pulled):
                    return
                else:
                    self._groups.leave(msg.group_id)  # nothing entered behind it (lock held)
                    token = -1
            else:
                token = -1
        if token < 0:
            self._drop(pulled, "consumer stopped")
            return
        try:  # one consume thread: the handler runs here, on the pull thread
            self._consume(pulled, token)
        finally:
            future.set_result(None)
            with self._cond:
                self._pulling += 1

    def _submit(self, pulled: Pulled) -> bool:
        """Start a message on a consume thread (lock held, so _consume cannot pop its token
        before it is stored); False when the executor is shut down."""
        token = next(self._tokens)
        if self._shut_down:
            return False
        if self._executor is None:  # one consume thread: only for a message that waited
            self._executor = self._new_executor()  # behind its group's head (never, as
            # one slot never pulls a second message while the first runs)
        try:
            future = self._executor.submit(self._consume, pulled, token)
        except RuntimeError:  # shut down since the caller's check
            return False
        self._pending[token] = (future, pulled)
        return True

    def _drop(self, pulled: Pulled, reason: str = "consumer stopped before handling it") -> None:
        """Nack a message pulled but not to be handled, and free its consume thread."""
        msg, _, delivery = pulled
        if delivery is not None and self._heartbeats is not None:
            self._heartbeats.untrack(delivery)
        self._give_back(1)
        self._settle(msg, False, reason)

    def _next_of_group(self, group_id: str | None) -> None:
        """The head of ``group_id`` returned: start the next message blocked behind it (or,
        when stopping, nack every one)."""
        dropped: list[Pulled] = []
        with self._cond:
            pulled = self._groups.leave(group_id)
            while pulled is not None:
                if not self._stopping.is_set() and self._submit(pulled):
                    break
                dropped.append(pulled)
                pulled = self._groups.leave(group_id)
        for pulled in dropped:
            self._drop(pulled)

    # ---- consuming -------------------------------------------------------------------
    def _consume(self, pulled: Pulled, token: int) -> None:
        msg, _, delivery = pulled
        self._in_handler.active = True
        try:
            if delivery is not None and delivery.lost:  # while it waited behind its head
                self._lost_one(msg, delivery)
                return
            try:
                ok = self.handler(msg)
                reason = "handler returned %r" % (ok,)
            except Exception as exc:  # noqa: BLE001 - any handler failure means nack
                ok, reason = self._handler_failed(msg, exc)
            if delivery is not None and self._heartbeats is not None:
                self._heartbeats.untrack(delivery)
                if delivery.lost:
                    self._lost_one(msg, delivery, bool(ok))
                    return
            self._settle(msg, bool(ok), reason, handled=True)
        finally:
            if delivery is not None and self._heartbeats is not None:
                self._heartbeats.untrack(delivery)
            self._in_handler.active = False
            self._next_of_group(msg.group_id)  # before its thread is given back: one at a time
            self._give_back(1)
            with self._cond:
                self._pending.pop(token, None)

    def _settle(self, msg: DelayMsg, ok: bool, reason: str, handled: bool = False) -> None:
        """Queue the ack or nack; ``_settled_one`` counts it once it is answered."""
        if not ok:
            logger.info("%s: nacking %s (%s)", msg.topic, msg.msg_id, reason)
        self._acks.submit(msg, ok, handled, self.subscription)
