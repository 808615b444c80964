"""A Hypothesis state machine drives push delivery's side of the queue (lua/pull.lua's push
mode, ack, nack, the scheduler's ack timeouts) on a real Redis with a ManualClock, against a
model of two push subscriptions of one topic: the default one and a named one ("p"), both
created before the first send. No HTTP receiver and no push loop: the machine is the loop,
taking deliveries with ``DelayQueue.pull(..., push=True)`` and settling them with their
receipts the way background/push.py does (ack on a 2xx, nack on anything else), or letting
them time out as a killed node would.

Rules: send (due now or later, maxRetry 0..2), the push loop's pull (a random count), ack
and nack (no delay, a delay, the backoff) of a delivery it holds, with that delivery's
receipt (stale ones included: a redelivery made it so), time passing with the scheduler's
visit (ack timeouts fire), pushConcurrency / pushTimeoutMillis set on either subscription,
ackTimeoutMillis on the topic and on "p", pushUrl cleared and set again (a reset drops every
own setting), and a consumer's pull: refused (BadRequest) while the subscription has a
pushUrl, an ordinary pull while it has none.

Checked after each step, per subscription: every sent message is in exactly one place with
the model's status and delivery count (nothing lost; a named subscription holds a message
once it is due); a dead letter has exactly maxRetry + 1 deliveries. After each pull: it
handed out exactly min(count, pushConcurrency - consuming, ready) messages (none where
pushUrl is cleared), the first ones by (ready time, acceptance), none before its
triggerTime, so the consuming count never exceeds the pushConcurrency in force at that pull;
each delivery's ack deadline is its delivery time + max(ackTimeoutMillis, pushTimeoutMillis
+ 1000) (a consumer's pull: + ackTimeoutMillis), with the settings in force when it was
made.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import hypothesis.strategies as st
import pytest
import redis
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from delayqueue.background.runtime import Runtime
from delayqueue.core.clock import ManualClock
from delayqueue.core.errors import BadRequest, Conflict, NotFound
from delayqueue.core.requests import SendRequest
from delayqueue.core.status import Status
from delayqueue.settings.config import load_settings

from support.lua import HOUR, T0, assert_one_place

TOPIC = "pushed"
NAMED = "p"
SUBS = st.sampled_from([None, NAMED])
URL = "http://127.0.0.1:9/hook"          # never called: the machine settles deliveries
SERVER_ACK_TIMEOUT_MS = 3_000
SERVER_PUSH_TIMEOUT_MS = 2_000
SERVER_PUSH_CONCURRENCY = 3
DELAYS = st.sampled_from([0, 0, 1, 500, 4_000])
MAX_RETRY = st.sampled_from([0, 1, 2])
COUNTS = st.sampled_from([1, 2, 5, 100])
CONCURRENCY = st.sampled_from([1, 2, 4])
PUSH_TIMEOUTS = st.sampled_from([100, 1_500, 5_000])
ACK_TIMEOUTS = st.sampled_from([1_000, 3_000, 8_000])
ADVANCES = st.sampled_from([1, 500, 1_000, 2_500, 7_000])
NACK_DELAYS = st.sampled_from([None, 0, 700])   # None: the backoff (redeliveryDelay 0)
END_LIFE = 100 * HOUR          # ended messages outlive every example: all stay visible
MAX_SENDS = 12
EXAMPLES = 100
STEPS = 30


@dataclass
class Entry:
    """One subscription's state of one message."""

    status: int
    trigger: int                 # due (a nack with a delay moves it)
    max_retry: int
    seq: int
    ready_at: int = 0
    deliveries: int = 0
    receipt: str = ""            # the latest delivery's
    deadline: int = 0            # the latest delivery's ack deadline, while consuming


@dataclass
class Sub:
    name: str | None
    entries: dict[str, Entry] = field(default_factory=dict)
    url: bool = True
    concurrency: int | None = None      # own; None: the server's
    push_timeout: int | None = None
    ack_timeout: int | None = None      # own ("p" only); None: the topic's

    def consuming(self) -> int:
        return sum(m.status == Status.CONSUMING for m in self.entries.values())

    def give_back(self, m: Entry, now: int, delay: int) -> None:
        """A nack or an ack timeout: a dead letter once its deliveries are used up."""
        if m.deliveries >= m.max_retry + 1:
            m.status = Status.RETRY_EXHAUSTED
        elif delay <= 0:
            m.status, m.ready_at = Status.READY, now
        else:
            m.status, m.trigger = Status.WAITING, now + delay


def _slot(msg_id: str) -> str:
    return hashlib.sha1(msg_id.encode()).hexdigest()[:14]


def _settings():
    return load_settings(env={}, overrides={
        "schedule-defer-millis": 0, "snapshot-dir": "", "end-life-msg-expire-millis": END_LIFE,
        "ack-timeout-millis": SERVER_ACK_TIMEOUT_MS,
        "push-timeout-millis": SERVER_PUSH_TIMEOUT_MS,
        "push-concurrency": SERVER_PUSH_CONCURRENCY,
        "push-allowed-networks": "127.0.0.0/8"})


class PushMachine(RuleBasedStateMachine):
    client: redis.Redis
    clock: ManualClock
    rt: Runtime

    def __init__(self) -> None:
        super().__init__()
        self.client.flushdb()
        self.clock._now_ms = T0
        self.queue = self.rt.queue
        self.queue.forget(TOPIC)
        self.tk = self.queue.topic_keys(TOPIC)
        self.subs = {None: Sub(None), NAMED: Sub(NAMED)}
        self.topic_ack_timeout: int | None = None
        self.sent = 0
        # Deliveries the machine (the push loop) holds: (subscription, msgId, receipt).
        self.held: list[tuple[str | None, str, str]] = []
        self.pulled: list[str] = []

    @initialize()
    def start(self) -> None:
        self.rt.subscriptions.create(TOPIC, NAMED, {"pushUrl": URL})
        self.rt.subscriptions.set_config(TOPIC, None, {"pushUrl": URL})

    def now(self) -> int:
        return self.clock.now_ms()

    def _sk(self, name: str | None):
        return self.tk if name is None else self.tk.subscription(name)

    # -- what is in force ------------------------------------------------------------------
    def concurrency(self, sub: Sub) -> int:
        return sub.concurrency or SERVER_PUSH_CONCURRENCY

    def ack_timeout(self, sub: Sub) -> int:
        return sub.ack_timeout or self.topic_ack_timeout or SERVER_ACK_TIMEOUT_MS

    def push_deadline(self, sub: Sub) -> int:
        return max(self.ack_timeout(sub),
                   (sub.push_timeout or SERVER_PUSH_TIMEOUT_MS) + 1000)

    # -- messages --------------------------------------------------------------------------
    @precondition(lambda self: self.sent < MAX_SENDS)
    @rule(delay=DELAYS, max_retry=MAX_RETRY)
    def send(self, delay, max_retry) -> None:
        self.sent += 1
        msg_id = f"m{self.sent}"
        [result] = self.queue.send_batch(TOPIC, [SendRequest(
            "body", msg_id, delay, max_retry=max_retry)])
        assert not result.duplicate
        trigger = self.now() + delay
        for sub in self.subs.values():
            # A named subscription gets it from the fan-out once due (a send due now, every
            # pull and the scheduler's visit fan out): the promote below covers both.
            sub.entries[msg_id] = Entry(Status.WAITING, trigger, max_retry, self.sent)
        self._promote()

    def _promote(self) -> None:
        for sub in self.subs.values():
            for m in sub.entries.values():
                if m.status == Status.WAITING and m.trigger <= self.now():
                    m.status, m.ready_at = Status.READY, m.trigger

    def _expected(self, sub: Sub, count: int) -> list[str]:
        ready = sorted((m.ready_at, m.seq, i) for i, m in sub.entries.items()
                       if m.status == Status.READY)
        return [i for _, _, i in ready[:count]]

    @rule(sub=SUBS, count=COUNTS)
    def push_pull(self, sub, count) -> None:
        """The push loop's pull: at most pushConcurrency - consuming (nothing without a
        pushUrl), each delivery's deadline max(ack timeout, push timeout + 1 s)."""
        model = self.subs[sub]
        cap = max(0, self.concurrency(model) - model.consuming()) if model.url else 0
        expected = self._expected(model, min(count, cap))
        result = self.queue.pull(TOPIC, count, subscription=sub, push=True)
        self._took(model, result, expected, self.push_deadline(model))
        if result.messages:
            assert model.consuming() <= self.concurrency(model), model
            assert self.client.zcard(self._sk(sub).ack) <= self.concurrency(model)

    @rule(sub=SUBS, count=COUNTS)
    def consumer_pull(self, sub, count) -> None:
        """A consumer's pull: refused while the subscription has a pushUrl."""
        model = self.subs[sub]
        if model.url:
            with pytest.raises(BadRequest, match="is a push subscription"):
                self.queue.pull(TOPIC, count, subscription=sub)
            return
        expected = self._expected(model, count)
        result = self.queue.pull(TOPIC, count, subscription=sub)
        self._took(model, result, expected, self.ack_timeout(model))

    def _took(self, model: Sub, result, expected: list[str], timeout: int) -> None:
        got = self.pulled = [m.msg_id for m in result.messages]
        assert got == expected, (model.name, got, expected)
        for message in result.messages:
            m = model.entries[message.msg_id]
            assert message.trigger_time <= self.now() and m.trigger <= self.now(), (message, m)
            m.deliveries += 1
            assert message.retry == m.deliveries, (message, m)
            assert m.deliveries <= m.max_retry + 1, m
            m.status, m.receipt = Status.CONSUMING, message.receipt
            m.deadline = self.now() + timeout
            self.held.append((model.name, message.msg_id, message.receipt))

    def _held(self, index: int) -> tuple[Sub, str, str, Entry]:
        name, msg_id, receipt = self.held[index % len(self.held)]
        model = self.subs[name]
        return model, msg_id, receipt, model.entries[msg_id]

    @precondition(lambda self: self.held)
    @rule(index=st.integers(0, 20))
    def ack(self, index) -> None:
        """A 2xx: ack with the delivery's receipt (a late ack of one given back and not yet
        redelivered is taken; a redelivery makes the receipt stale)."""
        model, msg_id, receipt, m = self._held(index)
        try:
            self.queue.ack(TOPIC, msg_id, receipt, subscription=model.name)
        except NotFound:
            assert m.status == Status.RETRY_EXHAUSTED, m
            return
        except Conflict:
            assert receipt != m.receipt, m
            return
        assert receipt == m.receipt and m.status != Status.RETRY_EXHAUSTED, m
        m.status = Status.ACKED

    @precondition(lambda self: self.held)
    @rule(index=st.integers(0, 20), delay=NACK_DELAYS)
    def nack(self, index, delay) -> None:
        """Anything else: nack (a 429 / 503's Retry-After is a delay)."""
        model, msg_id, receipt, m = self._held(index)
        try:
            self.queue.nack(TOPIC, msg_id, receipt, delay, subscription=model.name)
        except NotFound:
            assert m.status in (Status.ACKED, Status.RETRY_EXHAUSTED), m
            return
        except Conflict:
            assert receipt != m.receipt and m.status in (Status.READY, Status.WAITING,
                                                         Status.CONSUMING), m
            return
        except BadRequest:
            assert receipt == m.receipt and m.status in (Status.READY, Status.WAITING), m
            return
        assert receipt == m.receipt and m.status == Status.CONSUMING, m
        model.give_back(m, self.now(), delay or 0)

    @rule(ms=ADVANCES)
    def advance_and_visit(self, ms) -> None:
        """Time passes; the scheduler promotes, fans out and times out late deliveries (a
        push whose node died, or whose POST outlived its deadline)."""
        self.clock.advance(ms)
        self.rt.scheduler.visit([TOPIC])
        self._promote()
        for sub in self.subs.values():
            for m in sub.entries.values():
                if m.status == Status.CONSUMING and m.deadline <= self.now():
                    sub.give_back(m, self.now(), 0)

    # -- settings --------------------------------------------------------------------------
    @rule(sub=SUBS, concurrency=CONCURRENCY)
    def set_concurrency(self, sub, concurrency) -> None:
        self.rt.subscriptions.set_config(TOPIC, sub, {"pushConcurrency": str(concurrency)})
        self.subs[sub].concurrency = concurrency

    @rule(sub=SUBS, timeout=PUSH_TIMEOUTS)
    def set_push_timeout(self, sub, timeout) -> None:
        self.rt.subscriptions.set_config(TOPIC, sub, {"pushTimeoutMillis": str(timeout)})
        self.subs[sub].push_timeout = timeout

    @rule(own=st.booleans(), timeout=ACK_TIMEOUTS)
    def set_ack_timeout(self, own, timeout) -> None:
        """On "p" (its own), or on the topic (the default's, and "p"'s unless it has one);
        setTopicConfig keeps the push settings."""
        if own:
            self.rt.subscriptions.set_config(TOPIC, NAMED, {"ackTimeoutMillis": str(timeout)})
            self.subs[NAMED].ack_timeout = timeout
        else:
            self.rt.admin.set_config(TOPIC, {"ackTimeoutMillis": str(timeout)})
            self.topic_ack_timeout = timeout

    @rule(sub=SUBS, url=st.booleans(), reset=st.booleans())
    def set_url(self, sub, url, reset) -> None:
        """Clear or set pushUrl; a reset drops every own setting first (the push ones, and
        "p"'s ackTimeoutMillis)."""
        model = self.subs[sub]
        self.rt.subscriptions.set_config(TOPIC, sub, {"pushUrl": URL if url else ""}, reset)
        model.url = url
        if reset:
            model.concurrency = model.push_timeout = model.ack_timeout = None

    # -- invariants ------------------------------------------------------------------------
    @invariant()
    def every_message_is_in_one_place_with_its_deliveries(self) -> None:
        for name, sub in self.subs.items():
            sk = self._sk(name)
            for msg_id, m in sub.entries.items():
                if name is not None and m.trigger > self.now() and m.deliveries == 0:
                    # not yet due: still in the topic's fan-out, not the subscription's
                    with pytest.raises(NotFound):
                        self.queue.get(TOPIC, msg_id, subscription=name)
                    continue
                got = self.queue.get(TOPIC, msg_id, subscription=name)
                assert (got.status, got.retry) == (m.status, m.deliveries), (name, msg_id, m)
                if m.status == Status.RETRY_EXHAUSTED:
                    assert m.deliveries == m.max_retry + 1, m
                if name is not None and m.deliveries == 0:
                    self._bare(sk, msg_id, m)
                else:
                    assert_one_place(self.client, sk, msg_id, int(m.status))

    def _bare(self, sk, msg_id: str, m: Entry) -> None:
        """A named subscription's message never delivered there: a bare member of its
        `ready`, no record of its own."""
        slot = _slot(msg_id)
        member = f"{m.seq:012x}{slot}"
        pipe = self.client.pipeline(transaction=False)
        pipe.hexists(sk.msgs, slot).zscore(sk.ready, member).zscore(sk.ack, slot)
        record, ready, ack = pipe.execute()
        assert not record and ready is not None and ack is None, (msg_id, m)

    @invariant()
    def each_delivery_has_its_deadline_and_the_cap_holds_in_redis(self) -> None:
        for name, sub in self.subs.items():
            sk = self._sk(name)
            consuming = {_slot(i): m.deadline for i, m in sub.entries.items()
                         if m.status == Status.CONSUMING}
            assert dict(self.client.zrange(sk.ack, 0, -1, withscores=True)) == consuming, \
                (name, consuming)

    @invariant()
    def push_status_counts_what_is_in_flight(self) -> None:
        for name, sub in self.subs.items():
            status = self.rt.subscriptions.push_status(TOPIC, name)
            assert status["pushUrl"] == (URL if sub.url else None)
            assert status["pushConcurrency"] == self.concurrency(sub)
            assert status["inFlight"] == (sub.consuming() if sub.url else 0)


@pytest.fixture
def machine(redis_client):
    PushMachine.client = redis_client
    PushMachine.clock = ManualClock(T0)
    PushMachine.rt = Runtime(_settings(), client=redis_client, clock=PushMachine.clock)
    return PushMachine


def test_push_delivery_follows_its_model_through_any_sequence(machine):
    run_state_machine_as_test(machine, settings=settings(
        max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None, database=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.generate, Phase.shrink]))


# -- explicit walks ------------------------------------------------------------------------
def _steps(machine, *steps, state=None):
    """Run steps (rule name, arguments) with every invariant after each; returns the state."""
    if state is None:
        state = machine()
        state.start()
    for name, kwargs in steps:
        getattr(state, name)(**kwargs)
        state.every_message_is_in_one_place_with_its_deliveries()
        state.each_delivery_has_its_deadline_and_the_cap_holds_in_redis()
        state.push_status_counts_what_is_in_flight()
    return state


@pytest.mark.parametrize("sub", [None, NAMED])
def test_the_cap_holds_after_a_lowered_concurrency_until_deliveries_end(machine, sub):
    """Three in flight at concurrency 3; lowered to 1, the push pull hands out nothing until
    all three ended, then one."""
    send = ("send", {"delay": 0, "max_retry": 2})
    state = _steps(machine, send, send, send, send, ("push_pull", {"sub": sub, "count": 100}))
    assert state.pulled == ["m1", "m2", "m3"]
    _steps(machine, ("set_concurrency", {"sub": sub, "concurrency": 1}),
           ("push_pull", {"sub": sub, "count": 100}), ("ack", {"index": 0}),
           ("ack", {"index": 1}), ("push_pull", {"sub": sub, "count": 100}), state=state)
    assert state.pulled == [], "consuming 1 of 1: still nothing"
    _steps(machine, ("ack", {"index": 2}), ("push_pull", {"sub": sub, "count": 100}),
           state=state)
    assert state.pulled == ["m4"]


def test_a_push_deadline_outlasts_the_push_timeout_and_dead_letters_count_deliveries(machine):
    """Ack timeout 1 s, push timeout 5 s: the deadline is 6 s; the delivery times out twice
    and dead-letters after maxRetry + 1 = 2 deliveries."""
    state = _steps(machine, ("set_ack_timeout", {"own": False, "timeout": 1_000}),
                   ("set_push_timeout", {"sub": None, "timeout": 5_000}),
                   ("send", {"delay": 0, "max_retry": 1}),
                   ("push_pull", {"sub": None, "count": 1}))
    assert state.subs[None].entries["m1"].deadline == T0 + 6_000
    _steps(machine, ("advance_and_visit", {"ms": 2_500}), ("advance_and_visit", {"ms": 2_500}),
           state=state)
    assert state.subs[None].entries["m1"].status == Status.CONSUMING
    _steps(machine, ("advance_and_visit", {"ms": 1_000}),
           ("push_pull", {"sub": None, "count": 1}), ("advance_and_visit", {"ms": 7_000}),
           state=state)
    assert state.subs[None].entries["m1"].status == Status.RETRY_EXHAUSTED


# -- Found by the machine above, fixed in the scripts; kept as a regression ---------------------
def test_a_named_subscriptions_first_delivery_keeps_its_own_trigger_time(machine):
    """The default subscription nacks m1 with a 700 ms delay (its record's triggerTime moves
    to T0 + 700); "p" holds m1 as a bare ready entry, due at T0, and hands it out at T0 with
    triggerTime T0 + 700: a delivery that says it is early (a push receiver checking it, or
    a consumer computing lag, is misled)."""
    state = _steps(machine, ("send", {"delay": 0, "max_retry": 1}),
                   ("push_pull", {"sub": None, "count": 1}),
                   ("nack", {"index": 0, "delay": 700}))
    [message] = state.queue.pull(TOPIC, 1, subscription=NAMED, push=True).messages
    assert (message.trigger_time, message.retry) == (T0, 1)
