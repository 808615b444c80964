"""Named subscriptions across a fleet: two nodes (gunicorn, two gevent workers each) on one
Redis, a topic with three named subscriptions, long-poll consumers in each subscription on both
nodes. Without faults, every subscription gets every message exactly once and an ack in one
subscription ends the message there only (getMsg in each subscription, and in the default one
that nobody consumes, shows it acked only where it was acked). With a kill -9 of one node
(master and workers) mid-load, every subscription still gets every send answered 200: what the
dead node had handed out comes again after its ack timeout, in that subscription alone.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest
import requests

from support import wait_until
from support.fleet import API, now_ms
from support.node import ServerProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

SUBSCRIPTIONS = ("billing", "audit", "search")
MESSAGES = 300
CONSUMERS = 2                 # per subscription and node
DEADLINE_S = 30


@dataclass
class Ledger:
    """What the clients saw, per subscription: each delivery (msgId, pull sent, received,
    triggerTime) and each ack answered 200 (msgId, answered)."""

    deliveries: dict[str, list[tuple[str, float, float, int]]] = field(
        default_factory=lambda: defaultdict(list))
    acked: dict[str, dict[str, float]] = field(default_factory=lambda: defaultdict(dict))
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def delivered(self, subscription: str) -> set[str]:
        with self.lock:
            return {d[0] for d in self.deliveries[subscription]}

    def progress(self) -> str:
        """Messages delivered and acked, per subscription: what a timeout shows."""
        return ", ".join(f"{n} {len(self.delivered(n))} delivered / {len(self.acked[n])} acked"
                         for n in SUBSCRIPTIONS) + f"; errors {self.errors[:3]}"

    def error(self, text: str) -> None:
        with self.lock:
            self.errors.append(text)


class Consumers:
    """``CONSUMERS`` long-poll threads per subscription and node, each acking what it gets
    after up to ``work_s`` of work, unless ``keep(subscription, msgId)`` says to leave it
    unacked; a thread whose node stops answering moves to the next node. They run until
    ``stop()``."""

    def __init__(self, topic: str, nodes: list[ServerProcess], ledger: Ledger,
                 keep=lambda subscription, msg_id: False, work_s: float = 0.0) -> None:
        self.topic = topic
        self.bases = [node.url for node in nodes]
        self.ledger = ledger
        self.keep = keep
        self.work_s = work_s
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self._consume, args=(name, i), daemon=True)
                        for name in SUBSCRIPTIONS for i in range(CONSUMERS * len(nodes))]
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(15)

    def _consume(self, subscription: str, index: int) -> None:
        session, turn, rng = requests.Session(), index, random.Random(index)
        while not self.stopping.is_set():
            base = self.bases[turn % len(self.bases)]
            try:
                sent = now_ms()
                answer = session.post(base + API + "longPollingMsg", timeout=10, data={
                    "topic": self.topic, "subscription": subscription, "batch": 5,
                    "longPollingTimeoutMillis": 500}).json()
                received = now_ms()
                if answer.get("code") != 200:
                    self.ledger.error(f"pull in {subscription}: {answer}")
                    self.stopping.wait(0.1)
                    continue
                messages = answer["delayMsgList"]
                with self.ledger.lock:
                    self.ledger.deliveries[subscription] += [
                        (m["msgId"], sent, received, m["triggerTime"]) for m in messages]
                for message in messages:
                    if self.keep(subscription, message["msgId"]):
                        continue
                    if self.work_s:
                        self.stopping.wait(rng.uniform(0, self.work_s))
                    reply = session.post(base + API + "ackMsg", timeout=10, data={
                        "topic": self.topic, "subscription": subscription,
                        "msgId": message["msgId"], "receipt": message["receipt"]}).json()
                    if reply.get("code") == 200:
                        with self.ledger.lock:
                            self.ledger.acked[subscription].setdefault(message["msgId"],
                                                                       now_ms())
                    else:
                        self.ledger.error(f"ack in {subscription}: {reply}")
            except requests.RequestException:
                turn += 1                   # that node is gone: the next one
                session = requests.Session()
                self.stopping.wait(0.05)


@contextmanager
def two_nodes(redis_url: str, settings: dict | None = None):
    """Two nodes (two gevent workers each), started and stopped side by side: half the
    time of one after the other on a loaded machine. A node killed meanwhile stops at once."""
    nodes = [ServerProcess(redis_url, workers=2, settings=settings) for _ in range(2)]
    try:
        with ThreadPoolExecutor(2) as pool:
            for started in [pool.submit(node.start) for node in nodes]:
                started.result()
        yield nodes
    finally:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(ServerProcess.stop, nodes))


def create_subscriptions(node: ServerProcess, topic: str, **settings) -> None:
    for name in SUBSCRIPTIONS:
        reply = node.call("createSubscription", topic=topic, subscription=name, **settings)
        assert reply["code"] == 200, reply


def sizes(node: ServerProcess, topic: str) -> dict[str, tuple[int, int, int]]:
    """(waiting, ready, consuming) of each subscription, the default one included."""
    reply = node.call("listSubscriptions", topic=topic)
    assert reply["code"] == 200, reply
    return {s["subscription"]: (s["waitingQueueSize"], s["readyQueueSize"], s["ackQueueSize"])
            for s in reply["data"]}


def assert_each_once_never_early(ledger: Ledger, expected: set[str]) -> None:
    for name in SUBSCRIPTIONS:
        with ledger.lock:
            got = list(ledger.deliveries[name])
        counts = Counter(msg_id for msg_id, *_ in got)
        assert set(counts) == expected, (name, sorted(expected - set(counts))[:5],
                                         sorted(set(counts) - expected)[:5])
        assert [m for m, n in counts.items() if n > 1] == [], name     # exactly once
        assert [d for d in got if d[2] < d[3]] == [], name               # never early


def test_three_subscriptions_on_two_nodes_each_get_every_message_once_and_ack_on_their_own(
        redis_url):
    topic = "subs-fleet"
    rng = random.Random(5)
    ids = [f"m{i:03d}" for i in range(MESSAGES)]

    def keep(subscription: str, msg_id: str) -> bool:
        """In "search", the odd messages stay unacked (consuming until the test ends)."""
        return subscription == "search" and int(msg_id[1:]) % 2 == 1

    ledger = Ledger()
    with two_nodes(redis_url) as (a, b):
        # A long ack timeout: every delivery here is a first one, none comes again.
        create_subscriptions(a, topic, ackTimeoutMillis=60_000)
        consumers = Consumers(topic, [a, b], ledger, keep)
        due = int(now_ms()) + 500
        try:
            for start in range(0, MESSAGES, 100):
                node = (a, b)[start // 100 % 2]
                reply = requests.post(node.url + API + "sendMsgBatch", timeout=30, json={
                    "topic": topic, "msgs": [
                        {"msgId": msg_id, "msg": f"body {msg_id}",
                         "triggerTime": due + rng.randrange(1000)}
                        for msg_id in ids[start:start + 100]]}).json()
                assert [r["code"] for r in reply["results"]] == [200] * 100, reply
            wait_until(lambda: all(ledger.delivered(n) >= set(ids) for n in SUBSCRIPTIONS)
                       and sum(len(ledger.acked[n]) for n in SUBSCRIPTIONS)
                       >= 2.5 * MESSAGES, DEADLINE_S, interval_s=0.1,
                       message=lambda: f"not all delivered and acked: {ledger.progress()}")
            time.sleep(1.0)     # a duplicate delivery would show up meanwhile
        finally:
            consumers.stop()
        assert ledger.errors == []
        assert_each_once_never_early(ledger, set(ids))
        assert {n: sorted(ledger.acked[n]) for n in SUBSCRIPTIONS} == {
            "billing": ids, "audit": ids, "search": ids[::2]}

        # Each subscription's own state: acked where acked, consuming where kept; the
        # default subscription, which nobody pulled, still holds every message ready.
        def state(i: int) -> tuple | None:
            """None if message i is as expected everywhere, else what getMsg showed."""
            msg_id, node, seen = ids[i], (a, b)[i % 2], {}
            for name in (None, *SUBSCRIPTIONS):
                reply = node.call("getMsg", topic=topic, msgId=msg_id,
                                  **({"subscription": name} if name else {}))
                assert reply["code"] == 200, reply
                seen[name] = (reply["delayMsg"]["status"], reply["delayMsg"]["retry"])
                if name is None:        # the message as a whole: each subscription's state
                    whole = {n: (s["status"], s["retry"])
                             for n, s in reply["delayMsg"].get("subscriptions", {}).items()}
            search = (3, 1) if keep("search", msg_id) else (4, 1)
            expected = {None: (2, 0), "billing": (4, 1), "audit": (4, 1), "search": search}
            if seen == expected and whole == {n: expected[n] for n in SUBSCRIPTIONS}:
                return None
            return msg_id, seen, whole

        with ThreadPoolExecutor(8) as pool:
            wrong = [found for found in pool.map(state, range(MESSAGES)) if found]
        assert wrong == [], wrong[:3]
        assert sizes(b, topic) == {"default": (0, MESSAGES, 0), "billing": (0, 0, 0),
                                   "audit": (0, 0, 0), "search": (0, 0, MESSAGES // 2)}


def kill_node(node: ServerProcess) -> None:
    """kill -9 of the node's process group: its gunicorn master and every worker at once."""
    os.killpg(node.process.pid, signal.SIGKILL)
    node.process.wait()


def test_kill_9_of_a_node_mid_load_every_subscription_still_gets_every_acked_send(redis_url):
    topic = "subs-fleet-kill"
    ack_timeout_ms = 2000
    settings = {"ack-timeout-millis": ack_timeout_ms, "lease-ttl-millis": 2000}
    ledger = Ledger()
    sent: dict[str, int] = {}                   # sends answered 200: msgId -> triggerTime
    unknown: list[str] = []                     # no answer (the killed node's)
    with two_nodes(redis_url, settings) as (a, b):
        create_subscriptions(b, topic)
        # Some work before each ack: the dying node has deliveries in hand, unacked.
        consumers = Consumers(topic, [a, b], ledger, work_s=0.05)
        killed = threading.Event()

        def produce(index: int) -> None:
            """Half the messages, one sendMsg each, alternating nodes; never retried (a
            send without an answer is unknown: it may or may not have been accepted)."""
            session, rng = requests.Session(), random.Random(index)
            for i in range(index, MESSAGES, 2):
                node, msg_id = (a, b)[i % 2], f"k{i:03d}"
                if killed.is_set():
                    node = b
                try:
                    reply = session.post(node.url + API + "sendMsg", timeout=10, data={
                        "topic": topic, "msgId": msg_id, "msg": "x",
                        "delayMillis": rng.randrange(1500)}).json()
                except requests.RequestException:
                    unknown.append(msg_id)
                    session = requests.Session()
                    continue
                assert reply["code"] == 200, reply
                sent[msg_id] = reply["delayMsg"]["triggerTime"]

        producers = [threading.Thread(target=produce, args=(k,), daemon=True) for k in (0, 1)]
        try:
            for thread in producers:
                thread.start()
            # Mid-load: sends, long polls and acks in flight on both nodes, some messages
            # handed out by the node about to die and not yet acked.
            wait_until(lambda: len(sent) >= MESSAGES // 3, DEADLINE_S, interval_s=0.02)
            kill_node(a)
            killed.set()
            for thread in producers:
                thread.join(DEADLINE_S)
            # Every send answered 200 delivered in every subscription, and nothing live left
            # in any: every message ended in each (acked; an ack whose answer the kill took
            # may have acted), the unknown sends that were accepted too.
            wait_until(lambda: all(ledger.delivered(n) >= set(sent) for n in SUBSCRIPTIONS)
                       and all(s == (0, 0, 0) for n, s in sizes(b, topic).items()
                               if n != "default"),
                       DEADLINE_S, interval_s=0.2,
                       message=lambda: f"not all delivered and ended in every subscription: "
                       f"{ledger.progress()} of {len(sent)}, sizes {sizes(b, topic)}")
        finally:
            consumers.stop()
        assert len(sent) + len(unknown) == MESSAGES
        assert len(sent) > MESSAGES // 2, f"too few sends answered 200: {len(sent)}"
        redelivered = {}
        for name in SUBSCRIPTIONS:
            with ledger.lock:
                got, acked = list(ledger.deliveries[name]), dict(ledger.acked[name])
            assert set(sent) <= {d[0] for d in got}, name
            assert [d for d in got if d[2] < d[3]] == [], name                 # never early
            # Nothing comes again in a subscription after its own ack there answered.
            again = [d for d in got if d[0] in acked and d[1] > acked[d[0]]]
            assert again == [], (name, again[:3])
            assert {d[0] for d in got} <= set(sent) | set(unknown), name
            redelivered[name] = len(got) - len({d[0] for d in got})
        assert sum(redelivered.values()) > 0, "the kill took no delivery in hand: untested"
        print(f"\nkill -9 of a node: {len(sent)} sent, {len(unknown)} unknown, redelivered "
              f"{redelivered}, client errors {len(ledger.errors)}")
