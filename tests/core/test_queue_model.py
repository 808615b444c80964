"""A Hypothesis state machine drives DelayQueue (the Lua scripts) on a real Redis against a
model of the queue: send (one or a batch, atomic or not, with or without a groupId, keeping or
replacing a live namesake: onDuplicate), pull, ack, nack, changeVisibility, timeout, expiry,
delete, reschedule, redrive, pause and resume, purge, a backlog limit, a dedup window, clock
advances and SCRIPT FLUSH in any order, with every invariant of docs/design.md checked after
every step, and listMsg's pages compared with the model's queues.

The model knows the acceptance order (each accepted send, and each redrive, takes the next
sequence), so it predicts each pull's answer exactly, in order: ready messages leave by
(ready time, acceptance); a group's messages one at a time, by (triggerTime, acceptance),
its delivered head holding the group until it ends (ack, delete, expiry, retry exhausted).
The clock is a ManualClock; ack timeouts, promotion and expiry run through the scheduler's
tick. Failures Hypothesis found and shrank are kept below as explicit regression tests.
"""

from __future__ import annotations

from dataclasses import dataclass

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
from delayqueue.core.errors import BacklogExceeded, BadRequest, Conflict, NotFound
from delayqueue.core.requests import SendRequest
from delayqueue.core.status import Status
from delayqueue.settings.config import load_settings

from support.lua import HOUR, T0, assert_groups, assert_one_place, due_heads, slot_of

TOPIC = "model"
IDS = st.sampled_from(["a", "b", "c", "d", "e"])
GROUPS = st.sampled_from([None, "g1", "g2"])
DELAYS = st.sampled_from([0, 1, 500, 5_000])
TTLS = st.sampled_from([None, 1_500])          # None: the topic's ttl (an hour)
ON_DUPLICATE = st.sampled_from(["keep", "replace"])
# A msgId, or (an int) the k-th message being consumed: a random msgId rarely is one.
TARGETS = st.one_of(IDS, st.integers(0, 3))
ACK_TIMEOUT_MS = 3_000
TOPIC_TTL_MS = HOUR                            # the server's default ttl (a redrive's life)
# Ended messages outlive every example: their purge is not what this model is about.
END_LIFE = 100 * HOUR
LIVE = (Status.WAITING, Status.READY, Status.CONSUMING)
EXAMPLES = 200
STEPS = 25


@dataclass
class Model:
    """What the queue must hold for one message."""

    status: int             # as stored: a message blocked behind its group's head stores 1
    trigger: int
    expire: int
    max_retry: int
    seq: int                # acceptance order
    group: str | None = None
    blocked: bool = False   # waiting behind its group's front
    ready_at: int = 0       # when it became ready: pulls take (ready_at, seq) in order
    deliveries: int = 0
    receipt: str = ""
    deadline: int = 0
    left_index: bool = False  # consuming past its expireTime, and expiry visited it
    ended_at: int | None = None  # when it ended (the dedup window counts from it)

    def place_in_group(self) -> tuple[int, int]:
        return self.trigger, self.seq


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
        self.fronts: dict[str, str] = {}     # groupId -> its front's msgId
        self.seq = 0
        self.last_pull: list[str] = []
        self.paused = False
        self.backlog = 0                      # maxBacklog (0: none)
        self.window = 0                       # dedupWindowMillis (0: none)

    @initialize()
    def start(self) -> None:
        assert self.client.dbsize() == 0

    def now(self) -> int:
        return self.clock.now_ms()

    # -- the model's transitions (lua/includes/group.lua, in the model's words) ----------
    def shown(self, m: Model) -> int:
        """The status getMsg shows: a due message blocked behind its group's head is 2."""
        return Status.READY if m.blocked and m.trigger <= self.now() else m.status

    def _next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def _place(self, m: Model, ready_at: int) -> None:
        """Ready (at ``ready_at``) when due, else waiting."""
        if m.trigger <= self.now():
            m.status, m.ready_at = Status.READY, ready_at
        else:
            m.status = Status.WAITING

    @staticmethod
    def _block(m: Model) -> None:
        m.blocked, m.status = True, Status.WAITING

    def _join(self, msg_id: str, m: Model) -> bool:
        """m (not placed) joins its group: True when it is the front (the caller places it).
        A front never delivered steps back behind a message that comes before it."""
        front_id = self.fronts.get(m.group)
        if front_id is None:
            self.fronts[m.group] = msg_id
            return True
        front = self.model[front_id]
        if front.deliveries == 0 and m.place_in_group() < front.place_in_group():
            self._block(front)
            self.fronts[m.group] = msg_id
            return True
        self._block(m)
        return False

    def _next_in(self, group: str) -> str | None:
        """The group's first blocked message, by (triggerTime, acceptance)."""
        waiting = [(m.place_in_group(), i) for i, m in self.model.items()
                   if m.blocked and m.group == group]
        return min(waiting)[1] if waiting else None

    def _make_front(self, msg_id: str) -> None:
        n = self.model[msg_id]
        n.blocked = False
        self.fronts[n.group] = msg_id
        self._place(n, n.trigger)

    def _end(self, msg_id: str, status: int) -> None:
        """Every ending: a front releases its group to its next message."""
        m = self.model[msg_id]
        m.status, m.blocked, m.ended_at = status, False, self.now()
        if m.group and self.fronts.get(m.group) == msg_id:
            following = self._next_in(m.group)
            if following is None:
                del self.fronts[m.group]
            else:
                self._make_front(following)

    def _end_unconsumed(self, msg_id: str) -> None:
        """Past its expireTime: expired if never delivered, else a dead letter."""
        m = self.model[msg_id]
        self._end(msg_id, Status.EXPIRED if m.deliveries == 0 else Status.RETRY_EXHAUSTED)

    def _give_back(self, msg_id: str, delay: int) -> None:
        """nack, ack timeout, changeVisibility 0: a head stays its group's head."""
        m = self.model[msg_id]
        due = self.now() + max(delay, 0)
        if m.deliveries >= m.max_retry + 1 or due >= m.expire:
            self._end(msg_id, Status.RETRY_EXHAUSTED)
        elif delay <= 0:
            m.status, m.ready_at, m.left_index = Status.READY, self.now(), False
        else:
            m.trigger, m.status, m.left_index = due, Status.WAITING, False

    def _promote_due(self) -> None:
        for m in self.model.values():
            if m.status == Status.WAITING and not m.blocked and m.trigger <= self.now():
                m.status, m.ready_at = Status.READY, m.trigger

    def _expire_due(self) -> None:
        """The expiry index holds ready and blocked messages (consuming ones just leave it)."""
        for m in self.model.values():
            if m.status == Status.CONSUMING and m.expire <= self.now():
                m.left_index = True
        while due := [i for i, m in self.model.items() if m.expire <= self.now()
                      and (m.blocked or m.status == Status.READY)]:
            self._end_unconsumed(due[0])

    def _aim(self, target: str | int) -> str:
        if isinstance(target, str):
            return target
        consuming = sorted(i for i, m in self.model.items() if m.status == Status.CONSUMING)
        return consuming[target % len(consuming)] if consuming else "a"

    def _live(self) -> int:
        return sum(m.status in LIVE for m in self.model.values())

    def _verdict(self, msg_id: str, added: int = 0, replace: bool = False,
                 group: str | None = None) -> str:
        """What a send of ``msg_id`` meets: "duplicate" (a live namesake kept, or an ended
        one inside the dedup window), "replaced", "consuming" or "other_group" (a replace of
        a live one), "backlog" or "new" (``added``: new messages of the same call before
        it)."""
        old = self.model.get(msg_id)
        if old is not None and old.status in LIVE:
            if not replace:
                return "duplicate"
            if old.group != group:
                return "other_group"
            return "consuming" if old.status == Status.CONSUMING else "replaced"
        if old is not None and old.ended_at is not None and \
                self.now() < old.ended_at + self.window:
            return "duplicate"
        if self.backlog and self._live() + added >= self.backlog:
            return "backlog"
        return "new"

    def _accept(self, msg_id: str, delay: int, max_retry: int, group: str | None,
                ttl: int | None, result, replace: bool = False) -> None:
        old = self.model.get(msg_id)
        verdict = self._verdict(msg_id, replace=replace, group=group)
        if verdict == "duplicate":
            assert result.duplicate and not result.replaced, result
            assert result.message.status == self.shown(old), (msg_id, old)
            return
        if verdict == "backlog":
            assert isinstance(result, BacklogExceeded), result
            return
        if verdict == "consuming":
            assert isinstance(result, Conflict) and result.msg.startswith("msgId: "), result
            return
        if verdict == "other_group":
            assert type(result) is BadRequest and result.msg.startswith("groupId: "), result
            return
        assert not result.duplicate and result.replaced == (verdict == "replaced"), result
        trigger = self.now() + delay
        m = Model(Status.WAITING, trigger, trigger + (ttl or TOPIC_TTL_MS), max_retry,
                  self._next_seq(), group)
        was_front = verdict == "replaced" and group is not None and \
            self.fronts.get(group) == msg_id
        self.model[msg_id] = m     # a replace: a fresh delivery state, a new acceptance
        front = True
        if group and was_front:
            # It stays front unless the group's next message now comes first.
            following = self._next_in(group)
            if following is not None and \
                    self.model[following].place_in_group() < m.place_in_group():
                self._block(m)
                self._make_front(following)
                front = False
        elif group:
            front = self._join(msg_id, m)
        if front:
            self._place(m, trigger)
        assert result.message.trigger_time == trigger
        assert result.message.group_id == group
        assert result.message.retry == 0 and result.message.msg == "body"
        assert result.message.status == self.shown(m), (msg_id, m)

    # -- rules ---------------------------------------------------------------------------
    @rule(msg_id=IDS, delay=DELAYS, max_retry=st.sampled_from([0, 1, 3]), group=GROUPS,
          ttl=TTLS, on_duplicate=ON_DUPLICATE)
    def send(self, msg_id, delay, max_retry, group, ttl=None, on_duplicate="keep") -> None:
        [result] = self.queue.send_batch(TOPIC, [SendRequest(
            "body", msg_id, delay, max_retry=max_retry, group_id=group, ttl_ms=ttl,
            on_duplicate=on_duplicate)])
        self._accept(msg_id, delay, max_retry, group, ttl, result, on_duplicate == "replace")

    @rule(entries=st.lists(st.tuples(IDS, DELAYS, GROUPS, ON_DUPLICATE), min_size=2,
                           max_size=4))
    def send_batch(self, entries) -> None:
        """A batch is accepted in entry order (equal triggerTimes leave in that order)."""
        results = self.queue.send_batch(TOPIC, [
            SendRequest("body", msg_id, delay, max_retry=1, group_id=group, on_duplicate=on)
            for msg_id, delay, group, on in entries])
        for (msg_id, delay, group, on), result in zip(entries, results, strict=True):
            self._accept(msg_id, delay, 1, group, None, result, on == "replace")

    @rule(entries=st.lists(st.tuples(IDS, DELAYS, GROUPS, ON_DUPLICATE), min_size=1,
                           max_size=4))
    def send_atomic(self, entries) -> None:
        """All or nothing: refused whole when any new message would pass the backlog, or any
        replace meets a consuming namesake or another groupId (a duplicate refuses
        nothing). A msgId an earlier entry writes is live, in that entry's group."""
        results = self.queue.send_batch(TOPIC, [
            SendRequest("body", msg_id, delay, max_retry=1, group_id=group, on_duplicate=on)
            for msg_id, delay, group, on in entries], atomic=True)
        added, written, verdicts = 0, {}, []
        for msg_id, _, group, on in entries:
            replace = on == "replace"
            if msg_id in written:
                verdict = "duplicate" if not replace else \
                    "replaced" if written[msg_id] == group else "other_group"
            else:
                verdict = self._verdict(msg_id, added, replace, group)
            if verdict == "new":
                added += 1
            if verdict in ("new", "replaced"):
                written[msg_id] = group
            verdicts.append(verdict)
        refusals = {"backlog": BacklogExceeded, "consuming": Conflict,
                    "other_group": BadRequest}
        if any(v in refusals for v in verdicts):
            for verdict, result in zip(verdicts, results, strict=True):
                if verdict in refusals:
                    assert type(result) is refusals[verdict], (verdict, result)
                else:
                    assert type(result) is Conflict and result.msg.startswith("not written")
            return
        for (msg_id, delay, group, on), result in zip(entries, results, strict=True):
            self._accept(msg_id, delay, 1, group, None, result, on == "replace")

    @rule(backlog=st.sampled_from([0, 2, 4]))
    def set_backlog(self, backlog) -> None:
        self.rt.admin.set_config(TOPIC, {"maxBacklog": backlog})
        self.backlog = backlog

    @rule(window=st.sampled_from([0, 1_000, 7_000]))
    def set_dedup_window(self, window) -> None:
        """Ended messages answer a re-send as a duplicate this long after they ended (the
        model's retention, END_LIFE, is longer than any window)."""
        self.rt.admin.set_config(TOPIC, {"dedupWindowMillis": window})
        self.window = window

    @rule(paused=st.booleans())
    def pause(self, paused) -> None:
        """Pause or resume; an unknown topic (nothing sent yet) answers 404."""
        try:
            changed = (self.rt.controls.pause if paused else self.rt.controls.resume)(TOPIC)
        except NotFound:
            assert not self.model and not self.backlog
            return
        assert changed == (paused != self.paused)
        self.paused = paused

    @precondition(lambda self: self.model)
    @rule()
    def purge(self) -> None:
        """Every live message ends deleted, a group's next messages too."""
        result = self.rt.controls.purge(TOPIC)
        live = [i for i, m in self.model.items() if m.status in LIVE]
        assert (result.count, result.remaining) == (len(live), 0)
        for msg_id in live:
            if self.model[msg_id].status in LIVE:
                self._end(msg_id, Status.DELETED)

    @rule(batch=st.sampled_from([1, 2, 5]))
    def pull(self, batch) -> None:
        """The exact answer, in order: ready by (ready time, acceptance); an expired message
        met on the way ends (its group's next may come in this very pull)."""
        self._promote_due()
        expected, pops_left = [], 0 if self.paused else 2 * batch
        while len(expected) < batch and pops_left > 0:
            ready = [(m.ready_at, m.seq, i) for i, m in self.model.items()
                     if m.status == Status.READY and not m.blocked]
            if not ready:
                break
            pops_left -= 1
            msg_id = min(ready)[2]
            m = self.model[msg_id]
            if self.now() >= m.expire or m.deliveries >= m.max_retry + 1:
                self._end_unconsumed(msg_id)
            else:
                expected.append(msg_id)
                m.status, m.deliveries = Status.CONSUMING, m.deliveries + 1
                m.deadline = self.now() + ACK_TIMEOUT_MS
        result = self.queue.pull(TOPIC, batch, ACK_TIMEOUT_MS)
        got = self.last_pull = [m.msg_id for m in result.messages]
        assert got == expected
        groups = [m.group_id for m in result.messages if m.group_id]
        assert len(groups) == len(set(groups)), got           # one per group
        for message in result.messages:
            m = self.model[message.msg_id]
            assert message.trigger_time <= self.now()          # never early
            assert message.retry == m.deliveries
            assert message.group_id == m.group
            m.receipt = message.receipt

    @precondition(lambda self: self.model)
    @rule(msg_id=TARGETS, stale=st.booleans())
    def ack(self, msg_id, stale) -> None:
        msg_id = self._aim(msg_id)
        m = self.model.get(msg_id)
        receipt = "0.0" if stale else (m.receipt if m else "")
        try:
            self.queue.ack(TOPIC, msg_id, receipt)
        except NotFound:
            assert m is None or m.status > Status.ACKED
            return
        except Conflict:
            # A receipt of a message not delivered since (never, or replaced) is stale too:
            # the model keeps the receipt of a delivery that a redrive or a replace began
            # again (Hypothesis found: timeout to a dead letter, redrive, ack with the
            # receipt of the dead delivery: 409, as ack.lua says).
            assert m is not None and (stale or (receipt and m.deliveries == 0)), m
            return
        except BadRequest:
            assert m is not None and m.deliveries == 0 and m.status < Status.CONSUMING, m
            return
        assert m is not None and m.deliveries > 0 and not stale, m
        assert m.status in (Status.WAITING, Status.READY, Status.CONSUMING, Status.ACKED)
        if m.status != Status.ACKED:
            self._end(msg_id, Status.ACKED)

    @precondition(lambda self: self.model)
    @rule(msg_id=TARGETS, delay=st.sampled_from([None, 500]))
    def nack(self, msg_id, delay) -> None:
        msg_id = self._aim(msg_id)
        m = self.model.get(msg_id)
        message = self._change_delivery(
            m, lambda: self.queue.nack(TOPIC, msg_id, m.receipt if m else "", delay))
        if message is None:
            return
        self._give_back(msg_id, delay or 0)
        assert message.status == m.status

    @precondition(lambda self: self.model)
    @rule(msg_id=TARGETS, timeout=st.sampled_from([0, 5_000]))
    def change_visibility(self, msg_id, timeout) -> None:
        msg_id = self._aim(msg_id)
        m = self.model.get(msg_id)
        message = self._change_delivery(m, lambda: self.queue.change_visibility(
            TOPIC, msg_id, timeout, m.receipt if m else ""))
        if message is None:
            return
        if timeout:
            m.deadline = self.now() + timeout
        else:
            self._give_back(msg_id, 0)
        assert message.status == m.status

    @staticmethod
    def _change_delivery(m, call):
        """Nack or changeVisibility with the model's receipt: the answer, or None when it
        was refused as the model says it must be (unknown or ended: 404; not consuming:
        400); a call the model expected to be refused that was not fails."""
        try:
            message = call()
        except NotFound:
            assert m is None or m.status > Status.CONSUMING
            return None
        except BadRequest:
            assert m is not None and m.status != Status.CONSUMING
            return None
        assert m is not None and m.status == Status.CONSUMING
        return message

    @precondition(lambda self: self.model)
    @rule(msg_id=IDS)
    def delete(self, msg_id) -> None:
        m = self.model.get(msg_id)
        try:
            self.queue.delete(TOPIC, msg_id)
        except NotFound:
            assert m is None or m.status not in LIVE
            return
        assert m is not None and m.status in LIVE
        self._end(msg_id, Status.DELETED)

    @precondition(lambda self: self.model)
    @rule(msg_id=IDS, delay=DELAYS)
    def reschedule(self, msg_id, delay) -> None:
        """A waiting message takes its new place in its group; a delivered head stays head."""
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
        trigger = self.now() + delay
        m.expire, m.trigger = trigger + m.expire - m.trigger, trigger
        front = True
        if m.group and m.blocked:
            m.blocked = False
            front = self._join(msg_id, m)
        elif m.group and m.deliveries == 0:
            following = self._next_in(m.group)
            if following is not None and \
                    self.model[following].place_in_group() < m.place_in_group():
                self._block(m)
                self._make_front(following)
                front = False
        if front:
            self._place(m, self.now())
        assert message.trigger_time == m.trigger
        assert message.status == self.shown(m), (msg_id, m)

    @precondition(lambda self: any(m.status == Status.RETRY_EXHAUSTED
                                   for m in self.model.values()))
    @rule(msg_id=IDS)
    def redrive(self, msg_id) -> None:
        """A dead letter comes back as a new send would: a new acceptance, behind its
        group's head."""
        m = self.model.get(msg_id)
        try:
            count = self.rt.admin.redrive(TOPIC, msg_id)
        except NotFound:
            assert m is None or m.status != Status.RETRY_EXHAUSTED
            return
        assert m is not None and m.status == Status.RETRY_EXHAUSTED and count == 1
        m.trigger, m.expire, m.deliveries = self.now(), self.now() + TOPIC_TTL_MS, 0
        m.left_index, m.ended_at = False, None
        m.seq = self._next_seq()
        if not m.group or self._join(msg_id, m):
            self._place(m, self.now())

    @rule(ms=st.sampled_from([1, 499, 1_000, 6_000]), flush=st.booleans())
    def advance_and_tick(self, ms, flush=False) -> None:
        """Time passes; the scheduler promotes what is due, times out late deliveries, then
        ends what expired (a release may make a group's next message ready). ``flush``: the
        script cache was flushed meanwhile (SCRIPT FLUSH: every script is loaded again)."""
        if flush:
            self.client.script_flush()
        self.clock.advance(ms)
        self.rt.scheduler.tick()
        self._promote_due()
        for msg_id, m in list(self.model.items()):
            if m.status == Status.CONSUMING and m.deadline <= self.now():
                self._give_back(msg_id, 0)
        self._expire_due()

    # -- invariants ----------------------------------------------------------------------
    @invariant()
    def every_message_is_where_its_model_says(self) -> None:
        for msg_id, m in self.model.items():
            assert self.queue.get(TOPIC, msg_id).status == self.shown(m), (msg_id, m)
            assert_one_place(self.client, self.tk, msg_id, int(m.status),
                             left_index=m.left_index and m.status == Status.CONSUMING)

    @invariant()
    def nothing_waiting_is_due_after_a_tick_or_pull(self) -> None:
        # The zsets hold slots (includes/message.lua), not msgIds: map the model's ids.
        ids = {slot_of(self.client, self.tk, msg_id): msg_id for msg_id in self.model}
        for member in self.client.zrangebyscore(self.tk.ready, "-inf", "+inf"):
            assert self.model[ids[member[12:]]].trigger <= self.now()   # <seq><slot>

    @invariant()
    def the_due_index_is_never_later_than_the_topics_due_time(self) -> None:
        """The scheduler finds every due message: the topic's due-index score (and on a
        Cluster its due record) is at most the earliest entry of its due sets, which no
        request script reads (includes/message.lua due_lowered)."""
        due = due_heads(self.client, self.tk)
        if due is None:
            return
        index = self.client.zscore(self.rt.keys.due, TOPIC)
        assert index is not None and index <= due, (index, due)
        if not self.rt.scripts.lowers_due_index:
            record = self.client.get(self.tk.due)
            assert record is not None and int(record) <= due, (record, due)

    @invariant()
    def each_group_has_its_models_front_and_at_most_one_consuming(self) -> None:
        assert_groups(self.client, self.tk)
        fronts = {group: slot_of(self.client, self.tk, msg_id)
                  for group, msg_id in self.fronts.items()}
        assert self.client.hgetall(self.tk.groups) == fronts
        consuming = [m.group for m in self.model.values()
                     if m.group and m.status == Status.CONSUMING]
        assert len(consuming) == len(set(consuming)), consuming

    @invariant()
    def list_msg_pages_are_the_models_queues_in_order(self) -> None:
        """Each view, read in pages of two, is the model's queue in its own order."""
        def pages(view: str) -> list[str]:
            seen, cursor = [], None
            for _ in range(20):
                page = self.rt.controls.list(TOPIC, view, 2, cursor)
                seen += [message.msg_id for message in page.messages]
                if page.next_cursor is None:
                    return seen
                cursor = page.next_cursor
            raise AssertionError("no last page")

        unblocked = {i: m for i, m in self.model.items() if not m.blocked}
        assert pages("waiting") == [i for _, _, i in sorted(
            (m.trigger, m.seq, i) for i, m in unblocked.items() if m.status == Status.WAITING)]
        assert pages("ready") == [i for _, _, i in sorted(
            (m.ready_at, m.seq, i) for i, m in unblocked.items() if m.status == Status.READY)]
        consuming = pages("ack")
        deadlines = [self.model[i].deadline for i in consuming]
        assert deadlines == sorted(deadlines)
        assert sorted(consuming) == sorted(i for i, m in self.model.items()
                                           if m.status == Status.CONSUMING)
        assert pages("blocked") == [i for _, _, _, i in sorted(
            (m.group, m.trigger, m.seq, i) for i, m in self.model.items() if m.blocked)]

    @invariant()
    def topic_info_counts_what_the_model_holds(self) -> None:
        """A due blocked message counts in groupBlockedSize, not readyQueueSize; one not yet
        due counts as waiting."""
        live = [m for m in self.model.values() if m.status in LIVE]
        blocked = [m for m in live if m.blocked]
        info = self.queue.topic_info(TOPIC)
        assert (info["waitingQueueSize"], info["readyQueueSize"], info["ackQueueSize"],
                info["groupBlockedSize"]) == (
            sum(m.status == Status.WAITING and (not m.blocked or m.trigger > self.now())
                for m in live),
            sum(m.status == Status.READY for m in live),
            sum(m.status == Status.CONSUMING for m in live),
            sum(m.trigger <= self.now() for m in blocked)), (info, self.model)
        assert info["paused"] == self.paused


@pytest.fixture
def machine(redis_client):
    QueueMachine.client = redis_client
    QueueMachine.clock = ManualClock(T0)
    QueueMachine.rt = Runtime(_settings(), client=redis_client, clock=QueueMachine.clock)
    return QueueMachine


def test_the_queue_follows_its_model_through_any_sequence_of_transitions(machine):
    # No explain phase: its line tracing of every Redis call makes a failure take minutes.
    run_state_machine_as_test(machine, settings=settings(
        max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None, database=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.generate, Phase.shrink]))


def test_the_model_holds_with_the_due_index_kept_as_on_a_cluster(machine):
    """The same machine with the keys a Cluster gets: the scripts lower the topic's due record
    and the service lowers the index after them (DelayQueue.bookkeep)."""
    machine.rt.scripts.lowers_due_index = False
    run_state_machine_as_test(machine, settings=settings(
        max_examples=EXAMPLES // 2, stateful_step_count=STEPS, deadline=None, database=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.generate, Phase.shrink]))


# -- shrunk failures, and group walks, kept ------------------------------------------------------
def _steps(machine, *steps, state=None):
    """Run steps (rule name, arguments) with every invariant after each; returns the state
    (pass it back to go on)."""
    if state is None:
        state = machine()
        state.start()
    for name, kwargs in steps:
        getattr(state, name)(**kwargs)
        state.every_message_is_where_its_model_says()
        state.nothing_waiting_is_due_after_a_tick_or_pull()
        state.each_group_has_its_models_front_and_at_most_one_consuming()
        state.topic_info_counts_what_the_model_holds()
    return state


def test_a_deleted_message_is_kept_for_end_life_and_in_no_queue(machine):
    # The first shrink: send then delete (the model's end-life must be the server's).
    _steps(machine, ("send", {"msg_id": "a", "delay": 0, "max_retry": 0, "group": None}),
           ("delete", {"msg_id": "a"}))


def test_a_late_ack_after_a_timeout_ends_the_message_and_a_stale_one_is_refused(machine):
    _steps(machine, ("send", {"msg_id": "a", "delay": 1, "max_retry": 1, "group": None}),
           ("advance_and_tick", {"ms": 1}), ("pull", {"batch": 1}),
           ("advance_and_tick", {"ms": 6_000}), ("ack", {"msg_id": "a", "stale": True}),
           ("ack", {"msg_id": "a", "stale": False}),
           ("advance_and_tick", {"ms": 0, "flush": True}),
           ("send", {"msg_id": "a", "delay": 500, "max_retry": 0, "group": None}),
           ("reschedule", {"msg_id": "a", "delay": 0}), ("pull", {"batch": 2}),
           ("nack", {"msg_id": "a", "delay": None}))


def _send(msg_id, delay, group, **more):
    return "send", {"msg_id": msg_id, "delay": delay, "max_retry": 3, "group": group, **more}


PULL = ("pull", {"batch": 5})


def test_a_group_is_delivered_one_at_a_time_its_head_held_through_nack_and_timeout(machine):
    # c is sent first but due last; b ties with a and was accepted after it.
    state = _steps(machine, _send("c", 500, "g1"), _send("a", 0, "g1"), _send("b", 0, "g1"),
                   _send("d", 0, None), PULL)
    assert state.last_pull == ["a", "d"]
    _steps(machine, ("nack", {"msg_id": "a", "delay": None}), PULL, state=state)
    assert state.last_pull == ["a"]                     # b is due, but a is still the head
    _steps(machine, ("advance_and_tick", {"ms": 6_000}), PULL, state=state)
    assert state.last_pull == ["a", "d"]                # timed out together: acceptance order
    _steps(machine, ("ack", {"msg_id": "a", "stale": False}), PULL, state=state)
    assert state.last_pull == ["b"]
    _steps(machine, ("delete", {"msg_id": "b"}), ("advance_and_tick", {"ms": 1}), PULL,
           state=state)
    assert state.last_pull == ["c"]


def test_blocked_messages_expire_in_place_and_an_exhausted_head_hands_over(machine):
    state = _steps(machine, _send("a", 0, "g1", ttl=1_500), _send("b", 0, "g1", ttl=1_500),
                   _send("c", 500, "g1"), ("pull", {"batch": 1}),
                   ("advance_and_tick", {"ms": 1_499}))
    assert state.queue.topic_info(TOPIC)["groupBlockedSize"] == 2      # b and c, both due
    _steps(machine, ("advance_and_tick", {"ms": 1}), state=state)
    assert state.model["b"].status == Status.EXPIRED                   # where it waited
    assert state.model["a"].status == Status.CONSUMING
    _steps(machine, ("advance_and_tick", {"ms": 1_500}), PULL, state=state)
    assert state.model["a"].status == Status.RETRY_EXHAUSTED           # past its life
    assert state.last_pull == ["c"]


def test_a_redriven_message_refuses_the_receipt_of_its_dead_delivery(machine):
    # Found by Hypothesis in a fresh-clone CI run: the model kept the dead delivery's receipt.
    _steps(machine, ("send", {"msg_id": "d", "delay": 0, "max_retry": 0, "group": None}),
           ("pull", {"batch": 1}), ("advance_and_tick", {"ms": 6_000}),
           ("redrive", {"msg_id": "d"}), ("ack", {"msg_id": "d", "stale": False}))
