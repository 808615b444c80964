"""Message groups in the SDK against a live node: group_id on send and batch entries, the
topic's groupBlockedSize, and the listener's rule (one message of a group runs at a time, in
order; other groups and ungrouped messages are not held back)."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field, replace

import pytest

from delayqueue.client import BadRequestError, DelayMsg, DelayQueueClient, SendEntry, Status
from delayqueue.client.group_gate import GroupGate

from support import wait_until
from support.sdk import FAST_STOP, node, stop_in_background, topic  # noqa: F401 - fixtures

FAST = {"poll_timeout_ms": 500, "backoff_base_s": 0.05, "backoff_max_s": 0.4, "grace_s": 5}


@pytest.fixture
def client(node):
    with DelayQueueClient(node.url, timeout=5) as c:
        yield c


# ---- sending -------------------------------------------------------------------------------
def test_send_with_group_id_carries_it_on_every_delay_msg(client, topic):
    sent = client.send(topic, "first", group_id="order-42", msg_id="a")
    assert sent.group_id == "order-42" and sent.to_json()["groupId"] == "order-42"
    assert client.get(topic, "a").group_id == "order-42"
    [pulled] = client.pull(topic)
    assert (pulled.msg_id, pulled.group_id) == ("a", "order-42")
    plain = client.send(topic, "no group", group_id="", msg_id="b")   # "" is no group
    assert plain.group_id is None and "groupId" not in plain.to_json()


def test_send_batch_entries_carry_group_id(client, topic):
    results = client.send_batch(topic, [
        SendEntry("one", msg_id="e1", group_id="g"),
        {"msg": "two", "msgId": "e2", "groupId": "g"},
        {"msg": "three", "msgId": "e3", "groupId": "x" * 257},
        {"msg": "four", "msgId": "e4"},
    ])
    assert [r.code for r in results] == [200, 200, 400, 200]
    assert [r.delay_msg.group_id for r in results if r.ok] == ["g", "g", None]
    assert "groupId" in results[2].msg and "256" in results[2].msg
    # One of group g at a time: e2 is due but blocked behind e1.
    assert [m.msg_id for m in client.pull(topic, batch=10)] == ["e1", "e4"]
    assert client.get(topic, "e2").status is Status.READY


def test_a_batch_entry_with_a_group_id_that_is_not_a_string_is_refused_before_sending():
    with pytest.raises(ValueError, match="groupId: must be a string"):
        SendEntry.from_json({"msg": "x", "groupId": 7})
    assert SendEntry.from_json({"msg": "x", "groupId": "g"}).to_json() == \
        {"msg": "x", "groupId": "g"}
    assert "groupId" not in SendEntry.from_json({"msg": "x", "groupId": ""}).to_json()


@pytest.mark.parametrize("group_id, rule", [("x" * 257, "at most 256 characters"),
                                            ("a\nb", "control characters")])
def test_a_bad_group_id_raises_bad_request_naming_it_and_the_rule(client, topic, group_id,
                                                                   rule):
    with pytest.raises(BadRequestError) as info:
        client.send(topic, "x", group_id=group_id)
    assert info.value.code == 400
    assert info.value.msg.startswith("groupId:") and rule in info.value.msg
    assert client.topic_info(topic).ready_queue_size == 0


def test_topic_info_counts_messages_blocked_behind_their_group_head(client, topic):
    for i in range(3):
        client.send(topic, f"m{i}", group_id="g", msg_id=f"m{i}")
    client.send(topic, "later", group_id="g", delay_ms=120_000)
    info = client.topic_info(topic)
    assert (info.ready_queue_size, info.group_blocked_size, info.waiting_queue_size) == (1, 2, 1)
    client.pull(topic)
    info = client.topic_info(topic)
    assert (info.ready_queue_size, info.ack_queue_size, info.group_blocked_size) == (0, 1, 2)
    assert [t.group_blocked_size for t in client.topics() if t.topic == topic] == [2]


# ---- the listener --------------------------------------------------------------------------
@dataclass
class Runs:
    """Every handler run: per group the order they started in, and whether two overlapped."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    running: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    started: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    spans: dict[str, list[tuple[float, float]]] = field(default_factory=lambda: defaultdict(list))
    overlaps: list[str] = field(default_factory=list)
    handled: list[str] = field(default_factory=list)
    held_back: list[str] = field(default_factory=list)

    def handler_meeting(self, firsts: set[str], work_s: float = 0.01):
        """A handler in which the messages ``firsts`` wait for each other (up to 10 s) before
        they run: one that had to give up was held back by another (``held_back``)."""
        met = threading.Event()

        def handler(m: DelayMsg) -> bool:
            if m.msg_id in firsts:
                with self.lock:
                    self.started["first"].append(m.msg_id)
                    if len(self.started["first"]) == len(firsts):
                        met.set()
                if not met.wait(10):
                    self.held_back.append(m.msg_id)
            self.run(m, work_s)
            return True
        return handler

    def run(self, m: DelayMsg, work_s: float) -> None:
        group = m.group_id or "-"
        with self.lock:
            self.running[group] += 1
            if m.group_id and self.running[group] > 1:
                self.overlaps.append(f"{m.msg_id} started while another of {group} ran")
            self.started[group].append(m.msg_id)
            start = time.monotonic()
        time.sleep(work_s)
        with self.lock:
            self.running[group] -= 1
            self.spans[group].append((start, time.monotonic()))
            self.handled.append(m.msg_id)


def test_a_listener_with_8_threads_runs_each_group_in_order_one_at_a_time(client, topic):
    groups = [f"g{k}" for k in range(5)]
    sent = {g: [f"{g}-{i}" for i in range(10)] for g in groups}
    ungrouped = [f"u-{i}" for i in range(20)]
    for i in range(10):        # interleaved, so every pull can bring several groups
        for g in groups:
            client.send(topic, "x", group_id=g, msg_id=sent[g][i])
        client.send(topic, "x", msg_id=ungrouped[2 * i])
        client.send(topic, "x", msg_id=ungrouped[2 * i + 1])
    runs = Runs()
    # every group's first message and an ungrouped one must be running at once
    handler = runs.handler_meeting({f"{g}-0" for g in groups} | {"u-0"})
    with client.listen(topic, handler, pull_threads=2, consume_threads=8,
                       **FAST) as consumer:
        wait_until(lambda: consumer.acked == 70, 30,
                   message=lambda: f"{consumer.acked} acked, {len(runs.handled)} handled")
    assert runs.held_back == []      # the groups and the ungrouped ran side by side
    assert runs.overlaps == []
    for g in groups:
        assert runs.started[g] == sent[g], g
        spans = runs.spans[g]
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:])), g
    assert sorted(runs.handled) == sorted(ungrouped + [m for g in groups for m in sent[g]])
    assert consumer.nacked == consumer.lost == 0
    assert {client.get(topic, m).status for m in runs.handled} == {Status.ACKED}


class Pulls(DelayQueueClient):
    """Records what each pull brought back (monotonic time, messages)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.pulled: list[tuple[float, list[DelayMsg]]] = []

    def shown(self, messages: list[DelayMsg]) -> list[DelayMsg]:
        return messages

    def long_poll(self, topic, batch=1, timeout_ms=None, ack_timeout_ms=None):  # type: ignore[override]
        messages = self.shown(super().long_poll(topic, batch, timeout_ms, ack_timeout_ms))
        if messages:
            self.pulled.append((time.monotonic(), messages))
        return messages


def test_a_redelivery_waits_for_the_run_of_its_earlier_delivery(node, topic):
    """The first run gives its delivery up (changeVisibility 0) and goes on working: the
    message comes again at once, to the other consume thread, and must wait until the first
    run returned; heartbeats (every 1 s) keep its ack deadline (2 s) while it waits 2.5 s."""
    with Pulls(node.url, timeout=5) as client:
        client.send(topic, "x", group_id="g", msg_id="m")
        spans: dict[int, tuple[float, float]] = {}

        def handler(m: DelayMsg) -> bool:
            start = time.monotonic()
            if m.retry == 1:
                client.change_visibility(m, 0)
                wait_until(lambda: len(client.pulled) == 2, 5, message="not delivered again")
                time.sleep(2.5)
            spans[m.retry] = (start, time.monotonic())
            return True

        with client.listen(topic, handler, consume_threads=2, ack_timeout_ms=2_000,
                           **FAST) as consumer:
            wait_until(lambda: consumer.acked == 1 and consumer.lost == 1, 10,
                       message=lambda: f"{consumer.acked} acked, {consumer.lost} lost")
        redelivered_at = client.pulled[1][0]
        assert sorted(spans) == [1, 2]
        assert redelivered_at < spans[1][1] <= spans[2][0]   # pulled during run 1, ran after
        got = client.get(topic, "m")
        assert got.status is Status.ACKED and got.retry == 2  # its wait did not time it out


class NoGroupServer(Pulls):
    """As a server that does not know groups (camellia) shows them: messages are sent without
    a group, and their attribute "g" is shown as the groupId, so one pull brings several
    messages of a group."""

    def shown(self, messages: list[DelayMsg]) -> list[DelayMsg]:
        return [replace(m, group_id=(m.attributes or {}).get("g")) for m in messages]


def test_several_of_a_group_in_one_pull_run_one_at_a_time_in_the_order_pulled(node, topic):
    with NoGroupServer(node.url, timeout=5) as client:
        groups = ["a", "b", "c"]
        sent = {g: [f"{g}{i}" for i in range(8)] for g in groups}
        for i in range(8):
            for g in groups:
                client.send(topic, "x", msg_id=sent[g][i], attributes={"g": g})
            client.send(topic, "x", msg_id=f"u{i}")
        runs = Runs()
        handler = runs.handler_meeting({"a0", "b0", "c0"})
        with client.listen(topic, handler, consume_threads=8, **FAST) as consumer:
            wait_until(lambda: consumer.acked == 32, 30, message=lambda: f"{consumer.acked}")
        first = [m.group_id for m in client.pulled[0][1]]
        assert first.count("a") >= 2     # the case at hand: a pull brought two of a group
        assert runs.held_back == [] and runs.overlaps == []
        for g in groups:
            assert runs.started[g] == sent[g], g
        assert sorted(runs.handled) == sorted([f"u{i}" for i in range(8)]
                                              + [m for g in groups for m in sent[g]])
        assert consumer._groups.blocked == 0


def test_stop_nacks_the_messages_blocked_behind_a_running_one(node, topic):
    with NoGroupServer(node.url, timeout=5) as client:
        for i in range(4):
            client.send(topic, "x", msg_id=f"m{i}", attributes={"g": "g"})
        handled: list[str] = []
        running, release = threading.Event(), threading.Event()

        def handler(m: DelayMsg) -> bool:
            handled.append(m.msg_id)
            running.set()
            release.wait(10)   # runs until stop() has begun, however slow this machine is
            return True

        consumer = client.listen(topic, handler, consume_threads=4, ack_timeout_ms=60_000,
                                 **FAST)
        try:
            assert running.wait(10)
            wait_until(lambda: consumer._groups.blocked == 3, 5)
        finally:
            stopper = stop_in_background(consumer, grace_s=5)
            release.set()
            stopper.join(30)
        assert handled == ["m0"]
        assert [client.get(topic, f"m{i}").status for i in range(4)] == \
            [Status.ACKED] + [Status.READY] * 3
        assert (consumer.acked, consumer.nacked) == (1, 3)


def test_the_gate_lets_one_of_a_group_through_and_the_rest_in_order():
    gate: GroupGate[str] = GroupGate()
    assert gate.enter("g", "g1") and gate.enter(None, "u1") and gate.enter("h", "h1")
    assert not gate.enter("g", "g2") and not gate.enter("g", "g3")
    assert gate.blocked == 2 and gate.running("g")
    assert gate.leave("g") == "g2" and gate.leave("h") is None and not gate.running("h")
    assert gate.enter("h", "h2")        # h had nothing running any more
    assert gate.leave("g") == "g3" and gate.leave("g") is None and not gate.running("g")
    assert gate.leave(None) is None
    assert not gate.enter("h", "h3") and gate.drain() == ["h3"] and gate.blocked == 0
