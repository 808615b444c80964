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
from itertools import groupby
from operator import attrgetter
from typing import Any, Mapping, Sequence

import redis

from delayqueue.settings.config import Settings

from .bookkeeping import namespace_keys, registered_topics
from .clock import Clock
from .errors import DelayQueueError, as_error, redis_errors
from .keys import SubscriptionKeys, TopicKeys
from .message import DelayMsg
from .monitor import Monitor
from .outcome import Outcome
from .refusal import refusal
from .replies import AckReply, ChangeVisibilityReply, NackReply, SendReply
from .requests import (
    AckRequest,
    PullResult,
    SendRequest,
    SendResult,
    TopicSizes,
    VisibilityRequest,
)
from .script_runner import RoundTrip
from .scripts import AckArgs, Scripts, SendArgs
from .status import Status
from .topic_config import server_defaults

logger = logging.getLogger(__name__)

SCRIPT_LIMIT = 1000           # most ids one script call moves (bounded work per call)
SUBSCRIPTION_DEFAULT = "default"   # the default subscription's name (core/subscriptions.py)
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
        self.keys = namespace_keys(settings, scripts.runner.cluster)
        self.defaults = server_defaults(settings)
        self.end_life_ms = settings.end_life_msg_expire_millis
        self.hint_horizon_ms = settings.long_polling_safety_millis
        self._touched: dict[str, float] = {}

    def topic_keys(self, topic: str) -> TopicKeys:
        return self.keys.topic(topic)

    def context_keys(self, topic: str, subscription: str | None = None
                     ) -> TopicKeys | SubscriptionKeys:
        """The keys a script works in: the topic's (its default subscription, ``None``), or
        a named subscription's (the scripts refuse an unknown one: errors.NotFound)."""
        tk = self.keys.topic(topic)
        return tk if subscription is None else tk.subscription(subscription)

    def forget(self, topic: str) -> None:
        """The topic was recycled: register it again on its next use, however soon."""
        self._touched.pop(topic, None)

    # -- bookkeeping ---------------------------------------------------------------------
    def bookkeep(self, topic: str, now_ms: int, lowered_due_ms: int = -1) -> None:
        """Bump the registry (rate-limited) and lower the due index; one round trip at most,
        none when there is nothing to do.

        On one Redis the scripts lowered the index themselves (KEYS[19]); on a Cluster it is
        lowered here to the due time a script answered. A due time lowered to within
        ``hint_horizon_ms`` is also published as a "0 <topic>" hint, so held long polls and
        the scheduler re-read the topic's timing instead of sleeping past it; later ones are
        found by their own periodic re-checks.
        """
        touch = self._touch_due(topic)
        lower = lowered_due_ms >= 0 and not self.scripts.lowers_due_index
        hint = lowered_due_ms >= 0 and lowered_due_ms - now_ms < self.hint_horizon_ms
        if not (touch or lower or hint):
            return
        pipe = self.client.pipeline(transaction=False)
        if touch:
            pipe.zadd(self.keys.registry_of(topic), {topic: now_ms})
        if lower:
            pipe.zadd(self.keys.due_of(topic), {topic: lowered_due_ms}, lt=True)
        if hint:
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
             attributes: Mapping[str, str] | None = None,
             group_id: str | None = None, on_duplicate: str = "keep") -> SendResult:
        """Accept a message; a trigger time in the past means now (its life counts from now).
        ``on_duplicate="replace"``: a waiting or ready namesake begins again with this one's
        values (send.lua's REPLACED)."""
        return _raise(self.send_batch(topic, [SendRequest(
            body, msg_id, delay_ms, trigger_time_ms, ttl_ms, max_retry, attributes,
            group_id, on_duplicate)])[0])

    def send_batch(self, topic: str, requests: Sequence[SendRequest | DelayQueueError],
                   atomic: bool = False) -> list[SendResult | DelayQueueError]:
        """Accept each message on its own (each atomic), in one round trip to Redis. An entry
        given as an error (it failed validation) is answered with that error, untouched.

        ``atomic``: every message is written or none, in one script call whose checks all
        run before its first write (send.lua). An entry that failed validation makes no
        call at all; either way the entries not refused answer ``Conflict`` ("not written").
        """
        if atomic and any(isinstance(r, DelayQueueError) for r in requests):
            return [r if isinstance(r, DelayQueueError) else refusal(
                "send", Outcome.NOT_WRITTEN, topic, None) for r in requests]
        with redis_errors():
            now = self.clock.now_ms()
            tk = self.topic_keys(topic)
            entries = [_send_args(r, now) for r in requests
                       if not isinstance(r, DelayQueueError)]
            trip = self.scripts.round_trip()
            # One script call per SEND_CHUNK messages, so no call holds Redis for long; an
            # atomic batch (at most max-batch) is one call.
            chunk = len(entries) if atomic else SEND_CHUNK
            for start in range(0, len(entries), max(chunk, 1)):
                self.scripts.send_many(tk, now, self.keys.hint_channel, self.defaults,
                                       entries[start:start + chunk], trip=trip, atomic=atomic)
            replies = self._execute(topic, now, trip)
            self.bookkeep(topic, now, _lowest_due(replies))
        answers = [_sent(topic, entry.msg_id, reply)
                   for entry, reply in zip(entries, replies)]
        results = [a for a in answers if isinstance(a, SendResult)]
        # A replace is an accepted send too (it enqueues a new delivery state); a duplicate
        # enqueues nothing.
        self.monitor.incr(topic, "sendMsg", sum(1 for a in results if not a.duplicate))
        self.monitor.incr(topic, "replaced", sum(1 for a in results if a.replaced))
        self.monitor.incr(topic, "deduplicated", sum(1 for a in results if a.duplicate))
        self.monitor.incr(topic, "backlogRefused", sum(
            1 for r in replies if isinstance(r, SendReply) and r.outcome == Outcome.BACKLOG))
        return _in_place(requests, answers)

    def _execute(self, topic: str, now_ms: int, trip: RoundTrip) -> list[Any]:
        """Run a round trip of script calls, the registry bump (when due) riding along: one
        reply per entry, in order, where a call that failed (a script error, Redis out of
        memory) answers its DelayQueueError for each of its entries and the others stand."""
        bump = self._touch_due(topic)
        if bump:
            trip.command("ZADD", self.keys.registry_of(topic), now_ms, topic)
        replies = trip.execute()
        if bump:
            self._touched[topic] = time.monotonic()
            replies.pop()   # the bump's own answer: bookkeeping, never read
        return [as_error(r) if isinstance(r, Exception) else r for r in replies]

    def pull(self, topic: str, count: int = 1, ack_timeout_ms: int | None = None,
             subscription: str | None = None, push: bool = False,
             waiting_hub: str = "") -> PullResult:
        """Hand out up to ``count`` ready messages (the API's ``batch``), in the default
        subscription or the named ``subscription``. A push subscription refuses a consumer's
        pull (BadRequest); ``push``: the delivery loop's pull there (background/push.py),
        capped by the subscription's pushConcurrency fleet-wide. ``waiting_hub``: a long
        poll's "<hub id> <lease_ms>" (background/longpoll.py), registered to take the topic's
        hints when the pull hands out nothing."""
        push_arg = (f"push {self.settings.push_concurrency} {self.settings.push_timeout_millis}"
                    if push else "")
        with redis_errors():
            now = self.clock.now_ms()
            trip = self.scripts.round_trip()
            self.scripts.pull(
                self.context_keys(topic, subscription), now, count,
                ack_timeout_ms if ack_timeout_ms and ack_timeout_ms > 0 else -1,
                self.end_life_ms, SCRIPT_LIMIT, self.keys.hint_channel, self.defaults,
                push_arg, trip=trip, waiting_hub=waiting_hub)
            reply = _raise(self._execute(topic, now, trip)[0])
            self.bookkeep(topic, now, reply.lowered_due)
        delivered = [DelayMsg.from_fields(topic, m.msg_id, m.fields, with_receipt=True)
                     for m in reply.messages]
        if delivered:
            self.monitor.incr(topic, "pullMsg", len(delivered), subscription=subscription)
            self.monitor.observe(topic, "pullMsgTimeGap",
                                 [now - m.trigger_time for m in delivered],
                                 subscription=subscription)
        self.monitor.record_promotions(topic, reply.promoted, reply.gaps)
        self.monitor.incr(topic, "triggerMsgEndLife", reply.ended, subscription=subscription)
        self.monitor.incr(topic, "deadLettered", reply.dead, subscription=subscription)
        return PullResult(delivered, reply.next_trigger if reply.next_trigger >= 0 else None,
                          reply.ready_left)

    def ack(self, topic: str, msg_id: str, receipt: str | None = None,
            subscription: str | None = None) -> DelayMsg:
        """Ack a delivery (status 3, or given back and not yet redelivered) -> 4."""
        return _raise(self.ack_batch(topic, [AckRequest(msg_id, receipt)],
                                     subscription=subscription)[0])

    def nack(self, topic: str, msg_id: str, receipt: str | None = None,
             delay_ms: int | None = None, subscription: str | None = None) -> DelayMsg:
        """Give a delivery back: ready at once (the tail of the queue), waiting until
        ``delay_ms`` (or the topic's backoff) has passed, or 6 when it cannot be redelivered."""
        return _raise(self.ack_batch(topic, [AckRequest(msg_id, receipt, False, delay_ms)],
                                     subscription=subscription)[0])

    def ack_batch(self, topic: str, requests: Sequence[AckRequest | DelayQueueError],
                  subscription: str | None = None) -> list[DelayMsg | DelayQueueError]:
        """Acks and nacks (``AckRequest.ack``), each on its own, in one round trip to Redis:
        each run of acks in ACK_CHUNK-sized script calls, each nack a call of its own."""
        asked = [r for r in requests if not isinstance(r, DelayQueueError)]
        with redis_errors():
            now = self.clock.now_ms()
            tk = self.context_keys(topic, subscription)
            trip = self.scripts.round_trip()
            for acks, run in groupby(asked, attrgetter("ack")):
                if acks:
                    entries = [AckArgs(r.msg_id, r.receipt or "") for r in run]
                    for start in range(0, len(entries), ACK_CHUNK):
                        self.scripts.ack_many(tk, now, self.end_life_ms,
                                              entries[start:start + ACK_CHUNK], trip=trip,
                                              channel=self.keys.hint_channel,
                                              defaults=self.defaults)
                    continue
                for r in run:
                    self.scripts.nack(tk, r.msg_id, now, self.end_life_ms,
                                      self.keys.hint_channel, self.defaults, r.receipt or "",
                                      -1 if r.delay_ms is None else max(r.delay_ms, 0),
                                      trip=trip)
            replies = self._execute(topic, now, trip)
            self.bookkeep(topic, now, _lowest_due(replies))
        answers = [self._acked(topic, r.msg_id, reply, subscription) if r.ack
                   else self._nacked(topic, r.msg_id, reply, subscription)
                   for r, reply in zip(asked, replies)]
        return _in_place(requests, answers)

    def _acked(self, topic: str, msg_id: str, reply: AckReply | DelayQueueError,
               subscription: str | None
               ) -> DelayMsg | DelayQueueError:
        answer = _answer("ack", topic, msg_id, reply)
        if isinstance(answer, DelayMsg) and reply.outcome in (Outcome.OK, Outcome.ACKED_LATE):
            self.monitor.incr(topic, "ackMsg", subscription=subscription)
        return answer

    def _nacked(self, topic: str, msg_id: str, reply: NackReply | DelayQueueError,
                subscription: str | None
                ) -> DelayMsg | DelayQueueError:
        answer = _answer("nack", topic, msg_id, reply)
        if isinstance(answer, DelayMsg):
            self.monitor.incr(topic, "nackMsg", subscription=subscription)
            self._count_end(topic, answer, reply.dead, subscription)
        return answer

    def change_visibility(self, topic: str, msg_id: str, timeout_ms: int,
                          receipt: str | None = None,
                          subscription: str | None = None) -> DelayMsg:
        """A consuming message's ack deadline becomes now + ``timeout_ms``; 0 gives it up."""
        return _raise(self.change_visibility_batch(
            topic, [VisibilityRequest(msg_id, timeout_ms, receipt)], subscription)[0])

    def change_visibility_batch(self, topic: str,
                                requests: Sequence[VisibilityRequest | DelayQueueError],
                                subscription: str | None = None
                                ) -> list[DelayMsg | DelayQueueError]:
        """Change each delivery's ack deadline on its own, in one round trip to Redis: a
        change_visibility.lua call per entry (the script takes one), each atomic."""
        asked = [r for r in requests if not isinstance(r, DelayQueueError)]
        with redis_errors():
            now = self.clock.now_ms()
            tk = self.context_keys(topic, subscription)
            trip = self.scripts.round_trip()
            for r in asked:
                self.scripts.change_visibility(tk, r.msg_id, now, r.timeout_ms,
                                               self.end_life_ms, self.keys.hint_channel,
                                               self.defaults, r.receipt or "", trip=trip)
            replies = self._execute(topic, now, trip)
            self.bookkeep(topic, now, _lowest_due(replies))
        answers = [self._visibility_changed(topic, r.msg_id, reply, subscription)
                   for r, reply in zip(asked, replies)]
        return _in_place(requests, answers)

    def _visibility_changed(self, topic: str, msg_id: str,
                            reply: ChangeVisibilityReply | DelayQueueError,
                            subscription: str | None) -> DelayMsg | DelayQueueError:
        answer = _answer("change_visibility", topic, msg_id, reply)
        if isinstance(answer, DelayMsg):
            self._count_end(topic, answer, reply.dead, subscription)
        return answer

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
        self.monitor.touch(topic)   # sizes may move (ready -> waiting): the size caches' signal
        return _raise(_answer("reschedule", topic, msg_id, reply))

    def get(self, topic: str, msg_id: str, subscription: str | None = None) -> DelayMsg:
        """The message as the default subscription (or the named ``subscription``) holds it;
        in the default one, with where each named subscription that holds it has it."""
        with redis_errors():
            reply = self.scripts.get(self.context_keys(topic, subscription), msg_id,
                                     self.clock.now_ms())
        self.monitor.incr(topic, "getMsg")
        if not reply:
            raise refusal("get", Outcome.NO_MESSAGE, topic, msg_id)
        message = DelayMsg.from_fields(topic, msg_id, reply.fields, with_receipt=True)
        return message.with_place(reply.ack_deadline, reply.dead_time).with_subscriptions(
            reply.held)

    def delete(self, topic: str, msg_id: str, release: bool = False) -> DelayMsg:
        return _raise(self.delete_batch(topic, [msg_id], release)[0])

    def delete_batch(self, topic: str, msg_ids: Sequence[str | DelayQueueError],
                     release: bool = False) -> list[DelayMsg | DelayQueueError]:
        """Delete each message on its own, in one round trip to Redis."""
        asked = [m for m in msg_ids if not isinstance(m, DelayQueueError)]
        with redis_errors():
            tk = self.topic_keys(topic)
            now = self.clock.now_ms()
            trip = self.scripts.round_trip()
            for msg_id in asked:
                self.scripts.delete(tk, msg_id, now, self.end_life_ms, release, trip=trip,
                                    channel=self.keys.hint_channel, defaults=self.defaults)
            replies = self._execute(topic, now, trip)
            self.bookkeep(topic, now, _lowest_due(replies))
        answers = [_answer("delete", topic, msg_id, reply)
                   for msg_id, reply in zip(asked, replies)]
        self.monitor.incr(topic, "deleteMsg", sum(isinstance(a, DelayMsg) for a in answers))
        return _in_place(msg_ids, answers)

    def _count_end(self, topic: str, message: DelayMsg, dead: int,
                   subscription: str | None = None) -> None:
        if message.status == Status.RETRY_EXHAUSTED:
            self.monitor.incr(topic, "triggerMsgEndLife", subscription=subscription)
            self.monitor.incr(topic, "deadLettered", dead, subscription=subscription)

    # -- reads ---------------------------------------------------------------------------
    def topics(self) -> list[str]:
        with redis_errors():
            return registered_topics(self.client, self.keys)

    def topic_info(self, topic: str) -> dict:
        """getTopicInfo: the default subscription's sizes, and every subscription's."""
        return {**self.topic_infos([topic])[0], "subscriptions": self.subscription_infos(topic)}

    def topic_infos(self, topics: list[str]) -> list[dict]:
        """Queue sizes and the waiting queue's delay distribution, one round trip for all.

        The buckets are half-open and together cover every trigger time, so the waiting size
        is their sum: never a figure that disagrees with its own buckets. A message blocked
        behind its group's head counts as waiting until its triggerTime, then in
        ``groupBlockedSize`` (it is due, not ready: the head holds it back).
        """
        with redis_errors():
            now = self.clock.now_ms()
            retention = self._dead_retention(topics)
            pipe = self.client.pipeline(transaction=False)
            for topic in topics:
                tk = self.topic_keys(topic)
                pipe.zcard(tk.ready).zcard(tk.ack)
                pipe.zcount(tk.dead, now - retention[topic], "+inf")
                pipe.zcount(tk.held, "-inf", now)
                pipe.hget(tk.config, "paused")
                for _, lo, hi in WAITING_BUCKETS:
                    upper = "+inf" if hi is None else f"({now + hi}"
                    pipe.zcount(tk.waiting, "-inf" if lo is None else now + lo, upper)
                    pipe.zcount(tk.held, f"({now}" if lo is None else now + lo, upper)
            replies = pipe.execute()
        width = 5 + 2 * len(WAITING_BUCKETS)
        infos = []
        for i, topic in enumerate(topics):
            ready, ack, dead, blocked, paused, *counts = replies[i * width:(i + 1) * width]
            buckets = [counts[j] + counts[j + 1] for j in range(0, len(counts), 2)]
            infos.append({
                "topic": topic,
                "waitingQueueSize": sum(buckets),
                "waitingQueueInfo": {name: n for (name, _, _), n in zip(WAITING_BUCKETS, buckets)},
                "readyQueueSize": ready,
                "ackQueueSize": ack,
                "deadQueueSize": dead,
                "groupBlockedSize": blocked,
                "paused": paused == "1",
            })
        return infos

    def subscription_infos(self, topic: str) -> list[dict]:
        """The topic's subscriptions with their sizes: the default one first, then each named
        one by name (listSubscriptions, getTopicInfo's ``subscriptions``)."""
        tk = self.topic_keys(topic)
        with redis_errors():
            subs = self.client.hgetall(tk.subs)
            now = self.clock.now_ms()
            names = sorted(subs)
            contexts = [tk, *(tk.subscription(name) for name in names)]
            pipe = self.client.pipeline(transaction=False)
            pipe.hget(tk.config, "paused")
            for ctx in contexts:
                pipe.zcard(ctx.ready).zcard(ctx.ack).zcard(ctx.dead)
                pipe.zcount(ctx.held, "-inf", now).zcard(ctx.waiting)
                pipe.zcount(ctx.held, f"({now}", "+inf").hmget(ctx.config, "paused", "pushUrl")
            replies = pipe.execute()
        topic_paused = replies[0] == "1"
        infos = []
        for i, name in enumerate([SUBSCRIPTION_DEFAULT, *names]):
            ready, ack, dead, blocked, waiting, held_waiting, (paused, push_url) = \
                replies[1 + 7 * i:8 + 7 * i]
            created = None if i == 0 else int(subs[name].split()[1])
            info = {"subscription": name, "createdTime": created,
                    "readyQueueSize": ready, "ackQueueSize": ack,
                    "deadQueueSize": dead, "groupBlockedSize": blocked,
                    "waitingQueueSize": waiting + held_waiting,
                    "paused": topic_paused or paused == "1"}
            if push_url:   # a push subscription: its consuming messages are pushes in flight
                info["pushUrl"] = push_url
            infos.append(info)
        return infos

    def _dead_retention(self, topics: list[str]) -> dict[str, int]:
        """Each topic's dead-letter retention: its own setting, else the server's."""
        pipe = self.client.pipeline(transaction=False)
        for topic in topics:
            pipe.hget(self.topic_keys(topic).config, "deadLetterRetentionMillis")
        own = pipe.execute() if topics else []
        default = self.settings.dead_letter_retention_millis
        return {topic: int(value) if value else default for topic, value in zip(topics, own)}

    def queue_sizes(self, health: bool = True, topics: list[str] | None = None
                    ) -> dict[str, TopicSizes]:
        """The sizes of every registered topic and its pause, one pipelined round trip
        (waiting counts blocked messages not yet due, as getTopicInfo does); with ``health``
        (/metrics), its dead letters and the age of its oldest ready message too, in the
        same round trip: the ready queue scores each message by when it became ready, and
        the age is against the fleet's clock. Without (the console's sort by backlog), two
        commands fewer per topic. ``topics``: those only (monitoring/size_cache.py re-reads the
        changed ones), else every registered topic."""
        if topics is None:
            topics = self.topics()
        width = 8 if health else 6
        with redis_errors():
            now = self.clock.now_ms()
            pipe = self.client.pipeline(transaction=False)
            for topic in topics:
                tk = self.topic_keys(topic)
                pipe.zcard(tk.waiting).zcard(tk.ready).zcard(tk.ack)
                pipe.zcount(tk.held, f"({now}", "+inf").zcount(tk.held, "-inf", now)
                pipe.hget(tk.config, "paused")
                if health:
                    pipe.zcard(tk.dead).zrange(tk.ready, 0, 0, withscores=True)
            counts = pipe.execute()
        sizes = {}
        for i, topic in enumerate(topics):
            waiting, ready, ack, held_waiting, blocked, paused, *rest = (
                counts[width * i:width * i + width])
            dead, head = rest or (0, None)
            age = max(0, now - int(head[0][1])) if head else 0
            sizes[topic] = TopicSizes(waiting + held_waiting, ready, ack, blocked,
                                      paused == "1", dead, age)
        return sizes


# -- helpers of the transitions ------------------------------------------------------------
def _send_args(request: SendRequest, now_ms: int) -> SendArgs:
    """A request as the send script takes it: its trigger time (never before now; -1, the
    topic's delayMillis, when it gives neither a delay nor a time), a msgId made up where none
    was given, -1 where the topic's setting applies."""
    r = request
    if r.trigger_time_ms is None and r.delay_ms is None:
        trigger = -1
    else:
        trigger = max(r.trigger_time_ms if r.trigger_time_ms is not None
                      else now_ms + max(r.delay_ms or 0, 0), now_ms)
    return SendArgs(r.msg_id or uuid.uuid4().hex, r.body, trigger,
                     r.ttl_ms if r.ttl_ms and r.ttl_ms > 0 else -1,
                     r.max_retry if r.max_retry is not None and r.max_retry >= 0 else -1,
                     _attributes_json(r.attributes), r.group_id or "",
                     1 if r.on_duplicate == "replace" else 0)


def _sent(topic: str, msg_id: str, reply: SendReply | DelayQueueError
          ) -> SendResult | DelayQueueError:
    if isinstance(reply, DelayQueueError):
        return reply
    message = DelayMsg.from_fields(topic, msg_id, reply.fields) if reply.fields else None
    refused = refusal("send", reply.outcome, topic, msg_id, message)
    if refused is not None:
        return refused
    return SendResult(message, reply.outcome == Outcome.DUPLICATE,
                      reply.outcome == Outcome.REPLACED)


def _answer(script: str, topic: str, msg_id: str, reply: Any) -> DelayMsg | DelayQueueError:
    """The message a transition answers with, or its error: the call's own, or the one its
    refusing outcome maps to (refusal.py)."""
    if isinstance(reply, DelayQueueError):
        return reply
    message = DelayMsg.from_fields(topic, msg_id, reply.fields) if reply.fields else None
    return refusal(script, reply.outcome, topic, msg_id, message) or message


def _in_place(requests: Sequence[Any], answers: list[Any]) -> list[Any]:
    """Each request's answer, in order: a request that failed validation made no call and
    answers its own error; the others take the next answer."""
    rest = iter(answers)
    return [r if isinstance(r, DelayQueueError) else next(rest) for r in requests]


def _raise(result):
    """A single request's answer: the result, or its error raised."""
    if isinstance(result, DelayQueueError):
        raise result
    return result


def _attributes_json(attributes: Mapping[str, str] | None) -> str:
    return json.dumps(dict(attributes), ensure_ascii=False, separators=(",", ":")) \
        if attributes else ""


def _lowest_due(replies: list[Any]) -> int:
    """The earliest due time the scripts lowered (where a reply says), or -1."""
    lowered = [due for due in (getattr(r, "lowered_due", -1) for r in replies) if due >= 0]
    return min(lowered, default=-1)
