"""A Hypothesis state machine drives DelayQueue (the Lua scripts) on a real Redis against a
model of the queue: send, pull, ack, nack, timeout, delete, reschedule, clock advances and
SCRIPT FLUSH in any order, with every invariant of docs/design.md checked after every step.

The clock is a ManualClock; ack timeouts and promotion run through the scheduler's tick.
Failures Hypothesis found and shrank are kept below as explicit regression tests.
"""

from __future__ import annotations

from dataclasses import dataclass

import hypothesis.strategies as st
import pytest
import redis
from hypothesis import HealthCheck, settings
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from delayqueue.background.runtime import Runtime
from delayqueue.core.clock import ManualClock
from delayqueue.core.errors import BadRequest, Conflict, NotFound
from delayqueue.core.status import Status
from delayqueue.settings.config import load_settings

from support.lua import END_LIFE, T0, assert_one_place, slot_of

TOPIC = "model"
IDS = st.sampled_from(["a", "b", "c", "d"])
DELAYS = st.sampled_from([0, 1, 500, 5_000])
ACK_TIMEOUT_MS = 1_000
LIVE = (Status.WAITING, Status.READY, Status.CONSUMING)
EXAMPLES = 1000


@dataclass
class Model:
    """What the queue must hold for one message."""

    status: int
    trigger: int
    max_retry: int
    deliveries: int = 0
    receipt: str = ""
    deadline: int = 0


def _settings():
    # No deferral of idle visits: a tick then promotes and times out exactly what is due.
    return load_settings(env={}, overrides={"schedule-defer-millis": 0, "snapshot-dir": "",
                                            "end-life-msg-expire-millis": END_LIFE})


class QueueMachine(RuleBasedStateMachine):
    # One runtime for every example (building one reads the YAML and loads the scripts):
    # each example starts on a flushed database with the clock back at T0.
    client: redis.Redis
    clock: ManualClock
    rt: Runtime

    def __init__(self) -> None:
        super().__init__()
        self.client.flushdb()
        self.clock._now_ms = T0
        self.queue = self.rt.queue
        self.tk = self.queue.topic_keys(TOPIC)
        self.model: dict[str, Model] = {}

    @initialize()
    def start(self) -> None:
        assert self.client.dbsize() == 0

    def now(self) -> int:
        return self.clock.now_ms()

    def _promote_due(self) -> None:
        for m in self.model.values():
            if m.status == Status.WAITING and m.trigger <= self.now():
                m.status = Status.READY

    def _redeliver(self, m: Model) -> None:
        m.status = Status.RETRY_EXHAUSTED if m.deliveries >= m.max_retry + 1 else Status.READY

    # -- rules ---------------------------------------------------------------------------
    @rule(msg_id=IDS, delay=DELAYS, max_retry=st.sampled_from([0, 1, 3]))
    def send(self, msg_id, delay, max_retry) -> None:
        result = self.queue.send(TOPIC, "body", msg_id=msg_id, delay_ms=delay,
                                 max_retry=max_retry)
        old = self.model.get(msg_id)
        if old is not None and old.status in LIVE:
            assert result.duplicate
            return
        assert not result.duplicate
        trigger = self.now() + delay
        self.model[msg_id] = Model(Status.WAITING if delay > 0 else Status.READY, trigger,
                                   max_retry)
        assert result.message.trigger_time == trigger

    @rule(batch=st.sampled_from([1, 2, 5]))
    def pull(self, batch) -> None:
        self._promote_due()
        deliverable = sorted(i for i, m in self.model.items() if m.status == Status.READY)
        result = self.queue.pull(TOPIC, batch, ACK_TIMEOUT_MS)
        got = [m.msg_id for m in result.messages]
        assert len(got) == len(set(got)) == min(batch, len(deliverable)), (got, deliverable)
        for message in result.messages:
            m = self.model[message.msg_id]
            assert m.status == Status.READY, (message.msg_id, m)
            assert message.trigger_time <= self.now()          # never early
            m.status, m.deliveries = Status.CONSUMING, m.deliveries + 1
            m.receipt, m.deadline = message.receipt, self.now() + ACK_TIMEOUT_MS
            assert message.retry == m.deliveries

    @rule(msg_id=IDS, stale=st.booleans())
    def ack(self, msg_id, stale) -> None:
        m = self.model.get(msg_id)
        receipt = "0.0" if stale else (m.receipt if m else "")
        try:
            self.queue.ack(TOPIC, msg_id, receipt)
        except NotFound:
            assert m is None or m.status > Status.ACKED
            return
        except Conflict:
            assert m is not None and stale and m.deliveries > 0, m
            return
        except BadRequest:
            assert m is not None and m.deliveries == 0 and m.status < Status.CONSUMING, m
            return
        assert m is not None and m.deliveries > 0 and not stale, m
        assert m.status in (Status.WAITING, Status.READY, Status.CONSUMING, Status.ACKED)
        m.status = Status.ACKED

    @rule(msg_id=IDS)
    def nack(self, msg_id) -> None:
        m = self.model.get(msg_id)
        try:
            message = self.queue.nack(TOPIC, msg_id, m.receipt if m else "")
        except NotFound:
            assert m is None or m.status > Status.CONSUMING
            return
        except BadRequest:
            assert m is not None and m.status != Status.CONSUMING
            return
        assert m is not None and m.status == Status.CONSUMING
        self._redeliver(m)
        assert message.status == m.status

    @rule(msg_id=IDS)
    def delete(self, msg_id) -> None:
        m = self.model.get(msg_id)
        try:
            self.queue.delete(TOPIC, msg_id)
        except NotFound:
            assert m is None or m.status not in LIVE
            return
        assert m is not None and m.status in LIVE
        m.status = Status.DELETED

    @rule(msg_id=IDS, delay=DELAYS)
    def reschedule(self, msg_id, delay) -> None:
        m = self.model.get(msg_id)
        try:
            message = self.queue.reschedule(TOPIC, msg_id, delay_ms=delay)
        except NotFound:
            assert m is None or m.status not in LIVE
            return
        except BadRequest:
            assert m is not None and m.status == Status.CONSUMING
            return
        assert m is not None and m.status in (Status.WAITING, Status.READY)
        m.trigger = self.now() + delay
        m.status = Status.WAITING if delay > 0 else Status.READY
        assert message.trigger_time == m.trigger

    @rule(ms=st.sampled_from([1, 499, 1_000, 6_000]))
    def advance_and_tick(self, ms) -> None:
        """Time passes; the scheduler promotes what is due and times out late deliveries."""
        self.clock.advance(ms)
        self.rt.scheduler.tick()
        self._promote_due()
        for m in self.model.values():
            if m.status == Status.CONSUMING and m.deadline <= self.now():
                self._redeliver(m)

    @rule()
    def script_flush(self) -> None:
        self.client.script_flush()

    # -- invariants ----------------------------------------------------------------------
    @invariant()
    def every_message_is_where_its_model_says(self) -> None:
        for msg_id, m in self.model.items():
            assert self.queue.get(TOPIC, msg_id).status == m.status, (msg_id, m)
            assert_one_place(self.client, self.tk, msg_id, int(m.status))

    @invariant()
    def nothing_waiting_is_due_after_a_tick_or_pull(self) -> None:
        # The zsets hold slots (includes/message.lua), not msgIds: map the model's ids.
        ids = {slot_of(self.client, self.tk, msg_id): msg_id for msg_id in self.model}
        for member in self.client.zrangebyscore(self.tk.ready, "-inf", "+inf"):
            assert self.model[ids[member[12:]]].trigger <= self.now()   # <seq><slot>


@pytest.fixture
def machine(redis_client):
    QueueMachine.client = redis_client
    QueueMachine.clock = ManualClock(T0)
    QueueMachine.rt = Runtime(_settings(), client=redis_client, clock=QueueMachine.clock)
    return QueueMachine


def test_the_queue_follows_its_model_through_any_sequence_of_transitions(machine):
    run_state_machine_as_test(machine, settings=settings(
        max_examples=EXAMPLES, stateful_step_count=10, deadline=None, database=None,
        suppress_health_check=list(HealthCheck)))


# -- shrunk failures, kept ----------------------------------------------------------------------
def _steps(machine, *steps) -> None:
    state = machine()
    state.start()
    for name, kwargs in steps:
        getattr(state, name)(**kwargs)
        state.every_message_is_where_its_model_says()
        state.nothing_waiting_is_due_after_a_tick_or_pull()


def test_a_deleted_message_is_kept_for_end_life_and_in_no_queue(machine):
    # The first shrink: send then delete (the model's end-life must be the server's).
    _steps(machine, ("send", {"msg_id": "a", "delay": 0, "max_retry": 0}),
           ("delete", {"msg_id": "a"}))


def test_a_late_ack_after_a_timeout_ends_the_message_and_a_stale_one_is_refused(machine):
    _steps(machine, ("send", {"msg_id": "a", "delay": 1, "max_retry": 1}),
           ("advance_and_tick", {"ms": 1}), ("pull", {"batch": 1}),
           ("advance_and_tick", {"ms": 1_000}), ("ack", {"msg_id": "a", "stale": True}),
           ("ack", {"msg_id": "a", "stale": False}), ("script_flush", {}),
           ("send", {"msg_id": "a", "delay": 500, "max_retry": 0}),
           ("reschedule", {"msg_id": "a", "delay": 0}), ("pull", {"batch": 2}),
           ("nack", {"msg_id": "a"}))
