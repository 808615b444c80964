"""The clients of a fault run: two named subscriptions on every topic (s1, s2, created before
the first send), producers at a fixed rate over the topics, about half of the sends in a few
message groups per topic, a recurring schedule (everyMillis) on the first topic, and long-poll
consumers (two per topic in each subscription, the default one included) that ack what they
get, giving some first deliveries back with a nack; every call goes into the History."""

from __future__ import annotations

import math
import random
import threading
import time
import uuid
from typing import Callable

import requests

from faults.history import (
    FAIL,
    OK,
    UNKNOWN,
    Delivery,
    History,
    Op,
    ScheduleRun,
    SubscriptionRun,
    now_ms,
)
from support.fleet import API
from support.wait import wait_until

LONG_POLL_MS = 1000
HANG_MARGIN_S = 10.0       # an answer later than the call's own timeout + this is a hang
CALL_TIMEOUT_S = 5.0       # what the server may take for a send or an ack (socket timeouts)
GROUPS = 3                 # message groups per topic (g0, g1, ...)
GROUP_SHARE = 0.5          # of the sends
TRIGGER_GRID_MS = 250      # grouped sends are due on this grid: equal triggerTimes are common,
                           # so a group's order rests on acceptance order too
GROUP_MAX_RETRY = 1000     # a grouped message never runs out of deliveries in a run: the
                           # checker ends one at its ack only
NACK_SHARE = 0.1           # of first deliveries, given back with a nack (a head holds its group)
SCHEDULE_EVERY_MS = 1000   # the run's recurring schedule fires every second
ADMIN_CALLS_S = 30.0       # how long createSubscription, createSchedule, deleteSchedule are
                           # retried
SUBSCRIPTIONS = ("s1", "s2")   # each topic's named subscriptions; None is the default one


def _outcome(answer: dict) -> str:
    code = answer.get("code")
    if code == 200:
        return OK
    if code == 500 and "out of memory" not in str(answer.get("msg", "")):
        return UNKNOWN     # Redis unreachable: the script may or may not have run
    return FAIL            # a refusal (4xx), or over maxmemory: nothing was written


class Client:
    """One thread's HTTP calls, each recorded; tries the next node when one is down."""

    def __init__(self, history: History, bases: Callable[[], list[str]], token: str = "",
                 offset: int = 0) -> None:
        self.history = history
        self.bases = bases
        self.session = requests.Session()
        self.turn = offset
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}

    def call(self, kind: str, endpoint: str, topic: str, msg_id: str | None,
             server_time_s: float, group: str | None = None, *,
             subscription: str | None = None, **params) -> tuple[Op, dict | None]:
        """``subscription``: the named subscription the call is made in (sent as the
        ``subscription`` parameter, and recorded); None: the default one."""
        if subscription is not None:
            params["subscription"] = subscription
        bases = self.bases()
        self.turn += 1
        base = bases[self.turn % len(bases)]
        start = now_ms()
        status, answer, detail = None, None, ""
        try:
            response = self.session.post(base + API + endpoint, headers=self.headers,
                                         data={"topic": topic, **params},
                                         timeout=(2.0, server_time_s + HANG_MARGIN_S))
            status = response.status_code
            answer = response.json()
            outcome = _outcome(answer)
            detail = "" if outcome == OK else str(answer)[:200]
        except requests.ReadTimeout as exc:
            outcome, detail = UNKNOWN, f"hang: {exc.__class__.__name__}"
        except (requests.RequestException, ValueError) as exc:
            outcome, detail = UNKNOWN, exc.__class__.__name__
            self.session = requests.Session()
        trigger = answer["delayMsg"]["triggerTime"] if kind == "send" and outcome == OK \
            else None
        op = Op(kind, topic, msg_id, start, now_ms(), outcome, status, detail, group, trigger,
                subscription)
        self.history.add(op)
        if detail.startswith("hang"):
            self.history.hang(op)
        return op, answer


class Workload:
    """``rate`` sends per second over ``topics``, each due in 0..``max_delay_ms``;
    ``consumers`` per topic and subscription."""

    def __init__(self, history: History, bases: Callable[[], list[str]], topics: list[str], *,
                 rate: float, max_delay_ms: int = 1000, producers: int = 2, consumers: int = 2,
                 token: str = "") -> None:
        self.history = history
        self.bases = bases
        self.topics = topics
        self.rate = rate
        self.max_delay_ms = max_delay_ms
        self.producers = producers
        self.consumers = consumers
        self.token = token
        self.producing = threading.Event()
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []

    def start(self) -> "Workload":
        self.producing.set()
        self._create_subscriptions()
        self._start_schedule()
        for i in range(self.producers):
            self._spawn(self._produce, i)
        index = 0
        for topic in self.topics:
            for subscription in (None, *SUBSCRIPTIONS):
                for _ in range(self.consumers):
                    self._spawn(self._consume, topic, index, subscription)
                    index += 1
        return self

    def _spawn(self, target, *args) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        thread.start()
        self.threads.append(thread)

    def _produce(self, index: int) -> None:
        client = Client(self.history, self.bases, self.token, index)
        interval = self.producers / self.rate
        rng = random.Random(index)
        next_at = time.monotonic()
        while self.producing.is_set():
            topic = rng.choice(self.topics)
            msg_id = uuid.uuid4().hex
            delay = rng.randint(0, self.max_delay_ms)
            group, timing = None, {"delayMillis": delay}
            if rng.random() < GROUP_SHARE:
                group = f"g{rng.randrange(GROUPS)}"
                due = math.ceil((now_ms() + delay) / TRIGGER_GRID_MS) * TRIGGER_GRID_MS
                timing = {"triggerTime": due, "groupId": group, "maxRetry": GROUP_MAX_RETRY}
            client.call("send", "sendMsg", topic, msg_id, CALL_TIMEOUT_S, group, msgId=msg_id,
                        msg="x", **timing)
            next_at += interval
            self.stopping.wait(max(0.0, next_at - time.monotonic()))
            next_at = max(next_at, time.monotonic() - 1.0)  # no burst after a stall

    def _consume(self, topic: str, index: int, subscription: str | None) -> None:
        client = Client(self.history, self.bases, self.token, index)
        rng = random.Random(index)
        while not self.stopping.is_set():
            start = now_ms()
            op, answer = client.call("pull", "longPollingMsg", topic, None,
                                     LONG_POLL_MS / 1000 + CALL_TIMEOUT_S, batch=10,
                                     subscription=subscription,
                                     longPollingTimeoutMillis=LONG_POLL_MS)
            if op.outcome != OK:
                self.stopping.wait(0.1)
                continue
            for message in answer["delayMsgList"]:
                self.history.deliver(Delivery(topic, message["msgId"], message["retry"],
                                              message["triggerTime"], start, op.end_ms,
                                              message.get("groupId"), subscription))
            for message in answer["delayMsgList"]:
                nack = message["retry"] == 1 and rng.random() < NACK_SHARE
                client.call("nack" if nack else "ack", "ackMsg", topic, message["msgId"],
                            CALL_TIMEOUT_S, subscription=subscription, msgId=message["msgId"],
                            receipt=message.get("receipt", ""), ack="false" if nack else "true")

    def _create_subscriptions(self) -> None:
        """Each topic's named subscriptions, before the first send, each createSubscription
        retried until one answers 200 (creating an existing one changes nothing)."""
        client = Client(self.history, self.bases, self.token)
        for topic in self.topics:
            for name in SUBSCRIPTIONS:
                deadline, first_sent = time.monotonic() + ADMIN_CALLS_S, None
                while time.monotonic() < deadline:
                    op, _ = client.call("subscribe", "createSubscription", topic, None,
                                        CALL_TIMEOUT_S, subscription=name)
                    first_sent = op.start_ms if first_sent is None else first_sent
                    if op.outcome == OK:
                        self.history.subscribe(SubscriptionRun(topic, name, first_sent,
                                                               op.end_ms))
                        break
                    time.sleep(0.2)
                else:
                    raise AssertionError(f"createSubscription never answered 200: {op}")

    def _start_schedule(self) -> None:
        """A schedule firing every second on the first topic, from a startTime on the grid so
        that a retried create (replace) keeps the same fire times."""
        client = Client(self.history, self.bases, self.token)
        topic, schedule_id = self.topics[0], f"every-{uuid.uuid4().hex[:6]}"
        start = (int(now_ms()) // SCHEDULE_EVERY_MS + 2) * SCHEDULE_EVERY_MS
        deadline = time.monotonic() + ADMIN_CALLS_S
        while time.monotonic() < deadline:
            op, answer = client.call("schedule", "createSchedule", topic, None, CALL_TIMEOUT_S,
                                     scheduleId=schedule_id, everyMillis=SCHEDULE_EVERY_MS,
                                     startTime=start, msg="tick", maxRetry=GROUP_MAX_RETRY)
            if op.outcome == OK:
                with self.history.lock:
                    self.history.schedules.append(ScheduleRun(
                        topic, schedule_id, SCHEDULE_EVERY_MS,
                        answer["data"]["nextFireTimes"][0]))
                return
            time.sleep(0.2)
        raise AssertionError(f"createSchedule never answered 200: {op}")

    def _stop_schedules(self) -> None:
        """deleteSchedule each schedule until it answers 200, or 404 after a call whose outcome
        was unknown (that one deleted it): the run's fire times end there."""
        client = Client(self.history, self.bases, self.token)
        for run in self.history.schedules:
            deadline, first_sent = time.monotonic() + ADMIN_CALLS_S, None
            while time.monotonic() < deadline:
                op, answer = client.call("schedule", "deleteSchedule", run.topic, None,
                                         CALL_TIMEOUT_S, scheduleId=run.schedule_id)
                first_sent = op.start_ms if first_sent is None else first_sent
                gone = op.outcome == FAIL and answer and answer.get("code") == 404
                if op.outcome == OK or gone:
                    run.deleted_from_ms, run.deleted_ms = first_sent, op.end_ms
                    break
                time.sleep(0.2)
            else:
                raise AssertionError(f"deleteSchedule never answered: {op}")

    def stop_producing(self) -> None:
        """Producers stop, and the schedules are deleted (their last fire times end here)."""
        if self.producing.is_set():
            self.producing.clear()
            self._stop_schedules()

    def drain(self, timeout_s: float, settled: Callable[[], bool] = lambda: True) -> bool:
        """Wait until every send answered 200 has been delivered in every subscription and
        ``settled()``; True if it was."""
        def all_delivered() -> bool:
            sent = {op.msg_id for op in self.history.of("send") if op.outcome == OK}
            delivered: dict[str | None, set[str]] = {None: set()}
            delivered.update((name, set()) for name in SUBSCRIPTIONS)
            with self.history.lock:
                for d in self.history.deliveries:
                    delivered[d.subscription].add(d.msg_id)
            return all(sent <= ids for ids in delivered.values()) and settled()

        try:
            return wait_until(all_delivered, timeout_s, interval_s=0.1)
        except AssertionError:
            return False

    def stop(self) -> None:
        if self.producing.is_set():      # a run that failed before its drain
            self.producing.clear()
            try:
                self._stop_schedules()
            except AssertionError:
                pass                     # the run's own failure is the one to report
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=LONG_POLL_MS / 1000 + CALL_TIMEOUT_S + HANG_MARGIN_S)

