"""The SDK's subscriptions against a live node, blocking and asyncio: create, list, settings
and delete; fan-out (each named subscription gets every message sent after it was created,
each on its own: status, retry, receipt, dead letters, pause); every consuming call in a
subscription; an unknown one raised as SubscriptionNotFoundError; and ``listen`` in two
subscriptions at once, each handler meeting every message once, acked and heartbeaten in its
own subscription."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from delayqueue.aio import AsyncDelayQueueClient
from delayqueue.client import (
    BadRequestError,
    DelayMsg,
    DelayQueueClient,
    StaleReceiptError,
    Status,
    SubscriptionConfig,
    SubscriptionInfo,
    SubscriptionNotFoundError,
)

from support.sdk import node, run_async, topic  # noqa: F401 - fixtures
from support.wait import wait_until

FAST = {"poll_timeout_ms": 500, "backoff_base_s": 0.05, "backoff_max_s": 0.4, "grace_s": 5}


@pytest.fixture
def client(node):
    with DelayQueueClient(node.url, timeout=5) as c:
        yield c


def ids(messages: list[DelayMsg]) -> list[str]:
    return sorted(m.msg_id for m in messages)


# ---- create, list, settings, delete ---------------------------------------------------------
def test_a_subscription_is_created_listed_after_the_default_configured_and_deleted(client,
                                                                                 topic):
    before = int(time.time() * 1000)
    info = client.create_subscription(topic, "audit", max_retry=3, ack_timeout_ms=5_000)
    assert isinstance(info, SubscriptionInfo)
    assert info.subscription == "audit" and not info.is_default
    assert info.created_time is not None and info.created_time >= before - 1_000
    assert (info.ready_queue_size, info.ack_queue_size, info.dead_queue_size,
            info.paused) == (0, 0, 0, False)

    listed = client.list_subscriptions(topic)
    assert [s.subscription for s in listed] == ["default", "audit"]
    assert listed[0].is_default

    config = client.get_subscription_config(topic, "audit")
    assert isinstance(config, SubscriptionConfig) and config.subscription == "audit"
    assert (config.max_retry, config.ack_timeout_ms) == (3, 5_000)
    assert config.source("max_retry") == config.source("ackTimeoutMillis") == "subscription"
    assert config.source("redelivery_delay_ms") in ("topic", "server")

    # Creating it again changes only the values given.
    client.create_subscription(topic, "audit", max_retry=4)
    config = client.get_subscription_config(topic, "audit")
    assert (config.max_retry, config.ack_timeout_ms) == (4, 5_000)

    config = client.set_subscription_config(topic, "audit", dead_letter=False)
    assert config.dead_letter is False and config.source("dead_letter") == "subscription"
    assert config.max_retry == 4
    # A topic value shows through where the subscription has none of its own.
    client.set_topic_config(topic, redelivery_delay_ms=2_000)
    config = client.set_subscription_config(topic, "audit", reset=True)
    assert config.source("max_retry") != "subscription"
    assert (config.redelivery_delay_ms, config.source("redelivery_delay_ms")) == (2_000, "topic")

    client.delete_subscription(topic, "audit")
    assert [s.subscription for s in client.list_subscriptions(topic)] == ["default"]
    with pytest.raises(SubscriptionNotFoundError):
        client.delete_subscription(topic, "audit")


@pytest.mark.parametrize("name", ["default", "a b", "x" * 65, "é"])
def test_a_name_outside_the_rules_is_refused_naming_subscription(client, topic, name):
    with pytest.raises(BadRequestError, match="subscription"):
        client.create_subscription(topic, name)


def test_the_default_subscription_cannot_be_deleted(client, topic):
    client.send(topic, "x")
    with pytest.raises(BadRequestError, match="subscription"):
        client.delete_subscription(topic, "default")


def test_a_setting_no_subscription_may_have_is_refused(client, topic):
    with pytest.raises(BadRequestError):
        client.create_subscription(topic, "audit", ttl_ms=60_000)


def test_an_unknown_subscription_is_not_found_by_every_consuming_call(client, topic):
    client.send(topic, "x", msg_id="m1")
    calls = {
        "pull": lambda: client.pull(topic, subscription="nope"),
        "long_poll": lambda: client.long_poll(topic, timeout_ms=100, subscription="nope"),
        "ack": lambda: client.ack(topic, "m1", subscription="nope"),
        "nack": lambda: client.nack(topic, "m1", subscription="nope"),
        "change_visibility": lambda: client.change_visibility(topic, "m1", 1_000,
                                                              subscription="nope"),
        "get": lambda: client.get(topic, "m1", subscription="nope"),
        "list_dead": lambda: client.list_dead(topic, subscription="nope"),
        "redrive_dead": lambda: client.redrive_dead(topic, subscription="nope"),
        "purge_dead": lambda: client.purge_dead(topic, subscription="nope"),
        "list_messages": lambda: client.list_messages(topic, 2, subscription="nope"),
        "pause_topic": lambda: client.pause_topic(topic, subscription="nope"),
        "resume_topic": lambda: client.resume_topic(topic, subscription="nope"),
        "get_subscription_config": lambda: client.get_subscription_config(topic, "nope"),
        "set_subscription_config": lambda: client.set_subscription_config(topic, "nope",
                                                                          max_retry=1),
    }
    answered = []
    for name, call in calls.items():
        try:
            call()
        except SubscriptionNotFoundError:
            continue
        answered.append(name)
    assert answered == []
    # A batch answers it per entry (or as a whole): each entry's 404 names the subscription.
    for batch in (lambda: client.ack_batch(topic, ["m1"], subscription="nope"),
                  lambda: client.change_visibility_batch(topic, [("m1", 1_000)],
                                                         subscription="nope")):
        try:
            [result] = batch()
        except SubscriptionNotFoundError:
            continue
        assert result.code == 404 and result.msg.startswith("subscription"), result


# ---- fan-out --------------------------------------------------------------------------------
def test_each_named_subscription_gets_every_message_sent_after_it_was_created(client, topic):
    client.send(topic, "early", msg_id="early")
    client.create_subscription(topic, "s1")
    client.create_subscription(topic, "s2")
    for i in range(3):
        client.send(topic, f"m{i}", msg_id=f"m{i}")
    assert ids(client.pull(topic, 10)) == ["early", "m0", "m1", "m2"]
    assert ids(client.pull(topic, 10, subscription="s1")) == ["m0", "m1", "m2"]
    assert ids(client.long_poll(topic, 10, 1_000, subscription="s2")) == ["m0", "m1", "m2"]
    assert client.pull(topic, 10, subscription="s1") == []
    info = client.topic_info(topic)
    assert [s.subscription for s in info.subscriptions] == ["default", "s1", "s2"]
    assert [s.ack_queue_size for s in info.subscriptions] == [4, 3, 3]


def test_an_ack_in_one_subscription_leaves_the_message_in_the_others(client, topic):
    client.create_subscription(topic, "s1")
    client.create_subscription(topic, "s2")
    client.send(topic, "x", msg_id="m1")
    [in_s1] = client.pull(topic, subscription="s1")
    [in_s2] = client.pull(topic, subscription="s2")
    assert in_s1.receipt != in_s2.receipt
    client.ack(in_s1, subscription="s1")
    assert client.get(topic, "m1", subscription="s1").status is Status.ACKED
    assert client.get(topic, "m1", subscription="s2").status is Status.CONSUMING
    whole = client.get(topic, "m1")
    assert whole.status is Status.READY                  # the default's: never pulled
    assert whole.subscriptions == {"s1": {"status": 4, "retry": 1},
                                   "s2": {"status": 3, "retry": 1}}
    # A receipt of one subscription is refused by another.
    with pytest.raises(StaleReceiptError):
        client.ack(topic, "m1", receipt=in_s1.receipt, subscription="s2")
    client.nack(in_s2, subscription="s2")
    assert client.get(topic, "m1", subscription="s2").status is Status.READY


def test_dead_letters_are_kept_redriven_and_purged_per_subscription(client, topic):
    client.create_subscription(topic, "s1", max_retry=0)
    client.send(topic, "x", msg_id="m1")
    [m] = client.pull(topic, subscription="s1")
    client.nack(m, subscription="s1")
    assert client.get(topic, "m1", subscription="s1").status is Status.RETRY_EXHAUSTED
    assert ids(client.list_dead(topic, subscription="s1").messages) == ["m1"]
    assert [m.msg_id for m in client.iter_dead(topic, subscription="s1")] == ["m1"]
    assert client.list_dead(topic).messages == []
    assert client.get(topic, "m1").status is Status.READY  # the default still holds it
    assert client.redrive_dead(topic, subscription="s1") == 1
    [m] = client.pull(topic, subscription="s1")
    assert m.retry == 1
    client.nack(m, subscription="s1")
    assert client.purge_dead(topic, "m1", subscription="s1") == 1
    assert client.list_dead(topic, subscription="s1").messages == []


def test_a_paused_subscription_hands_nothing_out_while_the_others_go_on(client, topic):
    client.create_subscription(topic, "s1")
    client.send(topic, "x", msg_id="m1")
    assert client.pause_topic(topic, subscription="s1") is True
    assert client.pause_topic(topic, subscription="s1") is False
    assert client.pull(topic, subscription="s1") == []
    assert [s.paused for s in client.list_subscriptions(topic)] == [False, True]
    assert ids(client.pull(topic)) == ["m1"]
    assert client.resume_topic(topic, subscription="s1") is True
    assert ids(client.pull(topic, subscription="s1")) == ["m1"]


def test_list_messages_and_the_batches_act_in_the_subscription(client, topic):
    client.create_subscription(topic, "s1")
    client.send_batch(topic, ["a", "b", "c"])
    assert len(client.list_messages(topic, Status.READY, subscription="s1").messages) == 3
    pulled = client.pull(topic, 3, subscription="s1")
    assert sorted(m.msg_id for m in client.iter_messages(topic, Status.CONSUMING,
                                                         subscription="s1")) == ids(pulled)
    assert client.list_messages(topic, Status.CONSUMING).messages == []
    beats = client.change_visibility_batch(topic, [(m, 60_000) for m in pulled],
                                           subscription="s1")
    assert [r.code for r in beats] == [200] * 3
    acks = client.ack_batch(topic, pulled, subscription="s1")
    assert [r.code for r in acks] == [200] * 3
    for m in pulled:
        assert client.get(topic, m.msg_id, subscription="s1").status is Status.ACKED
        assert client.get(topic, m.msg_id).status is Status.READY


# ---- listen ---------------------------------------------------------------------------------
def test_listen_in_two_subscriptions_gives_each_handler_every_message_once(client, topic):
    client.create_subscription(topic, "s1")
    client.create_subscription(topic, "s2")
    seen: dict[str, list[str]] = {"s1": [], "s2": []}
    lock = threading.Lock()

    def handler_of(name: str):
        def handle(m: DelayMsg) -> bool:
            with lock:
                seen[name].append(m.msg_id)
            return True
        return handle

    sent = [f"m{i}" for i in range(20)]
    with client.listen(topic, handler_of("s1"), subscription="s1", consume_threads=4,
                       **FAST) as one, \
            client.listen(topic, handler_of("s2"), subscription="s2", consume_threads=4,
                          **FAST) as two:
        client.send_batch(topic, [{"msg": i, "msgId": i} for i in sent])
        wait_until(lambda: one.acked == two.acked == 20, 15,
                   message=lambda: f"acked {one.acked}, {two.acked}")
    assert sorted(seen["s1"]) == sorted(seen["s2"]) == sorted(sent)
    assert (one.nacked, one.lost, two.nacked, two.lost) == (0, 0, 0, 0)
    for msg_id in sent:
        assert client.get(topic, msg_id, subscription="s1").status is Status.ACKED
        assert client.get(topic, msg_id, subscription="s2").status is Status.ACKED
        assert client.get(topic, msg_id).status is Status.READY  # nobody consumed the default


def test_a_long_handler_in_a_subscription_is_heartbeaten_there(client, topic):
    client.create_subscription(topic, "s1")
    client.send(topic, "slow", msg_id="m1")
    runs: list[int] = []

    def handle(m: DelayMsg) -> bool:
        runs.append(m.retry)
        time.sleep(2.5)  # past the 1 s ack timeout: only the heartbeats keep it
        return True

    with client.listen(topic, handle, subscription="s1", ack_timeout_ms=1_000,
                       **FAST) as consumer:
        wait_until(lambda: consumer.acked == 1, 10)
    assert runs == [1] and consumer.lost == 0
    assert client.get(topic, "m1", subscription="s1").status is Status.ACKED


@run_async
async def test_async_listen_in_two_subscriptions_gives_each_handler_every_message_once(node,
                                                                                    topic):
    async with AsyncDelayQueueClient(node.url, timeout=5) as client:
        await client.create_subscription(topic, "s1")
        await client.create_subscription(topic, "s2")
        assert [s.subscription for s in await client.list_subscriptions(topic)] == \
            ["default", "s1", "s2"]
        seen: dict[str, list[str]] = {"s1": [], "s2": []}

        def handler_of(name: str):
            async def handle(m: DelayMsg) -> bool:
                seen[name].append(m.msg_id)
                await asyncio.sleep(0)
                return True
            return handle

        sent = [f"m{i}" for i in range(10)]
        async with client.listen(topic, handler_of("s1"), subscription="s1", concurrency=3,
                                 **FAST) as one, \
                client.listen(topic, handler_of("s2"), subscription="s2", concurrency=3,
                              **FAST) as two:
            await client.send_batch(topic, [{"msg": i, "msgId": i} for i in sent])
            deadline = time.monotonic() + 15
            while not one.acked == two.acked == 10:
                assert time.monotonic() < deadline, (one.acked, two.acked)
                await asyncio.sleep(0.02)
        assert sorted(seen["s1"]) == sorted(seen["s2"]) == sorted(sent)
        for msg_id in sent:
            got = await client.get(topic, msg_id)
            assert got.subscriptions == {"s1": {"status": 4, "retry": 1},
                                         "s2": {"status": 4, "retry": 1}}
        with pytest.raises(SubscriptionNotFoundError):
            await client.pull(topic, subscription="nope")
