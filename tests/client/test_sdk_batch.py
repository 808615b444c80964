"""The SDK's batch calls (send_batch, ack_batch, delete_batch, change_visibility_batch) against
a live node, and the listener's batched acks: per-entry results, splitting, the linger bound,
a server restart while acks wait, and pulls sized to the idle consume threads."""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from datetime import timedelta

import pytest

from delayqueue.client import (
    AckEntry,
    BadRequestError,
    DelayMsg,
    DelayQueueClient,
    SendEntry,
    Status,
    UnsupportedError,
    VisibilityEntry,
)
from delayqueue.client.ack_batcher import AckBatcher
from delayqueue.client.batch import MAX_BATCH_BYTES
from delayqueue.client.consumer import Consumer
from delayqueue.client.entries import BatchResult
from delayqueue.client.plan import Request

from support import wait_until
from support.node import ServerProcess
from support.sdk import FAST_STOP, node, topic  # noqa: F401 - fixtures

FAST = {"poll_timeout_ms": 500, "backoff_base_s": 0.05, "backoff_max_s": 0.4, "grace_s": 5}


class CountingClient(DelayQueueClient):
    """Counts the batch requests, with their sizes, by endpoint."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.batches: list[tuple[str, int]] = []  # (endpoint, body bytes)
        self.entries: list[int] = []              # entries of each request
        send = self._transport.send

        def counted(request: Request):
            if request.body is not None:  # the batch endpoints' JSON bodies
                self.batches.append((request.endpoint, len(request.body)))
                self.entries.append(max((len(v) for v in json.loads(request.body).values()
                                         if isinstance(v, list)), default=0))
            return send(request)

        self._transport.send = counted  # type: ignore[method-assign]


@pytest.fixture
def client(node):
    with CountingClient(node.url, timeout=10) as c:
        yield c


# ---- send_batch ------------------------------------------------------------------------------
def test_send_batch_answers_each_entry_in_order_valid_invalid_and_duplicate(client, topic):
    live = client.send(topic, "already here", msg_id="dup", delay_ms=60_000)
    results = client.send_batch(topic, [
        "plain body",
        SendEntry("later", msg_id="later", delay_ms=timedelta(minutes=1), attributes={"k": "v"}),
        {"msg": "", "msgId": "empty"},                       # refused: msg must be non-empty
        SendEntry("again", msg_id="dup"),                    # live msgId: a duplicate
        {"msg": "both", "delayMillis": 5, "triggerTime": int(time.time() * 1000)},
        {"msg": "retry-0", "msgId": "r0", "maxRetry": 0, "ttlMillis": 120_000},
    ])
    assert [r.code for r in results] == [200, 200, 400, 200, 400, 200]
    assert [r.duplicate for r in results] == [False, False, False, True, False, False]
    assert "msg" in results[2].msg and "delayMillis" in results[4].msg
    assert results[3].delay_msg.msg == "already here" and results[3].delay_msg == \
        DelayMsg(**{**live.__dict__, "duplicate": True})
    assert results[0].delay_msg.status is Status.READY and len(results[0].msg_id) == 32
    later = results[1].delay_msg
    assert later.status is Status.WAITING and later.trigger_time - later.produce_time == 60_000
    assert client.get(topic, "later").attributes == {"k": "v"}
    r0 = client.get(topic, "r0")
    assert (r0.max_retry, r0.expire_time - r0.trigger_time) == (0, 120_000)
    assert client.get(topic, "empty") is None
    assert client.get(topic, "dup").msg == "already here"
    assert client.batches == [("sendMsgBatch", client.batches[0][1])]


def test_send_batch_splits_into_requests_of_at_most_1000_entries(client, topic):
    results = client.send_batch(topic, (f"m{i}" for i in range(2_500)))
    assert [r.ok for r in results] == [True] * 2_500
    assert [r.delay_msg.msg for r in results] == [f"m{i}" for i in range(2_500)]
    assert client.entries == [1_000, 1_000, 500]
    assert client.topic_info(topic).ready_queue_size == 2_500
    client.entries.clear()
    client.send_batch(topic, [f"n{i}" for i in range(10)], batch_size=4)
    assert client.entries == [4, 4, 2]


def test_send_batch_splits_to_stay_under_the_4_mib_body_limit(client, topic):
    body = "x" * 900_000
    results = client.send_batch(topic, [SendEntry(body, msg_id=f"big{i}") for i in range(6)])
    assert [r.code for r in results] == [200] * 6
    sizes = [size for _, size in client.batches]
    assert len(sizes) == 2 and max(sizes) <= MAX_BATCH_BYTES, sizes
    assert client.entries == [4, 2]
    assert client.get(topic, "big5").msg == body


def test_compress_over_bytes_gzips_a_longer_batch_body_and_leaves_a_shorter_one(node, topic):
    sent: list[tuple[str | None, int]] = []      # (Content-Encoding, bytes on the wire)

    def on_the_wire(transport):
        post = transport._post

        def recorded(url, path, body, headers, timeout):
            sent.append((headers.get("Content-Encoding"), len(body)))
            return post(url, path, body, headers, timeout)
        transport._post = recorded

    with DelayQueueClient(node.url, compress_over_bytes=10_000) as c:
        on_the_wire(c._transport)
        big = c.send_batch(topic, [SendEntry("x" * 1000, msg_id=f"z{i}") for i in range(100)])
        small = c.delete_batch(topic, ["z0"])
    assert [r.code for r in big] == [200] * 100 and small[0].code == 200
    assert sent[0][0] == "gzip" and sent[0][1] < 10_000, sent
    assert sent[1][0] is None, sent
    with DelayQueueClient(node.url) as plain:
        assert plain.get(topic, "z99").msg == "x" * 1000
        on_the_wire(plain._transport)
        plain.send_batch(topic, [SendEntry("y" * 1000) for _ in range(100)])
    assert sent[-1][0] is None and sent[-1][1] > 100_000          # off by default
    with pytest.raises(ValueError, match="compress_over_bytes"):
        DelayQueueClient(node.url, compress_over_bytes=-1)


def test_send_batch_halves_a_request_over_a_lower_server_body_limit(redis_db_url, topic):
    # max-msg-bytes 10,000: the server takes bodies up to 4 x 10,000 + 65,536 bytes.
    with ServerProcess(redis_db_url, settings={**FAST_STOP, "max-msg-bytes": 10_000}) as small, \
            CountingClient(small.url) as c:
        results = c.send_batch(topic, [SendEntry("x" * 9_000, msg_id=f"m{i}")
                                       for i in range(30)] + [SendEntry("y" * 200_000)])
        assert [r.code for r in results] == [200] * 30 + [413], results[-1]
        assert "body" in results[-1].msg
        assert c.entries[:3] == [31, 15, 7], c.entries       # refused, refused, taken
        assert c.topic_info(topic).ready_queue_size == 30


def test_send_batch_refuses_an_invalid_item_before_sending_anything(client, topic):
    for bad in ({"msg": 42}, {"msg": "x", "delayMillis": "5s"}, {"msg": "x", "colour": "red"},
                {"msg": "x", "attributes": {"k": 1}}, SendEntry("x", attributes={"k": 1})):
        with pytest.raises(ValueError):
            client.send_batch(topic, ["fine", bad])
    assert client.batches == []
    with pytest.raises(ValueError, match="batch_size"):
        client.send_batch(topic, ["x"], batch_size=1001)


def test_a_batch_refused_as_a_whole_raises_and_writes_nothing(client, topic):
    with pytest.raises(BadRequestError) as refused:
        client.send_batch("bad{" + topic, [f"m{i}" for i in range(1_500)])
    assert refused.value.results == []  # type: ignore[attr-defined]
    assert len(client.batches) == 1
    assert client.topics() == [] or all(t.topic != "bad{" + topic for t in client.topics())


def test_a_missing_batch_endpoint_raises_unsupported(client):
    with pytest.raises(UnsupportedError):
        client._transport.send(Request("noSuchMsgBatch", body=b"{}", idempotent=True))


# ---- ack_batch, delete_batch -------------------------------------------------------------------
def test_ack_batch_answers_each_entry_as_ack_msg_would(client, topic):
    for i in range(4):
        client.send(topic, f"m{i}", msg_id=f"m{i}")
    waiting = client.send(topic, "not yet", delay_ms=60_000)
    first = {m.msg_id: m for m in client.pull(topic, 4, ack_timeout_ms=60_000)}
    client.change_visibility(first["m3"], 0)           # given up: delivered again below
    [again] = client.pull(topic, 1, ack_timeout_ms=60_000)
    assert again.msg_id == "m3"
    results = client.ack_batch(topic, [
        first["m0"],                                       # ack with its receipt
        AckEntry.of(first["m1"], ack=False, delay_ms=60_000),   # nack, back in a minute
        AckEntry("m2"),                                    # ack without a receipt
        first["m3"],                                       # its receipt is stale now
        "absent",                                          # unknown
        AckEntry(waiting.msg_id),                          # never delivered
        first["m0"],                                       # acked twice: idempotent
    ])
    assert [r.code for r in results] == [200, 200, 200, 409, 404, 400, 200]
    assert [r.msg_id for r in results] == ["m0", "m1", "m2", "m3", "absent",
                                           waiting.msg_id, "m0"]
    assert client.get(topic, "m0").status is Status.ACKED
    m1 = client.get(topic, "m1")
    assert m1.status is Status.WAITING and m1.trigger_time > time.time() * 1000 + 50_000
    assert client.get(topic, "m3").status is Status.CONSUMING
    assert client.batches == [("ackMsgBatch", client.batches[0][1])]


def test_delete_batch_answers_200_or_404_per_msg_id(client, topic):
    ids = [client.send(topic, f"m{i}").msg_id for i in range(3)]
    results = client.delete_batch(topic, [ids[0], "absent", ids[1]])
    assert results == [BatchResult(ids[0], 200, results[0].msg), BatchResult(
        "absent", 404, results[1].msg), BatchResult(ids[1], 200, results[2].msg)]
    assert client.get(topic, ids[0]).status is Status.DELETED
    assert client.delete_batch(topic, [ids[2]], release=True)[0].ok
    assert client.get(topic, ids[2]) is None
    assert client.topic_info(topic).ready_queue_size == 0


def test_change_visibility_batch_answers_each_entry_as_change_visibility_would(client, topic):
    for i in range(3):
        client.send(topic, f"m{i}", msg_id=f"m{i}")
    waiting = client.send(topic, "not yet", delay_ms=60_000)
    held = {m.msg_id: m for m in client.pull(topic, 3, ack_timeout_ms=60_000)}
    results = client.change_visibility_batch(topic, [
        VisibilityEntry.of(held["m0"], timedelta(minutes=5)),   # extended, with its receipt
        (held["m1"], 0),                                        # given up: ready again
        ("m2", 120_000),                                        # no receipt
        VisibilityEntry("m2", 1000, receipt="0.1"),             # an earlier delivery's
        ("absent", 1000),                                       # unknown
        (waiting.msg_id, 1000),                                 # not consuming
    ])
    assert [(r.msg_id, r.code) for r in results] == [
        ("m0", 200), ("m1", 200), ("m2", 200), ("m2", 409), ("absent", 404),
        (waiting.msg_id, 400)]
    assert [r.delay_msg.status for r in results[:3]] == [Status.CONSUMING, Status.READY,
                                                         Status.CONSUMING]
    assert [r.delay_msg for r in results[3:]] == [None, None, None]
    assert "stale" in results[3].msg and results[5].msg.startswith("msgId: ")
    [again] = client.pull(topic, 10, ack_timeout_ms=60_000)
    assert again.msg_id == "m1" and again.retry == 2
    assert client.batches == [("changeVisibilityBatch", client.batches[0][1])]


def test_change_visibility_batch_splits_into_requests_of_at_most_1000_entries(client, topic):
    client.send_batch(topic, [SendEntry(f"m{i}", msg_id=f"m{i}") for i in range(1_200)])
    held = client.pull(topic, 1000, ack_timeout_ms=60_000) + client.pull(
        topic, 1000, ack_timeout_ms=60_000)
    assert len(held) == 1_200
    client.entries.clear()
    results = client.change_visibility_batch(topic, [(m, 90_000) for m in held])
    assert client.entries == [1_000, 200]
    assert [r.msg_id for r in results] == [m.msg_id for m in held]
    assert all(r.ok and r.delay_msg.status is Status.CONSUMING for r in results)


# ---- the listener ------------------------------------------------------------------------------
def test_listener_acks_in_batches_and_pulls_for_every_idle_consume_thread(client, topic):
    client.send_batch(topic, [f"m{i}" for i in range(200)])
    asked: list[int] = []
    long_poll = client.long_poll

    def recorded(topic_, batch=1, *args, **kwargs):
        asked.append(batch)
        return long_poll(topic_, batch, *args, **kwargs)

    client.long_poll = recorded  # type: ignore[method-assign]
    client.batches.clear()
    client.entries.clear()
    with client.listen(topic, lambda m: True, consume_threads=8, **FAST) as consumer:
        wait_until(lambda: consumer.acked == 200, 20, message=lambda: f"{consumer.acked}")
    acks = [n for (e, _), n in zip(client.batches, client.entries) if e == "ackMsgBatch"]
    print(f"\n200 acks in {len(acks)} ackMsgBatch requests; pulls asked for {asked[:12]}...")
    assert asked[0] == 8 and max(asked) == 8
    assert sum(acks) == 200 and len(acks) < 100
    assert client.topic_info(topic).ack_queue_size == 0


def test_listener_drops_an_ack_answered_404_after_one_try(client, topic, caplog):
    client.send(topic, "deleted while handled", msg_id="gone")

    def handler(m: DelayMsg) -> bool:
        client.delete(topic, m.msg_id)
        return True

    with caplog.at_level(logging.WARNING, logger="delayqueue.client"):
        with client.listen(topic, handler, limit=1, **FAST) as consumer:
            assert consumer.wait(10)
    assert consumer.acked == 0 and consumer.lost == 0
    assert [e for e, _ in client.batches].count("ackMsgBatch") == 1
    assert any("gone" in r.getMessage() for r in caplog.records)


def test_listeners_batched_acks_survive_a_server_restart(redis_db_url, topic):
    """The node is killed (-9) while every handler runs; their acks find no server, wait,
    and reach the restarted node: each message acked once, none delivered twice."""
    node = ServerProcess(redis_db_url, settings=FAST_STOP).start()
    release = threading.Event()
    seen: list[str] = []
    finished = [0]
    lock = threading.Lock()

    def handler(m: DelayMsg) -> bool:
        with lock:
            seen.append(m.msg_id)
        ok = release.wait(20)
        with lock:
            finished[0] += 1
        return ok

    try:
        with CountingClient(node.url, timeout=5, connect_timeout=0.5) as c:
            ids = [r.msg_id for r in c.send_batch(topic, [f"m{i}" for i in range(40)])]
            consumer = c.listen(topic, handler, consume_threads=40, ack_timeout_ms=60_000,
                                **FAST)
            try:
                wait_until(lambda: len(seen) == 40, 10, message=lambda: f"{len(seen)} seen")
                os.killpg(node.process.pid, signal.SIGKILL)   # kill -9 the whole node
                node.process.wait()
                release.set()                          # 40 acks now wait in the batcher
                wait_until(lambda: finished[0] == 40, 10)
                assert consumer.acked == 0
                node = ServerProcess(redis_db_url, settings=FAST_STOP, port=node.port).start()
                wait_until(lambda: consumer.acked == 40, 15,
                           message=lambda: f"{consumer.acked} acked")
            finally:
                consumer.stop()
            assert sorted(seen) == sorted(ids)         # nothing delivered twice
            assert {c.get(topic, i).status for i in ids} == {Status.ACKED}
            assert consumer.lost == 0 and consumer.nacked == 0
            assert c.topic_info(topic).ack_queue_size == 0
    finally:
        node.stop()


# ---- the batcher on its own (a stand-in client: this is timing, not Redis behaviour) --------
class AckRecorder:
    """Stands in for the client: records when (by ``clock``) each ackMsgBatch came and
    answers 200."""

    timeout = 1.0

    def __init__(self, unsupported: bool = False, clock=time.monotonic) -> None:
        self.calls: list[tuple[float, int]] = []
        self.alone: list[str] = []
        self.unsupported = unsupported
        self.clock = clock

    def ack_batch(self, topic, entries):
        if self.unsupported:
            raise UnsupportedError("no endpoint ackMsgBatch (HTTP 404)", 404)
        self.calls.append((self.clock(), len(entries)))
        return [BatchResult(e.msg_id, 200, "success") for e in entries]

    def ack(self, topic, msg_id, receipt=None):
        self.alone.append(msg_id)


def _msg(i: int) -> DelayMsg:
    return DelayMsg("t", f"m{i}", "x", 0, 0, 0, 0, 1, Status.CONSUMING, receipt=f"r{i}")


class HandClock:
    """A monotonic clock moved by the test; counts how often it was read."""

    def __init__(self) -> None:
        self.now = 100.0
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return self.now


def test_an_ack_waits_no_longer_than_the_linger_and_a_full_batch_goes_at_once():
    # The batcher's own clock, moved by hand: the linger is asserted exactly, and no pause of
    # this thread between the submits splits them into two batches.
    clock, done = HandClock(), []
    recorder = AckRecorder(clock=clock)
    batcher = AckBatcher(recorder, "t", lambda s, code: done.append(code), linger_ms=20,
                         clock=clock)
    for i in range(3):
        batcher.submit(_msg(i), True)
    submitted = clock.now
    clock.now = submitted + 0.019
    reads = clock.reads
    wait_until(lambda: clock.reads >= reads + 2, 5)   # looked at the time twice since ...
    assert recorder.calls == []                        # ... and 19 ms is not yet the linger
    clock.now = submitted + 0.020
    wait_until(lambda: len(done) == 3, 5)              # 20 ms: sent, the clock moved no further
    assert recorder.calls == [(submitted + 0.020, 3)]
    slow = AckBatcher(recorder, "t", lambda s, code: done.append(code), linger_ms=60_000)
    for i in range(1_000):
        slow.submit(_msg(i), True)
    wait_until(lambda: len(done) == 1_003, 5)  # full: sent without waiting out the minute
    assert recorder.calls[-1][1] == 1_000
    batcher.close(1)
    slow.close(1)


def test_without_the_batch_endpoint_the_batcher_acks_one_message_a_request():
    recorder, done = AckRecorder(unsupported=True), []
    batcher = AckBatcher(recorder, "t", lambda s, code: done.append(code), linger_ms=0)
    for i in range(5):
        batcher.submit(_msg(i), True)
    batcher.close(5)
    assert done == [200] * 5 and sorted(recorder.alone) == [f"m{i}" for i in range(5)]


def test_consumer_refuses_a_pull_batch_over_1000_or_under_1():
    for batch in (1_001, 0):
        with pytest.raises(ValueError, match="batch"):
            Consumer(AckRecorder(), "t", lambda m: True, batch=batch)  # type: ignore[arg-type]
