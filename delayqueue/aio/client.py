"""AsyncDelayQueueClient: the SDK's calls as coroutines, for asyncio services.

Every call is the blocking client's plan (delayqueue/client/plans.py) carried out over the
awaiting transport, so the names, arguments, results and exceptions are DelayQueueClient's;
only ``await`` is added. Iterators over pages are async iterators, and ``listen`` starts an
AsyncConsumer whose handler is a coroutine function.
"""

from __future__ import annotations

import functools
from typing import (
    Any,
    AsyncIterator,
    Awaitable,
    Callable,
    Concatenate,
    Coroutine,
    ParamSpec,
    TypeVar,
)

from delayqueue.client.model import DelayMsg, Schedule
from delayqueue.client.plan import Plan, result_signature
from delayqueue.client.plans import ClientBase, Plans

from .consumer import AsyncConsumer, AsyncHandler
from .transport import AsyncTransport

T = TypeVar("T")
P = ParamSpec("P")
Item = TypeVar("Item")
Page = tuple[list[Item], "str | None"]  # MessagePage, DeadLetterPage, SchedulePage


async def run(plan: Plan[T], transport: AsyncTransport) -> T:
    """Carry a plan out with the awaiting transport (as plan.run does with the blocking one)."""
    try:
        request = next(plan)
        while True:
            try:
                envelope = await transport.send(request)
            except Exception as exc:  # noqa: BLE001 - the plan decides what an error means
                request = plan.throw(exc)
            else:
                request = plan.send(envelope)
    except StopIteration as done:
        return done.value


def awaitable(plan: Callable[Concatenate[Any, P], Plan[T]]
              ) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, T]]:
    """An AsyncDelayQueueClient method from a ``Plans`` method: same name, arguments and
    docstring, a coroutine returning the plan's result."""
    @functools.wraps(plan)
    async def method(self: Any, *args: P.args, **kwargs: P.kwargs) -> T:
        return await run(plan(self._plans, *args, **kwargs), self._transport)
    method.__signature__ = result_signature(plan)  # type: ignore[attr-defined]
    return method


class AsyncDelayQueueClient(ClientBase):
    """A client for one or more delayqueue nodes, for one event loop (its connections
    belong to the loop that first used them). Arguments as DelayQueueClient's.

    ``async with AsyncDelayQueueClient(url) as client:`` closes it on leaving, or call
    ``await client.close()``.
    """

    _transport_class = AsyncTransport
    _transport: AsyncTransport

    async def close(self) -> None:
        await self._transport.aclose()

    async def __aenter__(self) -> "AsyncDelayQueueClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # Each of these is the plan of the same name (delayqueue/client/plans.py, batch.py,
    # schedules.py, subscriptions.py).
    send = awaitable(Plans.send)
    pull = awaitable(Plans.pull)
    long_poll = awaitable(Plans.long_poll)
    ack = awaitable(Plans.ack)
    nack = awaitable(Plans.nack)
    change_visibility = awaitable(Plans.change_visibility)
    reschedule = awaitable(Plans.reschedule)
    get = awaitable(Plans.get)
    delete = awaitable(Plans.delete)
    topic_info = awaitable(Plans.topic_info)
    topics = awaitable(Plans.topics)
    get_topic_config = awaitable(Plans.get_topic_config)
    set_topic_config = awaitable(Plans.set_topic_config)
    list_dead = awaitable(Plans.list_dead)
    redrive_dead = awaitable(Plans.redrive_dead)
    redrive_all_dead = awaitable(Plans.redrive_all_dead)
    purge_dead = awaitable(Plans.purge_dead)
    pause_topic = awaitable(Plans.pause_topic)
    resume_topic = awaitable(Plans.resume_topic)
    purge_topic = awaitable(Plans.purge_topic)
    purge_topic_all = awaitable(Plans.purge_topic_all)
    list_messages = awaitable(Plans.list_messages)
    monitor_data = awaitable(Plans.monitor_data)
    send_batch = awaitable(Plans.send_batch)
    ack_batch = awaitable(Plans.ack_batch)
    delete_batch = awaitable(Plans.delete_batch)
    change_visibility_batch = awaitable(Plans.change_visibility_batch)
    create_schedule = awaitable(Plans.create_schedule)
    list_schedules = awaitable(Plans.list_schedules)
    get_schedule = awaitable(Plans.get_schedule)
    delete_schedule = awaitable(Plans.delete_schedule)
    pause_schedule = awaitable(Plans.pause_schedule)
    resume_schedule = awaitable(Plans.resume_schedule)
    create_subscription = awaitable(Plans.create_subscription)
    delete_subscription = awaitable(Plans.delete_subscription)
    list_subscriptions = awaitable(Plans.list_subscriptions)
    get_subscription_config = awaitable(Plans.get_subscription_config)
    set_subscription_config = awaitable(Plans.set_subscription_config)
    push_status = awaitable(Plans.push_status)

    def iter_dead(self, topic: str, page_size: int = 100, *,
                  subscription: str | None = None) -> AsyncIterator[DelayMsg]:
        """Every dead letter of the topic (of ``subscription`` when named), page by page,
        oldest death first: ``async for msg in client.iter_dead(topic)``."""
        return self._follow(lambda cursor: self.list_dead(topic, page_size, cursor,
                                                          subscription=subscription))

    def iter_messages(self, topic: str, status: int | None = None, group_blocked: bool = False,
                      page_size: int = 100, *,
                      subscription: str | None = None) -> AsyncIterator[DelayMsg]:
        """Every message ``list_messages`` shows, page by page, following the cursors:
        ``async for msg in client.iter_messages(topic, 1)`` (as DelayQueueClient's)."""
        return self._follow(
            lambda cursor: self.list_messages(topic, status, group_blocked, page_size, cursor,
                                              subscription=subscription))

    def iter_schedules(self, topic: str | None = None,
                       page_size: int | None = None) -> AsyncIterator[Schedule]:
        """Every schedule ``list_schedules`` shows, page by page, following the cursors:
        ``async for s in client.iter_schedules(topic)``."""
        return self._follow(lambda cursor: self.list_schedules(topic, cursor, page_size))

    @staticmethod
    async def _follow(page: Callable[[str | None], Awaitable[Page[Item]]]
                      ) -> AsyncIterator[Item]:
        """The items of every page, awaiting ``page(cursor)`` for each in turn."""
        cursor: str | None = None
        while True:
            items, cursor = await page(cursor)
            for item in items:
                yield item
            if not cursor:
                return

    def listen(self, topic: str, handler: AsyncHandler, *, subscription: str | None = None,
               pullers: int = 1,
               concurrency: int = 1, batch: int | None = None, ack_timeout_ms: int = 30_000,
               long_polling: bool = True, heartbeat: bool = True,
               **options: Any) -> AsyncConsumer:
        """Start an AsyncConsumer (in the running event loop) that awaits ``handler`` per
        message: True acks; False, or an exception, nacks.

        DelayQueueClient.listen's semantics, with tasks for threads: at most
        ``concurrency`` handlers run at once (its ``consume_threads``), ``pullers`` polls are
        in flight at most (its ``pull_threads``), and a pull asks for as many messages as
        there are idle handler slots (at most ``batch``). Receipts, batched acks,
        heartbeats, message groups and ``subscription`` as there. Stop it with ``await
        consumer.stop()``, or ``async with client.listen(...)``. Other ``options``: see
        ``AsyncConsumer``.
        """
        consumer = AsyncConsumer(self, topic, handler, subscription=subscription,
                                 pullers=pullers,
                                 concurrency=concurrency, batch=batch,
                                 ack_timeout_ms=ack_timeout_ms, long_polling=long_polling,
                                 heartbeat=heartbeat, **options)
        return consumer.start()
