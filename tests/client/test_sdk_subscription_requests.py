"""What the SDK sends for subscriptions, without a server: every consuming call's request
carries ``subscription`` when one is named and leaves it out otherwise (a camellia server
never sees it), the five subscription calls' requests, the 404 that names the subscription
raised apart from a missing message, and the ack batcher sending one subscription a request."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from delayqueue.client import (
    AckEntry,
    DelayMsg,
    NotFoundError,
    Status,
    SubscriptionConfig,
    SubscriptionInfo,
    SubscriptionNotFoundError,
    TopicInfo,
)
from delayqueue.client.ack_batcher import Settlement, SettlementQueue
from delayqueue.client.errors import error_for
from delayqueue.client.plans import Plans

MSG = DelayMsg("t", "m1", "body", 1, 1, 2, 3, 1, Status.CONSUMING, receipt="r1")


def request(plan):
    """The first request a plan makes."""
    return next(plan)


def answer(plan, envelope):
    """Drive a one-request plan with ``envelope``; its result."""
    next(plan)
    with pytest.raises(StopIteration) as done:
        plan.send(envelope)
    return done.value.value


CALLS = {
    "pull": (lambda p, s: p.pull("t", 5, subscription=s), "pullMsg"),
    "long_poll": (lambda p, s: p.long_poll("t", 5, 1000, subscription=s), "longPollingMsg"),
    "ack": (lambda p, s: p.ack(MSG, subscription=s), "ackMsg"),
    "nack": (lambda p, s: p.nack(MSG, delay_ms=10, subscription=s), "ackMsg"),
    "change_visibility": (lambda p, s: p.change_visibility(MSG, 5000, subscription=s),
                          "changeVisibility"),
    "get": (lambda p, s: p.get("t", "m1", subscription=s), "getMsg"),
    "list_dead": (lambda p, s: p.list_dead("t", subscription=s), "listDeadMsg"),
    "redrive_dead": (lambda p, s: p.redrive_dead("t", "m1", subscription=s), "redriveDeadMsg"),
    "redrive_all_dead": (lambda p, s: p.redrive_all_dead("t", subscription=s),
                         "redriveDeadMsg"),
    "purge_dead": (lambda p, s: p.purge_dead("t", subscription=s), "purgeDeadMsg"),
    "list_messages": (lambda p, s: p.list_messages("t", 2, subscription=s), "listMsg"),
    "pause_topic": (lambda p, s: p.pause_topic("t", subscription=s), "pauseTopic"),
    "resume_topic": (lambda p, s: p.resume_topic("t", subscription=s), "resumeTopic"),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_every_consuming_call_names_the_subscription_only_when_given(name):
    call, endpoint = CALLS[name]
    named = request(call(Plans(1), "audit"))
    assert named.endpoint == endpoint
    assert named.params["subscription"] == "audit"
    assert named.params["topic"] == "t"
    for default in (None, ""):
        assert "subscription" not in request(call(Plans(1), default)).params
    # "default" is the default subscription by name: sent as given (a pause of the default
    # subscription alone, not of the whole topic).
    assert request(call(Plans(1), "default")).params["subscription"] == "default"


def test_the_batch_calls_name_the_subscription_at_the_top_of_the_body():
    acks = request(Plans(1).ack_batch("t", [MSG, AckEntry("m2", ack=False)],
                                      subscription="audit"))
    assert json.loads(acks.body) == {"topic": "t", "subscription": "audit", "acks": [
        {"msgId": "m1", "ack": True, "receipt": "r1"}, {"msgId": "m2", "ack": False}]}
    beats = request(Plans(1).change_visibility_batch("t", [(MSG, 5000)], subscription="audit"))
    assert json.loads(beats.body) == {"topic": "t", "subscription": "audit", "entries": [
        {"msgId": "m1", "ackTimeoutMillis": 5000, "receipt": "r1"}]}
    assert "subscription" not in json.loads(request(Plans(1).ack_batch("t", [MSG])).body)


def test_create_sends_the_subscriptions_own_settings_by_their_api_names():
    create = request(Plans(1).create_subscription(
        "t", "audit", max_retry=3, ack_timeout_ms=timedelta(seconds=5), deadLetter=False,
        redelivery_backoff_multiplier=2, redelivery_delay_ms=None))
    assert (create.endpoint, create.idempotent) == ("createSubscription", True)
    assert create.params == {"topic": "t", "subscription": "audit", "maxRetry": "3",
                             "ackTimeoutMillis": "5000", "deadLetter": "false",
                             "redeliveryBackoffMultiplier": "2.0"}
    with pytest.raises(ValueError, match="unknown topic setting 'colour'"):
        request(Plans(1).create_subscription("t", "audit", colour="blue"))
    with pytest.raises(ValueError, match="dead_letter: must be True or False"):
        request(Plans(1).create_subscription("t", "audit", dead_letter="yes"))


def test_the_subscription_calls_read_their_answers():
    info = {"subscription": "audit", "createdTime": 1700000000000, "waitingQueueSize": 1,
            "readyQueueSize": 2, "ackQueueSize": 3, "deadQueueSize": 4, "groupBlockedSize": 5,
            "paused": True}
    created = answer(Plans(1).create_subscription("t", "audit"), {"code": 200, "data": info})
    assert created == SubscriptionInfo("audit", 1700000000000, 1, 2, 3, 4, 5, True, None)
    assert not created.is_default
    listed = answer(Plans(1).list_subscriptions("t"), {"code": 200, "data": [
        {"subscription": "default", "readyQueueSize": 7}, info]})
    assert [s.subscription for s in listed] == ["default", "audit"]
    assert listed[0].is_default and listed[0].ready_queue_size == 7
    config = answer(Plans(1).get_subscription_config("t", "audit"), {
        "code": 200, "data": {"maxRetry": 3, "ackTimeoutMillis": 5000, "deadLetter": "on"},
        "source": {"maxRetry": "subscription", "ackTimeoutMillis": "topic",
                   "deadLetter": "server"}})
    assert isinstance(config, SubscriptionConfig)
    assert (config.topic, config.subscription) == ("t", "audit")
    assert (config.max_retry, config.ack_timeout_ms, config.dead_letter) == (3, 5000, True)
    assert config.source("maxRetry") == "subscription"
    assert config.values() == {"max_retry": 3, "ack_timeout_ms": 5000, "dead_letter": True}
    reset = request(Plans(1).set_subscription_config("t", "audit", reset=True, max_retry=1))
    assert reset.params == {"topic": "t", "subscription": "audit", "maxRetry": "1",
                            "reset": "true"}
    delete = request(Plans(1).delete_subscription("t", "audit"))
    assert (delete.endpoint, delete.params, delete.idempotent) == (
        "deleteSubscription", {"topic": "t", "subscription": "audit"}, False)
    topic = TopicInfo.from_json({"topic": "t", "waitingQueueSize": 0, "readyQueueSize": 7,
                                 "ackQueueSize": 0, "subscriptions": [
                                     {"subscription": "default", "readyQueueSize": 7}, info]})
    assert [s.subscription for s in topic.subscriptions] == ["default", "audit"]


def test_a_404_naming_the_subscription_is_no_missing_message():
    unknown = error_for(404, "subscription: no subscription 'audit' of topic 't'")
    assert isinstance(unknown, SubscriptionNotFoundError)
    assert isinstance(unknown, NotFoundError)   # caught as any 404 by existing code
    assert type(error_for(404, "msgId: no message 'm1'")) is NotFoundError
    # get answers None for a missing message, and raises for a missing subscription.
    plan = Plans(1).get("t", "m1", subscription="audit")
    next(plan)
    with pytest.raises(SubscriptionNotFoundError):
        plan.throw(unknown)
    plan = Plans(1).get("t", "m1", subscription="audit")
    next(plan)
    with pytest.raises(StopIteration) as done:
        plan.throw(error_for(404, "msgId: no message"))
    assert done.value.value is None


def test_the_ack_batcher_sends_one_subscription_a_request_keeping_the_order_of_each():
    queue = SettlementQueue("t", lambda s, code: None, linger_ms=0, max_batch=2,
                            clock=lambda: 100.0)
    queue.pending = [Settlement(MSG, True, True, 0.0, sub)
                     for sub in ("a", None, "a", "a", None)]
    for i, settlement in enumerate(queue.pending):
        settlement.attempts = i  # a label to follow each one
    batches = []
    while queue.pending:
        batch, give_up, _ = queue.next_step()
        assert not give_up
        batches.append([(s.subscription, s.attempts) for s in batch])
    assert batches == [[("a", 0), ("a", 2)], [(None, 1), (None, 4)], [("a", 3)]]
