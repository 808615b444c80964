"""The SDK's push subscriptions against a live node pushing to a local receiver, blocking and
asyncio: every message POSTed once, signed so that verify_signature passes, read by
PushDelivery and acked on 2xx (in that subscription only); a non-2xx answer retried with a new
receipt and shown by push_status; pulls refused; the default subscription pushed and reset;
the URL cleared; URLs and values the server refuses."""

from __future__ import annotations

import pytest

from delayqueue.aio import AsyncDelayQueueClient
from delayqueue.client import (
    BadRequestError,
    DelayQueueClient,
    PushDelivery,
    PushStatus,
    Status,
    SubscriptionNotFoundError,
    verify_signature,
)

from support.receiver import Answer
from support.sdk import push_node, receiver, run_async, topic  # noqa: F401 - fixtures
from support.wait import wait_until

SECRET = "whsec-live-1"


@pytest.fixture
def client(push_node):
    with DelayQueueClient(push_node.url, timeout=5) as c:
        yield c


def acked_in(client, topic, subscription, msg_ids) -> bool:
    return all(client.get(topic, m, subscription=subscription).status == Status.ACKED
               for m in msg_ids)


def test_each_message_is_pushed_signed_and_acked_by_a_2xx(client, topic, receiver):
    info = client.create_subscription(topic, "hooks", push_url=receiver.url("/hooks"),
                                      push_secret=SECRET, push_concurrency=4,
                                      push_timeout_ms=5_000)
    assert info.push_url == receiver.url("/hooks")
    config = client.get_subscription_config(topic, "hooks")
    assert config.is_push and config.push_secret_set
    assert (config.push_url, config.push_concurrency, config.push_timeout_ms) == \
        (receiver.url("/hooks"), 4, 5_000)
    assert config.source("push_url") == config.source("push_concurrency") == "subscription"
    assert "pushSecret" not in config.raw["data"] and SECRET not in repr(config.raw)
    listed = {s.subscription: s.push_url for s in client.list_subscriptions(topic)}
    assert listed == {"default": None, "hooks": receiver.url("/hooks")}

    sent = [client.send(topic, f"order {i}", msg_id=f"m{i}").msg_id for i in range(3)]
    pushes = receiver.wait_for(3, timeout_s=20)
    wait_until(lambda: acked_in(client, topic, "hooks", sent), 20,
               message="the pushed messages were not all acked")
    assert sorted(p.json["delayMsg"]["msgId"] for p in receiver.requests()) == sent  # once
    for push in pushes:
        assert push.path == "/hooks"
        assert verify_signature(SECRET, push.headers, push.body)
        assert not verify_signature("another", push.headers, push.body)
        delivery = PushDelivery.from_body(push.body)
        assert delivery.subscription == "hooks" and delivery.message.topic == topic
        assert delivery.message.msg == f"order {delivery.message.msg_id[1:]}"
        assert delivery.message.receipt == push.headers["X-DelayQueue-Receipt"]
        assert push.headers["X-DelayQueue-Msg-Id"] == delivery.message.msg_id
        assert push.headers["X-DelayQueue-Subscription"] == "hooks"
    # Pushed in its own subscription only: the default one still holds them, ready.
    assert all(client.get(topic, m).status == Status.READY for m in sent)


def test_a_failed_push_is_retried_with_a_new_receipt_and_push_status_shows_it(client, topic,
                                                                             receiver):
    receiver.script("/push", Answer(503), Answer(500))     # then 200
    client.create_subscription(topic, "flaky", push_url=receiver.url(), max_retry=5,
                               redelivery_delay_ms=0)
    client.send(topic, "x", msg_id="m1")
    wait_until(lambda: acked_in(client, topic, "flaky", ["m1"]), 30,
               message=lambda: f"{len(receiver.requests())} pushes, not acked")
    pushes = receiver.requests()
    assert len(pushes) == 3
    receipts = [PushDelivery.from_body(p.body).message.receipt for p in pushes]
    retries = [PushDelivery.from_body(p.body).message.retry for p in pushes]
    assert len(set(receipts)) == 3 and retries == sorted(retries) and retries[0] < retries[-1]

    status = client.push_status(topic, "flaky")
    assert isinstance(status, PushStatus) and status.is_push
    assert (status.subscription, status.push_url, status.in_flight, status.paused) == \
        ("flaky", receiver.url(), 0, False)
    assert not status.push_secret_set
    assert [(e.msg_id, e.outcome, e.status) for e in status.last_errors] == \
        [("m1", "5xx", 500), ("m1", "5xx", 503)]                 # newest first
    assert all(e.time > 0 and e.millis is not None for e in status.last_errors)


def test_a_consumer_cannot_pull_a_push_subscription(client, topic, receiver):
    client.create_subscription(topic, "hooks", push_url=receiver.url())
    with pytest.raises(BadRequestError, match="push subscription"):
        client.pull(topic, subscription="hooks")
    with pytest.raises(BadRequestError, match="push subscription"):
        client.long_poll(topic, timeout_ms=100, subscription="hooks")


def test_clearing_the_url_and_the_secret_makes_it_pulled_and_unsigned(client, topic,
                                                                     receiver):
    client.create_subscription(topic, "hooks", push_url=receiver.url(), push_secret=SECRET)
    config = client.set_subscription_config(topic, "hooks", push_url="", push_secret="")
    assert not config.is_push and not config.push_secret_set
    assert config.source("push_url") == "server"
    assert [s.push_url for s in client.list_subscriptions(topic)] == [None, None]
    client.send(topic, "x", msg_id="m1")
    [m] = wait_until(lambda: client.pull(topic, subscription="hooks"), 10)
    assert m.msg_id == "m1"
    assert receiver.requests() == []


def test_the_default_subscription_is_pushed_and_reset(client, topic, receiver):
    config = client.set_subscription_config(topic, push_url=receiver.url("/default"),
                                            push_secret=SECRET)
    assert config.subscription == "default" and config.is_push and config.push_secret_set
    assert client.get_subscription_config(topic).push_url == receiver.url("/default")
    client.send(topic, "x", msg_id="m1")
    [push] = receiver.wait_for(1, timeout_s=20)
    assert push.headers["X-DelayQueue-Subscription"] == "default"
    assert verify_signature(SECRET, push.headers, push.body)
    wait_until(lambda: client.get(topic, "m1").status == Status.ACKED, 20)
    assert client.push_status(topic).push_url == receiver.url("/default")
    # Only push settings: the default subscription's others are the topic's.
    with pytest.raises(BadRequestError):
        client.set_subscription_config(topic, "default", max_retry=3)
    config = client.set_subscription_config(topic, "default", reset=True)
    assert not config.is_push and not config.push_secret_set
    assert not client.push_status(topic).is_push


@pytest.mark.parametrize("url, reason", [
    ("ftp://127.0.0.1/x", "http"), ("http://user:pw@127.0.0.1/x", "pushUrl"),
    ("http://10.1.2.3/x", "pushUrl"), ("http://no-such-host.invalid/x", "pushUrl"),
])
def test_a_url_the_server_refuses_is_a_bad_request_and_nothing_is_written(client, topic,
                                                                          url, reason):
    client.create_subscription(topic, "hooks")
    with pytest.raises(BadRequestError, match=reason):
        client.set_subscription_config(topic, "hooks", push_url=url, max_retry=7)
    config = client.get_subscription_config(topic, "hooks")
    assert not config.is_push and config.source("max_retry") != "subscription"


@pytest.mark.parametrize("setting", [{"push_concurrency": 0}, {"push_concurrency": 10_001},
                                     {"push_timeout_ms": 99}, {"push_timeout_ms": 600_001}])
def test_push_values_out_of_range_are_refused(client, topic, receiver, setting):
    with pytest.raises(BadRequestError, match="push"):
        client.create_subscription(topic, "hooks", push_url=receiver.url(), **setting)


def test_push_status_of_a_pulled_and_of_an_unknown_subscription(client, topic):
    client.create_subscription(topic, "audit")
    status = client.push_status(topic, "audit")
    assert not status.is_push and status.in_flight == 0 and status.last_errors == ()
    assert status.push_timeout_ms > 0 and status.push_concurrency > 0   # the server's defaults
    with pytest.raises(SubscriptionNotFoundError):
        client.push_status(topic, "nope")


@run_async
async def test_the_asyncio_client_sets_and_reads_push(push_node, topic, receiver):
    async with AsyncDelayQueueClient(push_node.url, timeout=5) as client:
        info = await client.create_subscription(topic, "hooks", push_url=receiver.url(),
                                                push_secret=SECRET)
        assert info.push_url == receiver.url()
        await client.send(topic, "x", msg_id="m1")
        [push] = receiver.wait_for(1, timeout_s=20)
        assert verify_signature(SECRET, push.headers, push.body)
        status = await client.push_status(topic, "hooks")
        assert status.is_push and status.push_secret_set
        config = await client.set_subscription_config(topic, "hooks", push_concurrency=2)
        assert config.push_concurrency == 2 and config.push_url == receiver.url()
        default = await client.get_subscription_config(topic)
        assert default.subscription == "default" and not default.is_push
