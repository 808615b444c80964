"""AsyncDelayQueueClient against a live node: every method once, the same results and
exceptions as DelayQueueClient, gzip bodies, fail-over over several URLs, keep-alive."""

from __future__ import annotations

import asyncio
import gzip
import inspect
import json
import re
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from delayqueue.aio import (
    AccessDeniedError,
    AckEntry,
    AsyncDelayQueueClient,
    BacklogExceededError,
    BadRequestError,
    BatchResult,
    DeadLetterPage,
    DelayMsg,
    MessagePage,
    MonitorData,
    NotFoundError,
    PurgeResult,
    SendEntry,
    ServerError,
    StaleReceiptError,
    Status,
    TopicConfig,
    TopicInfo,
    UnavailableError,
    UnsupportedError,
    VisibilityEntry,
)
from delayqueue.client import DelayQueueClient
from delayqueue.client.plans import Plans
from delayqueue.client.transport import encode_body

from support.node import ServerProcess
from support.ports import refused_port
from support.proxy import AnswerDroppingProxy
from support.sdk import FAST_STOP, node, run_async, topic  # noqa: F401 - fixtures


@pytest.fixture
def dead_url():
    """A node URL whose port refuses every connection (held for the test)."""
    with refused_port() as port:
        yield f"http://127.0.0.1:{port}"


def connect(node, **options) -> AsyncDelayQueueClient:
    return AsyncDelayQueueClient(node.url, timeout=5, **options)


def test_every_call_of_the_blocking_client_is_a_coroutine_with_the_same_signature():
    calls = {name for name, f in vars(DelayQueueClient).items()
             if not name.startswith("_") and callable(f)
             and name not in ("close", "listen") and not name.startswith("iter_")}
    for name in calls:
        method = getattr(AsyncDelayQueueClient, name)
        assert inspect.iscoroutinefunction(method), name
        assert inspect.signature(method) == inspect.signature(getattr(DelayQueueClient, name))
        assert method.__doc__ == getattr(DelayQueueClient, name).__doc__
    assert inspect.iscoroutinefunction(AsyncDelayQueueClient.close)
    assert len(calls) >= 27
    # Both clients list their plans by hand: a plan neither lists is a call neither has.
    assert calls == {name for name in dir(Plans) if not name.startswith("_")}


@run_async
async def test_send_get_and_duplicate_answer_as_the_blocking_client(node, topic):
    async with connect(node) as client:
        sent = await client.send(topic, "hello", delay_ms=60_000, max_retry=3, ttl_ms=120_000,
                                 attributes={"k": "ü"})
        assert isinstance(sent, DelayMsg) and sent.status is Status.WAITING
        assert re.fullmatch(r"[0-9a-f]{32}", sent.msg_id) and not sent.duplicate
        assert sent.expire_time == sent.trigger_time + 120_000
        assert await client.get(topic, sent.msg_id) == sent
        again = await client.send(topic, "other", msg_id=sent.msg_id)
        assert again.duplicate and again.msg == "hello"
        assert await client.get(topic, "absent") is None
        with DelayQueueClient(node.url) as blocking:
            assert blocking.get(topic, sent.msg_id) == sent


@run_async
async def test_errors_are_the_same_exception_classes_with_the_servers_code(node, topic):
    async with connect(node) as client:
        with pytest.raises(ValueError):  # refused before anything is sent, as the blocking one
            await client.send(topic, "x", delay_ms=5, trigger_time=int(time.time() * 1000))
        with pytest.raises(BadRequestError) as bad:
            await client.send("bad{topic}", "x")
        assert bad.value.code == 400 and "topic" in bad.value.msg
        with pytest.raises(NotFoundError):
            await client.ack(topic, "nope")
        with pytest.raises(TypeError):
            await client.ack(topic)
        await client.send(topic, "x")
        first = (await client.pull(topic))[0]
        await client.nack(first)
        second = (await client.pull(topic))[0]
        with pytest.raises(StaleReceiptError) as stale:
            await client.ack(first)
        assert stale.value.code == 409
        await client.ack(second)
        await client.set_topic_config(topic, max_backlog=1)
        await client.send(topic, "one", delay_ms=60_000)
        with pytest.raises(BacklogExceededError):
            await client.send(topic, "two")


@run_async
async def test_pull_long_poll_ack_nack_change_visibility_reschedule_and_delete(node, topic):
    async with connect(node) as client:
        assert await client.pull(topic) == []
        await client.send(topic, "a", msg_id="a")
        (a,) = await client.pull(topic, batch=5, ack_timeout_ms=60_000)
        assert a.status is Status.CONSUMING and a.receipt
        moved = await client.change_visibility(a, 120_000)
        assert moved.msg_id == "a" and moved.status is Status.CONSUMING
        await client.nack(a, delay_ms=timedelta(minutes=1))
        assert (await client.get(topic, "a")).status is Status.WAITING
        back = await client.reschedule(topic, "a", delay_ms=0)
        assert back.status is Status.READY
        started = time.monotonic()
        polled, _ = await asyncio.gather(client.long_poll(topic, timeout_ms=5_000),
                                         client.send(topic, "b", delay_ms=300, msg_id="b"))
        assert [m.msg_id for m in polled] == ["a"]
        polled = await client.long_poll(topic, timeout_ms=5_000)
        assert [m.msg_id for m in polled] == ["b"] and time.monotonic() - started < 5
        await client.ack(polled[0])
        assert (await client.get(topic, "b")).status is Status.ACKED
        await client.delete(topic, "a")
        assert (await client.get(topic, "a")).status is Status.DELETED
        with pytest.raises(NotFoundError):
            await client.delete(topic, "nope")


@run_async
async def test_batches_gzip_bodies_and_answer_each_entry(node, topic):
    async with connect(node, compress_over_bytes=0) as client:
        results = await client.send_batch(topic, [
            "plain", SendEntry("later", msg_id="later", delay_ms=60_000), {"msg": ""}])
        assert [r.code for r in results] == [200, 200, 400]
        refused = await client.send_batch(topic, ["x", {"msg": ""}], atomic=True)
        assert [r.code for r in refused] == [409, 400]
        assert (await client.topic_info(topic)).ready_queue_size == 1  # nothing of it written
        pulled = await client.pull(topic, batch=10)
        seen = await client.change_visibility_batch(topic, [(m, 60_000) for m in pulled] + [
            VisibilityEntry("later", 1_000)])
        assert [r.code for r in seen] == [200, 400]
        acks = await client.ack_batch(topic, [*pulled, AckEntry("nope")])
        assert all(isinstance(r, BatchResult) for r in acks)
        assert [r.code for r in acks] == [200, 404]
        deleted = await client.delete_batch(topic, ["later", "nope"], release=True)
        assert [r.code for r in deleted] == [200, 404]
    body, headers = encode_body(b'{"topic":"t"}', 0)  # what compress_over_bytes=0 sent
    assert headers["Content-Encoding"] == "gzip" and gzip.decompress(body) == b'{"topic":"t"}'


@run_async
async def test_topic_sizes_and_settings(node, topic):
    async with connect(node) as client:
        await client.send(topic, "w", delay_ms=120_000)
        await client.send(topic, "r")
        info = await client.topic_info(topic)
        assert isinstance(info, TopicInfo)
        assert (info.waiting_queue_size, info.ready_queue_size) == (1, 1)
        assert topic in {t.topic for t in await client.topics()}
        config = await client.set_topic_config(topic, max_retry=2, ttl_ms=timedelta(hours=1))
        assert isinstance(config, TopicConfig) and config.max_retry == 2
        got = await client.get_topic_config(topic)
        assert got.ttl_ms == 3_600_000 and got.source("max_retry") == "topic"
        with pytest.raises(ValueError):
            await client.set_topic_config(topic, no_such_setting=1)
        assert isinstance(await client.monitor_data(), MonitorData)


@run_async
async def test_dead_letters_list_iterate_redrive_and_purge(node, topic):
    async with connect(node) as client:
        for body in ("a", "b", "c"):
            await client.send(topic, body, max_retry=0, msg_id=body)
        for m in await client.pull(topic, batch=3):
            await client.nack(m)
        page = await client.list_dead(topic, limit=2)
        assert isinstance(page, DeadLetterPage) and len(page.messages) == 2 and page.next_cursor
        listed = [m.msg_id async for m in client.iter_dead(topic, page_size=1)]
        assert sorted(listed) == ["a", "b", "c"]
        assert await client.redrive_dead(topic, msg_id=listed[0]) == 1
        assert await client.purge_dead(topic, msg_id=listed[1]) == 1
        totals: list[int] = []
        assert await client.redrive_all_dead(topic, batch=1, progress=totals.append) == 1
        assert totals == [1, 1]
        assert await client.purge_dead(topic) == 0


@run_async
async def test_pause_resume_list_and_purge_a_topic(node, topic):
    async with connect(node) as client:
        results = await client.send_batch(topic, [f"m{i}" for i in range(5)])
        ids = [r.msg_id for r in results]
        assert await client.pause_topic(topic) is True
        assert await client.pull(topic) == []
        assert await client.resume_topic(topic) is True
        page = await client.list_messages(topic, 2, limit=2)
        assert isinstance(page, MessagePage) and len(page.messages) == 2 and page.next_cursor
        assert [m.msg_id async for m in client.iter_messages(topic, 2, page_size=2)] == ids
        assert await client.purge_topic(topic, limit=2) == PurgeResult(2, 3)
        assert await client.purge_topic_all(topic, batch=2) == PurgeResult(3, 0)
        assert (await client.topic_info(topic)).ready_queue_size == 0
        with pytest.raises(ValueError):
            await client.list_messages(topic)


@run_async
async def test_a_dead_node_url_is_skipped_and_the_live_one_serves(node, dead_url, topic):
    async with AsyncDelayQueueClient([dead_url, node.url], timeout=5) as client:
        ids = [(await client.send(topic, f"m{i}")).msg_id for i in range(6)]
        assert [m.msg_id for m in await client.pull(topic, batch=10)] == ids
        nodes = {n.url: n for n in client._transport.pool.nodes}
        assert nodes[dead_url].failures >= 1 and nodes[node.url].failures == 0


@run_async
async def test_no_reachable_node_raises_unavailable_error(dead_url, topic):
    async with AsyncDelayQueueClient(dead_url, connect_timeout=1) as client:
        with pytest.raises(UnavailableError) as info:
            await client.pull(topic)
    assert info.value.code is None and "refused" in str(info.value)


@run_async
async def test_a_lost_answer_is_resent_to_the_other_url_only_when_idempotent(node, topic):
    with AnswerDroppingProxy(node.url, ports=2) as proxy:
        async with AsyncDelayQueueClient(proxy.urls, timeout=5) as client:
            proxy.drop_next("sendMsg")
            sent = await client.send(topic, "once", delay_ms=60_000)
            proxy.drop_next("pullMsg")
            with pytest.raises(UnavailableError):
                await client.pull(topic)
    first, retry = proxy.forwarded("sendMsg")
    assert (first.dropped, retry.dropped) == (True, False) and first.port != retry.port
    assert retry.form["msgId"] == first.form["msgId"] == sent.msg_id and sent.duplicate
    assert len(proxy.forwarded("pullMsg")) == 1  # a pull may have handed messages out


@run_async
async def test_concurrent_calls_share_one_keep_alive_pool(node, topic):
    async with connect(node, pool_size=4) as client:
        sent = await asyncio.gather(*(client.send(topic, f"m{i}") for i in range(40)))
        assert len({m.msg_id for m in sent}) == 40
        for _ in range(10):
            await client.get(topic, "absent")
        # The burst opened more; those past pool_size were closed, the rest are reused.
        assert 1 <= len(client._transport.http._transport._pool.connections) <= 4
        assert (await client.topic_info(topic)).ready_queue_size == 40


class _Answering(BaseHTTPRequestHandler):
    """Answers every POST with ``server.status`` and a page that is not the envelope."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b"<html>not here</html>"
        self.send_response(self.server.status)  # type: ignore[attr-defined]
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:  # quiet
        pass


@pytest.fixture
def answering():
    """Start a server answering a status that is not the envelope: ``answering(503)``."""
    servers: list[ThreadingHTTPServer] = []

    def start(status: int) -> str:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Answering)
        server.status = status  # type: ignore[attr-defined]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@run_async
async def test_answers_that_are_not_the_envelope_map_as_in_the_blocking_client(node, answering,
                                                                             topic):
    async with AsyncDelayQueueClient(answering(404)) as client:
        with pytest.raises(UnsupportedError) as unsupported:
            await client.topic_info(topic)
        assert unsupported.value.code == 404
    gone = answering(503)  # a proxy whose node is gone
    async with AsyncDelayQueueClient([gone, node.url], timeout=5) as client:
        assert await client.get(topic, "absent") is None   # idempotent: on to the next node
        await client.send(topic, "x", msg_id="x")
    async with AsyncDelayQueueClient([gone, node.url], timeout=5) as client:
        with pytest.raises(ServerError) as info:  # a pull may have handed messages out
            await client.pull(topic)               # (a new client starts at the first URL)
        assert "HTTP 503" in str(info.value)
    async with AsyncDelayQueueClient(node.url) as client:
        assert (await client.get(topic, "x")).status is Status.READY   # not sent elsewhere


@run_async
async def test_the_token_is_sent_and_a_refusal_is_access_denied(redis_db_url, topic):
    tokens = [{"name": "producer", "secret": "producer-secret-0001", "roles": ["produce"]}]
    with ServerProcess(redis_db_url, settings={"auth-tokens": json.dumps(tokens),
                                                **FAST_STOP}) as secured:
        async with AsyncDelayQueueClient(secured.url, token="producer-secret-0001") as client:
            assert (await client.send(topic, "x")).status is Status.READY
            with pytest.raises(AccessDeniedError) as role:
                await client.pull(topic)
            assert role.value.code == 403
        async with AsyncDelayQueueClient(secured.url, token="wrong-secret-00001") as client:
            with pytest.raises(AccessDeniedError) as unknown:
                await client.send(topic, "x")
            assert unknown.value.code == 401
