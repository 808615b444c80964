"""The subscriptions' views (ours): createSubscription, deleteSubscription,
listSubscriptions, setSubscriptionConfig, getSubscriptionConfig. Each reads its parameters,
makes one call on ``Subscriptions`` (core/subscriptions.py) and answers the envelope; rows in
endpoints.py.

A named subscription of a topic receives every message sent to the topic after it was
created, each on its own (status, retry, receipt, ack deadline, backoff, dead letter); the
topic's default subscription is the one a request without ``subscription`` uses. The answers
have the object endpoints' shape (getTopicConfig's, the schedules'): the subscription, the
list, or the settings under ``data``; what is about the call (``deleted``) beside it.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response

from delayqueue.core.errors import BadRequest
from delayqueue.core.subscriptions import DEFAULT

from .endpoints import route
from .params import Params
from .request import params, runtime, success

subscriptions = Blueprint("subscriptions", __name__)


def settings_of(p: Params, *others: str) -> dict[str, Any]:
    """The request's values but topic, subscription and ``others``: the settings it gives.
    Every other name is taken for a setting, and the core refuses one that is not a
    subscription's (a typo must not pass silently)."""
    skip = {"topic", "subscription", *others}
    return {k: v for k, v in p.values.items() if k not in skip}


@route(subscriptions, "createSubscription")
def create_subscription() -> Response:
    """The settings sent (any of core.subscriptions.SUBSCRIPTION_SETTINGS) become the
    subscription's own; creating an existing one changes only the values given."""
    p = params()
    topic, name = p.topic(), p.named_subscription()
    assert name is not None
    return success(data=runtime().subscriptions.create(topic, name, settings_of(p)))


@route(subscriptions, "deleteSubscription")
def delete_subscription() -> Response:
    """Its state for every message is dropped (by the core, in slices); the default one
    cannot be deleted."""
    p = params()
    topic, name = p.topic(), p.named_subscription()
    assert name is not None
    runtime().subscriptions.delete(topic, name)
    return success(deleted=True)


@route(subscriptions, "listSubscriptions")
def list_subscriptions() -> Response:
    """Every subscription of the topic, the default one first."""
    return success(data=runtime().subscriptions.list(params().topic()))


@route(subscriptions, "setSubscriptionConfig")
def set_subscription_config() -> Response:
    """As setTopicConfig, for one named subscription; ``reset=true`` drops every value of
    the subscription's own first. The default subscription's settings are the topic's."""
    p = params()
    topic = p.topic()
    if p.string("subscription") == DEFAULT:
        raise BadRequest("subscription: the default subscription's settings are the topic's; "
                         "set them with setTopicConfig")
    name = p.named_subscription()
    reset = p.boolean("reset", default=False)
    data, source = runtime().subscriptions.set_config(topic, name, settings_of(p, "reset"),
                                                      reset=reset)
    return success(data=data, source=source)


@route(subscriptions, "getSubscriptionConfig")
def get_subscription_config() -> Response:
    """The effective settings of a subscription and where each comes from: "subscription",
    "topic" or "server" (``default``: the topic's, as getTopicConfig answers them)."""
    p = params()
    topic, name = p.topic(), p.named_subscription(default_allowed=True)
    data, source = runtime().subscriptions.get_config(topic, name)
    return success(data=data, source=source)
