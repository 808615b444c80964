"""AsyncDelayQueueClient.listen against a live node: True acks, False or an exception nacks,
the concurrency bound, heartbeats for long handlers (and a delivery they find lost), limit,
and a graceful stop."""

from __future__ import annotations

import asyncio
import time
from typing import Callable

import pytest

from delayqueue.aio import AsyncDelayQueueClient, DelayMsg, StaleReceiptError, Status

from support.ports import refused_port
from support.sdk import node, run_async, topic  # noqa: F401 - fixtures

FAST = {"poll_timeout_ms": 500, "backoff_base_s": 0.05, "backoff_max_s": 0.4, "grace_s": 5}


async def until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout_s}s: {what}"
        await asyncio.sleep(0.02)


@pytest.fixture
def dead_url():
    with refused_port() as port:
        yield f"http://127.0.0.1:{port}"


@run_async
async def test_true_acks_and_false_or_an_exception_nacks_for_redelivery(node, dead_url, topic):
    """Through two node URLs, the first refusing connections."""
    async with AsyncDelayQueueClient([dead_url, node.url], timeout=5) as client:
        for body in ("ok", "no", "boom"):
            await client.send(topic, body, msg_id=body)
        runs: list[tuple[str, int]] = []

        async def handler(m: DelayMsg) -> bool:
            runs.append((m.msg, m.retry))
            await asyncio.sleep(0)
            if m.msg == "boom" and m.retry == 1:
                raise RuntimeError("first delivery fails")
            return m.msg != "no" or m.retry > 1

        async with client.listen(topic, handler, concurrency=3, **FAST) as consumer:
            await until(lambda: consumer.acked == 3, 10, "three acks")
        assert consumer.nacked == 2 and consumer.lost == 0
        assert sorted(runs) == [("boom", 1), ("boom", 2), ("no", 1), ("no", 2), ("ok", 1)]
        for body in ("ok", "no", "boom"):
            assert (await client.get(topic, body)).status is Status.ACKED


@run_async
async def test_concurrency_bounds_the_handlers_running_at_once(node, topic):
    async with AsyncDelayQueueClient(node.url, timeout=5) as client:
        await client.send_batch(topic, [f"m{i}" for i in range(9)])
        running, most = 0, 0

        async def handler(m: DelayMsg) -> bool:
            nonlocal running, most
            running += 1
            most = max(most, running)
            await asyncio.sleep(0.2)
            running -= 1
            return True

        async with client.listen(topic, handler, concurrency=3, pullers=2, **FAST) as consumer:
            await until(lambda: consumer.acked == 9, 15, "nine acks")
        assert most == 3
        info = await client.topic_info(topic)
        assert (info.ready_queue_size, info.ack_queue_size) == (0, 0)


@run_async
async def test_heartbeat_keeps_a_handler_running_past_its_ack_timeout_from_redelivery(node,
                                                                                      topic):
    async with AsyncDelayQueueClient(node.url, timeout=5) as client:
        sent = await client.send(topic, "slow")
        deliveries: list[int] = []

        async def handler(m: DelayMsg) -> bool:
            deliveries.append(m.retry)
            await asyncio.sleep(4.0)   # twice the ack timeout
            return True

        # Each beat (every half ack timeout) has the other half, 1 s, to reach the server:
        # more than a busy 2-core machine delays a wake-up and one request.
        async with client.listen(topic, handler, concurrency=2, ack_timeout_ms=2_000,
                                 **FAST) as consumer:
            await until(lambda: consumer.acked == 1, 12, "the ack")
        # A redelivery would have come before that ack (the ack ends the message), to the
        # idle slot, and its run would be in ``deliveries``: nothing to wait for after it.
        assert deliveries == [1] and consumer.lost == 0 and consumer.nacked == 0
        got = await client.get(topic, sent.msg_id)
        assert got.status is Status.ACKED and got.retry == 1


class StaleBeats(AsyncDelayQueueClient):
    """Counts the heartbeats the server refused as stale (409)."""

    stale = 0

    async def change_visibility(self, *args, **kwargs):
        try:
            return await super().change_visibility(*args, **kwargs)
        except StaleReceiptError:
            self.stale += 1
            raise


@run_async
async def test_a_delivery_its_heartbeat_found_lost_is_neither_acked_nor_nacked(node, topic):
    async with AsyncDelayQueueClient(node.url, timeout=5) as client, \
            StaleBeats(node.url, timeout=5) as listening:
        sent = await client.send(topic, "x")
        other: list[DelayMsg] = []

        async def handler(m: DelayMsg) -> bool:
            await client.change_visibility(m, 0)  # given up: someone else takes it
            other.extend(await client.pull(topic, ack_timeout_ms=60_000))
            # Runs until a heartbeat (every 500 ms) has met the newer receipt.
            await until(lambda: listening.stale > 0, 5, "a heartbeat met the newer receipt")
            return True

        async with listening.listen(topic, handler, ack_timeout_ms=1_000, **FAST) as consumer:
            await until(lambda: consumer.lost == 1, 5, "the lost delivery counted")
        assert consumer.acked == 0 and consumer.nacked == 0
        assert consumer._acks.requests == 0  # skipped, not sent and refused with 409
        assert [m.retry for m in other] == [2]
        got = await client.get(topic, sent.msg_id)
        assert got.status is Status.CONSUMING and got.retry == 2  # the other delivery's
        await client.ack(other[0])


@run_async
async def test_limit_takes_that_many_messages_and_wait_returns(node, topic):
    async with AsyncDelayQueueClient(node.url, timeout=5) as client:
        await client.send_batch(topic, [f"m{i}" for i in range(5)])

        async def handler(m: DelayMsg) -> bool:
            return True

        consumer = client.listen(topic, handler, concurrency=2, limit=3, **FAST)
        assert await consumer.wait(10) is True
        await consumer.stop()
        assert consumer.acked == 3
        assert (await client.topic_info(topic)).ready_queue_size == 2


@run_async
async def test_stop_lets_a_running_handler_finish_and_pulls_no_more(node, topic):
    async with AsyncDelayQueueClient(node.url, timeout=5) as client:
        await client.send(topic, "first", msg_id="first")
        finished: list[str] = []

        async def handler(m: DelayMsg) -> bool:
            await asyncio.sleep(0.5)
            finished.append(m.msg_id)
            return True

        consumer = client.listen(topic, handler, **FAST)
        await until(lambda: consumer.running == 1, 5, "the handler started")
        started = time.monotonic()
        await consumer.stop()
        assert finished == ["first"] and consumer.acked == 1
        assert time.monotonic() - started < FAST["grace_s"]   # not the grace waited out
        assert await consumer.wait(0) is True
        await client.send(topic, "after", msg_id="after")
        await asyncio.sleep(0.3)
        assert (await client.get(topic, "after")).status is Status.READY


@run_async
async def test_stop_with_no_grace_leaves_the_handler_to_settle_when_it_returns(node, topic):
    async with AsyncDelayQueueClient(node.url, timeout=5) as client:
        await client.send(topic, "x", msg_id="x")
        release = asyncio.Event()

        async def handler(m: DelayMsg) -> bool:
            await release.wait()
            return False

        consumer = client.listen(topic, handler, **FAST)
        await until(lambda: consumer.running == 1, 5, "the handler started")
        await consumer.stop(grace_s=0)
        assert (await client.get(topic, "x")).status is Status.CONSUMING
        release.set()
        await until(lambda: consumer.running == 0, 5, "the handler returned")
        await until(lambda: consumer.nacked == 1, 5, "its nack, sent alone after stop")
        assert (await client.get(topic, "x")).status is Status.READY


@run_async
async def test_a_groups_messages_run_one_at_a_time_in_order_beside_the_others(node, topic):
    async with AsyncDelayQueueClient(node.url, timeout=5) as client:
        await client.send_batch(topic, [{"msg": f"g{i}", "groupId": "g"} for i in range(4)]
                                + [f"u{i}" for i in range(4)])
        spans: dict[str, tuple[float, float]] = {}

        async def handler(m: DelayMsg) -> bool:
            start = time.monotonic()
            await asyncio.sleep(0.1)
            spans[m.msg] = (start, time.monotonic())
            return True

        async with client.listen(topic, handler, concurrency=4, **FAST) as consumer:
            await until(lambda: consumer.acked == 8, 15, "eight acks")
        group = [spans[f"g{i}"] for i in range(4)]
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(group, group[1:]))
        assert consumer.nacked == consumer.lost == 0


@run_async
async def test_pulls_that_fail_back_off_instead_of_looping_and_stop_ends_them(dead_url, topic):
    async with AsyncDelayQueueClient(dead_url, timeout=1, connect_timeout=0.5) as client:
        async def handler(m: DelayMsg) -> bool:
            return True

        consumer = client.listen(topic, handler, **FAST)
        await asyncio.sleep(1.2)
        started = time.monotonic()
        await consumer.stop()
        assert time.monotonic() - started < 1.0
        # Back-off 0.05 s doubling to 0.4 s, each at least half: at most ~9 pulls in 1.2 s.
        assert 2 <= client._transport.pool.nodes[0].failures <= 12


def test_listen_outside_an_event_loop_raises():
    client = AsyncDelayQueueClient("http://127.0.0.1:1")

    async def handler(m: DelayMsg) -> bool:
        return True

    with pytest.raises(RuntimeError):
        client.listen("t", handler)
    with pytest.raises(ValueError):
        asyncio.run(_listen(client, handler, concurrency=0))


async def _listen(client: AsyncDelayQueueClient, handler, **options) -> None:
    client.listen("t", handler, **options)
