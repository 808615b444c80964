"""The queue service: one typed method per transition, each one Lua script.

Views call this; the background work (promotion, ack timeouts, expiry) lives in
``scheduler.py``. The only writes outside a script are bookkeeping in the namespace slot
(registry, due index), which is never the truth about a message: a lost bookkeeping write
costs at most a repair sweep's delay.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Mapping

import redis

from .clock import Clock
from .config import Settings
from .errors import BadRequest, Conflict, NotFound, redis_errors
from .keys import NamespaceKeys, TopicKeys
from .message import MESSAGE_FIELDS, DelayMsg
from .monitor import Monitor
from .outcome import Outcome
from .scripts import Scripts
from .status import Status
from .topic_config import server_defaults

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


class DelayQueue:
    """Every transition of a message, each one Lua script. Where a request gives no value,
    the script uses the topic's own setting, then the server's (``defaults``)."""

    def __init__(self, client: redis.Redis, scripts: Scripts, clock: Clock, monitor: Monitor,
                 settings: Settings) -> None:
        self.client = client
        self.scripts = scripts
        self.clock = clock
        self.monitor = monitor
        self.settings = settings
        self.keys = NamespaceKeys(settings.redis_key_prefix, settings.namespace)
        self.defaults = server_defaults(settings)
        self.end_life_ms = settings.end_life_msg_expire_millis
        self.hint_horizon_ms = settings.long_polling_safety_millis
        self._touched: dict[str, float] = {}

    def topic_keys(self, topic: str) -> TopicKeys:
        return self.keys.topic(topic)

    def forget(self, topic: str) -> None:
        """The topic was recycled: register it again on its next use, however soon."""
        self._touched.pop(topic, None)

    # -- bookkeeping ---------------------------------------------------------------------
    def bookkeep(self, topic: str, now_ms: int, lowered_due_ms: int = -1) -> None:
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
                # execute_command: a Cluster pipeline refuses .publish() (any node will do:
                # a classic PUBLISH reaches the subscribers of every node).
                pipe.execute_command("PUBLISH", self.keys.hint_channel, f"0 {topic}")
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
             ttl_ms: int | None = None, max_retry: int | None = None,
             attributes: Mapping[str, str] | None = None) -> SendResult:
        """Accept a message; a trigger time in the past means now (its life counts from now)."""
        msg_id = msg_id or uuid.uuid4().hex
        attrs = json.dumps(dict(attributes), ensure_ascii=False, separators=(",", ":")) \
            if attributes else ""
        with redis_errors():
            now = self.clock.now_ms()
            trigger = trigger_time_ms if trigger_time_ms is not None \
                else now + max(delay_ms or 0, 0)
            tk = self.topic_keys(topic)
            outcome, fields, lowered_due = self.scripts.send(
                tk, msg_id, body, now, max(trigger, now), ttl_ms if ttl_ms and ttl_ms > 0 else -1,
                max_retry if max_retry is not None and max_retry >= 0 else -1, attrs,
                self.keys.hint_channel, self.defaults)
            self.bookkeep(topic, now, int(lowered_due))
        duplicate = outcome == Outcome.DUPLICATE
        if not duplicate:
            self.monitor.incr(topic, "sendMsg")
        return SendResult(DelayMsg.from_fields(topic, msg_id, fields), duplicate=duplicate)

    def pull(self, topic: str, batch: int = 1, ack_timeout_ms: int | None = None) -> PullResult:
        with redis_errors():
            now = self.clock.now_ms()
            tk = self.topic_keys(topic)
            messages, promoted, gaps, ended, next_trigger, ready_left, lowered_due, dead = \
                self.scripts.pull(tk, now, batch,
                                  ack_timeout_ms if ack_timeout_ms and ack_timeout_ms > 0 else -1,
                                  self.end_life_ms, SCRIPT_LIMIT, self.keys.hint_channel,
                                  self.defaults)
            self.bookkeep(topic, now, int(lowered_due))
        delivered = [DelayMsg.from_fields(topic, m[0], m[1:], with_receipt=True)
                     for m in messages]
        if delivered:
            self.monitor.incr(topic, "pullMsg", len(delivered))
            self.monitor.observe(topic, "pullMsgTimeGap",
                                 [now - m.trigger_time for m in delivered])
        self.monitor.record_promotions(topic, promoted, gaps)
        self.monitor.incr(topic, "triggerMsgEndLife", ended)
        self.monitor.incr(topic, "deadLettered", dead)
        return PullResult(delivered, int(next_trigger) if next_trigger >= 0 else None,
                          int(ready_left))

    def ack(self, topic: str, msg_id: str, receipt: str | None = None) -> DelayMsg:
        """Ack a delivery (status 3, or given back and not yet redelivered) -> 4."""
        with redis_errors():
            outcome, fields = self.scripts.ack(self.topic_keys(topic), msg_id, self.end_life_ms,
                                               receipt or "")
            self.bookkeep(topic, self.clock.now_ms())
        if outcome == Outcome.NO_MESSAGE:
            raise NotFound(f"msgId: no live or acked message '{msg_id}' in topic '{topic}'")
        message = DelayMsg.from_fields(topic, msg_id, fields)
        self._check_receipt(outcome, message)
        if outcome == Outcome.NOT_DELIVERED:
            raise BadRequest(f"msgId: message '{msg_id}' has not been delivered yet "
                             f"(status {int(message.status)}); use deleteMsg to drop it")
        if outcome in (Outcome.OK, Outcome.ACKED_LATE):
            self.monitor.incr(topic, "ackMsg")
        return message

    def nack(self, topic: str, msg_id: str, receipt: str | None = None,
             delay_ms: int | None = None) -> DelayMsg:
        """Give a delivery back: ready at once (the tail of the queue), waiting until
        ``delay_ms`` (or the topic's backoff) has passed, or 6 when it cannot be redelivered."""
        with redis_errors():
            now = self.clock.now_ms()
            outcome, fields, lowered_due, dead = self.scripts.nack(
                self.topic_keys(topic), msg_id, now, self.end_life_ms, self.keys.hint_channel,
                self.defaults, receipt or "", -1 if delay_ms is None else max(delay_ms, 0))
            self.bookkeep(topic, now, int(lowered_due))
        if outcome == Outcome.NO_MESSAGE:
            raise NotFound(f"msgId: no live message '{msg_id}' in topic '{topic}'")
        message = DelayMsg.from_fields(topic, msg_id, fields)
        self._check_receipt(outcome, message)
        if outcome == Outcome.NOT_CONSUMING:
            raise BadRequest(f"msgId: message '{msg_id}' is not being consumed "
                             f"(status {int(message.status)}); only status 3 can be nacked")
        self.monitor.incr(topic, "nackMsg")
        self._count_end(topic, message, dead)
        return message

    def change_visibility(self, topic: str, msg_id: str, timeout_ms: int,
                          receipt: str | None = None) -> DelayMsg:
        """A consuming message's ack deadline becomes now + ``timeout_ms``; 0 gives it up."""
        with redis_errors():
            now = self.clock.now_ms()
            outcome, fields, lowered_due, dead = self.scripts.change_visibility(
                self.topic_keys(topic), msg_id, now, timeout_ms, self.end_life_ms,
                self.keys.hint_channel, self.defaults, receipt or "")
            self.bookkeep(topic, now, int(lowered_due))
        if outcome == Outcome.NO_MESSAGE:
            raise NotFound(f"msgId: no live message '{msg_id}' in topic '{topic}'")
        message = DelayMsg.from_fields(topic, msg_id, fields)
        self._check_receipt(outcome, message)
        if outcome == Outcome.NOT_CONSUMING:
            raise BadRequest(f"msgId: message '{msg_id}' is not being consumed "
                             f"(status {int(message.status)}); only status 3 has an ack "
                             f"deadline")
        self._count_end(topic, message, dead)
        return message

    def reschedule(self, topic: str, msg_id: str, *, delay_ms: int | None = None,
                   trigger_time_ms: int | None = None) -> DelayMsg:
        """A waiting or ready message gets a new trigger time (past: now); its life moves too."""
        with redis_errors():
            now = self.clock.now_ms()
            trigger = trigger_time_ms if trigger_time_ms is not None \
                else now + max(delay_ms or 0, 0)
            outcome, fields, lowered_due = self.scripts.reschedule(
                self.topic_keys(topic), msg_id, now, trigger, self.keys.hint_channel)
            self.bookkeep(topic, now, int(lowered_due))
        if outcome == Outcome.NO_MESSAGE:
            raise NotFound(f"msgId: no live message '{msg_id}' in topic '{topic}'")
        message = DelayMsg.from_fields(topic, msg_id, fields)
        if outcome == Outcome.CONSUMING:
            raise BadRequest(f"msgId: message '{msg_id}' is being consumed (status 3); only "
                             f"waiting or ready messages can be rescheduled")
        return message

    def get(self, topic: str, msg_id: str) -> DelayMsg:
        with redis_errors():
            fields = self.client.hmget(self.topic_keys(topic).msg(msg_id), MESSAGE_FIELDS)
        self.monitor.incr(topic, "getMsg")
        if fields[6] is None:
            raise NotFound(f"msgId: no message '{msg_id}' in topic '{topic}'")
        return DelayMsg.from_fields(topic, msg_id, fields)

    def delete(self, topic: str, msg_id: str, release: bool = False) -> DelayMsg:
        with redis_errors():
            outcome, fields = self.scripts.delete(self.topic_keys(topic), msg_id,
                                                  self.end_life_ms, release)
            self.bookkeep(topic, self.clock.now_ms())
        if outcome == Outcome.NO_MESSAGE:
            raise NotFound(f"msgId: no live message '{msg_id}' in topic '{topic}'")
        self.monitor.incr(topic, "deleteMsg")
        return DelayMsg.from_fields(topic, msg_id, fields)

    def _check_receipt(self, outcome: int, message: DelayMsg) -> None:
        if outcome == Outcome.STALE_RECEIPT:
            raise Conflict(f"receipt: stale receipt: message '{message.msg_id}' was delivered "
                           f"again since (status {int(message.status)}, retry {message.retry})")

    def _count_end(self, topic: str, message: DelayMsg, dead: int) -> None:
        if message.status == Status.RETRY_EXHAUSTED:
            self.monitor.incr(topic, "triggerMsgEndLife")
            self.monitor.incr(topic, "deadLettered", dead)

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
            retention = self._dead_retention(topics)
            pipe = self.client.pipeline(transaction=False)
            for topic in topics:
                tk = self.topic_keys(topic)
                pipe.zcard(tk.ready).zcard(tk.ack)
                pipe.zcount(tk.dead, now - retention[topic], "+inf")
                for _, lo, hi in WAITING_BUCKETS:
                    pipe.zcount(tk.waiting, "-inf" if lo is None else now + lo,
                                "+inf" if hi is None else f"({now + hi}")
            replies = pipe.execute()
        width = 3 + len(WAITING_BUCKETS)
        infos = []
        for i, topic in enumerate(topics):
            ready, ack, dead, *buckets = replies[i * width:(i + 1) * width]
            infos.append({
                "topic": topic,
                "waitingQueueSize": sum(buckets),
                "waitingQueueInfo": {name: n for (name, _, _), n in zip(WAITING_BUCKETS, buckets)},
                "readyQueueSize": ready,
                "ackQueueSize": ack,
                "deadQueueSize": dead,
            })
        return infos

    def _dead_retention(self, topics: list[str]) -> dict[str, int]:
        """Each topic's dead-letter retention: its own setting, else the server's."""
        pipe = self.client.pipeline(transaction=False)
        for topic in topics:
            pipe.hget(self.topic_keys(topic).config, "deadLetterRetentionMillis")
        own = pipe.execute() if topics else []
        default = self.settings.dead_letter_retention_millis
        return {topic: int(value) if value else default for topic, value in zip(topics, own)}

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
