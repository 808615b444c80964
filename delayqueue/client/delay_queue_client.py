"""DelayQueueClient: every endpoint of the HTTP API as one typed method."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any, Callable, Iterable

from .consumer import Consumer
from .errors import NotFoundError
from .model import DelayMsg, MonitorData, TopicInfo
from .transport import Transport

# The server caps longPollingTimeoutMillis at this; a poll without a timeout may last as long.
LONG_POLL_MAX_MS = 60_000


def _ms(value: int | float | timedelta) -> int:
    if isinstance(value, timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)


def epoch_ms(value: int | float | datetime) -> int:
    """Milliseconds since the epoch; a naive datetime is taken as local time."""
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    return int(value)


def split_urls(url: str | Iterable[str]) -> list[str]:
    """One URL, a comma-separated list, or an iterable of URLs."""
    items = url.split(",") if isinstance(url, str) else list(url)
    return [u.strip() for u in items if u and u.strip()]


class DelayQueueClient:
    """A thread-safe client for one or more delayqueue nodes.

    Args:
        url: a base URL (``http://host:8080``), several separated by commas, or a list;
            requests are spread over them and a node that fails is skipped for a while.
        timeout: read timeout in seconds; a long poll waits this much longer than the poll.
        connect_timeout: seconds to open a connection before trying the next node.
        pool_size: keep-alive connections kept per node (at least the threads that share it).
    """

    def __init__(self, url: str | Iterable[str] = "http://127.0.0.1:8080", *,
                 timeout: float = 10.0, connect_timeout: float = 3.0,
                 pool_size: int = 32) -> None:
        self.urls = split_urls(url)
        self.timeout = timeout
        self._transport = Transport(self.urls, connect_timeout_s=connect_timeout,
                                    read_timeout_s=timeout, pool_size=pool_size)

    def close(self) -> None:
        self._transport.close()

    def __enter__(self) -> "DelayQueueClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, topic: str, msg: str, delay_ms: int | timedelta = 0, *,
             trigger_time: int | datetime | None = None, msg_id: str | None = None,
             ttl_ms: int | timedelta | None = None,
             max_retry: int | None = None) -> DelayMsg:
        """Send a message due in ``delay_ms`` or at ``trigger_time`` (epoch ms or datetime).

        Without ``msg_id`` one is generated here, so a re-send after a lost answer is
        recognised by the server as a duplicate (``DelayMsg.duplicate``) instead of doubling.
        """
        if trigger_time is not None and delay_ms:
            raise ValueError("give at most one of delay_ms and trigger_time")
        params: dict[str, Any] = {"topic": topic, "msg": msg,
                                  "msgId": msg_id or uuid.uuid4().hex}
        if trigger_time is not None:
            params["triggerTime"] = epoch_ms(trigger_time)
        else:
            params["delayMillis"] = _ms(delay_ms)
        if ttl_ms is not None:
            params["ttlMillis"] = _ms(ttl_ms)
        if max_retry is not None:
            params["maxRetry"] = int(max_retry)
        envelope = self._transport.call("sendMsg", params, idempotent=True)
        return DelayMsg.from_json(envelope["delayMsg"], bool(envelope.get("duplicate")))

    def pull(self, topic: str, batch: int = 1,
             ack_timeout_ms: int | None = None) -> list[DelayMsg]:
        """Take up to ``batch`` ready messages now (an empty list when none is ready)."""
        params = self._pull_params(topic, batch, ack_timeout_ms)
        envelope = self._transport.call("pullMsg", params, idempotent=False)
        return [DelayMsg.from_json(m) for m in envelope.get("delayMsgList") or []]

    def long_poll(self, topic: str, batch: int = 1, timeout_ms: int | None = None,
                  ack_timeout_ms: int | None = None) -> list[DelayMsg]:
        """As pull, but wait up to ``timeout_ms`` (server default when None) for a message."""
        params = self._pull_params(topic, batch, ack_timeout_ms)
        if timeout_ms is not None:
            params["longPollingTimeoutMillis"] = int(timeout_ms)
        hold_ms = LONG_POLL_MAX_MS if timeout_ms is None else min(int(timeout_ms),
                                                                   LONG_POLL_MAX_MS)
        envelope = self._transport.call("longPollingMsg", params, idempotent=False,
                                        read_timeout_s=hold_ms / 1000 + self.timeout)
        return [DelayMsg.from_json(m) for m in envelope.get("delayMsgList") or []]

    @staticmethod
    def _pull_params(topic: str, batch: int, ack_timeout_ms: int | None) -> dict[str, Any]:
        params: dict[str, Any] = {"topic": topic, "batch": int(batch)}
        if ack_timeout_ms is not None:
            params["ackTimeoutMillis"] = int(ack_timeout_ms)
        return params

    def ack(self, topic: str, msg_id: str) -> None:
        """Mark a delivered message consumed (idempotent)."""
        self._transport.call("ackMsg", {"topic": topic, "msgId": msg_id, "ack": "true"},
                             idempotent=True)

    def nack(self, topic: str, msg_id: str) -> None:
        """Hand a delivered message back for redelivery now (ends it if retries are used up)."""
        self._transport.call("ackMsg", {"topic": topic, "msgId": msg_id, "ack": "false"},
                             idempotent=False)

    def get(self, topic: str, msg_id: str) -> DelayMsg | None:
        """The message with its current status, or None when the server has none."""
        try:
            envelope = self._transport.call("getMsg", {"topic": topic, "msgId": msg_id},
                                            idempotent=True)
        except NotFoundError:
            return None
        return DelayMsg.from_json(envelope["delayMsg"])

    def delete(self, topic: str, msg_id: str, release: bool = False) -> None:
        """Delete a live message (status 7); ``release`` also drops its body at once."""
        params = {"topic": topic, "msgId": msg_id, "release": "true" if release else "false"}
        self._transport.call("deleteMsg", params, idempotent=False)

    def topic_info(self, topic: str) -> TopicInfo:
        envelope = self._transport.call("getTopicInfo", {"topic": topic}, idempotent=True)
        return TopicInfo.from_json(envelope["data"])

    def topics(self) -> list[TopicInfo]:
        envelope = self._transport.call("getTopicInfoList", {}, idempotent=True)
        return [TopicInfo.from_json(t) for t in envelope.get("data") or []]

    def monitor_data(self) -> MonitorData:
        envelope = self._transport.call("getMonitorData", {}, idempotent=True)
        return MonitorData.from_json(envelope.get("data") or {})

    def listen(self, topic: str, handler: Callable[[DelayMsg], bool], *,
               pull_threads: int = 1, consume_threads: int = 1, batch: int = 1,
               ack_timeout_ms: int = 30_000, long_polling: bool = True,
               **options: Any) -> Consumer:
        """Start a Consumer that calls ``handler`` per message (True acks, else nacks)."""
        consumer = Consumer(self, topic, handler, pull_threads=pull_threads,
                            consume_threads=consume_threads, batch=batch,
                            ack_timeout_ms=ack_timeout_ms, long_polling=long_polling,
                            **options)
        return consumer.start()
