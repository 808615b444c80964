"""The queue service: one typed method per transition, each one Lua script.

Views call this; background loops call its scheduler methods. The only writes outside a
script are bookkeeping in the namespace slot (registry, due index), which is never the
truth about a message: a lost bookkeeping write costs at most a repair sweep's delay.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Iterator

import redis

from .clock import Clock
from .errors import BadRequest, NotFound, Unavailable
from .keys import NamespaceKeys, TopicKeys
from .message import DelayMsg
from .monitor import Monitor
from .scripts import Scripts
from .status import Status

logger = logging.getLogger(__name__)

SCRIPT_LIMIT = 1000           # most ids one script call moves (bounded work per call)
TOPICS_PER_TICK = 200         # most due topics one scheduler tick visits
ROUNDS_PER_TOPIC = 10         # most script rounds for one busy topic per tick
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


@dataclass
class TickStats:
    promoted: int = 0
    requeued: int = 0
    ended: int = 0
    topics: int = 0
    gaps: list[float] = field(default_factory=list)


@contextlib.contextmanager
def redis_errors() -> Iterator[None]:
    """Translate redis-py failures into the project's 500 error, chained."""
    try:
        yield
    except redis.RedisError as exc:
        raise Unavailable(f"redis unavailable: {exc.__class__.__name__}: {exc}") from exc


class DelayQueue:
    def __init__(self, client: redis.Redis, scripts: Scripts, clock: Clock, monitor: Monitor,
                 *, namespace: str, key_prefix: str, ttl_ms: int, max_retry: int,
                 ack_timeout_ms: int, end_life_ms: int, hint_horizon_ms: int = 1000,
                 schedule_defer_ms: int = 0) -> None:
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
        self.schedule_defer_ms = schedule_defer_ms
        self._touched: dict[str, float] = {}

    def topic_keys(self, topic: str) -> TopicKeys:
        return self.keys.topic(topic)

    # -- bookkeeping ---------------------------------------------------------------------
    def _bookkeep(self, topic: str, now_ms: int, attention_ms: int = -1) -> None:
        """Bump the registry (rate-limited) and lower the due index; one round trip at most.

        A due time lowered to within ``hint_horizon_ms`` is also published as a "0 <topic>"
        hint, so held long polls and the scheduler re-read the topic's timing instead of
        sleeping past it; later ones are found by their own periodic re-checks.
        """
        touch = time.monotonic() - self._touched.get(topic, -REGISTRY_TOUCH_S) >= REGISTRY_TOUCH_S
        if not touch and attention_ms < 0:
            return
        pipe = self.client.pipeline(transaction=False)
        if touch:
            pipe.zadd(self.keys.topics, {topic: now_ms})
        if attention_ms >= 0:
            pipe.zadd(self.keys.due, {topic: attention_ms}, lt=True)
            if attention_ms - now_ms < self.hint_horizon_ms:
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
            stored, fields, attention = self.scripts.send(
                tk, msg_id, body, now, trigger, ttl_ms, max_retry, self.keys.hint_channel)
            self._bookkeep(topic, now, int(attention))
        if stored:
            self.monitor.incr(topic, "sendMsg")
        return SendResult(DelayMsg.from_fields(topic, msg_id, fields), duplicate=not stored)

    def pull(self, topic: str, batch: int = 1, ack_timeout_ms: int | None = None) -> PullResult:
        ack_timeout_ms = ack_timeout_ms if ack_timeout_ms and ack_timeout_ms > 0 \
            else self.ack_timeout_ms
        with redis_errors():
            now = self.clock.now_ms()
            tk = self.topic_keys(topic)
            messages, promoted, gaps, ended, next_due, ready_left, attention = \
                self.scripts.pull(tk, now, batch, ack_timeout_ms, self.end_life_ms,
                                  SCRIPT_LIMIT, self.keys.hint_channel)
            self._bookkeep(topic, now, int(attention))
        delivered = [DelayMsg.from_fields(topic, m[0], m[1:]) for m in messages]
        if delivered:
            self.monitor.incr(topic, "pullMsg", len(delivered))
            self.monitor.observe(topic, "pullMsgTimeGap",
                                 [now - m.trigger_time for m in delivered])
        self._record_promotions(topic, promoted, gaps)
        if ended:
            self.monitor.incr(topic, "triggerMsgEndLife", ended)
        return PullResult(delivered, int(next_due) if next_due >= 0 else None, int(ready_left))

    def ack(self, topic: str, msg_id: str) -> DelayMsg:
        """Ack a delivery (status 3, or 2 after a timeout not yet redelivered) -> 4."""
        with redis_errors():
            outcome, fields = self.scripts.ack(self.topic_keys(topic), msg_id, self.end_life_ms)
            self._bookkeep(topic, self.clock.now_ms())
        if outcome == -1:
            raise NotFound(f"msgId: no live or acked message '{msg_id}' in topic '{topic}'")
        message = DelayMsg.from_fields(topic, msg_id, fields)
        if outcome == -2:
            raise BadRequest(f"msgId: message '{msg_id}' has not been delivered yet "
                             f"(status {int(message.status)}); use deleteMsg to drop it")
        if outcome in (1, 2):
            self.monitor.incr(topic, "ackMsg")
        return message

    def nack(self, topic: str, msg_id: str) -> DelayMsg:
        """Give a delivery back: 3 -> 2 at once, or -> 6 when its deliveries are used up."""
        with redis_errors():
            now = self.clock.now_ms()
            outcome, fields = self.scripts.nack(self.topic_keys(topic), msg_id, now,
                                                self.end_life_ms, self.keys.hint_channel)
            self._bookkeep(topic, now)
        if outcome == -1:
            raise NotFound(f"msgId: no live message '{msg_id}' in topic '{topic}'")
        message = DelayMsg.from_fields(topic, msg_id, fields)
        if outcome == -2:
            raise BadRequest(f"msgId: message '{msg_id}' is not being consumed "
                             f"(status {int(message.status)}); only status 3 can be nacked")
        self.monitor.incr(topic, "nackMsg")
        if outcome == Status.RETRY_EXHAUSTED:
            self.monitor.incr(topic, "triggerMsgEndLife")
        return message

    def get(self, topic: str, msg_id: str) -> DelayMsg:
        with redis_errors():
            fields = self.client.hmget(self.topic_keys(topic).msg(msg_id),
                                       "m", "p", "t", "e", "r", "n", "s")
        self.monitor.incr(topic, "getMsg")
        if fields[-1] is None:
            raise NotFound(f"msgId: no message '{msg_id}' in topic '{topic}'")
        return DelayMsg.from_fields(topic, msg_id, fields)

    def delete(self, topic: str, msg_id: str, release: bool = False) -> DelayMsg:
        with redis_errors():
            outcome, fields = self.scripts.delete(self.topic_keys(topic), msg_id,
                                                  self.end_life_ms, release)
            self._bookkeep(topic, self.clock.now_ms())
        if outcome == -1:
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

    # -- scheduler work ------------------------------------------------------------------
    def _record_promotions(self, topic: str, promoted: int, gaps: list) -> None:
        if promoted:
            self.monitor.incr(topic, "triggerMsgReady", promoted)
            self.monitor.observe(topic, "readyQueueTimeGap", [float(g) for g in gaps])

    def schedule_topic(self, topic: str) -> int:
        """Promote, time out and expire one topic; returns its next scheduler time or -1."""
        return self.schedule_topics([topic])[topic]

    def schedule_topics(self, topics: list[str]) -> dict[str, int]:
        """Promote, time out and expire these topics; returns each one's next scheduler time.

        Every round runs the three scripts of every topic still busy in one pipelined round
        trip; a topic stays busy while a script moved its full limit.

        A topic whose visit found nothing to do although its time had come was served by its
        consumers (a pull promotes its own topic): its next visit is deferred by
        ``schedule_defer_ms``, so a busy consumed topic costs the scheduler a visit per
        deferral instead of one per due message. Consumers still get every message on time;
        only promotion with nobody polling, ack timeouts and expiry may wait that much longer,
        and the first visit that finds work makes the topic's visits exact again.
        """
        channel = self.keys.hint_channel
        attention: dict[str, int] = {}
        busy = topics = list(topics)
        for _ in range(ROUNDS_PER_TOPIC):
            if not busy:
                return attention
            now = self.clock.now_ms()
            pipe = self.client.pipeline(transaction=False)
            for topic in busy:
                tk = self.topic_keys(topic)
                self.scripts.promote(tk, now, SCRIPT_LIMIT, channel, client=pipe)
                self.scripts.timeout(tk, now, SCRIPT_LIMIT, self.end_life_ms, channel,
                                     client=pipe)
                self.scripts.expire(tk, now, SCRIPT_LIMIT, self.end_life_ms, client=pipe)
            replies = pipe.execute()
            still_busy = []
            first_round = busy is topics
            for i, topic in enumerate(busy):
                (moved, gaps, _), (requeued, exhausted, _), \
                    (expired, ended6, scanned, next_time) = replies[3 * i:3 * i + 3]
                self._record_promotions(topic, moved, gaps)
                if requeued or exhausted:
                    self.monitor.incr(topic, "triggerMsgTimeout", requeued + exhausted)
                if exhausted or expired or ended6:
                    self.monitor.incr(topic, "triggerMsgEndLife", exhausted + expired + ended6)
                if SCRIPT_LIMIT in (moved, requeued + exhausted, scanned):
                    still_busy.append(topic)
                elif first_round and next_time >= 0 and self.schedule_defer_ms and \
                        not (moved or requeued or exhausted or expired or ended6):
                    attention[topic] = int(next_time) + self.schedule_defer_ms
                else:
                    attention[topic] = int(next_time)
            busy = still_busy
        now = self.clock.now_ms()
        attention.update({topic: now for topic in busy})  # still busy: back on the next tick
        return attention

    def schedule_tick(self) -> int | None:
        """Visit every topic whose due time has come; returns the next due time, if any.

        Two round trips besides the due-index read, however many topics are due: one for the
        scripts, one for the due-index updates and the new head.
        """
        now = self.clock.now_ms()
        due = self.client.zrangebyscore(self.keys.due, "-inf", now, start=0,
                                        num=TOPICS_PER_TICK, withscores=True)
        pipe = self.client.pipeline(transaction=False)
        if due:
            attention = self.schedule_topics([topic for topic, _ in due])
            for topic, seen in due:
                self.scripts.due_set(self.keys, topic, seen, attention[topic], client=pipe)
        pipe.zrange(self.keys.due, 0, 0, withscores=True)
        head = pipe.execute()[-1]
        return int(head[0][1]) if head else None

    def repair_due_index(self, chunk: int = 500) -> int:
        """Registry upkeep: re-derive every topic's due time from its queue heads.

        Covers a process killed between a script and its due-index write. Cost per sweep:
        three O(log n) reads per registered topic, pipelined in chunks.
        """
        topics = self.topics()
        repaired = 0
        for start in range(0, len(topics), chunk):
            part = topics[start:start + chunk]
            pipe = self.client.pipeline(transaction=False)
            for topic in part:
                tk = self.topic_keys(topic)
                for key in (tk.waiting, tk.ack, tk.expire):
                    pipe.zrange(key, 0, 0, withscores=True)
            heads = pipe.execute()
            fix = self.client.pipeline(transaction=False)
            for i, topic in enumerate(part):
                scores = [h[0][1] for h in heads[3 * i:3 * i + 3] if h]
                if scores:
                    fix.zadd(self.keys.due, {topic: min(scores)}, lt=True)
                    repaired += 1
            fix.execute()
        return repaired

    def recycle_topics(self, inactive_ms: int, chunk: int = 500) -> list[str]:
        """Forget topics unused for ``inactive_ms`` whose queues are all empty."""
        cutoff = self.clock.now_ms() - inactive_ms
        stale = self.client.zrangebyscore(self.keys.topics, "-inf", f"({cutoff}", start=0,
                                          num=chunk, withscores=True)
        pipe = self.client.pipeline(transaction=False)
        for topic, _ in stale:
            tk = self.topic_keys(topic)
            pipe.exists(tk.waiting, tk.ready, tk.ack, tk.expire)
        live = pipe.execute() if stale else []
        recycled = []
        for (topic, seen), count in zip(stale, live):
            if count == 0 and self.scripts.recycle(self.keys, topic, seen):
                self._touched.pop(topic, None)
                recycled.append(topic)
        if recycled:
            logger.info("recycled %d inactive topics", len(recycled))
        return recycled
