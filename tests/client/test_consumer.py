"""Consumer (client.listen) against a live node: ack, nack, redelivery, back-pressure, stop,
back-off, and the defaults camellia's listener settings imply.

Pauses are asserted as the pull loop asks for them (``Pauses`` records each wait it makes on
its stop event) and as never shorter than asked; how much longer a busy machine makes them
is lateness, not this suite's to bound."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

import pytest

from delayqueue.client import Backoff, DelayMsg, DelayQueueClient, Status
from delayqueue.client.consumer import Consumer
from delayqueue.client.errors import ServerError

from support import wait_until
from support.fleet import wait_until_pulled
from support.node import ServerProcess
from support.redis_server import RedisServer
from support.sdk import FAST_STOP, node, stop_in_background, topic  # noqa: F401 - fixtures


@dataclass
class Call:
    """One pull of a consumer: when it started and ended, and what it raised."""
    name: str
    kwargs: dict
    start: float
    end: float
    error: Exception | None


class RecordingClient(DelayQueueClient):
    """Records every pull and long poll, to tell back-off from a hot loop."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[Call] = []       # in the order they ended
        self.started: list[float] = []    # in the order they started

    def long_poll(self, topic, batch=1, timeout_ms=None, ack_timeout_ms=None):  # type: ignore[override]
        return self._record("long_poll", super().long_poll, topic, batch=batch,
                            timeout_ms=timeout_ms, ack_timeout_ms=ack_timeout_ms)

    def pull(self, topic, batch=1, ack_timeout_ms=None):  # type: ignore[override]
        return self._record("pull", super().pull, topic, batch=batch,
                            ack_timeout_ms=ack_timeout_ms)

    def _record(self, name, call, topic, **kwargs):
        start = time.monotonic()
        self.started.append(start)
        try:
            result = call(topic, **kwargs)
        except Exception as exc:
            self.calls.append(Call(name, kwargs, start, time.monotonic(), exc))
            raise
        self.calls.append(Call(name, kwargs, start, time.monotonic(), None))
        return result

    def failures_after(self, since: float) -> list[Call]:
        return [c for c in self.calls if c.error is not None and c.start >= since]


class Pauses(threading.Event):
    """A Consumer's stop event that records each pause its pull loop asks of it (the back-off
    after a failed pull, the interval after an empty short poll): the seconds asked. Nothing
    else waits on that event."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[float] = []

    def wait(self, timeout=None):
        self.asked.append(timeout)
        return super().wait(timeout)


@pytest.fixture
def pauses(monkeypatch):
    """Every consumer this test starts (listen() too) records its pauses: ``asked(consumer)``."""
    start = Consumer.start

    def recording_start(self: Consumer) -> Consumer:
        if not self._pullers:  # not yet started: no pull loop waits on the event yet
            self._stopping = Pauses()
        return start(self)

    monkeypatch.setattr(Consumer, "start", recording_start)


def asked(consumer: Consumer) -> list[float]:
    """The pauses ``consumer``'s pull loop asked for so far, in order (the ``pauses`` fixture)."""
    return list(consumer._stopping.asked)


def backoff_pauses(calls: list[Call]) -> list[tuple[int, float]]:
    """(failures in a row before it, seconds) of each pause between a failed pull and the next."""
    pauses, in_a_row = [], 0
    for before, after in zip(calls, calls[1:]):
        if before.error is None:
            in_a_row = 0
            continue
        pauses.append((in_a_row, after.start - before.end))
        in_a_row += 1
    return pauses


def assert_backs_off(calls: list[Call], asked: list[float], base_s: float, max_s: float,
                     count: int) -> None:
    """The first ``count`` pauses after failed pulls follow Backoff(base_s, max_s): the k-th
    failure in a row asked for a pause in [d/2, d], d = min(max_s, base_s * 2**k), and the
    next pull started no sooner than that (a hot loop would not pause at all). ``asked`` has
    one pause per failed pull, in order; every pause of these pull loops follows a failure."""
    pauses = backoff_pauses(calls)[:count]
    assert len(pauses) == count and len(asked) >= count, (pauses, asked)
    print(f"\nback-off pauses asked (s): {[round(a, 3) for a in asked[:count]]}, "
          f"measured: {[round(p, 3) for _, p in pauses]}")
    for (k, pause), want in zip(pauses, asked):
        ceiling = min(max_s, base_s * 2 ** k)
        assert ceiling / 2 <= want <= ceiling, (k, want, asked)
        assert pause >= want - TIMER_S, (k, pause, want)


# A timed wait may end this much before its time by the clocks' rounding.
TIMER_S = 0.002


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
        wait_until(lambda: consumer.acked == 5, 10)
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
        wait_until(lambda: consumer.acked == 1, 10)
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
            wait_until(lambda: consumer.acked == 1, 10)
    assert calls == [1, 2] and consumer.nacked == 1
    assert any(r.exc_info and "boom in handler" in str(r.exc_info[1]) for r in caplog.records)


def test_max_retry_bounds_the_deliveries_and_ends_the_message(client, topic):
    sent = client.send(topic, "x", max_retry=1)
    deliveries: list[int] = []
    with client.listen(topic, lambda m: deliveries.append(m.retry) or False,
                       **FAST) as consumer:
        wait_until(lambda: client.get(topic, sent.msg_id).status is Status.RETRY_EXHAUSTED, 10)
        # Both deliveries were settled (nacked): the consumer holds nothing of it any more.
        wait_until(lambda: consumer.nacked == 2, 10, message=lambda: f"{consumer.nacked} nacks")
    assert deliveries == [1, 2]


class ParkCountingCondition(threading.Condition):
    """A Condition that counts the threads waiting on it (``wait`` runs with the lock held)."""

    def __init__(self) -> None:
        super().__init__()
        self.parked = 0

    def wait(self, timeout=None):
        self.parked += 1
        try:
            return super().wait(timeout)
        finally:
            self.parked -= 1


def test_pulls_no_more_than_the_idle_consume_threads(client, topic):
    for i in range(10):
        client.send(topic, f"m{i}")
    release = threading.Event()
    started: list[str] = []

    def handler(m: DelayMsg) -> bool:
        started.append(m.msg_id)
        return release.wait(10)

    consumer = Consumer(client, topic, handler, pull_threads=2, consume_threads=3, batch=10,
                        **FAST)
    consumer._cond = ParkCountingCondition()  # the pull threads wait on it for idle threads
    with consumer:
        # Three handlers run and both pull threads wait for an idle consume thread: no pull
        # is in flight, so what the server hands out now is all the consumer will ever take.
        wait_until(lambda: len(started) == 3 and consumer._cond.parked == 2, 10,
                   message=lambda: f"{len(started)} started, {consumer._cond.parked} parked")
        info = client.topic_info(topic)
        assert (info.ack_queue_size, info.ready_queue_size) == (3, 7)
        release.set()
        wait_until(lambda: (client.topic_info(topic).ack_queue_size,
                            client.topic_info(topic).ready_queue_size) == (0, 0), 10)


def test_stop_mid_load_leaves_only_handled_messages_off_the_ready_queue(client, topic):
    ids = [client.send(topic, f"m{i}").msg_id for i in range(30)]
    started: list[str] = []
    handled: list[str] = []
    lock = threading.Lock()
    stopping = threading.Event()

    def handler(m: DelayMsg) -> bool:
        with lock:
            started.append(m.msg_id)
            later = len(started) > 4
        if later:  # from the fifth on, runs once stop() began: stopped mid-load, however slow
            stopping.wait(10)
        time.sleep(0.15)
        with lock:
            handled.append(m.msg_id)
        return True

    consumer = client.listen(topic, handler, pull_threads=2, consume_threads=3, batch=5,
                             ack_timeout_ms=60_000, **FAST)
    try:
        wait_until(lambda: len(handled) >= 4, 10)
    finally:
        stopper = stop_in_background(consumer)
        stopping.set()
        stopper.join(30)
    statuses = {i: client.get(topic, i).status for i in ids}
    assert {i for i, s in statuses.items() if s is Status.ACKED} == set(handled)
    assert {s for i, s in statuses.items() if i not in handled} == {Status.READY}
    assert 4 <= len(handled) < 30


def test_stop_nacks_what_a_poll_in_flight_brings_back(client, node, topic):
    # A hold far longer than the test: the poll is still in flight whenever the send comes.
    consumer = client.listen(topic, lambda m: True, ack_timeout_ms=60_000,
                             **{**FAST, "poll_timeout_ms": 30_000})
    wait_until_pulled(node.redis_url, topic)  # the pull thread now holds a long poll
    stopper = stop_in_background(consumer)
    sent = client.send(topic, "arrives during stop")   # wakes the poll held since before
    stopper.join(40)
    assert not stopper.is_alive()
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


def test_consumer_backs_off_while_the_server_is_down_and_recovers(redis_db_url, topic, pauses):
    node = ServerProcess(redis_db_url, settings=FAST_STOP).start()
    handled: list[str] = []
    try:
        with RecordingClient(node.url, connect_timeout=0.5) as c:
            with c.listen(topic, lambda m: handled.append(m.msg) or True, **FAST) as consumer:
                wait_until_pulled(redis_db_url, topic)  # polling the live node
                node.stop()
                stopped = time.monotonic()
                # Back-off from 50 ms doubling to 400 ms; a hot loop would not pause at all.
                wait_until(lambda: len(c.failures_after(stopped)) >= 7, 10)
                assert_backs_off(c.calls, asked(consumer), FAST["backoff_base_s"],
                                 FAST["backoff_max_s"], 6)
                node = ServerProcess(redis_db_url, settings=FAST_STOP, port=node.port).start()
                c.send(topic, "after restart")
                wait_until(lambda: handled == ["after restart"], 10)
    finally:
        node.stop()


def test_consumer_backs_off_during_a_redis_outage_and_recovers(tmp_path, topic, pauses):
    store = RedisServer(tmp_path).start()
    handled: list[str] = []
    try:
        with ServerProcess(store.url, settings=FAST_STOP) as dq_node, \
                RecordingClient(dq_node.url) as c:
            with c.listen(topic, lambda m: handled.append(m.msg) or True, **FAST) as consumer:
                wait_until_pulled(store.url, topic)  # polling the live node
                store.stop()
                stopped = time.monotonic()
                # Each poll is answered code 500 at once: only the back-off spaces them.
                wait_until(lambda: len(c.failures_after(stopped)) >= 7, 10)
                assert_backs_off(c.calls, asked(consumer), FAST["backoff_base_s"],
                                 FAST["backoff_max_s"], 6)
                store.start()
                wait_until(lambda: _try_send(c, topic, "after outage"), 10)
                wait_until(lambda: handled == ["after outage"], 10)
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


class ScriptedClient:
    """Stands in for DelayQueueClient: each long poll's outcome comes from a script (an
    exception to raise, or the messages to return); then polls are held, empty."""

    timeout = 1.0

    def __init__(self, outcomes: list) -> None:
        self.outcomes = list(outcomes)
        self.calls: list[Call] = []
        self.idle = threading.Event()

    def long_poll(self, topic, batch=1, timeout_ms=None, ack_timeout_ms=None):
        start = time.monotonic()
        if not self.outcomes:
            self.idle.wait(0.05)   # a held, empty poll
            return []
        outcome = self.outcomes.pop(0)
        error = outcome if isinstance(outcome, Exception) else None
        self.calls.append(Call("long_poll", {}, start, time.monotonic(), error))
        if error is not None:
            raise error
        return outcome


def test_back_off_starts_over_after_a_successful_pull(pauses):
    error = ServerError("redis unavailable", 500)
    scripted = ScriptedClient([error, error, [], error, error, error])
    consumer = Consumer(scripted, "t", lambda m: True, **FAST)
    with consumer:
        wait_until(lambda: not scripted.outcomes, 10)
    # 0.025-0.05 s, then 0.05-0.1 s; after the success the same again, not 0.1-0.2 s.
    assert_backs_off(scripted.calls, asked(consumer), FAST["backoff_base_s"],
                     FAST["backoff_max_s"], 4)
    assert [k for k, _ in backoff_pauses(scripted.calls)] == [0, 1, 0, 1]


# -- the defaults (camellia's listener settings; docs/client.md "Sending and consuming") -----
def test_default_back_off_after_failed_pulls_starts_at_100_ms_and_doubles(node, topic,
                                                                          pauses):
    with RecordingClient(node.url) as c:
        # A topic name the server refuses (code 400): every pull fails at once.
        consumer = c.listen("bad{" + topic, lambda m: True)
        try:
            wait_until(lambda: len(c.calls) >= 5, 10, message=lambda: f"{c.calls}")
        finally:
            consumer.stop()
    assert all(call.error is not None for call in c.calls), c.calls
    assert_backs_off(c.calls, asked(consumer), 0.1, 10.0, 4)  # ceilings 0.1, 0.2, 0.4, 0.8 s


def test_default_long_poll_holds_3_s_and_an_empty_one_is_followed_at_once(client, node,
                                                                         topic, pauses):
    with RecordingClient(node.url) as c:
        consumer = c.listen(topic, lambda m: True, limit=1)
        try:
            wait_until(lambda: len(c.started) >= 2, 10, message=lambda: f"{c.calls}")
            client.send(topic, "ends the second poll")     # and, with limit=1, the consumer
            assert consumer.wait(10)
        finally:
            consumer.stop()
    first = c.calls[0]
    print(f"\nempty long poll held {first.end - first.start:.3f} s, next poll after "
          f"{c.started[1] - first.end:.4f} s")
    assert (first.name, first.error) == ("long_poll", None)
    assert first.kwargs == {"batch": 1, "timeout_ms": 3_000, "ack_timeout_ms": 30_000}
    assert first.end - first.start >= 3.0     # held by the server (the 3 s asked), then empty
    assert asked(consumer) == []              # no pause after an empty one


def test_default_pause_after_an_empty_short_poll_is_100_ms(node, topic, pauses):
    with RecordingClient(node.url) as c:
        consumer = c.listen(topic, lambda m: True, long_polling=False)
        try:
            wait_until(lambda: len(c.calls) >= 5, 10, message=lambda: f"{c.calls}")
        finally:
            consumer.stop()
    assert {(call.name, call.error) for call in c.calls} == {("pull", None)}
    gaps = [b.start - a.end for a, b in zip(c.calls, c.calls[1:5])]
    print(f"\npauses after empty pulls (s): {[round(p, 3) for p in gaps]}")
    assert asked(consumer)[:4] == [0.1] * 4   # one pause after each empty pull, of 100 ms
    assert all(gap >= 0.1 - TIMER_S for gap in gaps), gaps


def test_default_stop_waits_for_a_running_handler_to_settle_its_message(client, topic):
    sent = client.send(topic, "slow")
    running = threading.Event()

    returned: list[float] = []

    def handler(m: DelayMsg) -> bool:
        running.set()
        time.sleep(1.0)        # the handler's work: longer than any stop() would take alone
        returned.append(time.monotonic())
        return True

    consumer = client.listen(topic, handler)
    assert running.wait(10)
    stopping = time.monotonic()
    consumer.stop()            # the default grace (30 s) lets the handler finish
    stopped = time.monotonic()
    assert returned and returned[0] <= stopped       # waited for the handler ...
    print(f"\nstop() waited {stopped - stopping:.3f} s, {stopped - returned[0]:.3f} s of it "
          "after the handler returned")
    assert client.get(topic, sent.msg_id).status is Status.ACKED    # ... and its ack
    assert consumer.acked == 1 and consumer.nacked == 0
    assert consumer.grace_s == 30.0
    assert stopped - stopping < consumer.grace_s     # not the grace waited out
