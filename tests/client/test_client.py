"""DelayQueueClient against a live server node: every method, errors, fail-over, restarts."""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta, timezone

import pytest

from delayqueue.client import (
    BadRequestError,
    DelayMsg,
    DelayQueueClient,
    NotFoundError,
    Status,
    UnavailableError,
)
from delayqueue.client.transport import NodePool

from support import wait_until
from support.node import ServerProcess
from support.ports import refused_port
from support.proxy import AnswerDroppingProxy
from support.sdk import FAST_STOP, node, topic  # noqa: F401 - fixtures


@pytest.fixture
def client(node):
    with DelayQueueClient(node.url, timeout=5) as c:
        yield c


@pytest.fixture
def dead_url():
    """A node URL whose port refuses every connection (held for the test)."""
    with refused_port() as port:
        yield f"http://127.0.0.1:{port}"


def test_send_with_delay_is_waiting_and_get_returns_it(client, topic):
    sent = client.send(topic, "hello", delay_ms=60_000, max_retry=3, ttl_ms=120_000)
    assert isinstance(sent, DelayMsg)
    assert sent.status is Status.WAITING and not sent.duplicate
    assert re.fullmatch(r"[0-9a-f]{32}", sent.msg_id)
    assert sent.trigger_time - sent.produce_time == 60_000   # both from one server clock read
    assert sent.expire_time == sent.trigger_time + 120_000
    assert sent.max_retry == 3 and sent.retry == 0
    got = client.get(topic, sent.msg_id)
    assert got == sent


def test_send_at_trigger_time_datetime_sets_that_trigger_time(client, topic):
    when = datetime.now(timezone.utc) + timedelta(minutes=5)
    sent = client.send(topic, "x", trigger_time=when, msg_id="m1")
    assert sent.msg_id == "m1"
    assert sent.trigger_time == int(when.timestamp() * 1000)


def test_send_twice_with_the_same_live_msg_id_reports_the_stored_duplicate(client, topic):
    first = client.send(topic, "one", delay_ms=60_000, msg_id="dup")
    again = client.send(topic, "two", msg_id="dup")
    assert again.duplicate and again.msg == "one" and again.trigger_time == first.trigger_time


def test_a_send_whose_answer_was_lost_is_resent_with_its_client_generated_id(client, node,
                                                                            topic):
    """The first answer is lost after the node stored the message; the SDK re-sends (sendMsg
    is idempotent) with the msgId it generated, so the node recognises the re-send."""
    with AnswerDroppingProxy(node.url, ports=2) as proxy, \
            DelayQueueClient(proxy.urls, timeout=5) as through_proxy:
        proxy.drop_next("sendMsg")
        sent = through_proxy.send(topic, "once", delay_ms=60_000)
    first, retry = proxy.forwarded("sendMsg")
    assert (first.dropped, retry.dropped) == (True, False)
    assert first.port != retry.port                       # re-sent to the other node URL
    assert re.fullmatch(r"[0-9a-f]{32}", first.form.get("msgId", ""))   # made by the SDK
    assert retry.form["msgId"] == first.form["msgId"] == sent.msg_id
    assert sent.duplicate is True and sent.msg == "once"
    info = client.topic_info(topic)
    assert (info.waiting_queue_size, info.ready_queue_size) == (1, 0)   # stored once


def test_each_send_without_msg_id_gets_an_id_of_its_own(client, topic):
    first = client.send(topic, "same body")
    second = client.send(topic, "same body")
    assert first.msg_id != second.msg_id
    assert not first.duplicate and not second.duplicate
    assert client.topic_info(topic).ready_queue_size == 2


def test_send_rejects_both_delay_and_trigger_time(client, topic):
    with pytest.raises(ValueError):
        client.send(topic, "x", delay_ms=5, trigger_time=int(time.time() * 1000))


def test_bad_parameter_raises_bad_request_with_the_servers_code_and_msg(client, topic):
    with pytest.raises(BadRequestError) as info:
        client.send("bad{topic}", "x")
    assert info.value.code == 400
    assert "topic" in info.value.msg


def test_empty_body_raises_bad_request(client, topic):
    with pytest.raises(BadRequestError):
        client.send(topic, "")


def test_pull_returns_empty_list_when_nothing_is_ready(client, topic):
    client.send(topic, "later", delay_ms=60_000)
    assert client.pull(topic) == []


def test_pull_delivers_ready_messages_up_to_batch_as_consuming(client, topic):
    ids = [client.send(topic, f"m{i}").msg_id for i in range(3)]
    pulled = client.pull(topic, batch=2)
    assert [m.msg_id for m in pulled] == ids[:2]
    assert all(m.status is Status.CONSUMING and m.retry == 1 for m in pulled)
    assert client.get(topic, ids[0]).status is Status.CONSUMING


def test_pull_with_short_ack_timeout_redelivers_the_unacked_message(client, topic):
    sent = client.send(topic, "x")
    assert client.pull(topic, ack_timeout_ms=200)[0].msg_id == sent.msg_id
    again = wait_until(lambda: client.pull(topic, ack_timeout_ms=60_000), 5, interval_s=0.1,
                       message="not redelivered after its 200 ms ack timeout")
    assert again[0].msg_id == sent.msg_id and again[0].retry == 2


def test_long_poll_answers_as_soon_as_a_message_becomes_due(client, topic):
    sent = client.send(topic, "soon", delay_ms=400)
    start = time.monotonic()
    got = client.long_poll(topic, timeout_ms=10_000)
    elapsed = time.monotonic() - start
    assert [m.msg_id for m in got] == [sent.msg_id]
    assert 0.2 < elapsed < 3


def test_long_poll_read_timeout_is_longer_than_the_poll(node, topic):
    # A read timeout shorter than the hold: the client must still wait the poll out.
    with DelayQueueClient(node.url, timeout=0.3) as short:
        start = time.monotonic()
        assert short.long_poll(topic, timeout_ms=1_000) == []
        assert time.monotonic() - start >= 0.9


def test_ack_ends_the_message_and_is_idempotent(client, topic):
    sent = client.send(topic, "x")
    client.pull(topic)
    client.ack(topic, sent.msg_id)
    client.ack(topic, sent.msg_id)
    assert client.get(topic, sent.msg_id).status is Status.ACKED


def test_nack_makes_the_message_ready_for_redelivery(client, topic):
    sent = client.send(topic, "x")
    client.pull(topic, ack_timeout_ms=60_000)
    client.nack(topic, sent.msg_id)
    assert client.get(topic, sent.msg_id).status is Status.READY
    again = client.pull(topic)
    assert again[0].msg_id == sent.msg_id and again[0].retry == 2


def test_ack_of_a_waiting_message_raises_bad_request(client, topic):
    sent = client.send(topic, "x", delay_ms=60_000)
    with pytest.raises(BadRequestError):
        client.ack(topic, sent.msg_id)


def test_ack_and_nack_of_unknown_message_raise_not_found(client, topic):
    with pytest.raises(NotFoundError) as info:
        client.ack(topic, "nope")
    assert info.value.code == 404
    with pytest.raises(NotFoundError):
        client.nack(topic, "nope")


def test_get_of_absent_message_returns_none(client, topic):
    assert client.get(topic, "absent") is None


def test_delete_marks_deleted_and_keeps_the_body_for_get(client, topic):
    sent = client.send(topic, "x", delay_ms=60_000)
    client.delete(topic, sent.msg_id)
    got = client.get(topic, sent.msg_id)
    assert got.status is Status.DELETED and got.msg == "x"


def test_delete_with_release_removes_the_body_at_once(client, topic):
    sent = client.send(topic, "x", delay_ms=60_000)
    client.delete(topic, sent.msg_id, release=True)
    assert client.get(topic, sent.msg_id) is None


def test_delete_of_unknown_message_raises_not_found(client, topic):
    with pytest.raises(NotFoundError):
        client.delete(topic, "nope")


def test_topic_info_counts_waiting_ready_and_consuming(client, topic):
    client.send(topic, "w", delay_ms=120_000)
    client.send(topic, "r1")
    client.send(topic, "r2")
    client.pull(topic)
    info = client.topic_info(topic)
    assert (info.topic, info.waiting_queue_size, info.ready_queue_size,
            info.ack_queue_size) == (topic, 1, 1, 1)
    assert info.waiting_buckets["sizeOf1minTo10min"] == 1
    assert sum(info.waiting_buckets.values()) == 1


def test_topics_lists_every_topic(client, topic):
    client.send(topic + "a", "x")
    client.send(topic + "b", "x", delay_ms=60_000)
    sizes = {t.topic: (t.ready_queue_size, t.waiting_queue_size) for t in client.topics()
             if t.topic.startswith(topic)}
    assert sizes == {topic + "a": (1, 0), topic + "b": (0, 1)}


def test_monitor_data_reports_the_last_interval(redis_db_url, topic):
    # 1 s intervals, the shortest: each worker flushes every half interval, so a sample is
    # in Redis while its interval is "the last one" (a fresh-clone run once saw no row at
    # all when the flush period equalled the interval).
    settings = {"monitor-interval-seconds": 1, **FAST_STOP}
    with ServerProcess(redis_db_url, settings=settings) as mon_node, \
            DelayQueueClient(mon_node.url) as c:
        c.send(topic, "x")
        c.pull(topic)
        # Send and pull may fall into two intervals: add up each interval seen once.
        rows: list[dict] = []

        def pull_counted() -> bool:
            row = next((r for r in c.monitor_data().request_stats if r["topic"] == topic), None)
            if row and (not rows or row != rows[-1]):
                rows.append(row)
            return sum(r["pullMsg"] for r in rows) >= 1

        wait_until(pull_counted, 12, interval_s=0.2, message=lambda: f"rows seen: {rows}")
    assert sum(r["sendMsg"] for r in rows) == 1, rows
    assert sum(r["pullMsg"] for r in rows) == 1, rows


def test_requests_reuse_one_keep_alive_connection(client, topic):
    def local_ports() -> list[int]:
        """The local ports of the node's open idle connections (urllib3's pool)."""
        ((pool, _),) = client._transport._routes.values()
        return [c.sock.getsockname()[1] for c in pool.pool.queue if c is not None and c.sock]

    client.get(topic, "absent")
    first = local_ports()
    for _ in range(20):
        client.get(topic, "absent")
    assert len(first) == 1 and local_ports() == first   # the same socket, never reopened


def test_unreachable_server_raises_unavailable_error(dead_url, topic):
    with DelayQueueClient(dead_url, connect_timeout=1) as c:
        with pytest.raises(UnavailableError) as info:
            c.pull(topic)
    assert info.value.code is None


def test_client_skips_a_dead_node_and_keeps_using_the_live_one(node, dead_url, topic):
    with DelayQueueClient([dead_url, node.url]) as c:
        ids = [c.send(topic, f"m{i}").msg_id for i in range(6)]
        pulled = [m.msg_id for m in c.pull(topic, batch=10)]
    assert pulled == ids


def test_node_pool_rotates_and_puts_failed_nodes_last():
    pool = NodePool(["a", "b", "c"], cooldown_base_s=60)
    firsts = [pool.order()[0].url for _ in range(6)]
    assert firsts == ["a", "b", "c", "a", "b", "c"]
    pool.failed(pool.nodes[0])
    assert [[n.url for n in pool.order()][-1] for _ in range(3)] == ["a", "a", "a"]
    pool.succeeded(pool.nodes[0])
    assert "a" in [pool.order()[0].url for _ in range(3)]


def test_client_keeps_working_across_a_server_restart(redis_db_url, topic):
    node = ServerProcess(redis_db_url, settings=FAST_STOP).start()
    try:
        with DelayQueueClient(node.url, connect_timeout=1) as c:
            sent = c.send(topic, "before")
            node.stop()
            with pytest.raises(UnavailableError):
                c.get(topic, sent.msg_id)
            node = ServerProcess(redis_db_url, settings=FAST_STOP, port=node.port).start()
            assert c.get(topic, sent.msg_id).msg == "before"
            assert c.pull(topic)[0].msg_id == sent.msg_id
    finally:
        node.stop()
