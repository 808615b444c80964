"""Consumer (client.listen) against a live node: ack, nack, redelivery, back-pressure, stop."""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

import pytest
from redis_support import RedisServer
from server_process import ServerProcess

from delayqueue.client import Backoff, DelayMsg, DelayQueueClient, Status
from sdk_helpers import FAST_STOP, node, redis_db_url, topic  # noqa: F401


def wait_until(predicate: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


class CountingClient(DelayQueueClient):
    """Counts pull attempts, to tell back-off from a hot loop."""

    polls = 0

    def long_poll(self, *args, **kwargs):  # type: ignore[override]
        self.polls += 1
        return super().long_poll(*args, **kwargs)


@pytest.fixture
def client(node):
    with DelayQueueClient(node.url, timeout=5) as c:
        yield c


FAST = {"poll_timeout_ms": 500, "backoff_base_s": 0.05, "backoff_max_s": 0.4, "grace_s": 5}


def test_handler_returning_true_acks_every_message(client, topic):
    ids = {client.send(topic, f"m{i}").msg_id for i in range(5)}
    seen: list[str] = []
    with client.listen(topic, lambda m: seen.append(m.msg_id) or True, consume_threads=2,
                       batch=2, **FAST) as consumer:
        assert wait_until(lambda: consumer.acked == 5)
    assert sorted(seen) == sorted(ids)
    assert {client.get(topic, i).status for i in ids} == {Status.ACKED}


def test_handler_returning_false_nacks_and_the_message_is_redelivered_at_once(client, topic):
    sent = client.send(topic, "x")
    retries: list[int] = []

    def handler(m: DelayMsg) -> bool:
        retries.append(m.retry)
        return len(retries) > 1

    start = time.monotonic()
    with client.listen(topic, handler, ack_timeout_ms=30_000, **FAST) as consumer:
        assert wait_until(lambda: consumer.acked == 1)
    assert retries == [1, 2]
    assert time.monotonic() - start < 10  # redelivered by the nack, not the 30 s ack timeout
    assert client.get(topic, sent.msg_id).status is Status.ACKED


def test_handler_exception_nacks_and_logs_the_exception(client, topic, caplog):
    client.send(topic, "x")
    calls: list[int] = []

    def handler(m: DelayMsg) -> bool:
        calls.append(m.retry)
        if len(calls) == 1:
            raise RuntimeError("boom in handler")
        return True

    with caplog.at_level(logging.ERROR, logger="delayqueue.client"):
        with client.listen(topic, handler, **FAST) as consumer:
            assert wait_until(lambda: consumer.acked == 1)
    assert calls == [1, 2] and consumer.nacked == 1
    assert any(r.exc_info and "boom in handler" in str(r.exc_info[1]) for r in caplog.records)


def test_max_retry_bounds_the_deliveries_and_ends_the_message(client, topic):
    sent = client.send(topic, "x", max_retry=1)
    deliveries: list[int] = []
    with client.listen(topic, lambda m: deliveries.append(m.retry) or False, **FAST):
        assert wait_until(
            lambda: client.get(topic, sent.msg_id).status is Status.RETRY_EXHAUSTED)
        time.sleep(0.3)  # a third delivery would show up here
    assert deliveries == [1, 2]


def test_pulls_no_more_than_the_idle_consume_threads(client, topic):
    for i in range(10):
        client.send(topic, f"m{i}")
    release = threading.Event()
    started: list[str] = []

    def handler(m: DelayMsg) -> bool:
        started.append(m.msg_id)
        return release.wait(10)

    with client.listen(topic, handler, pull_threads=2, consume_threads=3, batch=10, **FAST):
        assert wait_until(lambda: len(started) == 3)
        time.sleep(0.5)  # room for an over-eager pull to happen
        info = client.topic_info(topic)
        assert (info.ack_queue_size, info.ready_queue_size) == (3, 7)
        release.set()
        assert wait_until(lambda: client.topic_info(topic).ack_queue_size == 0
                          and client.topic_info(topic).ready_queue_size == 0)


def test_stop_mid_load_leaves_only_handled_messages_off_the_ready_queue(client, topic):
    ids = [client.send(topic, f"m{i}").msg_id for i in range(30)]
    handled: list[str] = []
    lock = threading.Lock()

    def handler(m: DelayMsg) -> bool:
        time.sleep(0.15)
        with lock:
            handled.append(m.msg_id)
        return True

    consumer = client.listen(topic, handler, pull_threads=2, consume_threads=3, batch=5,
                             ack_timeout_ms=60_000, **FAST)
    try:
        assert wait_until(lambda: len(handled) >= 4)
    finally:
        consumer.stop()
    statuses = {i: client.get(topic, i).status for i in ids}
    assert {i for i, s in statuses.items() if s is Status.ACKED} == set(handled)
    assert {s for i, s in statuses.items() if i not in handled} == {Status.READY}
    assert 4 <= len(handled) < 30


def test_stop_nacks_what_a_poll_in_flight_brings_back(client, topic):
    consumer = client.listen(topic, lambda m: True, ack_timeout_ms=60_000,
                             **{**FAST, "poll_timeout_ms": 2_000})
    time.sleep(0.3)  # the pull thread is now holding a long poll
    sent = client.send(topic, "arrives during stop", delay_ms=300)
    consumer.stop()
    got = client.get(topic, sent.msg_id)
    assert got.status is Status.READY and got.retry == 1
    assert consumer.acked == 0 and consumer.nacked == 1


def test_stop_lets_a_running_handler_finish_within_the_grace_period(client, topic):
    sent = client.send(topic, "slow")
    running = threading.Event()

    def handler(m: DelayMsg) -> bool:
        running.set()
        time.sleep(0.6)
        return True

    consumer = client.listen(topic, handler, **FAST)
    assert running.wait(5)
    consumer.stop(grace_s=5)
    assert client.get(topic, sent.msg_id).status is Status.ACKED


def test_limit_takes_that_many_messages_and_then_finishes(client, topic):
    ids = [client.send(topic, f"m{i}").msg_id for i in range(5)]
    with client.listen(topic, lambda m: True, consume_threads=2, batch=5, limit=3,
                       **FAST) as consumer:
        assert consumer.wait(10)
    assert [client.get(topic, i).status for i in ids].count(Status.ACKED) == 3
    assert client.topic_info(topic).ready_queue_size == 2


def test_consumer_backs_off_while_the_server_is_down_and_recovers(redis_db_url, topic):
    node = ServerProcess(redis_db_url, settings=FAST_STOP).start()
    handled: list[str] = []
    try:
        with CountingClient(node.url, connect_timeout=0.5) as c:
            with c.listen(topic, lambda m: handled.append(m.msg) or True, **FAST):
                time.sleep(0.2)
                node.stop()
                before = c.polls
                time.sleep(2.0)
                failed_polls = c.polls - before
                # Back-off from 50 ms doubling to 400 ms: about 8 attempts; a hot loop, 100s.
                assert 3 <= failed_polls <= 15
                node = ServerProcess(redis_db_url, settings=FAST_STOP, port=node.port).start()
                c.send(topic, "after restart")
                assert wait_until(lambda: handled == ["after restart"], 10)
    finally:
        node.stop()


def test_consumer_backs_off_during_a_redis_outage_and_recovers(tmp_path, topic):
    store = RedisServer(tmp_path).start()
    handled: list[str] = []
    try:
        with ServerProcess(store.url, settings=FAST_STOP) as dq_node, \
                CountingClient(dq_node.url) as c:
            with c.listen(topic, lambda m: handled.append(m.msg) or True, **FAST):
                time.sleep(0.2)
                store.stop()
                before = c.polls
                time.sleep(2.0)
                failed_polls = c.polls - before  # each answered code 500 at once
                assert 3 <= failed_polls <= 15
                store.start()
                assert wait_until(lambda: _try_send(c, topic, "after outage"), 10)
                assert wait_until(lambda: handled == ["after outage"], 10)
    finally:
        store.stop()


def _try_send(c: DelayQueueClient, topic: str, body: str) -> bool:
    try:
        c.send(topic, body, msg_id="after-outage")
    except Exception:  # noqa: BLE001 - the node may need a moment to reconnect
        return False
    return True


def test_backoff_doubles_up_to_its_cap_with_jitter_in_the_upper_half():
    low = Backoff(0.1, 1.0, rand=lambda: 0.0)
    assert [round(low.next(), 3) for _ in range(6)] == [0.05, 0.1, 0.2, 0.4, 0.5, 0.5]
    high = Backoff(0.1, 1.0, rand=lambda: 1.0)
    assert [round(high.next(), 3) for _ in range(3)] == [0.1, 0.2, 0.4]
    high.reset()
    assert high.next() == pytest.approx(0.1)
