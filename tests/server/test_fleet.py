"""Two nodes on one Redis, kill -9 of workers, lease takeover and a Redis outage.

Every node here is a real gunicorn master (the deployed command) with gevent workers.
"""

from __future__ import annotations

import random
import threading
import time
from collections import defaultdict

import pytest
import redis
import requests

from support import wait_until
from support.fleet import (
    Ledger,
    consume,
    hold_long_poll,
    now_ms,
    produce,
    start_threads,
    wait_until_held,
)
from support.node import ServerProcess
from support.redis_server import RedisServer

pytestmark = pytest.mark.timeout(120)

TOPICS = ["fleet-a", "fleet-b", "fleet-c", "fleet-d"]


def make_plan(count: int, max_delay_ms: int, seed: int) -> list[tuple[str, str, int]]:
    rng = random.Random(seed)
    return [(TOPICS[i % len(TOPICS)], f"m{i:05d}", rng.randint(0, max_delay_ms))
            for i in range(count)]


def run_load(nodes: list[ServerProcess], plan, ledger: Ledger, *, ack_timeout_ms: int,
             deadline_s: float, during=None, drain_s: float = 1.5,
             forget_first: int = 0, forgotten: list[str] | None = None) -> None:
    """Producers and long-polling consumers on every node until all accepted are delivered.

    With ``forget_first``, one consumer per node and topic never acks the first that many
    messages it gets (their ids go to ``forgotten``): they are redelivered after their ack
    timeout.
    """
    bases = [n.url for n in nodes]
    stop = threading.Event()
    consumers = start_threads([
        (consume, (base, topic, ledger, stop),
         {"ack_timeout_ms": ack_timeout_ms,
          "forget_first": forget_first if copy == 0 else 0, "forgotten": forgotten})
        for base in bases for topic in TOPICS for copy in range(2)
    ])
    started = time.monotonic()
    end = started + deadline_s
    producers = start_threads([(produce, (bases, plan[k::6], ledger, end), {})
                               for k in range(6)])
    if during is not None:
        during()
    for thread in producers:
        thread.join(max(0.0, end - time.monotonic()))

    def all_delivered() -> bool:
        with ledger.lock:
            missing = set(ledger.accepted) - set(ledger.deliveries)
        return not missing and not any(t.is_alive() for t in producers)

    try:
        wait_until(all_delivered, max(0.0, end - time.monotonic()), interval_s=0.1)
    except AssertionError:
        pass  # the caller's assertions say what was lost
    # Keep consuming a little longer so a duplicate delivery would show up.
    time.sleep(drain_s)
    stop.set()
    for thread in consumers:
        thread.join(15)


def queue_sizes(node: ServerProcess) -> dict[str, tuple[int, int, int]]:
    sizes = {}
    for topic in TOPICS:
        info = node.call("getTopicInfo", topic=topic)["data"]
        sizes[topic] = (info["waitingQueueSize"], info["readyQueueSize"], info["ackQueueSize"])
    return sizes


def queues_empty(node: ServerProcess) -> bool:
    return set(queue_sizes(node).values()) == {(0, 0, 0)}


def assert_queues_empty(node: ServerProcess) -> None:
    sizes = queue_sizes(node)
    assert set(sizes.values()) == {(0, 0, 0)}, sizes


def test_two_nodes_deliver_every_message_once_and_never_early(redis_url):
    plan = make_plan(2000, 3000, seed=1)
    ledger = Ledger()
    with ServerProcess(redis_url, workers=2) as a, ServerProcess(redis_url, workers=2) as b:
        run_load([a, b], plan, ledger, ack_timeout_ms=60_000, deadline_s=60)
        assert len(ledger.accepted) == len(plan), ledger.errors[:5]
        missing = set(ledger.accepted) - set(ledger.deliveries)
        assert not missing, f"{len(missing)} lost, e.g. {sorted(missing)[:5]}"
        twice = {m: t for m, t in ledger.deliveries.items() if len(t) > 1}
        assert not twice, f"{len(twice)} delivered twice, e.g. {list(twice.items())[:3]}"
        assert not ledger.early, f"{len(ledger.early)} early, e.g. {ledger.early[:3]}"
        assert not ledger.errors, ledger.errors[:5]
        assert_queues_empty(a)


def test_kill_9_of_workers_mid_load_loses_nothing_and_redelivers_only_after_ack_timeout(
        redis_url):
    ack_timeout_ms = 2000
    plan = make_plan(1200, 2000, seed=2)
    ledger = Ledger()
    settings = {"lease-ttl-millis": 2000}
    forgotten: list[str] = []
    with ServerProcess(redis_url, workers=2, settings=settings) as a, \
            ServerProcess(redis_url, workers=2, settings=settings) as b:
        killed = []

        def killer() -> None:
            # Mid-load: while sends, long polls and acks are in flight on both nodes.
            for node in (a, b, a):
                time.sleep(0.8)
                killed.append(node.kill_worker())

        # Besides the deliveries the kills lose, one consumer per node and topic forgets to
        # ack its first message: redeliveries that are certain to happen, to be timed below.
        run_load([a, b], plan, ledger, ack_timeout_ms=ack_timeout_ms, deadline_s=60,
                 during=killer, drain_s=ack_timeout_ms / 1000 + 1.5,
                 forget_first=1, forgotten=forgotten)
        assert len(killed) == 3
        assert len(ledger.accepted) == len(plan), ledger.errors[:5]
        missing = set(ledger.accepted) - set(ledger.deliveries)
        assert not missing, f"{len(missing)} lost, e.g. {sorted(missing)[:5]}"
        assert not ledger.early, ledger.early[:3]
        # A redelivery comes only after the earlier delivery's ack deadline. The earlier
        # receive stamp is at most a response's transit later than the server's pull, so
        # allow that much (generous on a loaded 2-core box).
        tolerance_ms = 300
        too_soon = []
        compared = 0
        for (msg_id, produced), times in ledger.copies.items():
            for first, second in zip(times, times[1:]):
                compared += 1
                if second - first < ack_timeout_ms - tolerance_ms:
                    too_soon.append((msg_id, produced, round(second - first)))
        # A second copy of a msgId exists only where a send was retried after a broken
        # connection and the first copy had already ended (then a re-send replaces it).
        copies_per_id = defaultdict(int)
        for msg_id, _ in ledger.copies:
            copies_per_id[msg_id] += 1
        unexplained = [m for m, n in copies_per_id.items() if n > 1 and m not in ledger.resent]
        assert not unexplained, f"second copies without a re-send: {unexplained[:5]}"
        redelivered = sum(1 for t in ledger.deliveries.values() if len(t) > 1)
        print(f"\nkill -9 x3: {len(ledger.accepted)} accepted, {redelivered} redelivered, "
              f"{len(ledger.errors)} client errors")
        assert not too_soon, f"redelivered before the ack timeout: {too_soon[:5]}"
        # The check above compared real redeliveries: at least every forgotten message's.
        assert len(forgotten) == 2 * len(TOPICS), forgotten
        not_redelivered = [m for m in forgotten if len(ledger.deliveries[m]) < 2]
        assert not not_redelivered, f"never redelivered after a missing ack: {not_redelivered}"
        assert compared >= len(forgotten), compared
        # Everything was eventually acked: nothing left in any queue.
        wait_until(lambda: queues_empty(a), 10, interval_s=0.2,
                   message=lambda: f"queues not empty: {queue_sizes(a)}")


def lease_token(client: redis.Redis) -> tuple[str, str | None]:
    keys = client.keys("*:lease:schedule")
    assert len(keys) == 1, keys
    return keys[0], client.get(keys[0])


def test_schedule_lease_is_taken_over_after_kill_9_and_promotes_without_consumers(
        redis_url, redis_client):
    ttl_ms = 2000
    with ServerProcess(redis_url, workers=2, settings={"lease-ttl-millis": ttl_ms}) as node:
        wait_until(lambda: redis_client.keys("*:lease:schedule"), 10, interval_s=0.05,
                   message="no worker took the schedule lease")
        key, old_token = lease_token(redis_client)
        sent = [node.call("sendMsg", topic="lease", msgId=f"l{i}", msg="x", delayMillis=400)
                ["delayMsg"] for i in range(10)]
        for worker in node.workers():  # every worker: the holder dies, whichever it is
            worker.kill()
        killed_at = now_ms()
        due = max(m["triggerTime"] for m in sent)
        # The dead holder's lease lingers until its TTL: nobody may promote before that...
        # ...but within TTL + a retry + a worker boot on a loaded box, a new one must.
        limit = max(due, killed_at + ttl_ms) + 4000
        pending = {m["msgId"] for m in sent}

        def all_promoted() -> bool:
            for msg_id in sorted(pending):
                status = node.call("getMsg", topic="lease", msgId=msg_id)["delayMsg"]["status"]
                assert status in (1, 2), status
                if status == 2:
                    pending.discard(msg_id)
            return not pending

        wait_until(all_promoted, max(0.0, (limit - now_ms()) / 1000), interval_s=0.05,
                   message=lambda: f"not promoted {now_ms() - due:.0f} ms after due: {pending}")
        promoted_at = now_ms()
        _, new_token = lease_token(redis_client)
        assert new_token and new_token != old_token, "the lease was not taken over"
        print(f"\npromoted {promoted_at - due:.0f} ms after due, "
              f"{promoted_at - killed_at:.0f} ms after kill -9 (lease ttl {ttl_ms} ms)")


ENDPOINTS = {
    "sendMsg": {"topic": "o", "msg": "x", "delayMillis": 0},
    "pullMsg": {"topic": "o"},
    "longPollingMsg": {"topic": "o", "longPollingTimeoutMillis": 1000},
    "ackMsg": {"topic": "o", "msgId": "m"},
    "getMsg": {"topic": "o", "msgId": "m"},
    "deleteMsg": {"topic": "o", "msgId": "m"},
    "getMonitorData": {},
    "getTopicInfo": {"topic": "o"},
    "getTopicInfoList": {},
}


def held_long_poll_latency(node: ServerProcess, topic: str, sender: ServerProcess) -> float:
    """Hold a long poll on a new topic, send a ready-now message via ``sender``; ms until it
    is answered."""
    thread, result = hold_long_poll(node, topic, 8000)
    wait_until_held(node.redis_url, topic, thread, result)
    sent_at = now_ms()
    assert sender.call("sendMsg", topic=topic, msg="wake", delayMillis=0)["code"] == 200
    thread.join(15)
    answer = result["answer"]
    assert answer.get("code") == 200 and len(answer["delayMsgList"]) == 1, answer
    return result["at"] - sent_at


def test_redis_outage_answers_500_and_the_node_recovers_by_itself(tmp_path):
    store = RedisServer(tmp_path).start()
    # Safety re-checks every 5 s: a wake-up well under that came from pub/sub.
    settings = {"long-polling-safety-millis": 5000, "redis-socket-timeout-millis": 1000}
    try:
        with ServerProcess(store.url, workers=2, settings=settings) as node:
            assert node.call("sendMsg", topic="o", msg="before", delayMillis=0)["code"] == 200
            store.stop()
            for endpoint, params in ENDPOINTS.items():
                started = time.monotonic()
                answer = node.call(endpoint, timeout=5, **params)
                elapsed = time.monotonic() - started
                assert answer["code"] == 500, (endpoint, answer)
                assert "Traceback" not in (answer.get("msg") or ""), answer
                assert elapsed < 5, (endpoint, elapsed)
            health = requests.get(node.url + "/camellia/health/status", timeout=5)
            assert (health.status_code, health.json()) == (500, {"code": 500})

            store.start()  # same port, empty: no scripts loaded, no keys
            restarted = time.monotonic()

            def sent_after_restart() -> bool:
                try:
                    answer = node.call("sendMsg", timeout=5, topic="r", msg="after",
                                       delayMillis=0)
                except requests.RequestException:
                    return False
                return answer["code"] == 200

            wait_until(sent_after_restart, 15, interval_s=0.2,
                       message="sendMsg did not recover")
            recovered_s = time.monotonic() - restarted
            assert requests.get(node.url + "/camellia/health/status",
                                timeout=5).status_code == 200
            pulled = node.call("pullMsg", topic="r")
            assert pulled["code"] == 200 and len(pulled["delayMsgList"]) == 1, pulled
            assert node.call("sendMsg", topic="r", msg="lp", delayMillis=300)["code"] == 200
            polled = node.call("longPollingMsg", topic="r", longPollingTimeoutMillis=5000)
            assert polled["code"] == 200 and len(polled["delayMsgList"]) == 1, polled
            # The scheduler is back too (its lease vanished with the old Redis): a message
            # nobody pulls is promoted on time.
            due = node.call("sendMsg", topic="r2", msg="s", delayMillis=300)["delayMsg"]
            wait_until(lambda: node.call("getMsg", topic="r2", msgId=due["msgId"])
                       ["delayMsg"]["status"] == 2, 5, interval_s=0.05,
                       message="scheduler did not recover")

            # Hints again: every worker's subscriber must be back (the subscriber backs off
            # up to 5 s, so allow a few attempts). Send through a second node so the wake-up
            # needs pub/sub whichever worker holds the poll.
            with ServerProcess(store.url, workers=1, settings=settings) as other:
                latencies = []
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:
                    topic = f"hint-{len(latencies)}"
                    latencies.append(held_long_poll_latency(node, topic, other))
                    if len(latencies) >= 4 and all(ln < 1000 for ln in latencies[-4:]):
                        break
                print(f"\nrecovered after {recovered_s:.1f}s; hint wake-ups (ms): "
                      f"{[round(ln) for ln in latencies]}")
                assert len(latencies) >= 4 and all(ln < 1000 for ln in latencies[-4:]), \
                    f"long polls not woken by pub/sub after the restart: {latencies}"
    finally:
        store.stop()
