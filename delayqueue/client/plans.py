"""Plans: every endpoint of the HTTP API as one typed call, shared by both clients.

DelayQueueClient (blocking) and AsyncDelayQueueClient (delayqueue.aio) expose these methods
under the same names with the same arguments; plan.py says how a plan is carried out.

Every consuming call takes ``subscription``: None (or "default") consumes from the topic's
default subscription, as a camellia client does; a name consumes from that named
subscription, which holds its own copy of every message (subscriptions.py). A DelayMsg does
not say which subscription delivered it: settle it with the subscription it was pulled from.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any, Callable, Iterable, Mapping

from .batch import BatchPlans
from .entries import on_duplicate_value
from .errors import NotFoundError, SubscriptionNotFoundError
from .model import (
    DeadLetterPage,
    DelayMsg,
    MessagePage,
    MonitorData,
    PurgeResult,
    TopicConfig,
    TopicInfo,
    attributes_json,
    epoch_ms,
    millis,
    settings_params,
)
from .plan import Plan, Request
from .schedules import SchedulePlans
from .subscriptions import SubscriptionPlans, with_subscription

# The server caps longPollingTimeoutMillis at this; a poll without a timeout may last as long.
LONG_POLL_MAX_MS = 60_000
# purge_topic_all: messages a purgeTopic call ends (the server's default limit), and the most
# calls: ten million messages, past which a topic that never empties (sends outrunning the
# purge) is reported rather than chased for ever.
PURGE_BATCH = 10_000
PURGE_MAX_CALLS = 1000


def split_urls(url: str | Iterable[str]) -> list[str]:
    """One URL, a comma-separated list, or an iterable of URLs."""
    items = url.split(",") if isinstance(url, str) else list(url)
    return [u.strip() for u in items if u and u.strip()]


def _ref(topic: "str | DelayMsg", msg_id: str | None,
         receipt: str | None) -> tuple[str, str, str | None]:
    """(topic, msgId, receipt) from a delivered DelayMsg or from names (receipt optional)."""
    if isinstance(topic, DelayMsg):
        if msg_id is not None:
            raise TypeError("give a DelayMsg or topic and msg_id, not both")
        return topic.topic, topic.msg_id, receipt if receipt is not None else topic.receipt
    if msg_id is None:
        raise TypeError("msg_id is required with a topic name")
    return topic, msg_id, receipt


class Plans(BatchPlans, SchedulePlans, SubscriptionPlans):
    """Every call of the HTTP API as a plan, shared by DelayQueueClient and the asyncio
    client: what a method checks, the requests it makes and how it reads the answers are
    written once, here, and each client only moves the requests (plan.py).

    Args:
        timeout: the client's read timeout in seconds; a long poll waits this much longer
            than the poll.
    """

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout

    def send(self, topic: str, msg: str, delay_ms: int | timedelta | None = None, *,
             trigger_time: int | datetime | None = None, msg_id: str | None = None,
             ttl_ms: int | timedelta | None = None,
             max_retry: int | None = None,
             attributes: Mapping[str, str] | None = None,
             group_id: str | None = None, on_duplicate: str = "keep") -> Plan[DelayMsg]:
        """Send a message due in ``delay_ms`` or at ``trigger_time`` (epoch ms or datetime).

        With neither it is due after the topic's ``delay_ms`` setting (0, due now, unless the
        topic sets one): no delay is sent, so the server applies it.
        Without ``msg_id`` one is generated here, so a re-send after a lost answer is
        recognised by the server as a duplicate (``DelayMsg.duplicate``) instead of doubling.
        ``attributes`` (str -> str, at most 32 keys and 8 KiB) come back on every delivery.
        ``group_id`` puts it in a message group: the group's messages are delivered one at a
        time, in order of (trigger time, acceptance), each after the one before it ended
        (the msgId rules: at most 256 characters, no control characters; "" is no group).
        ``on_duplicate`` is what a live message with this msgId meets: ``"keep"`` (it is
        answered, ``DelayMsg.duplicate``, nothing enqueued) or ``"replace"`` (debounce: a
        waiting or ready one begins again with this send's body, attributes, time, ttl, and
        max_retry if given, retry 0, its old receipt stale; ``DelayMsg.replaced``). An ended
        one inside the topic's ``dedup_window_ms`` is a duplicate either way.

        Raises:
            ValueError: ``on_duplicate`` is neither "keep" nor "replace" (nothing sent).
            BacklogExceededError: (429) the topic holds its ``max_backlog`` live messages;
                nothing was written.
            MessageConsumingError: (409) ``on_duplicate="replace"`` and the message is being
                consumed; nothing was written.
            BadRequestError: (400) among others, a replace that gives another ``group_id``.
        """
        if trigger_time is not None and delay_ms:
            raise ValueError("give at most one of delay_ms and trigger_time")
        on_duplicate_value(on_duplicate)
        params: dict[str, Any] = {"topic": topic, "msg": msg,
                                  "msgId": msg_id or uuid.uuid4().hex}
        if trigger_time is not None:
            params["triggerTime"] = epoch_ms(trigger_time)
        elif delay_ms is not None:
            params["delayMillis"] = millis(delay_ms)
        if ttl_ms is not None:
            params["ttlMillis"] = millis(ttl_ms)
        if max_retry is not None:
            params["maxRetry"] = int(max_retry)
        if attributes:
            params["attributes"] = attributes_json(attributes)
        if group_id:
            params["groupId"] = group_id
        if on_duplicate != "keep":
            params["onDuplicate"] = on_duplicate
        envelope = yield Request("sendMsg", params, idempotent=True)
        return DelayMsg.from_json(envelope["delayMsg"], bool(envelope.get("duplicate")),
                                  bool(envelope.get("replaced")))

    def pull(self, topic: str, batch: int = 1, ack_timeout_ms: int | None = None, *,
             subscription: str | None = None) -> Plan[list[DelayMsg]]:
        """Take up to ``batch`` ready messages now (an empty list when none is ready), from
        the default subscription or the named ``subscription``.

        Raises:
            SubscriptionNotFoundError: (404) no such subscription.
        """
        params = self._pull_params(topic, batch, ack_timeout_ms, subscription)
        envelope = yield Request("pullMsg", params, idempotent=False)
        return [DelayMsg.from_json(m) for m in envelope.get("delayMsgList") or []]

    def long_poll(self, topic: str, batch: int = 1, timeout_ms: int | None = None,
                  ack_timeout_ms: int | None = None, *,
                  subscription: str | None = None) -> Plan[list[DelayMsg]]:
        """As pull, but wait up to ``timeout_ms`` (server default when None) for a message."""
        params = self._pull_params(topic, batch, ack_timeout_ms, subscription)
        if timeout_ms is not None:
            params["longPollingTimeoutMillis"] = int(timeout_ms)
        hold_ms = LONG_POLL_MAX_MS if timeout_ms is None else min(int(timeout_ms),
                                                                   LONG_POLL_MAX_MS)
        envelope = yield Request("longPollingMsg", params, idempotent=False,
                                 read_timeout_s=hold_ms / 1000 + self.timeout)
        return [DelayMsg.from_json(m) for m in envelope.get("delayMsgList") or []]

    @staticmethod
    def _pull_params(topic: str, batch: int, ack_timeout_ms: int | None,
                     subscription: str | None) -> dict[str, Any]:
        params: dict[str, Any] = {"topic": topic, "batch": int(batch)}
        if ack_timeout_ms is not None:
            params["ackTimeoutMillis"] = int(ack_timeout_ms)
        return with_subscription(params, subscription)

    def ack(self, topic: str | DelayMsg, msg_id: str | None = None, *,
            receipt: str | None = None, subscription: str | None = None) -> Plan[None]:
        """Mark a delivered message consumed: ``ack(msg)`` or ``ack(topic, msg_id)``.

        With a delivered DelayMsg its receipt is sent, so the ack only counts if that
        delivery is still the latest; ``receipt=`` gives one explicitly. A message pulled
        from a named subscription is acked there only: pass the same ``subscription``.

        Raises:
            StaleReceiptError: (409) the message was delivered again since that receipt
                (or the receipt is another subscription's).
            SubscriptionNotFoundError: (404) no such subscription.
        """
        topic, msg_id, receipt = _ref(topic, msg_id, receipt)
        params = {"topic": topic, "msgId": msg_id, "ack": "true"}
        if receipt:
            params["receipt"] = receipt
        yield Request("ackMsg", with_subscription(params, subscription), idempotent=True)

    def nack(self, topic: str | DelayMsg, msg_id: str | None = None, *,
             receipt: str | None = None,
             delay_ms: int | timedelta | None = None,
             subscription: str | None = None) -> Plan[None]:
        """Hand a delivered message back: ``nack(msg)`` or ``nack(topic, msg_id)``.

        Without ``delay_ms`` it is redelivered after the topic's redelivery backoff (at once
        by default; a subscription's own, when it sets one); with it, no earlier than
        ``delay_ms`` from now. It ends (status 6) when its deliveries or its life are used
        up. The receipt and ``subscription`` are used as for ``ack``.
        """
        topic, msg_id, receipt = _ref(topic, msg_id, receipt)
        params = {"topic": topic, "msgId": msg_id, "ack": "false"}
        if receipt:
            params["receipt"] = receipt
        if delay_ms is not None:
            params["delayMillis"] = str(max(0, millis(delay_ms)))
        yield Request("ackMsg", with_subscription(params, subscription), idempotent=False)

    def change_visibility(self, topic: str | DelayMsg, msg_id: str | None = None,
                          ack_timeout_ms: int | timedelta | None = None, *,
                          receipt: str | None = None,
                          subscription: str | None = None) -> Plan[DelayMsg]:
        """Set a consuming message's ack deadline to now + ``ack_timeout_ms``.

        ``change_visibility(msg, 60_000)`` or ``change_visibility(topic, msg_id, 60_000)``.
        A long handler's heartbeat (the Consumer sends it by itself); 0 gives the delivery up
        at once (ready again, no backoff). Returns the message as it is now (in
        ``subscription``, the one it was pulled from).

        Raises:
            BadRequestError: (400) not consuming (waiting, or ready after its deadline).
            NotFoundError: (404) unknown or ended.
            StaleReceiptError: (409) delivered again since that receipt.
        """
        if isinstance(topic, DelayMsg) and msg_id is not None and not isinstance(msg_id, str):
            msg_id, ack_timeout_ms = None, msg_id  # change_visibility(msg, 60_000)
        topic, msg_id, receipt = _ref(topic, msg_id, receipt)
        if ack_timeout_ms is None:
            raise TypeError("ack_timeout_ms is required")
        timeout = max(0, millis(ack_timeout_ms))
        params = {"topic": topic, "msgId": msg_id, "ackTimeoutMillis": str(timeout)}
        if receipt:
            params["receipt"] = receipt
        envelope = yield Request("changeVisibility", with_subscription(params, subscription),
                                 idempotent=timeout > 0)
        return DelayMsg.from_json(envelope["delayMsg"])

    def reschedule(self, topic: str, msg_id: str, delay_ms: int | timedelta | None = None,
                   trigger_time: int | datetime | None = None) -> Plan[DelayMsg]:
        """Move a waiting or ready message to a new due time (exactly one of the two).

        A past time, or ``delay_ms=0``, makes it due now. Its ``expireTime`` moves with it.

        Raises:
            BadRequestError: (400) it is being consumed.
            NotFoundError: (404) unknown or ended.
        """
        if (delay_ms is None) == (trigger_time is None):
            raise ValueError("give exactly one of delay_ms and trigger_time")
        params: dict[str, Any] = {"topic": topic, "msgId": msg_id}
        if trigger_time is not None:
            params["triggerTime"] = epoch_ms(trigger_time)
        else:
            params["delayMillis"] = millis(delay_ms)  # type: ignore[arg-type]
        envelope = yield Request("rescheduleMsg", params, idempotent=True)
        return DelayMsg.from_json(envelope["delayMsg"])

    def get(self, topic: str, msg_id: str, *,
            subscription: str | None = None) -> Plan[DelayMsg | None]:
        """The message with its current status, or None when the server has none.

        The status, retry and receipt are the default subscription's, or the named
        ``subscription``'s. Without ``subscription``, a message that named subscriptions
        hold carries ``subscriptions``: each one's name -> ``{"status", "retry"}``.

        Raises:
            SubscriptionNotFoundError: (404) no such subscription (not None: the message
                may well exist).
        """
        params = with_subscription({"topic": topic, "msgId": msg_id}, subscription)
        try:
            envelope = yield Request("getMsg", params, idempotent=True)
        except SubscriptionNotFoundError:
            raise
        except NotFoundError:
            return None
        return DelayMsg.from_json(envelope["delayMsg"])

    def delete(self, topic: str, msg_id: str, release: bool = False) -> Plan[None]:
        """Delete a live message (status 7); ``release`` also drops its body at once."""
        params = {"topic": topic, "msgId": msg_id, "release": "true" if release else "false"}
        yield Request("deleteMsg", params, idempotent=False)

    def topic_info(self, topic: str) -> Plan[TopicInfo]:
        envelope = yield Request("getTopicInfo", {"topic": topic}, idempotent=True)
        return TopicInfo.from_json(envelope["data"])

    def topics(self) -> Plan[list[TopicInfo]]:
        envelope = yield Request("getTopicInfoList", {}, idempotent=True)
        return [TopicInfo.from_json(t) for t in envelope.get("data") or []]

    # ---- topic settings ----------------------------------------------------------------
    def get_topic_config(self, topic: str) -> Plan[TopicConfig]:
        """The topic's effective settings, each with its source ("topic" or "server")."""
        envelope = yield Request("getTopicConfig", {"topic": topic}, idempotent=True)
        return TopicConfig.from_json(topic, envelope.get("data") or {}, envelope.get("source"))

    def set_topic_config(self, topic: str, reset: bool = False,
                         **settings: Any) -> Plan[TopicConfig]:
        """Set topic settings; ``reset=True`` first drops every value set on the topic.

        Settings by their SDK names (``ttl_ms``, ``max_retry``, ``ack_timeout_ms``,
        ``redelivery_delay_ms``, ``redelivery_backoff_multiplier``, ``redelivery_max_delay_ms``,
        ``dead_letter``, ``dead_letter_retention_ms``, ``dead_letter_max_size``, ``delay_ms``
        (the delay of a send that gives none), ``max_backlog`` (most live messages, 0 no
        limit), ``dedup_window_ms`` (how long after a message ended a re-send of its msgId
        is a duplicate, 0 none), ``default_subscription`` (False: only the named
        subscriptions receive the topic's messages), ``description`` (text); the API names
        such as ``ttlMillis`` are accepted too); durations may be timedeltas. A None value is
        left out. Returns the settings now in force.

        Raises:
            ValueError: an unknown setting (nothing sent).
            BadRequestError: (400) a value the server refuses; nothing is written.
        """
        params: dict[str, Any] = {"topic": topic, **settings_params(settings)}
        if reset:
            params["reset"] = "true"
        envelope = yield Request("setTopicConfig", params, idempotent=True)
        return TopicConfig.from_json(topic, envelope.get("data") or {}, envelope.get("source"))

    # ---- dead letters ----------------------------------------------------------------
    def list_dead(self, topic: str, limit: int = 100, cursor: str | None = None, *,
                  subscription: str | None = None) -> Plan[DeadLetterPage]:
        """One page of the topic's dead letters, oldest death first (each has ``dead_time``):
        the default subscription's, or the named ``subscription``'s (each keeps its own).

        ``messages, cursor = client.list_dead(topic)``; pass the cursor back for the next
        page; it is None on the last page.
        """
        params: dict[str, Any] = {"topic": topic, "limit": int(limit)}
        if cursor:
            params["cursor"] = cursor
        envelope = yield Request("listDeadMsg", with_subscription(params, subscription),
                                 idempotent=True)
        messages = [DelayMsg.from_json(m) for m in envelope.get("delayMsgList") or []]
        return DeadLetterPage(messages, envelope.get("nextCursor") or None)

    def redrive_dead(self, topic: str, msg_id: str | None = None, limit: int | None = None,
                     *, subscription: str | None = None) -> Plan[int]:
        """Put dead letters back to ready (retry 0, due now, a fresh ttl); returns how many.

        One message by ``msg_id`` (NotFoundError when it is not a dead letter), or the
        ``limit`` oldest (server default and most 1000), of the default subscription or the
        named ``subscription`` (back to ready in that one only). See ``redrive_all_dead``.
        """
        params: dict[str, Any] = {"topic": topic}
        if msg_id is not None:
            params["msgId"] = msg_id
        if limit is not None:
            params["limit"] = int(limit)
        envelope = yield Request("redriveDeadMsg", with_subscription(params, subscription),
                                 idempotent=False)
        return int(envelope.get("count") or 0)

    def redrive_all_dead(self, topic: str, batch: int = 1000, *, max_count: int | None = None,
                         progress: Callable[[int], None] | None = None,
                         subscription: str | None = None) -> Plan[int]:
        """Redrive the oldest ``max_count`` dead letters (all when None), ``batch`` per call.

        Calls ``redrive_dead`` until a call redrives fewer than it asked for; ``progress``
        gets the running total after each call. Returns the total.
        """
        total = 0
        while max_count is None or total < max_count:
            ask = batch if max_count is None else min(batch, max_count - total)
            count = yield from self.redrive_dead(topic, limit=ask, subscription=subscription)
            total += count
            if progress is not None:
                progress(total)
            if count < ask:
                break
        return total

    def purge_dead(self, topic: str, msg_id: str | None = None, *,
                   subscription: str | None = None) -> Plan[int]:
        """Remove one dead letter (NotFoundError when absent) or all of them, of the default
        subscription or the named ``subscription``; returns how many."""
        params: dict[str, Any] = {"topic": topic}
        if msg_id is not None:
            params["msgId"] = msg_id
        envelope = yield Request("purgeDeadMsg", with_subscription(params, subscription),
                                 idempotent=msg_id is None)
        return int(envelope.get("count") or 0)

    # ---- topic controls: pause, purge, list -------------------------------------------
    def pause_topic(self, topic: str, *, subscription: str | None = None) -> Plan[bool]:
        """Stop handing the topic's messages out: pulls answer empty and long polls wait
        until ``resume_topic``; sends, promotion, ack timeouts and expiry go on. Returns
        whether this call paused it (False: it was paused already).

        Without ``subscription`` the whole topic pauses, every subscription with it; with
        one (``"default"`` included), only that subscription.

        Raises:
            NotFoundError: (404) no such topic (no messages, no settings); nothing created.
            SubscriptionNotFoundError: (404) no such subscription.
        """
        envelope = yield Request("pauseTopic", with_subscription({"topic": topic}, subscription),
                                 idempotent=True)
        return bool(envelope.get("changed"))

    def resume_topic(self, topic: str, *, subscription: str | None = None) -> Plan[bool]:
        """Hand the topic's messages out again (long polls held meanwhile answer at once):
        the whole topic's, or ``subscription``'s, as ``pause_topic`` paused them. Returns
        whether this call resumed it (False: it was not paused)."""
        envelope = yield Request("resumeTopic", with_subscription({"topic": topic}, subscription),
                                 idempotent=True)
        return bool(envelope.get("changed"))

    def purge_topic(self, topic: str, limit: int | None = None) -> Plan[PurgeResult]:
        """End up to ``limit`` (server default 10,000; at most 1,000,000) of the live
        messages accepted before the call: status 7, as ``delete``. Dead letters are left
        (``purge_dead``). ``remaining`` is 0 when no such message is left, else the topic's
        live messages: call again, or use ``purge_topic_all``.

        Raises:
            NotFoundError: (404) no such topic.
        """
        params: dict[str, Any] = {"topic": topic}
        if limit is not None:
            params["limit"] = int(limit)
        # Not re-sent after a lost answer: the second call would also end what was sent since.
        envelope = yield Request("purgeTopic", params, idempotent=False)
        return PurgeResult(int(envelope.get("count") or 0), int(envelope.get("remaining") or 0))

    def purge_topic_all(self, topic: str, batch: int = PURGE_BATCH, *,
                        max_count: int | None = None, max_calls: int = PURGE_MAX_CALLS,
                        progress: Callable[[PurgeResult], None] | None = None
                        ) -> Plan[PurgeResult]:
        """Purge the topic ``batch`` messages a call until it is done, or ``max_count``
        messages were ended (all when None); at most ``max_calls`` calls (sends that go on
        meanwhile can keep a topic from emptying).

        Done is a call that reports ``remaining`` 0 and ended fewer than it asked for: one
        that used its whole budget may have stopped short, so it is called once more (as
        ``redrive_all_dead`` does). ``progress`` gets (running total, remaining) after each
        call. Returns (total count, remaining of the last call): remaining is not 0 when
        ``max_count`` or ``max_calls`` stopped it first.
        """
        if max_calls < 1:
            raise ValueError(f"max_calls: must be at least 1, got {max_calls}")
        total, remaining = 0, 0
        for _ in range(max_calls):
            ask = batch if max_count is None else min(batch, max_count - total)
            if ask < 1:
                break
            result = yield from self.purge_topic(topic, ask)
            total, remaining = total + result.count, result.remaining
            if progress is not None:
                progress(PurgeResult(total, remaining))
            if remaining == 0 and result.count < ask:
                break
        return PurgeResult(total, remaining)

    def list_messages(self, topic: str, status: int | None = None,
                      group_blocked: bool = False, limit: int = 100,
                      cursor: str | None = None, *,
                      subscription: str | None = None) -> Plan[MessagePage]:
        """One page of the topic's live messages of one ``status``: 1 waiting (by trigger
        time), 2 ready (in delivery order), 3 consuming (by ack deadline; each with its
        ``receipt`` and ``ack_deadline``); or ``group_blocked=True``, the due messages
        waiting behind their group's head, each group in its order.

        ``messages, cursor = client.list_messages(topic, 1)``; pass the cursor back for the
        next page; it is None on the last page. ``limit`` is at most the server's max-batch.
        The statuses are the default subscription's, or the named ``subscription``'s.

        Raises:
            ValueError: neither or both of ``status`` and ``group_blocked`` (nothing sent).
        """
        if (status is None) != group_blocked:
            raise ValueError("give one of status (1 waiting, 2 ready, 3 consuming) and "
                             "group_blocked=True")
        params: dict[str, Any] = {"topic": topic, "limit": int(limit)}
        if group_blocked:
            params["groupBlocked"] = "true"
        else:
            params["status"] = int(status)  # type: ignore[arg-type]
        if cursor:
            params["cursor"] = cursor
        envelope = yield Request("listMsg", with_subscription(params, subscription),
                                 idempotent=True)
        messages = [DelayMsg.from_json(m) for m in envelope.get("delayMsgList") or []]
        return MessagePage(messages, envelope.get("nextCursor") or None)

    def monitor_data(self) -> Plan[MonitorData]:
        envelope = yield Request("getMonitorData", {}, idempotent=True)
        return MonitorData.from_json(envelope.get("data") or {})


class ClientBase:
    """The construction both clients share: the node URLs, the read timeout and the plans;
    ``_transport_class`` (blocking, or asyncio) moves the requests. Arguments: see
    DelayQueueClient."""

    _transport_class: Any

    def __init__(self, url: str | Iterable[str] = "http://127.0.0.1:8080", *,
                 timeout: float = 10.0, connect_timeout: float = 3.0,
                 pool_size: int = 32, token: str | None = None,
                 compress_over_bytes: int | None = None) -> None:
        self.urls = split_urls(url)
        self.timeout = timeout
        self._plans = Plans(timeout)
        self._transport = self._transport_class(
            self.urls, connect_timeout_s=connect_timeout, read_timeout_s=timeout,
            pool_size=pool_size, token=token, compress_over_bytes=compress_over_bytes)
