"""What the SDK sends and reads for push delivery, without a server: the push settings of
create_subscription and set_subscription_config as form parameters (the default subscription
named "default"), values of the wrong kind and a secret the server would refuse stopped
before anything is sent (and the secret never in the error), getPushStatus's request, and the
models read from answers: SubscriptionConfig's push fields and sources, PushStatus with its
PushFailure entries, SubscriptionInfo.push_url, PushDelivery from a pushed body."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from delayqueue.aio import AsyncDelayQueueClient
from delayqueue.client import (
    PUSH_SETTINGS,
    DelayMsg,
    DelayQueueClient,
    PushDelivery,
    PushFailure,
    PushStatus,
    Status,
    SubscriptionConfig,
    SubscriptionInfo,
)
from delayqueue.client.plans import Plans
from delayqueue.settings.topic_setting import PUSH_SETTINGS as PUSH_TABLE

SECRET = "s3cr3t-do-not-print"


def request(plan):
    return next(plan)


def answer(plan, envelope):
    next(plan)
    with pytest.raises(StopIteration) as done:
        plan.send(envelope)
    return done.value.value


def test_the_sdk_names_of_the_push_settings_are_the_tables():
    assert PUSH_SETTINGS == {"push_url": "pushUrl", "push_timeout_ms": "pushTimeoutMillis",
                             "push_concurrency": "pushConcurrency",
                             "push_secret": "pushSecret"}
    assert PUSH_SETTINGS == {s.sdk: s.name for s in PUSH_TABLE}


def test_create_subscription_sends_the_push_settings_given_and_only_those():
    sent = request(Plans(1).create_subscription(
        "t", "hooks", push_url="https://example.com/h", push_timeout_ms=timedelta(seconds=5),
        push_concurrency=4, push_secret=SECRET, max_retry=3))
    assert sent.endpoint == "createSubscription" and sent.idempotent
    assert dict(sent.params) == {"topic": "t", "subscription": "hooks", "maxRetry": "3",
                                 "pushUrl": "https://example.com/h",
                                 "pushTimeoutMillis": "5000", "pushConcurrency": "4",
                                 "pushSecret": SECRET}
    plain = request(Plans(1).create_subscription("t", "audit"))
    assert dict(plain.params) == {"topic": "t", "subscription": "audit"}


def test_an_empty_url_or_secret_is_sent_to_clear_it():
    sent = request(Plans(1).set_subscription_config("t", "hooks", push_url="",
                                                    push_secret=""))
    assert (sent.params["pushUrl"], sent.params["pushSecret"]) == ("", "")
    assert "pushTimeoutMillis" not in sent.params


@pytest.mark.parametrize("subscription", [None, "", "default"])
def test_set_subscription_config_of_the_default_subscription_names_it(subscription):
    plan = Plans(1).set_subscription_config("t", subscription, reset=True,
                                            push_url="https://example.com/h")
    sent = request(plan)
    assert sent.endpoint == "setSubscriptionConfig"
    assert dict(sent.params) == {"topic": "t", "subscription": "default", "reset": "true",
                                 "pushUrl": "https://example.com/h"}
    config = answer(Plans(1).set_subscription_config("t", subscription, push_concurrency=2),
                    {"code": 200, "data": {"pushUrl": "https://example.com/h",
                                           "pushConcurrency": 2, "pushTimeoutMillis": 10000,
                                           "pushSecretSet": False},
                     "source": {"pushUrl": "subscription", "pushConcurrency": "subscription",
                                "pushTimeoutMillis": "server"}})
    assert config.subscription == "default"
    assert (config.push_url, config.push_concurrency, config.push_timeout_ms) == \
        ("https://example.com/h", 2, 10000)


def test_get_subscription_config_without_a_name_is_the_default_subscriptions():
    assert dict(request(Plans(1).get_subscription_config("t")).params) == \
        {"topic": "t", "subscription": "default"}


@pytest.mark.parametrize("kwargs", [
    {"push_url": 42}, {"push_timeout_ms": "10s"}, {"push_concurrency": 1.5},
    {"push_concurrency": True}, {"push_secret": 123},
])
def test_a_push_value_of_the_wrong_kind_is_refused_before_sending(kwargs):
    for plan in (Plans(1).create_subscription("t", "hooks", **kwargs),
                 Plans(1).set_subscription_config("t", "hooks", **kwargs)):
        with pytest.raises(ValueError, match=next(iter(kwargs))):
            request(plan)


@pytest.mark.parametrize("secret", ["x" * 257, "é" * 129, SECRET + "\x00", SECRET + "\x1b"])
def test_a_secret_the_server_would_refuse_is_refused_without_showing_it(secret):
    for plan in (Plans(1).create_subscription("t", "hooks", push_secret=secret),
                 Plans(1).set_subscription_config("t", None, push_secret=secret)):
        with pytest.raises(ValueError, match="push_secret") as refused:
            request(plan)
        assert secret[:8] not in str(refused.value)
    # 256 bytes is allowed
    assert request(Plans(1).create_subscription("t", "hooks", push_secret="x" * 256))


def test_push_status_names_the_subscription_only_when_given():
    sent = request(Plans(1).push_status("t", "hooks"))
    assert (sent.endpoint, dict(sent.params), sent.idempotent) == \
        ("getPushStatus", {"topic": "t", "subscription": "hooks"}, True)
    assert dict(request(Plans(1).push_status("t")).params) == {"topic": "t"}


STATUS = {"subscription": "hooks", "pushUrl": "https://example.com/h",
          "pushTimeoutMillis": 2000, "pushConcurrency": 8, "pushSecretSet": True,
          "paused": False, "inFlight": 3,
          "lastErrors": [{"time": 1_800_000_000_500, "msgId": "m2", "outcome": "5xx",
                          "status": 503, "error": "HTTP 503", "millis": 12.5},
                         {"time": 1_800_000_000_000, "msgId": "m1", "outcome": "timeout",
                          "status": None, "error": "read timed out", "millis": 2000.0}]}


def test_push_status_reads_the_answer():
    status = answer(Plans(1).push_status("t", "hooks"), {"code": 200, "data": STATUS})
    assert isinstance(status, PushStatus) and status.is_push
    assert (status.topic, status.subscription, status.push_url, status.push_timeout_ms,
            status.push_concurrency, status.push_secret_set, status.paused,
            status.in_flight) == ("t", "hooks", "https://example.com/h", 2000, 8, True,
                                  False, 3)
    assert status.last_errors == (
        PushFailure(1_800_000_000_500, "m2", "5xx", 503, "HTTP 503", 12.5),
        PushFailure(1_800_000_000_000, "m1", "timeout", None, "read timed out", 2000.0))
    assert status.raw == STATUS
    pulled = PushStatus.from_json("t", {"subscription": "default", "pushUrl": None,
                                        "pushTimeoutMillis": 10000, "pushConcurrency": 16,
                                        "pushSecretSet": False, "paused": True,
                                        "inFlight": 0, "lastErrors": []})
    assert not pulled.is_push and pulled.paused and pulled.last_errors == ()


def test_subscription_config_reads_the_push_fields_and_their_sources():
    data = {"maxRetry": 3, "ackTimeoutMillis": 30000, "pushUrl": "https://example.com/h",
            "pushTimeoutMillis": 10000, "pushConcurrency": 4, "pushSecretSet": True}
    source = {"maxRetry": "subscription", "ackTimeoutMillis": "server",
              "pushUrl": "subscription", "pushTimeoutMillis": "server",
              "pushConcurrency": "subscription"}
    config = SubscriptionConfig.of("t", "hooks", data, source)
    assert config.is_push and config.push_secret_set
    assert (config.push_url, config.push_timeout_ms, config.push_concurrency) == \
        ("https://example.com/h", 10000, 4)
    for spelling in ("push_url", "pushUrl", "push-url"):
        assert config.source(spelling) == "subscription"
    assert config.source("push-timeout-millis") == "server"
    assert config.source("pushConcurrency") == "subscription"
    assert config.source("max_retry") == "subscription"          # the topic settings still
    assert config.values() == {"max_retry": 3, "ack_timeout_ms": 30000,
                               "push_url": "https://example.com/h", "push_timeout_ms": 10000,
                               "push_concurrency": 4, "push_secret_set": True}
    with pytest.raises(ValueError):
        config.source("colour")
    pulled = SubscriptionConfig.of("t", "audit", {"pushUrl": None, "pushSecretSet": False})
    assert not pulled.is_push and pulled.push_url is None and not pulled.push_secret_set
    # A server without push delivery answers none of them.
    old = SubscriptionConfig.of("t", "audit", {"maxRetry": 3})
    assert (old.push_url, old.push_timeout_ms, old.push_secret_set) == (None, None, False)
    assert "push_secret_set" not in old.values()


def test_subscription_info_reads_push_url():
    assert SubscriptionInfo.from_json({"subscription": "hooks",
                                       "pushUrl": "https://example.com/h"}).push_url == \
        "https://example.com/h"
    assert SubscriptionInfo.from_json({"subscription": "audit"}).push_url is None


def test_push_delivery_reads_a_pushed_body():
    msg = DelayMsg("orders", "m1", "body", 1, 2, 3, 10, 1, Status.CONSUMING, receipt="r1",
                   attributes={"k": "v"})
    body = json.dumps({"subscription": "billing", "delayMsg": msg.to_json()}).encode()
    delivery = PushDelivery.from_body(body)
    assert delivery.subscription == "billing"
    assert delivery.message == msg and delivery.message.receipt == "r1"
    assert PushDelivery.from_body(body.decode()) == delivery


@pytest.mark.parametrize("body", [b"", b"not json", b"[]", b'{"subscription": "s"}',
                                  b'{"subscription": "s", "delayMsg": {"topic": "t"}}'])
def test_a_body_that_is_no_push_delivery_is_a_value_error(body):
    with pytest.raises(ValueError, match="not a push delivery"):
        PushDelivery.from_body(body)


def test_both_clients_have_push_status():
    assert DelayQueueClient.push_status.__doc__ == AsyncDelayQueueClient.push_status.__doc__
    assert "PushStatus" in str(DelayQueueClient.push_status.__signature__.return_annotation)
