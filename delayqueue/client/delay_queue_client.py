"""DelayQueueClient: every endpoint of the HTTP API as one typed, blocking method.

What each method sends and returns is its plan's (plans.py, shared with the asyncio client in
delayqueue.aio); this class moves the requests over the blocking transport and adds what
only a blocking client has: iterators over pages, and ``listen``'s threaded Consumer.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, TypeVar

from .consumer import Consumer
from .model import DelayMsg, Schedule
from .plan import blocking
from .plans import ClientBase, Plans, split_urls
from .transport import Transport

__all__ = ["DelayQueueClient", "split_urls"]

Item = TypeVar("Item")
Page = tuple[list[Item], "str | None"]  # MessagePage, DeadLetterPage, SchedulePage


class DelayQueueClient(ClientBase):
    """A thread-safe client for one or more delayqueue nodes.

    Args:
        url: a base URL (``http://host:8080``), several separated by commas, or a list;
            requests are spread over them and a node that fails is skipped for a while.
        timeout: read timeout in seconds; a long poll waits this much longer than the poll.
        connect_timeout: seconds to open a connection before trying the next node.
        pool_size: keep-alive connections kept per node (at least the threads that share it).
        token: the API token where the server has authentication on (sent as
            ``Authorization: Bearer <token>``).
        compress_over_bytes: send a batch request whose JSON body is longer than this many
            bytes gzip-compressed (``Content-Encoding: gzip``); None (the default) never
            compresses. The server's limits hold for the decoded body, so it changes what
            goes over the wire, not what fits in a request.
    """

    _transport_class = Transport
    _transport: Transport

    def close(self) -> None:
        self._transport.close()

    def __enter__(self) -> "DelayQueueClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # Each of these is the plan of the same name (plans.py, batch.py, schedules.py,
    # subscriptions.py), carried out at once.
    send = blocking(Plans.send)
    pull = blocking(Plans.pull)
    long_poll = blocking(Plans.long_poll)
    ack = blocking(Plans.ack)
    nack = blocking(Plans.nack)
    change_visibility = blocking(Plans.change_visibility)
    reschedule = blocking(Plans.reschedule)
    get = blocking(Plans.get)
    delete = blocking(Plans.delete)
    topic_info = blocking(Plans.topic_info)
    topics = blocking(Plans.topics)
    get_topic_config = blocking(Plans.get_topic_config)
    set_topic_config = blocking(Plans.set_topic_config)
    list_dead = blocking(Plans.list_dead)
    redrive_dead = blocking(Plans.redrive_dead)
    redrive_all_dead = blocking(Plans.redrive_all_dead)
    purge_dead = blocking(Plans.purge_dead)
    pause_topic = blocking(Plans.pause_topic)
    resume_topic = blocking(Plans.resume_topic)
    purge_topic = blocking(Plans.purge_topic)
    purge_topic_all = blocking(Plans.purge_topic_all)
    list_messages = blocking(Plans.list_messages)
    monitor_data = blocking(Plans.monitor_data)
    send_batch = blocking(Plans.send_batch)
    ack_batch = blocking(Plans.ack_batch)
    delete_batch = blocking(Plans.delete_batch)
    change_visibility_batch = blocking(Plans.change_visibility_batch)
    create_schedule = blocking(Plans.create_schedule)
    list_schedules = blocking(Plans.list_schedules)
    get_schedule = blocking(Plans.get_schedule)
    delete_schedule = blocking(Plans.delete_schedule)
    pause_schedule = blocking(Plans.pause_schedule)
    resume_schedule = blocking(Plans.resume_schedule)
    create_subscription = blocking(Plans.create_subscription)
    delete_subscription = blocking(Plans.delete_subscription)
    list_subscriptions = blocking(Plans.list_subscriptions)
    get_subscription_config = blocking(Plans.get_subscription_config)
    set_subscription_config = blocking(Plans.set_subscription_config)
    push_status = blocking(Plans.push_status)

    def iter_dead(self, topic: str, page_size: int = 100, *,
                  subscription: str | None = None) -> Iterator[DelayMsg]:
        """Every dead letter of the topic (of ``subscription`` when named), page by page,
        oldest death first."""
        return self._follow(lambda cursor: self.list_dead(topic, page_size, cursor,
                                                          subscription=subscription))

    def iter_messages(self, topic: str, status: int | None = None, group_blocked: bool = False,
                      page_size: int = 100, *,
                      subscription: str | None = None) -> Iterator[DelayMsg]:
        """Every message ``list_messages`` shows, page by page, following the cursors.

        Pages are read as they are iterated: a message that moves meanwhile (delivered,
        acked, promoted) may be missed or met twice; those that stay are met once.
        """
        return self._follow(
            lambda cursor: self.list_messages(topic, status, group_blocked, page_size, cursor,
                                              subscription=subscription))

    def iter_schedules(self, topic: str | None = None,
                       page_size: int | None = None) -> Iterator[Schedule]:
        """Every schedule ``list_schedules`` shows (the topic's, or every topic's), page by
        page, following the cursors."""
        return self._follow(lambda cursor: self.list_schedules(topic, cursor, page_size))

    @staticmethod
    def _follow(page: Callable[[str | None], Page[Item]]) -> Iterator[Item]:
        """The items of every page, asking ``page(cursor)`` for each in turn."""
        cursor: str | None = None
        while True:
            messages, cursor = page(cursor)
            yield from messages
            if not cursor:
                return

    def listen(self, topic: str, handler: Callable[[DelayMsg], bool], *,
               subscription: str | None = None,
               pull_threads: int = 1, consume_threads: int = 1, batch: int | None = None,
               ack_timeout_ms: int = 30_000, long_polling: bool = True,
               heartbeat: bool = True, **options: Any) -> Consumer:
        """Start a Consumer that calls ``handler`` per message (True acks, else nacks).

        A pull asks for as many messages as there are idle consume threads (at most
        ``batch`` when given). Acks and nacks carry the delivery's receipt and go out in
        batches, each waiting at most ``ack_linger_ms`` (5 ms); with ``heartbeat`` a handler
        running past half of ``ack_timeout_ms`` has its ack deadline extended until it
        returns. At most one message of a group runs at a time: one that arrives while
        another of its group runs waits, in order, until that one returned. With
        ``subscription`` it consumes that named subscription (pulls, acks, nacks and
        heartbeats all in it): a consumer per subscription, and each sees every message.
        Other ``options``: see ``Consumer``.
        """
        consumer = Consumer(self, topic, handler, subscription=subscription,
                            pull_threads=pull_threads,
                            consume_threads=consume_threads, batch=batch,
                            ack_timeout_ms=ack_timeout_ms, long_polling=long_polling,
                            heartbeat=heartbeat, **options)
        return consumer.start()
