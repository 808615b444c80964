"""Send order and message groups on every Redis topology, and across a Redis restart: the
order is data (the record's acceptance sequence, the ``ready`` member), so a standalone Redis,
a Sentinel master and a Cluster shard keep it alike, and an append-only Redis that restarts
gives it back as it was."""

from __future__ import annotations

import pytest

from delayqueue.background.runtime import Runtime
from delayqueue.core.requests import SendRequest
from delayqueue.settings.config import Settings

from support.redis_server import RedisServer
from support.topologies import TOPOLOGIES, backend_named

SINGLES = [f"single-{i:02d}" for i in range(20)]
BATCH = [f"batch-{(i * 37) % 200:03d}" for i in range(200)]       # entry order, not sorted


def send_all(queue, topic: str, trigger_ms: int) -> None:
    """Twenty single sends, a batch of 200, and three groups of five, one triggerTime."""
    for msg_id in SINGLES:
        queue.send(topic, "x", msg_id=msg_id, trigger_time_ms=trigger_ms)
    queue.send_batch(topic, [SendRequest("x", m, trigger_time_ms=trigger_ms) for m in BATCH])
    queue.send_batch(topic, [SendRequest("x", f"g{g}-{i}", trigger_time_ms=trigger_ms,
                                         group_id=f"g{g}") for i in range(5) for g in range(3)])


def delivered_at(message) -> int:
    """When the server handed the message out: the receipt is "<time hex>.<deliveries hex>"
    (lua/includes/message.lua)."""
    return int(message.receipt.split(".")[0], 16)


def drain(queue, topic: str) -> list[str]:
    """Pull everything in batches of 50 (grouped ones acked as they come), in pull order."""
    order: list[str] = []
    for _ in range(100):
        pulled = queue.pull(topic, count=50).messages
        if not pulled:
            return order
        for message in pulled:
            order.append(message.msg_id)
            queue.ack(topic, message.msg_id, message.receipt)
    raise AssertionError("the topic did not drain")


def expected_order() -> list[str]:
    groups = [f"g{g}-{i}" for i in range(5) for g in range(3)]
    return SINGLES + BATCH + groups


def check_drained(order: list[str]) -> None:
    """Ungrouped messages strictly in send order; each group's messages in send order too
    (one per group per pull, so groups interleave with later pulls)."""
    ungrouped = [m for m in order if not m.startswith("g")]
    assert ungrouped == SINGLES + BATCH
    for g in range(3):
        assert [m for m in order if m.startswith(f"g{g}-")] == [f"g{g}-{i}" for i in range(5)]
    assert sorted(order) == sorted(expected_order())


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_equal_trigger_times_keep_send_order_on_every_topology(request, topology):
    backend = backend_named(request, topology)
    with backend.place() as (url, extra):
        runtime = Runtime(Settings(redis_url=url, snapshot_dir="", **extra))
        try:
            queue = runtime.queue
            trigger = runtime.clock.now_ms() + 300
            send_all(queue, "orders", trigger)
            # Pulls until the trigger time: a pull that reaches Redis at the trigger time may
            # hand messages out. Never early: each delivery's own time (its receipt's) is not
            # before its triggerTime; and such deliveries keep their place in the order.
            early: list[str] = []
            while runtime.clock.now_ms() < trigger:
                for message in queue.pull("orders", count=50).messages:
                    assert delivered_at(message) >= message.trigger_time == trigger
                    early.append(message.msg_id)
                    queue.ack("orders", message.msg_id, message.receipt)
            check_drained(early + drain(queue, "orders"))
        finally:
            runtime.client.close()


def test_the_order_survives_a_redis_restart(tmp_path):
    server = RedisServer(tmp_path, extra_args=["--appendonly", "yes",
                                               "--appendfsync", "always"]).start()
    try:
        runtime = Runtime(Settings(redis_url=server.url, snapshot_dir=""))
        trigger = runtime.clock.now_ms()
        send_all(runtime.queue, "orders", trigger)
        first = runtime.queue.pull("orders", count=1).messages[0]
        runtime.queue.ack("orders", first.msg_id, first.receipt)
        runtime.client.close()
        server.stop()                                                 # kill -9
        server.start()
        runtime = Runtime(Settings(redis_url=server.url, snapshot_dir=""))
        try:
            assert first.msg_id == SINGLES[0]
            check_drained([first.msg_id, *drain(runtime.queue, "orders")])
        finally:
            runtime.client.close()
    finally:
        server.stop()
