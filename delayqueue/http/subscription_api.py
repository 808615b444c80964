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
    return success(deleted=runtime().subscriptions.delete(topic, name))


@route(subscriptions, "listSubscriptions")
def list_subscriptions() -> Response:
    """Every subscription of the topic, the default one first."""
    return success(data=runtime().subscriptions.list(params().topic()))


@route(subscriptions, "setSubscriptionConfig")
def set_subscription_config() -> Response:
    """As setTopicConfig, for one subscription (``default``: the topic's default one);
    ``reset=true`` drops every value of the subscription's own first."""
    p = params()
    topic, name = p.topic(), p.named_subscription(default_allowed=True)
    reset = p.boolean("reset", default=False)
    data, source = runtime().subscriptions.set_config(topic, name, settings_of(p, "reset"),
                                                      reset=reset)
    return success(data=data, source=source)


@route(subscriptions, "getSubscriptionConfig")
def get_subscription_config() -> Response:
    """The effective settings of a subscription and where each comes from: "subscription",
    "topic" or "server"."""
    p = params()
    topic, name = p.topic(), p.named_subscription(default_allowed=True)
    data, source = runtime().subscriptions.get_config(topic, name)
    return success(data=data, source=source)
