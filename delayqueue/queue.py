"""The queue service: one typed method per transition, each one Lua script.

Views call this; the background work (promotion, ack timeouts, expiry) lives in
``scheduler.py``. The only writes outside a script are bookkeeping in the namespace slot
(registry, due index), which is never the truth about a message: a lost bookkeeping write
costs at most a repair sweep's delay.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Iterator

import redis

from .clock import Clock
from .errors import BadRequest, NotFound, OutOfMemory, Unavailable
from .keys import NamespaceKeys, TopicKeys
from .message import MESSAGE_FIELDS, DelayMsg
from .monitor import Monitor
from .outcome import Outcome
from .scripts import Scripts
from .status import Status

logger = logging.getLogger(__name__)

SCRIPT_LIMIT = 1000           # most ids one script call moves (bounded work per call)
REGISTRY_TOUCH_S = 1.0        # a process bumps a topic's last-active time at most this often
MINUTE_MS = 60_000
# getTopicInfo buckets: time until triggerTime, half-open [lo, hi) in ms.
WAITING_BUCKETS = (
    ("sizeOf0To1min", None, MINUTE_MS),
    ("sizeOf1minTo10min", MINUTE_MS, 10 * MINUTE_MS),
    ("sizeOf10minTo30min", 10 * MINUTE_MS, 30 * MINUTE_MS),
    ("sizeOf30minTo1hour", 30 * MINUTE_MS, 60 * MINUTE_MS),
    ("sizeOf1hourTo6hour", 60 * MINUTE_MS, 360 * MINUTE_MS),
    ("sizeOf6hourTo1day", 360 * MINUTE_MS, 1440 * MINUTE_MS),
    ("sizeOf1dayTo7day", 1440 * MINUTE_MS, 7 * 1440 * MINUTE_MS),
    ("sizeOf7dayTo30day", 7 * 1440 * MINUTE_MS, 30 * 1440 * MINUTE_MS),
    ("sizeOf30dayToInfinite", 30 * 1440 * MINUTE_MS, None),
)


@dataclass(frozen=True)
class SendResult:
    message: DelayMsg
    duplicate: bool


@dataclass(frozen=True)
class PullResult:
    messages: list[DelayMsg]
    next_due_ms: int | None      # triggerTime of the earliest waiting message
    ready_left: int              # ready messages still queued


@contextlib.contextmanager
def redis_errors() -> Iterator[None]:
    """Translate redis-py failures into the project's 500 errors, chained."""
    try:
        yield
    except redis.RedisError as exc:
        if is_out_of_memory(exc):
            raise OutOfMemory(f"Redis is out of memory (over its maxmemory); nothing was "
                              f"written: {exc}") from exc
        raise Unavailable(f"redis unavailable: {exc.__class__.__name__}: {exc}") from exc


def is_out_of_memory(exc: redis.RedisError) -> bool:
    """Redis refused a write over maxmemory: redis-py's OutOfMemoryError, or (Redis 6) a
    script error wrapping the same OOM reply."""
    return isinstance(exc, redis.exceptions.OutOfMemoryError) or (
        isinstance(exc, redis.ResponseError) and "OOM command not allowed" in str(exc))


class DelayQueue:
    def __init__(self, client: redis.Redis, scripts: Scripts, clock: Clock, monitor: Monitor,
                 *, namespace: str, key_prefix: str, ttl_ms: int, max_retry: int,
                 ack_timeout_ms: int, end_life_ms: int, hint_horizon_ms: int = 1000) -> None:
        self.client = client
        self.scripts = scripts
        self.clock = clock
        self.monitor = monitor
        self.keys = NamespaceKeys(key_prefix, namespace)
        self.ttl_ms = ttl_ms
        self.max_retry = max_retry
        self.ack_timeout_ms = ack_timeout_ms
        self.end_life_ms = end_life_ms
        self.hint_horizon_ms = hint_horizon_ms
        self._touched: dict[str, float] = {}

    def topic_keys(self, topic: str) -> TopicKeys:
        return self.keys.topic(topic)

    def forget(self, topic: str) -> None:
        """The topic was recycled: register it again on its next use, however soon."""
        self._touched.pop(topic, None)

    # -- bookkeeping ---------------------------------------------------------------------
    def _bookkeep(self, topic: str, now_ms: int, lowered_due_ms: int = -1) -> None:
        """Bump the registry (rate-limited) and lower the due index; one round trip at most.

        A due time lowered to within ``hint_horizon_ms`` is also published as a "0 <topic>"
        hint, so held long polls and the scheduler re-read the topic's timing instead of
        sleeping past it; later ones are found by their own periodic re-checks.
        """
        touch = time.monotonic() - self._touched.get(topic, -REGISTRY_TOUCH_S) >= REGISTRY_TOUCH_S
        if not touch and lowered_due_ms < 0:
            return
        pipe = self.client.pipeline(transaction=False)
        if touch:
            pipe.zadd(self.keys.topics, {topic: now_ms})
        if lowered_due_ms >= 0:
            pipe.zadd(self.keys.due, {topic: lowered_due_ms}, lt=True)
            if lowered_due_ms - now_ms < self.hint_horizon_ms:
                pipe.publish(self.keys.hint_channel, f"0 {topic}")
        try:
            pipe.execute()
        except redis.RedisError as exc:
            # The transition itself is done: answering 500 now would invite a retry that
            # enqueues twice. The next use retries the registry; the repair sweep the due index.
            logger.warning("bookkeeping for topic %r failed after its script: %s", topic, exc)
            return
        if touch:
            self._touched[topic] = time.monotonic()

    # -- transitions ---------------------------------------------------------------------
    def send(self, topic: str, body: str, *, msg_id: str | None = None,
             delay_ms: int | None = None, trigger_time_ms: int | None = None,
             ttl_ms: int | None = None, max_retry: int | None = None) -> SendResult:
        msg_id = msg_id or uuid.uuid4().hex
        ttl_ms = ttl_ms if ttl_ms and ttl_ms > 0 else self.ttl_ms
        max_retry = max_retry if max_retry is not None and max_retry >= 0 else self.max_retry
        with redis_errors():
            now = self.clock.now_ms()
            if trigger_time_ms is not None:
                trigger = trigger_time_ms
            else:
                trigger = now + max(delay_ms or 0, 0)
            tk = self.topic_keys(topic)
            outcome, fields, lowered_due = self.scripts.send(
                tk, msg_id, body, now, trigger, ttl_ms, max_retry, self.keys.hint_channel)
            self._bookkeep(topic, now, int(lowered_due))
        duplicate = outcome == Outcome.DUPLICATE
        if not duplicate:
            self.monitor.incr(topic, "sendMsg")
        return SendResult(DelayMsg.from_fields(topic, msg_id, fields), duplicate=duplicate)

    def pull(self, topic: str, batch: int = 1, ack_timeout_ms: int | None = None) -> PullResult:
        ack_timeout_ms = ack_timeout_ms if ack_timeout_ms and ack_timeout_ms > 0 \
            else self.ack_timeout_ms
        with redis_errors():
            now = self.clock.now_ms()
            tk = self.topic_keys(topic)
            messages, promoted, gaps, ended, next_trigger, ready_left, lowered_due = \
                self.scripts.pull(tk, now, batch, ack_timeout_ms, self.end_life_ms,
                                  SCRIPT_LIMIT, self.keys.hint_channel)
            self._bookkeep(topic, now, int(lowered_due))
        delivered = [DelayMsg.from_fields(topic, m[0], m[1:]) for m in messages]
        if delivered:
            self.monitor.incr(topic, "pullMsg", len(delivered))
            self.monitor.observe(topic, "pullMsgTimeGap",
                                 [now - m.trigger_time for m in delivered])
        self.monitor.record_promotions(topic, promoted, gaps)
        if ended:
            self.monitor.incr(topic, "triggerMsgEndLife", ended)
        return PullResult(delivered, int(next_trigger) if next_trigger >= 0 else None,
                          int(ready_left))

    def ack(self, topic: str, msg_id: str) -> DelayMsg:
        """Ack a delivery (status 3, or 2 after a timeout not yet redelivered) -> 4."""
        with redis_errors():
            outcome, fields = self.scripts.ack(self.topic_keys(topic), msg_id, self.end_life_ms)
            self._bookkeep(topic, self.clock.now_ms())
        if outcome == Outcome.NO_MESSAGE:
            raise NotFound(f"msgId: no live or acked message '{msg_id}' in topic '{topic}'")
        message = DelayMsg.from_fields(topic, msg_id, fields)
        if outcome == Outcome.NOT_DELIVERED:
            raise BadRequest(f"msgId: message '{msg_id}' has not been delivered yet "
                             f"(status {int(message.status)}); use deleteMsg to drop it")
        if outcome in (Outcome.OK, Outcome.ACKED_LATE):
            self.monitor.incr(topic, "ackMsg")
        return message

    def nack(self, topic: str, msg_id: str) -> DelayMsg:
        """Give a delivery back: 3 -> 2 at once, or -> 6 when its deliveries are used up."""
        with redis_errors():
            now = self.clock.now_ms()
            outcome, fields = self.scripts.nack(self.topic_keys(topic), msg_id, now,
                                                self.end_life_ms, self.keys.hint_channel)
            self._bookkeep(topic, now)
        if outcome == Outcome.NO_MESSAGE:
            raise NotFound(f"msgId: no live message '{msg_id}' in topic '{topic}'")
        message = DelayMsg.from_fields(topic, msg_id, fields)
        if outcome == Outcome.NOT_CONSUMING:
            raise BadRequest(f"msgId: message '{msg_id}' is not being consumed "
                             f"(status {int(message.status)}); only status 3 can be nacked")
        self.monitor.incr(topic, "nackMsg")
        if message.status == Status.RETRY_EXHAUSTED:
            self.monitor.incr(topic, "triggerMsgEndLife")
        return message

    def get(self, topic: str, msg_id: str) -> DelayMsg:
        with redis_errors():
            fields = self.client.hmget(self.topic_keys(topic).msg(msg_id), MESSAGE_FIELDS)
        self.monitor.incr(topic, "getMsg")
        if fields[-1] is None:
            raise NotFound(f"msgId: no message '{msg_id}' in topic '{topic}'")
        return DelayMsg.from_fields(topic, msg_id, fields)

    def delete(self, topic: str, msg_id: str, release: bool = False) -> DelayMsg:
        with redis_errors():
            outcome, fields = self.scripts.delete(self.topic_keys(topic), msg_id,
                                                  self.end_life_ms, release)
            self._bookkeep(topic, self.clock.now_ms())
        if outcome == Outcome.NO_MESSAGE:
            raise NotFound(f"msgId: no live message '{msg_id}' in topic '{topic}'")
        self.monitor.incr(topic, "deleteMsg")
        return DelayMsg.from_fields(topic, msg_id, fields)

    # -- reads ---------------------------------------------------------------------------
    def topics(self) -> list[str]:
        with redis_errors():
            return sorted(self.client.zrange(self.keys.topics, 0, -1))

    def topic_info(self, topic: str) -> dict:
        return self.topic_infos([topic])[0]

    def topic_infos(self, topics: list[str]) -> list[dict]:
        """Queue sizes and the waiting queue's delay distribution, one round trip for all.

        The buckets are half-open and together cover every trigger time, so the waiting size
        is their sum: never a figure that disagrees with its own buckets.
        """
        with redis_errors():
            now = self.clock.now_ms()
            pipe = self.client.pipeline(transaction=False)
            for topic in topics:
                tk = self.topic_keys(topic)
                pipe.zcard(tk.ready).zcard(tk.ack)
                for _, lo, hi in WAITING_BUCKETS:
                    pipe.zcount(tk.waiting, "-inf" if lo is None else now + lo,
                                "+inf" if hi is None else f"({now + hi}")
            replies = pipe.execute()
        width = 2 + len(WAITING_BUCKETS)
        infos = []
        for i, topic in enumerate(topics):
            ready, ack, *buckets = replies[i * width:(i + 1) * width]
            infos.append({
                "topic": topic,
                "waitingQueueSize": sum(buckets),
                "waitingQueueInfo": {name: n for (name, _, _), n in zip(WAITING_BUCKETS, buckets)},
                "readyQueueSize": ready,
                "ackQueueSize": ack,
            })
        return infos

    def queue_sizes(self) -> dict[str, tuple[int, int, int]]:
        """(waiting, ready, consuming) per registered topic, one pipelined round trip."""
        topics = self.topics()
        with redis_errors():
            pipe = self.client.pipeline(transaction=False)
            for topic in topics:
                tk = self.topic_keys(topic)
                pipe.zcard(tk.waiting).zcard(tk.ready).zcard(tk.ack)
            counts = pipe.execute()
        return {t: tuple(counts[3 * i:3 * i + 3]) for i, t in enumerate(topics)}
