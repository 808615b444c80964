"""Push delivery: every node POSTs the deliveries of push subscriptions to their pushUrl.

A push subscription is a subscription (the default one included) whose config has a
``pushUrl``; ``NamespaceKeys.push_subscriptions`` lists them. Every worker process runs a
``Pusher``: its ``tick`` (every REFRESH_S, no lease: every node delivers) keeps one
``SubscriptionPusher`` thread per listed subscription. That thread takes deliveries with the
same atomic pull a consumer uses, in push mode (lua/pull.lua): the script hands out at most
the subscription's ``pushConcurrency`` minus its deliveries consuming now, so however many
nodes pull, the fleet never has more in flight, and gives each the ack deadline
max(ackTimeoutMillis, pushTimeoutMillis + 1 s). Each delivery is POSTed on the process's
pool of PUSH workers (``push-workers``) by push_client.py; a 2xx answer acks it with its
receipt, anything else nacks it: the subscription's backoff, or a 429 / 503's Retry-After,
then retries and the dead letter as for any consumer's nack.

The thread waits like a long poll: registered with the hub, it is woken by the same hints
(send, promote, fan-out, nack, ack timeout), and otherwise sleeps until the next message is
due (+1 ms, never early) or LONG_POLL safety interval passes. Settings changed on any node
apply within CONFIG_TTL_S.

Stopping (SIGTERM): ``drain`` stops new pulls; ``stop`` waits up to ``grace_s`` for POSTs in
flight and gives back (nack, no delay) the deliveries still unanswered. A node killed mid-push
leaves its deliveries to the ack timeout: at least once, never lost.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import orjson
import redis

from delayqueue.core.clock import Clock
from delayqueue.core.errors import BadRequest, DelayQueueError, NotFound, redis_errors
from delayqueue.core.keys import NamespaceKeys
from delayqueue.core.message import DelayMsg
from delayqueue.core.monitor import Monitor
from delayqueue.core.queue import SUBSCRIPTION_DEFAULT, DelayQueue
from delayqueue.core.requests import AckRequest
from delayqueue.core.signature import sign
from delayqueue.core.subscriptions import PUSH_FIELDS, PushConfig
from delayqueue.settings.config import Settings

from .longpoll import Hub
from .push_client import OK, PushAnswer, PushClient

logger = logging.getLogger(__name__)

REFRESH_S = 1.0             # how often the list of push subscriptions is re-read
CONFIG_TTL_S = 1.0          # how long a subscription's push settings are trusted
PULL_MAX = 100              # deliveries taken by one pull
CAPPED_WAIT_S = 0.02        # fleet at pushConcurrency: look again this soon
GATHER_S = 0.002            # busy: wait this long for more free slots before a pull
PUSH_ERRORS_KEPT = 20       # the last failures kept per subscription (the console's list)
PUSH_ERRORS_TTL_MS = 7 * 86_400_000
RETRY_AFTER_MAX_MS = 86_400_000
MONITOR_OUTCOME = {"2xx": "push2xx", "3xx": "push3xx", "4xx": "push4xx", "5xx": "push5xx",
                   "timeout": "pushTimeout", "connection": "pushConnectionError",
                   "refused": "pushRefused"}


def delivery_body(message: DelayMsg, subscription: str) -> bytes:
    """What a push POSTs: ``{"subscription": <name>, "delayMsg": <as pullMsg answers it>}``."""
    return orjson.dumps({"subscription": subscription, "delayMsg": message.to_json()})


def delivery_headers(message: DelayMsg, subscription: str, body: bytes, secret: str,
                     now_ms: int) -> dict[str, str]:
    headers = {"Content-Type": "application/json",
               "X-DelayQueue-Topic": message.topic,
               "X-DelayQueue-Subscription": subscription,
               "X-DelayQueue-Msg-Id": message.msg_id,
               "X-DelayQueue-Receipt": message.receipt or ""}
    if secret:
        headers["X-DelayQueue-Signature"] = sign(secret, now_ms, body)
    return headers


class Pusher:
    """The process's push delivery: one thread per push subscription, one pool of POSTs."""

    def __init__(self, queue: DelayQueue, hub: Hub, clock: Clock, monitor: Monitor,
                 keys: NamespaceKeys, client: PushClient, settings: Settings) -> None:
        self.queue, self.hub, self.clock, self.monitor = queue, hub, clock, monitor
        self.keys, self.client, self.settings = keys, client, settings
        self.redis = queue.client
        self.workers = ThreadPoolExecutor(max_workers=settings.push_workers,
                                          thread_name_prefix="dq-push")
        self.busy = 0   # POSTs submitted and not yet answered, over every subscription
        self.pushers: dict[tuple[str, str | None], SubscriptionPusher] = {}
        self.draining = threading.Event()
        self._lock = threading.Lock()

    # -- the subscriptions ---------------------------------------------------------------------
    def tick(self) -> None:
        """Start a thread for every listed push subscription; end those no longer listed."""
        if self.draining.is_set():
            return
        with redis_errors():
            members = self.redis.smembers(self.keys.push_subscriptions)
        wanted = set()
        for member in members:
            topic, _, name = member.partition("\n")
            wanted.add((topic, None if name in ("", SUBSCRIPTION_DEFAULT) else name))
        with self._lock:
            for key, pusher in list(self.pushers.items()):
                if pusher.ended:   # (a listed one is started again below)
                    del self.pushers[key]
            for key in wanted - set(self.pushers):
                self.pushers[key] = SubscriptionPusher(self, *key)
                self.pushers[key].start()
            for key in set(self.pushers) - wanted:
                self.pushers.pop(key).stop()

    def forget(self, topic: str, subscription: str | None, member: str) -> None:
        """The subscription is gone, or has no pushUrl: off the list (unless set again)."""
        config = self.queue.context_keys(topic, subscription).config
        with redis_errors():
            if not self.redis.hget(config, "pushUrl"):
                self.redis.srem(self.keys.push_subscriptions, member)

    # -- stopping ------------------------------------------------------------------------------
    def drain(self) -> None:
        """Shutdown has begun: take no new deliveries."""
        self.draining.set()
        with self._lock:
            pushers = list(self.pushers.values())
        for pusher in pushers:
            pusher.stop()

    def stop(self, grace_s: float) -> None:
        """Wait up to ``grace_s`` for the POSTs in flight, give back the rest, end."""
        self.drain()
        deadline = time.monotonic() + grace_s
        with self._lock:
            pushers = list(self.pushers.values())
        for pusher in pushers:
            pusher.join(max(0.0, deadline - time.monotonic()))
        for pusher in pushers:
            pusher.give_back()
        self.workers.shutdown(wait=False, cancel_futures=True)
        self.client.close()


class SubscriptionPusher:
    """Takes and POSTs one subscription's deliveries (see the module's docstring)."""

    def __init__(self, owner: Pusher, topic: str, subscription: str | None) -> None:
        self.owner, self.topic, self.subscription = owner, topic, subscription
        self.name = subscription or SUBSCRIPTION_DEFAULT
        self.member = f"{topic}\n{self.name}"
        self.context = owner.queue.context_keys(topic, subscription)   # its keys
        self.in_flight = 0
        self.pending: dict[tuple[str, str], DelayMsg] = {}   # (msgId, receipt) being POSTed
        self._acks: list[DelayMsg] = []   # answered 2xx, waiting for the ack in progress
        self._acking = False
        self.ended = False
        self._config: PushConfig | None = None
        self._config_read = 0.0
        self._lock = threading.Lock()
        self._slot_freed = threading.Event()
        self._stop = threading.Event()
        self._idle = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"dq-push-{topic}-{self.name}"[:60])

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._slot_freed.set()
        self.owner.hub.wake(self.topic, 1, self.subscription)

    def join(self, timeout: float) -> None:
        """Wait until every POST in flight is answered, up to ``timeout``."""
        self._thread.join(timeout)
        deadline = time.monotonic() + timeout
        while self.in_flight and time.monotonic() < deadline:
            self._idle.wait(min(0.05, max(0.0, deadline - time.monotonic())))
            self._idle.clear()

    def give_back(self) -> None:
        """Hand the deliveries still unanswered back to the subscription (nack, no delay):
        another node takes them at once instead of after the ack timeout."""
        with self._lock:
            pending = list(self.pending.values())
            self.pending.clear()
        for message in pending:
            try:
                self.owner.queue.nack(self.topic, message.msg_id, message.receipt, 0,
                                      subscription=self.subscription)
            except DelayQueueError as exc:   # answered meanwhile, or Redis gone: ack timeout
                logger.info("push give-back of %s/%s %s: %s", self.topic, self.name,
                            message.msg_id, exc)

    # -- the loop ------------------------------------------------------------------------------
    def _run(self) -> None:
        hub = self.owner.hub
        waiter = hub.register(self.topic, self.subscription, pusher=True)
        failures = 0
        try:
            while not self._stop.is_set():
                try:
                    wait_s = self._round(waiter)
                    failures = 0
                except (BadRequest, NotFound) as exc:   # deleted, or no longer pushed
                    logger.info("push %s/%s ends: %s", self.topic, self.name, exc)
                    self.owner.forget(self.topic, self.subscription, self.member)
                    return
                except DelayQueueError as exc:
                    failures += 1
                    wait_s = min(0.1 * 2 ** min(failures, 6), 5.0)
                    if failures == 1 or failures % 100 == 0:
                        logger.warning("push %s/%s: %s (%d in a row)", self.topic, self.name,
                                       exc, failures)
                if wait_s > 0:
                    waiter.event.wait(wait_s)
        except Exception:  # noqa: BLE001 - the tick starts a new thread for a listed one
            logger.exception("push %s/%s stopped", self.topic, self.name)
        finally:
            hub.unregister(waiter)
            self.ended = True

    def _round(self, waiter) -> float:
        """One pull and its POSTs; returns how long to wait before the next (0: at once)."""
        config = self.config()
        if config is None:
            raise NotFound("no pushUrl")
        free = self._free(config)
        if free <= 0:
            self._slot_freed.wait(1.0)
            self._slot_freed.clear()
            return 0
        if free < min(config.concurrency, PULL_MAX) // 4 and self.in_flight:
            # Busy: let a few more POSTs end, so one pull takes several (not one per push).
            self._stop.wait(GATHER_S)
            free = self._free(config)
        waiter.event.clear()
        result = self.owner.queue.pull(self.topic, free, subscription=self.subscription,
                                       push=True)
        for message in result.messages:
            self._submit(message, config)
        if len(result.messages) == free:
            return 0
        if result.ready_left:   # the fleet is at pushConcurrency: a slot frees soon
            return CAPPED_WAIT_S
        wait_s = self.owner.settings.long_polling_safety_millis / 1000
        if result.next_due_ms is not None:
            wait_s = min(wait_s, self.owner.clock.seconds_until(result.next_due_ms + 1))
        return max(wait_s, 0.001)

    def _free(self, config: PushConfig) -> int:
        """Deliveries this thread may take now (the script caps the fleet's)."""
        return min(config.concurrency - self.in_flight, PULL_MAX,
                   self.owner.settings.push_workers - self.owner.busy)

    def config(self) -> PushConfig | None:
        now = time.monotonic()
        if self._config is None or now - self._config_read > CONFIG_TTL_S:
            key = self.context.config
            with redis_errors():
                own = self.owner.redis.hmget(key, *PUSH_FIELDS)
            config = PushConfig.of(own, self.owner.settings)
            self._config = config if config.url else None
            self._config_read = now
        return self._config

    # -- one delivery --------------------------------------------------------------------------
    def _submit(self, message: DelayMsg, config: PushConfig) -> None:
        with self._lock:
            self.in_flight += 1
            self.pending[(message.msg_id, message.receipt)] = message
        with self.owner._lock:
            self.owner.busy += 1
        try:
            self.owner.workers.submit(self._deliver, message, config)
        except RuntimeError:   # shutting down: give it back at once
            self._answered(message)
            self._done()
            self.owner.queue.nack(self.topic, message.msg_id, message.receipt, 0,
                                  subscription=self.subscription)

    def _deliver(self, message: DelayMsg, config: PushConfig) -> None:
        try:
            body = delivery_body(message, self.name)
            now = self.owner.clock.now_ms()
            answer = self.owner.client.post(
                config.url, body, delivery_headers(message, self.name, body, config.secret,
                                                   now), config.timeout_ms)
            if self._answered(message):   # else given back meanwhile: its receipt is stale
                self._settle(message, answer)
        except Exception:  # noqa: BLE001 - a worker must not die; the ack timeout redelivers
            logger.exception("push %s/%s %s failed", self.topic, self.name, message.msg_id)
        finally:
            self._done()

    def _answered(self, message: DelayMsg) -> bool:
        """The POST has its answer: no longer to give back. False if it was given back."""
        with self._lock:
            return self.pending.pop((message.msg_id, message.receipt), None) is not None

    def _done(self) -> None:
        """The delivery is settled (or left to the ack timeout): its slot is free."""
        with self._lock:
            self.in_flight -= 1
        with self.owner._lock:
            self.owner.busy -= 1
        self._slot_freed.set()
        self._idle.set()

    def _settle(self, message: DelayMsg, answer: PushAnswer) -> None:
        monitor = self.owner.monitor
        monitor.incr(self.topic, MONITOR_OUTCOME[answer.outcome], subscription=self.subscription)
        monitor.observe(self.topic, "pushMillis", [answer.millis],
                        subscription=self.subscription)
        try:
            if answer.outcome == OK:
                self._ack(message)
                return
            delay = None if answer.retry_after_ms is None else \
                min(answer.retry_after_ms, RETRY_AFTER_MAX_MS)
            self._note_error(message, answer)
            self.owner.queue.nack(self.topic, message.msg_id, message.receipt, delay,
                                  subscription=self.subscription)
        except DelayQueueError as exc:
            # Stale (redelivered meanwhile: the 2xx changes nothing), ended, or Redis gone:
            # the ack timeout redelivers what was not settled.
            logger.debug("push %s/%s %s settle: %s", self.topic, self.name, message.msg_id, exc)

    def _ack(self, message: DelayMsg) -> None:
        """Ack with the receipt. Acks that arrive while one is being sent wait for it and go
        together in one call (ackMsgBatch's), sent by the thread already acking: no timer,
        so a lone ack is never delayed, and a busy subscription pays one round trip for many."""
        with self._lock:
            self._acks.append(message)
            if self._acking:
                return
            self._acking = True
        while True:
            with self._lock:
                batch, self._acks = self._acks, []
                if not batch:
                    self._acking = False   # in the same lock as the empty check: none missed
                    return
            try:
                self.owner.queue.ack_batch(
                    self.topic, [AckRequest(m.msg_id, m.receipt) for m in batch],
                    subscription=self.subscription)   # per entry: stale ones change nothing
            except DelayQueueError as exc:   # Redis gone: the ack timeout redelivers them
                logger.warning("push %s/%s: %d acks failed: %s", self.topic, self.name,
                               len(batch), exc)

    def _note_error(self, message: DelayMsg, answer: PushAnswer) -> None:
        key = self.context.push_errors
        entry = json.dumps({"time": self.owner.clock.now_ms(), "msgId": message.msg_id,
                            "outcome": answer.outcome, "status": answer.status,
                            "error": answer.error, "millis": round(answer.millis, 1)})
        try:
            pipe = self.owner.redis.pipeline(transaction=False)
            pipe.lpush(key, entry).ltrim(key, 0, PUSH_ERRORS_KEPT - 1)
            pipe.pexpire(key, PUSH_ERRORS_TTL_MS).execute()
        except redis.RedisError:
            pass   # the list is for people; the nack is what matters

