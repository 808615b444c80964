"""Message groups across a fleet: two nodes (gunicorn, two gevent workers each) on one Redis,
8 consumers (threads, 4 per node) long-polling one topic of 20 groups x 10 messages and 100
ungrouped ones, each doing a short random piece of work before it acks, and giving a tenth of
first deliveries back with a nack. Per group: the messages come in order of (triggerTime,
acceptance), never two outstanding at once (each delivery received after the group's
previous one was acked or nacked), a nacked head comes again before anything else of its
group; nothing is lost, nothing early, nothing delivered again but after its nack.
"""

from __future__ import annotations

import itertools
import random
import threading
from dataclasses import dataclass

import pytest
import requests

from support.fleet import API, now_ms
from support.node import ServerProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

TOPIC = "groups-fleet"
GROUPS, PER_GROUP, UNGROUPED = 20, 10, 100
TRIGGER_SLOTS_MS = (0, 250, 500, 750)   # few triggerTimes: a group's ties rest on acceptance
CONSUMERS_PER_NODE = 4
NACK_SHARE = 0.1
ACK_TIMEOUT_MS = 30_000                 # no ack timeout in the run: every redelivery is a nack's
DEADLINE_S = 30


@dataclass
class Delivery:
    msg_id: str
    group: str | None
    retry: int
    trigger_ms: int
    received_ms: float
    ended_ms: float = float("inf")      # when its ack or nack was sent
    nacked: bool = False


def plan(rng: random.Random) -> list[dict]:
    """The sendMsgBatch entries in send order, each group's messages spread among the rest."""
    due = now_ms() + 1000
    entries = [{"msg": "x", "msgId": f"g{g:02d}-m{k}", "groupId": f"g{g:02d}"}
               for g in range(GROUPS) for k in range(PER_GROUP)]
    entries += [{"msg": "x", "msgId": f"u{i:03d}"} for i in range(UNGROUPED)]
    rng.shuffle(entries)
    for entry in entries:
        entry["triggerTime"] = int(due) + rng.choice(TRIGGER_SLOTS_MS)
    return entries


def send_all(nodes: list[ServerProcess], entries: list[dict]) -> list[dict]:
    """Send in order, 100 entries a request, one request after the other: acceptance order
    is the list's. Returns each accepted delayMsg."""
    accepted = []
    for i in range(0, len(entries), 100):
        response = requests.post(nodes[i // 100 % 2].url + API + "sendMsgBatch", timeout=30,
                                 json={"topic": TOPIC, "msgs": entries[i:i + 100]})
        results = response.json()["results"]
        assert [r["code"] for r in results] == [200] * len(results), results
        accepted += [r["delayMsg"] for r in results]
    return accepted


class Consumers:
    """Long-poll, work a little, ack (or nack a first delivery now and then), until every
    message was acked; every delivery recorded with its receive and ack times."""

    def __init__(self, nodes: list[ServerProcess], expected: int) -> None:
        self.nodes = nodes
        self.expected = expected
        self.deliveries: list[Delivery] = []
        self.acked: list[str] = []
        self.errors: list[str] = []
        self.lock = threading.Lock()
        self.done = threading.Event()

    def run(self) -> None:
        threads = [threading.Thread(target=self._consume, args=(node, i), daemon=True)
                   for i, node in enumerate(self.nodes * CONSUMERS_PER_NODE)]
        for thread in threads:
            thread.start()
        self.done.wait(DEADLINE_S)
        self.done.set()
        for thread in threads:
            thread.join(15)

    def _consume(self, node: ServerProcess, index: int) -> None:
        try:
            self._loop(node, index)
        except Exception as exc:  # noqa: BLE001 - the test reports it with the others
            self._error(f"consumer {index}: {exc!r}")

    def _loop(self, node: ServerProcess, index: int) -> None:
        rng = random.Random(index)
        session = requests.Session()
        while not self.done.is_set():
            answer = session.post(node.url + API + "longPollingMsg", timeout=15, data={
                "topic": TOPIC, "batch": 3, "longPollingTimeoutMillis": 500,
                "ackTimeoutMillis": ACK_TIMEOUT_MS}).json()
            received = now_ms()
            if answer.get("code") != 200:
                self._error(f"pull: {answer}")
                continue
            mine = [Delivery(m["msgId"], m.get("groupId"), m["retry"], m["triggerTime"],
                             received) for m in answer["delayMsgList"]]
            with self.lock:
                self.deliveries += mine
            for d, message in zip(mine, answer["delayMsgList"]):
                self.done.wait(rng.uniform(0.002, 0.02))                 # the work
                d.nacked = d.retry == 1 and rng.random() < NACK_SHARE
                d.ended_ms = now_ms()
                ended = session.post(node.url + API + "ackMsg", timeout=15, data={
                    "topic": TOPIC, "msgId": d.msg_id, "receipt": message["receipt"],
                    "ack": "false" if d.nacked else "true"}).json()
                if ended.get("code") != 200:
                    self._error(f"{'nack' if d.nacked else 'ack'} {d.msg_id}: {ended}")
                elif not d.nacked:
                    with self.lock:
                        self.acked.append(d.msg_id)
                        if len(self.acked) >= self.expected:
                            self.done.set()

    def _error(self, text: str) -> None:
        with self.lock:
            self.errors.append(text)


def test_eight_consumers_on_two_nodes_get_each_group_in_order_one_at_a_time(redis_url):
    rng = random.Random(23)
    entries = plan(rng)
    with ServerProcess(redis_url, workers=2) as a, ServerProcess(redis_url, workers=2) as b:
        accepted = send_all([a, b], entries)
        consumers = Consumers([a, b], len(entries))
        consumers.run()
        info = a.call("getTopicInfo", topic=TOPIC)["data"]

    assert consumers.errors == []
    assert sorted(consumers.acked) == sorted(e["msgId"] for e in entries)   # each once
    deliveries = sorted(consumers.deliveries, key=lambda d: d.received_ms)
    assert [d for d in deliveries if d.received_ms < d.trigger_ms] == []     # never early
    nacks = [d.msg_id for d in deliveries if d.nacked]
    assert len(deliveries) == len(entries) + len(nacks)     # again only after a nack
    # A group's order: (triggerTime as accepted, acceptance = the send order).
    place = {m["msgId"]: (m["triggerTime"], i) for i, m in enumerate(accepted)}
    for group in {e["groupId"] for e in entries if "groupId" in e}:
        got = [d for d in deliveries if d.group == group]
        for before, after in itertools.pairwise(got):
            assert after.received_ms >= before.ended_ms, (group, before, after)  # one at a time
        expected = sorted((e["msgId"] for e in entries if e.get("groupId") == group),
                          key=place.__getitem__)
        assert [msg_id for msg_id, _ in itertools.groupby(d.msg_id for d in got)] == \
            expected, group       # in order; a nacked head again before the rest
    assert (info["waitingQueueSize"], info["readyQueueSize"], info["ackQueueSize"],
            info["groupBlockedSize"]) == (0, 0, 0, 0)
    assert nacks, "no nack in the run: the head's hold was not exercised"
