"""The SDK's debounce (``on_duplicate="replace"``) and dedup window (``dedup_window_ms``),
blocking and asyncio, against a live node: what a send answers, the errors a refused replace
raises, and the batch results."""

from __future__ import annotations

import asyncio

import pytest

from delayqueue.aio import AsyncDelayQueueClient
from delayqueue.client import (
    BadRequestError,
    DelayQueueClient,
    MessageConsumingError,
    SendEntry,
    StaleReceiptError,
    Status,
)

from support.sdk import node, topic  # noqa: F401 - fixtures


@pytest.fixture
def client(node):
    with DelayQueueClient(node.url, timeout=5) as c:
        yield c


def test_send_with_replace_begins_a_waiting_message_again(client, topic):
    first = client.send(topic, "one", delay_ms=60_000, msg_id="d", max_retry=4)
    again = client.send(topic, "two", delay_ms=120_000, msg_id="d", on_duplicate="replace")
    assert again.replaced and not again.duplicate
    assert (again.msg, again.status, again.retry, again.max_retry) == (
        "two", Status.WAITING, 0, 4)
    assert again.trigger_time >= first.trigger_time + 60_000
    assert client.get(topic, "d").msg == "two"
    kept = client.send(topic, "three", msg_id="d")                    # keep, the default
    assert kept.duplicate and not kept.replaced and kept.msg == "two"


def test_a_replaced_delivery_s_receipt_is_stale(client, topic):
    client.send(topic, "one", msg_id="r")
    [delivered] = client.pull(topic)
    client.nack(delivered)
    assert client.send(topic, "two", msg_id="r", on_duplicate="replace").replaced
    with pytest.raises(StaleReceiptError):
        client.ack(delivered)


def test_a_refused_replace_raises_and_a_bad_value_is_refused_before_sending(client, topic):
    client.send(topic, "one", msg_id="c", group_id="g")
    client.pull(topic)
    with pytest.raises(MessageConsumingError) as consuming:
        client.send(topic, "two", msg_id="c", group_id="g", on_duplicate="replace")
    assert consuming.value.code == 409 and consuming.value.msg.startswith("msgId: ")
    client.send(topic, "x", msg_id="w", delay_ms=60_000, group_id="g")
    with pytest.raises(BadRequestError) as other_group:
        client.send(topic, "y", msg_id="w", on_duplicate="replace")
    assert other_group.value.msg.startswith("groupId: ")
    with pytest.raises(ValueError, match="on_duplicate"):
        client.send(topic, "z", on_duplicate="overwrite")
    with pytest.raises(ValueError, match="onDuplicate"):
        client.send_batch(topic, [{"msg": "z", "onDuplicate": "overwrite"}])
    assert client.get(topic, "w").msg == "x"


def test_send_batch_reports_replaced_and_duplicate_per_entry(client, topic):
    client.send(topic, "a1", msg_id="a", delay_ms=60_000)
    client.send(topic, "b1", msg_id="b", delay_ms=60_000)
    results = client.send_batch(topic, [
        SendEntry("a2", msg_id="a", on_duplicate="replace"),
        {"msg": "b2", "msgId": "b"},
        {"msg": "n", "msgId": "n", "onDuplicate": "replace"}])
    assert [(r.replaced, r.duplicate) for r in results] == [
        (True, False), (False, True), (False, False)]
    assert client.get(topic, "a").msg == "a2" and client.get(topic, "b").msg == "b1"


def test_an_atomic_batch_with_a_consuming_replace_writes_nothing(client, topic):
    client.send(topic, "busy", msg_id="busy")
    client.pull(topic)
    results = client.send_batch(topic, [
        SendEntry("n", msg_id="new"), SendEntry("b", msg_id="busy", on_duplicate="replace")],
        atomic=True)
    assert [r.code for r in results] == [409, 409]
    assert results[0].msg.startswith("not written") and results[1].msg.startswith("msgId: ")
    assert client.get(topic, "new") is None


def test_the_dedup_window_setting_answers_an_ended_message(client, topic):
    config = client.set_topic_config(topic, dedup_window_ms=3_600_000)
    assert config.dedup_window_ms == 3_600_000 and config.source("dedup_window_ms") == "topic"
    client.send(topic, "once", msg_id="w")
    [delivered] = client.pull(topic)
    client.ack(delivered)
    again = client.send(topic, "twice", msg_id="w", on_duplicate="replace")
    assert again.duplicate and again.status is Status.ACKED and again.msg == "once"
    assert client.topic_info(topic).ready_queue_size == 0


def test_the_asyncio_client_replaces_as_the_blocking_one(node, topic):
    async def main():
        async with AsyncDelayQueueClient(node.url, timeout=5) as client:
            await client.send(topic, "one", msg_id="a", delay_ms=60_000)
            again = await client.send(topic, "two", msg_id="a", delay_ms=60_000,
                                      on_duplicate="replace")
            assert again.replaced and again.msg == "two"
            [result] = await client.send_batch(topic, [
                SendEntry("three", msg_id="a", delay_ms=60_000, on_duplicate="replace")])
            assert result.replaced and result.delay_msg.msg == "three"
            await client.send(topic, "c", msg_id="c")
            assert [m.msg_id for m in await client.pull(topic)] == ["c"]
            with pytest.raises(MessageConsumingError):
                await client.send(topic, "d", msg_id="c", on_duplicate="replace")

    asyncio.run(main())
