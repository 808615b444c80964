"""Push delivery across a fleet: two real nodes (gunicorn, one gevent worker each) on one Redis
POST to a local receiver (tests/support/receiver.py). Push is set up through the core in the
test process (same Redis, same namespace), messages are sent through a node's HTTP API.

- pushConcurrency is the fleet's: with two nodes pushing, the receiver never has more POSTs
  in flight than the subscription's pushConcurrency, and every message is acked once.
- kill -9 of the node whose POST the receiver holds: after the ack deadline the other node
  pushes the message again and it is acked; nothing is lost.
- SIGTERM of that node: a POST answered within the grace is acked (one delivery in all); one
  that cannot be answered in time is given back and the other node pushes it long before the
  ack deadline.

The receiver tells which node made a POST by its source port (psutil: whose socket it is).
"""

from __future__ import annotations

import os
import signal
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import psutil
import pytest
import redis

from delayqueue.background.runtime import Runtime
from delayqueue.core.status import Status
from delayqueue.settings.config import load_settings

from support import wait_until
from support.node import ServerProcess
from support.receiver import Answer, Receiver

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

NODE_SETTINGS = {"push-allowed-networks": "127.0.0.0/8", "lease-ttl-millis": 2000,
                 "graceful-timeout-seconds": 4}     # push POSTs get half of it: 2 s


@contextmanager
def fleet(redis_url: str, count: int = 2):
    nodes = [ServerProcess(redis_url, settings=NODE_SETTINGS) for _ in range(count)]
    try:
        with ThreadPoolExecutor(count) as pool:
            list(pool.map(lambda node: node.start(), nodes))
        yield nodes
    finally:
        with ThreadPoolExecutor(count) as pool:
            list(pool.map(lambda node: node.stop(), nodes))


@pytest.fixture
def setup(redis_url):
    """A Runtime of the test process (never started): the core API on the nodes' Redis."""
    settings = load_settings(overrides={"redis_url": redis_url, "snapshot_dir": "",
                                        "push_allowed_networks": "127.0.0.0/8"})
    return Runtime(settings, client=redis.Redis.from_url(redis_url, decode_responses=True))


@pytest.fixture
def receiver():
    with Receiver() as r:
        yield r


def send(node: ServerProcess, topic: str, msg_id: str, **params) -> dict:
    answer = node.call("sendMsg", topic=topic, msgId=msg_id, msg=f"body-{msg_id}", **params)
    assert answer["code"] == 200, answer
    return answer["delayMsg"]


def node_of(request, nodes: list[ServerProcess]) -> ServerProcess | None:
    """The node whose process owns the socket the request came from (None: closed since)."""
    return source_ports(nodes).get(request.client[1])


def source_ports(nodes: list[ServerProcess]) -> dict[int, ServerProcess]:
    """Every local TCP port of the nodes' processes, and whose it is."""
    owners: dict[int, ServerProcess] = {}
    for node in nodes:
        try:
            root = psutil.Process(node.process.pid)
            processes = [root, *root.children(recursive=True)]
        except psutil.Error:
            continue
        for process in processes:
            try:
                owners.update((c.laddr.port, node) for c in process.net_connections("tcp")
                              if c.laddr)
            except psutil.Error:
                continue
    return owners


def status_of(rt: Runtime, topic: str, msg_id: str) -> int:
    return int(rt.queue.get(topic, msg_id).status)


def wait_acked(rt: Runtime, topic: str, msg_ids, timeout_s: float = 30) -> None:
    msg_ids = list(msg_ids)

    def statuses() -> list[int]:
        return [status_of(rt, topic, m) for m in msg_ids]

    wait_until(lambda: statuses() == [Status.ACKED] * len(msg_ids), timeout_s, interval_s=0.05,
               message=lambda: f"statuses {statuses()}")


def posts_per_msg(receiver: Receiver, path: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for request in receiver.requests(path):
        msg_id = request.json["delayMsg"]["msgId"]
        counts[msg_id] = counts.get(msg_id, 0) + 1
    return counts


def refuses_connections(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
    except OSError:
        return True
    return False


# -- 5. pushConcurrency across the fleet ----------------------------------------------

def test_push_concurrency_is_never_exceeded_by_two_nodes(redis_url, setup, receiver):
    topic, path, count = "fleet-capped", "/capped", 40
    receiver.script(path, then=Answer(sleep_s=0.2))
    with fleet(redis_url) as nodes:
        setup.subscriptions.set_config(topic, None, {"pushUrl": receiver.url(path),
                                                     "pushConcurrency": 3})
        sent = {f"m{n}": send(nodes[n % 2], topic, f"m{n}") for n in range(count)}
        requests = receiver.wait_for(count, path, timeout_s=40)
        wait_acked(setup, topic, sent)
        owners = source_ports(nodes)
        per_node = [sum(owners.get(r.client[1]) is node for r in requests) for node in nodes]
    assert posts_per_msg(receiver, path) == {m: 1 for m in sent}
    # Never more than pushConcurrency at once; and the cap was reached (40 ready at once).
    assert receiver.max_in_flight(path) == 3, \
        f"{receiver.max_in_flight(path)} in flight at most; POSTs per node {per_node}"
    early = [r for r in requests if r.at_ms < r.json["delayMsg"]["triggerTime"]]
    assert not early


# -- 7. kill -9 mid-push ---------------------------------------------------------------

def test_a_node_killed_mid_push_leaves_the_message_to_the_other_after_its_ack_deadline(
        redis_url, setup, receiver):
    topic, path = "fleet-killed", "/killed"
    hold = threading.Event()
    receiver.script(path, Answer(hold=hold))            # the first POST is held; then 200
    setup.admin.set_config(topic, {"ackTimeoutMillis": 1000})
    # The push's ack deadline: max(ackTimeoutMillis, pushTimeoutMillis + 1 s) = 4 s.
    setup.subscriptions.set_config(topic, None, {"pushUrl": receiver.url(path),
                                                 "pushTimeoutMillis": 3000})
    try:
        with fleet(redis_url) as nodes:
            send(nodes[0], topic, "victim")
            [first] = receiver.wait_for(1, path, timeout_s=15)
            pusher = node_of(first, nodes)
            assert pusher is not None, "no node owns the held POST's connection"
            survivor = nodes[1 - nodes.index(pusher)]
            deadline = setup.queue.get(topic, "victim").ack_deadline
            assert deadline is not None
            os.killpg(pusher.process.pid, signal.SIGKILL)
            pusher.process.wait(10)
            others = [f"m{n}" for n in range(5)]
            for msg_id in others:
                send(survivor, topic, msg_id)
            wait_acked(setup, topic, ["victim", *others])
            counts = posts_per_msg(receiver, path)
            again = [r for r in receiver.requests(path)
                     if r.json["delayMsg"]["msgId"] == "victim"][1:]
    finally:
        hold.set()
    assert counts == {"victim": 2, **{m: 1 for m in others}}
    assert again[0].at_ms >= deadline, "pushed again before the dead node's ack deadline"
    assert again[0].json["delayMsg"]["retry"] == 2


# -- 8. SIGTERM mid-push ---------------------------------------------------------------

def test_sigterm_lets_a_post_answered_within_the_grace_be_acked(redis_url, setup, receiver):
    topic, path = "fleet-graceful", "/graceful"
    hold = threading.Event()
    receiver.script(path, Answer(hold=hold))
    setup.subscriptions.set_config(topic, None, {"pushUrl": receiver.url(path),
                                                 "pushTimeoutMillis": 20_000})
    try:
        with fleet(redis_url) as nodes:
            send(nodes[0], topic, "m")
            [first] = receiver.wait_for(1, path, timeout_s=15)
            pusher = node_of(first, nodes)
            assert pusher is not None, "no node owns the held POST's connection"
            os.killpg(pusher.process.pid, signal.SIGTERM)
            wait_until(lambda: refuses_connections(pusher.port), 10,
                       message="the node still accepts connections after SIGTERM")
            # Answered 1 s into the shutdown: inside the POSTs' 2 s share of the grace.
            threading.Timer(1.0, hold.set).start()
            wait_acked(setup, topic, ["m"], timeout_s=15)
            assert pusher.process.wait(15) == 0
            counts = posts_per_msg(receiver, path)
    finally:
        hold.set()
    assert first.status == 200
    assert counts == {"m": 1}                           # acked by the stopping node itself


def test_sigterm_gives_back_a_post_that_cannot_finish_and_the_other_node_pushes_it(
        redis_url, setup, receiver):
    topic, path = "fleet-given-back", "/given-back"
    hold = threading.Event()
    receiver.script(path, Answer(hold=hold))            # held until the test ends
    setup.admin.set_config(topic, {"ackTimeoutMillis": 30_000})
    setup.subscriptions.set_config(topic, None, {"pushUrl": receiver.url(path),
                                                 "pushTimeoutMillis": 20_000})
    try:
        with fleet(redis_url) as nodes:
            send(nodes[0], topic, "m")
            [first] = receiver.wait_for(1, path, timeout_s=15)
            pusher = node_of(first, nodes)
            assert pusher is not None, "no node owns the held POST's connection"
            deadline = setup.queue.get(topic, "m").ack_deadline
            os.killpg(pusher.process.pid, signal.SIGTERM)
            # Given back after the POSTs' share of the grace (2 s), pushed by the other node
            # at once: long before the 30 s ack deadline (the fallback of a lost give-back).
            first_again, second = receiver.wait_for(2, path, timeout_s=15)
            wait_acked(setup, topic, ["m"])
            counts = posts_per_msg(receiver, path)
            first_status = first.status
    finally:
        hold.set()
    assert first_again is first and first_status is None    # never answered
    assert counts == {"m": 2}
    assert second.at_ms < deadline - 10_000, (second.at_ms, deadline)
    assert second.json["delayMsg"]["retry"] == 2
