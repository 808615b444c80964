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
from functools import partial
from typing import Any, Callable, Mapping, Sequence

import redis

from delayqueue.settings.config import Settings

from .clock import Clock
from .errors import DelayQueueError, redis_errors
from .keys import NamespaceKeys, TopicKeys
from .message import DelayMsg
from .monitor import Monitor
from .outcome import Outcome
from .refusal import refusal
from .scripts import ScriptBatch, Scripts
from .status import Status
from .topic_config import server_defaults

logger = logging.getLogger(__name__)

SCRIPT_LIMIT = 1000           # most ids one script call moves (bounded work per call)
SEND_CHUNK = 100              # most messages one send script call accepts (its time in Redis)
ACK_CHUNK = 100               # most acks one ack script call takes
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
class SendRequest:
    """One message to send: sendMsg's parameters, or one entry of sendMsgBatch."""
    body: str
    msg_id: str | None = None
    delay_ms: int | None = None
    trigger_time_ms: int | None = None
    ttl_ms: int | None = None
    max_retry: int | None = None
    attributes: Mapping[str, str] | None = None


@dataclass(frozen=True)
class AckRequest:
    """One ack (or, ``ack=False``, a nack): ackMsg's parameters, or one entry of ackMsgBatch."""
    msg_id: str
    receipt: str | None = None
    ack: bool = True
    delay_ms: int | None = None


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
        touch = self._touch_due(topic)
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

    def _touch_due(self, topic: str) -> bool:
        """Whether this process should bump the topic's registry entry now (rate-limited)."""
        return time.monotonic() - self._touched.get(topic, -REGISTRY_TOUCH_S) >= REGISTRY_TOUCH_S

    # -- transitions ---------------------------------------------------------------------
    def send(self, topic: str, body: str, *, msg_id: str | None = None,
             delay_ms: int | None = None, trigger_time_ms: int | None = None,
             ttl_ms: int | None = None, max_retry: int | None = None,
             attributes: Mapping[str, str] | None = None) -> SendResult:
        """Accept a message; a trigger time in the past means now (its life counts from now)."""
        return _raise(self.send_batch(topic, [SendRequest(
            body, msg_id, delay_ms, trigger_time_ms, ttl_ms, max_retry, attributes)])[0])

    def send_batch(self, topic: str, requests: Sequence[SendRequest | DelayQueueError]
                   ) -> list[SendResult | DelayQueueError]:
        """Accept each message on its own (each atomic), in one round trip to Redis. An entry
        given as an error (it failed validation) is answered with that error, untouched."""
        with redis_errors():
            now = self.clock.now_ms()
            tk = self.topic_keys(topic)
            entries = []
            for r in requests:
                if isinstance(r, DelayQueueError):
                    continue
                trigger = r.trigger_time_ms if r.trigger_time_ms is not None \
                    else now + max(r.delay_ms or 0, 0)
                entries.append((r.msg_id or uuid.uuid4().hex, r.body, max(trigger, now),
                                r.ttl_ms if r.ttl_ms and r.ttl_ms > 0 else -1,
                                r.max_retry if r.max_retry is not None and r.max_retry >= 0
                                else -1, _attributes_json(r.attributes)))
            # One script call per SEND_CHUNK messages (all in the same round trip), so no
            # call holds Redis for long.
            calls = [([entry[0] for entry in chunk], partial(
                self.scripts.send_many, tk, now, self.keys.hint_channel, self.defaults, chunk))
                for chunk in (entries[i:i + SEND_CHUNK]
                              for i in range(0, len(entries), SEND_CHUNK))]
            replies = self._run_each(topic, now, calls)
            self.bookkeep(topic, now, _lowest_due(replies, 2))
        accepted = 0

        def sent(request: SendRequest, msg_id: str, reply: list) -> SendResult:
            nonlocal accepted
            outcome, fields, _ = reply
            duplicate = outcome == Outcome.DUPLICATE
            accepted += not duplicate
            return SendResult(DelayMsg.from_fields(topic, msg_id, fields), duplicate)

        results = _in_order(requests, replies, sent)
        self.monitor.incr(topic, "sendMsg", accepted)
        return results

    def _run_each(self, topic: str, now_ms: int,
                  calls: list[tuple[str | list[str], Callable[..., Any]]]
                  ) -> list[tuple[str, Any]]:
        """Run script calls in one round trip, the registry bump (when due) riding along; a
        call that fails alone (a script error, Redis out of memory) answers its own error,
        the others stand. A call made for one msgId answers one reply; a call made for a
        list of msgIds (a send of several messages) answers a list of replies, one each.
        Returns (msgId, reply or DelayQueueError) per msgId, in order."""
        batch = ScriptBatch(self.client, self.scripts.runner)
        for _, call in calls:
            call(client=batch)
        touch = self._touch_due(topic)
        if touch:
            batch.command("ZADD", self.keys.topics, now_ms, topic)
        replies = batch.execute() if calls or touch else []
        if touch:
            self._touched[topic] = time.monotonic()
        out: list[tuple[str, Any]] = []
        for (ids, _), reply in zip(calls, replies):
            if isinstance(ids, str):
                out.append((ids, reply))
            else:
                out.extend(zip(ids, [reply] * len(ids) if isinstance(reply, Exception)
                               else reply))
        return [(msg_id, _entry_error(reply) if isinstance(reply, Exception) else reply)
                for msg_id, reply in out]

    def pull(self, topic: str, batch: int = 1, ack_timeout_ms: int | None = None) -> PullResult:
        with redis_errors():
            now = self.clock.now_ms()
            tk = self.topic_keys(topic)
            reply = self.scripts.pull(
                tk, now, batch, ack_timeout_ms if ack_timeout_ms and ack_timeout_ms > 0 else -1,
                self.end_life_ms, SCRIPT_LIMIT, self.keys.hint_channel, self.defaults)
            self.bookkeep(topic, now, reply.lowered_due)
        delivered = [DelayMsg.from_fields(topic, m.msg_id, m.fields, with_receipt=True)
                     for m in reply.messages]
        if delivered:
            self.monitor.incr(topic, "pullMsg", len(delivered))
            self.monitor.observe(topic, "pullMsgTimeGap",
                                 [now - m.trigger_time for m in delivered])
        self.monitor.record_promotions(topic, reply.promoted, reply.gaps)
        self.monitor.incr(topic, "triggerMsgEndLife", reply.ended)
        self.monitor.incr(topic, "deadLettered", reply.dead)
        return PullResult(delivered, reply.next_trigger if reply.next_trigger >= 0 else None,
                          reply.ready_left)

    def ack(self, topic: str, msg_id: str, receipt: str | None = None) -> DelayMsg:
        """Ack a delivery (status 3, or given back and not yet redelivered) -> 4."""
        return _raise(self.ack_batch(topic, [AckRequest(msg_id, receipt)])[0])

    def nack(self, topic: str, msg_id: str, receipt: str | None = None,
             delay_ms: int | None = None) -> DelayMsg:
        """Give a delivery back: ready at once (the tail of the queue), waiting until
        ``delay_ms`` (or the topic's backoff) has passed, or 6 when it cannot be redelivered."""
        return _raise(self.ack_batch(topic, [AckRequest(msg_id, receipt, False, delay_ms)])[0])

    def ack_batch(self, topic: str, requests: Sequence[AckRequest | DelayQueueError]
                  ) -> list[DelayMsg | DelayQueueError]:
        """Acks and nacks (``AckRequest.ack``), each on its own, in one round trip to Redis."""
        with redis_errors():
            now = self.clock.now_ms()
            tk = self.topic_keys(topic)
            calls: list[tuple[str | list[str], Callable[..., Any]]] = []
            acks: list[tuple[str, str]] = []     # a run of acks, sent as one call

            def end_run() -> None:
                for i in range(0, len(acks), ACK_CHUNK):
                    chunk = acks[i:i + ACK_CHUNK]
                    calls.append(([msg_id for msg_id, _ in chunk], partial(
                        self.scripts.ack_many, tk, now, self.end_life_ms, chunk)))
                acks.clear()

            for r in requests:
                if isinstance(r, DelayQueueError):
                    continue
                if r.ack:
                    acks.append((r.msg_id, r.receipt or ""))
                    continue
                end_run()
                calls.append((r.msg_id, partial(
                    self.scripts.nack, tk, r.msg_id, now, self.end_life_ms,
                    self.keys.hint_channel, self.defaults, r.receipt or "",
                    -1 if r.delay_ms is None else max(r.delay_ms, 0))))
            end_run()
            replies = self._run_each(topic, now, calls)
            self.bookkeep(topic, now, _lowest_due(replies, 2))
        return _in_order(requests, replies, lambda r, msg_id, reply:
                         self._acked(topic, msg_id, reply) if r.ack
                         else self._nacked(topic, msg_id, reply))

    def _acked(self, topic: str, msg_id: str, reply: list) -> DelayMsg:
        outcome, fields = reply
        message = _refuse("ack", outcome, topic, msg_id, fields)
        if outcome in (Outcome.OK, Outcome.ACKED_LATE):
            self.monitor.incr(topic, "ackMsg")
        return message

    def _nacked(self, topic: str, msg_id: str, reply: list) -> DelayMsg:
        outcome, fields, _, dead = reply
        message = _refuse("nack", outcome, topic, msg_id, fields)
        self.monitor.incr(topic, "nackMsg")
        self._count_end(topic, message, dead)
        return message

    def change_visibility(self, topic: str, msg_id: str, timeout_ms: int,
                          receipt: str | None = None) -> DelayMsg:
        """A consuming message's ack deadline becomes now + ``timeout_ms``; 0 gives it up."""
        with redis_errors():
            now = self.clock.now_ms()
            reply = self.scripts.change_visibility(
                self.topic_keys(topic), msg_id, now, timeout_ms, self.end_life_ms,
                self.keys.hint_channel, self.defaults, receipt or "")
            self.bookkeep(topic, now, reply.lowered_due)
        message = _refuse("change_visibility", reply.outcome, topic, msg_id, reply.fields)
        self._count_end(topic, message, reply.dead)
        return message

    def reschedule(self, topic: str, msg_id: str, *, delay_ms: int | None = None,
                   trigger_time_ms: int | None = None) -> DelayMsg:
        """A waiting or ready message gets a new trigger time (past: now); its life moves too."""
        with redis_errors():
            now = self.clock.now_ms()
            trigger = trigger_time_ms if trigger_time_ms is not None \
                else now + max(delay_ms or 0, 0)
            reply = self.scripts.reschedule(self.topic_keys(topic), msg_id, now, trigger,
                                            self.keys.hint_channel)
            self.bookkeep(topic, now, reply.lowered_due)
        return _refuse("reschedule", reply.outcome, topic, msg_id, reply.fields)

    def get(self, topic: str, msg_id: str) -> DelayMsg:
        with redis_errors():
            reply = self.scripts.get(self.topic_keys(topic), msg_id, self.clock.now_ms())
        self.monitor.incr(topic, "getMsg")
        if not reply:
            raise refusal("get", Outcome.NO_MESSAGE, topic, msg_id)
        return DelayMsg.from_fields(topic, msg_id, reply.fields)

    def delete(self, topic: str, msg_id: str, release: bool = False) -> DelayMsg:
        return _raise(self.delete_batch(topic, [msg_id], release)[0])

    def delete_batch(self, topic: str, msg_ids: Sequence[str | DelayQueueError],
                     release: bool = False) -> list[DelayMsg | DelayQueueError]:
        """Delete each message on its own, in one round trip to Redis."""
        with redis_errors():
            tk = self.topic_keys(topic)
            now = self.clock.now_ms()
            calls = [(m, partial(self.scripts.delete, tk, m, now, self.end_life_ms, release))
                     for m in msg_ids if not isinstance(m, DelayQueueError)]
            replies = self._run_each(topic, now, calls)
        return _in_order(msg_ids, replies, lambda _, msg_id, reply:
                         self._deleted(topic, msg_id, reply))

    def _deleted(self, topic: str, msg_id: str, reply: list) -> DelayMsg:
        outcome, fields = reply
        message = _refuse("delete", outcome, topic, msg_id, fields)
        self.monitor.incr(topic, "deleteMsg")
        return message

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


# -- helpers of the batch paths ------------------------------------------------------------
def _in_order(entries: Sequence[Any], replies: list[tuple[str, Any]],
              interpret: Callable[[Any, str, Any], Any]) -> list[Any]:
    """Each entry's answer, in the entries' order: an entry that was already an error (it
    failed validation, so it made no call) answers that error; a call that failed in Redis
    answers its error; any other reply is ``interpret(entry, msg_id, reply)``, or the
    DelayQueueError that raises."""
    answers = iter(replies)
    results: list[Any] = []
    for entry in entries:
        if isinstance(entry, DelayQueueError):
            results.append(entry)
            continue
        msg_id, reply = next(answers)
        if not isinstance(reply, DelayQueueError):
            try:
                reply = interpret(entry, msg_id, reply)
            except DelayQueueError as exc:
                reply = exc
        results.append(reply)
    return results


def _refuse(script: str, outcome: int, topic: str, msg_id: str, fields: list) -> DelayMsg:
    """The message a script answered with, or the error its refusing outcome maps to
    (refusal.py), raised."""
    message = DelayMsg.from_fields(topic, msg_id, fields) if fields else None
    error = refusal(script, outcome, topic, msg_id, message)
    if error:
        raise error
    return message


def _raise(result):
    """A single request's answer: the result, or its error raised."""
    if isinstance(result, DelayQueueError):
        raise result
    return result


def _attributes_json(attributes: Mapping[str, str] | None) -> str:
    return json.dumps(dict(attributes), ensure_ascii=False, separators=(",", ":")) \
        if attributes else ""


def _entry_error(exc: Exception) -> DelayQueueError:
    """A pipelined script's own failure, as the error a single request would raise."""
    try:
        with redis_errors():
            raise exc
    except DelayQueueError as error:
        return error


def _lowest_due(replies: list[tuple[str, Any]], index: int) -> int:
    """The earliest due time the scripts lowered (their reply's ``index``, where the reply
    has one: an ack's has not), or -1."""
    lowered = [int(reply[index]) for _, reply in replies
               if not isinstance(reply, DelayQueueError) and len(reply) > index
               and int(reply[index]) >= 0]
    return min(lowered, default=-1)
