"""The subscriptions' views (ours): createSubscription, deleteSubscription,
listSubscriptions, setSubscriptionConfig, getSubscriptionConfig, getPushStatus. Each reads
its parameters, makes one call on ``Subscriptions`` (core/subscriptions.py) and answers the
envelope; rows in endpoints.py.

A named subscription of a topic receives every message sent to the topic after it was
created, each on its own (status, retry, receipt, ack deadline, backoff, dead letter); the
topic's default subscription is the one a request without ``subscription`` uses. The answers
have the object endpoints' shape (getTopicConfig's, the schedules'): the subscription, the
list, or the settings under ``data``; what is about the call (``deleted``) beside it.

Push delivery: any subscription, the default one too, may have a ``pushUrl`` (and
``pushTimeoutMillis``, ``pushConcurrency``, ``pushSecret``); the core checks them. The
secret is write-only: no answer carries it (``pushSecretSet`` says whether there is one),
no refusal echoes it (``secret_kept``), the audit line says ``(set)`` (audit.py), and a
secret in the query string is refused, since URLs are logged (access logs, proxies).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from flask import Blueprint, Response, request

from delayqueue.core.errors import BadRequest

from .endpoints import route
from .params import Params
from .request import params, runtime, success

SECRET = "pushSecret"

subscriptions = Blueprint("subscriptions", __name__)


def settings_of(p: Params, *others: str) -> dict[str, Any]:
    """The request's values but topic, subscription and ``others``: the settings it gives.
    Every other name is taken for a setting, and the core refuses one that is not a
    subscription's (a typo must not pass silently)."""
    skip = {"topic", "subscription", *others}
    return {k: v for k, v in p.values.items() if k not in skip}


@contextlib.contextmanager
def secret_kept() -> Iterator[None]:
    """Around a call given ``pushSecret``: a secret in the query string is refused before
    anything is written (a refused secret is never repeated: the core says the rule only)."""
    if SECRET in request.args:
        raise BadRequest(f"{SECRET}: send it in the request body (a form or JSON), never in "
                         "the query string: URLs are written to access logs")
    yield


@route(subscriptions, "createSubscription")
def create_subscription() -> Response:
    """The settings sent (any of core.subscriptions.SUBSCRIPTION_SETTINGS) become the
    subscription's own; creating an existing one changes only the values given."""
    p = params()
    topic, name = p.topic(), p.named_subscription()
    assert name is not None
    with secret_kept():
        info = runtime().subscriptions.create(topic, name, settings_of(p))
    return success(data=info)


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
    """As setTopicConfig, for one subscription; ``reset=true`` drops every value of the
    subscription's own first. The default subscription (``subscription`` absent, empty or
    "default") has only its push settings of its own: the core refuses any other, naming it
    (they are the topic's: setTopicConfig), and its reset drops only those."""
    p = params()
    topic, name = p.topic(), p.subscription()
    reset = p.boolean("reset", default=False)
    with secret_kept():
        data, source = runtime().subscriptions.set_config(topic, name, settings_of(p, "reset"),
                                                          reset=reset)
    return success(data=data, source=source)


@route(subscriptions, "getSubscriptionConfig")
def get_subscription_config() -> Response:
    """The effective settings of a subscription and where each comes from: "subscription",
    "topic" or "server" (the default one's: the topic's, as getTopicConfig answers them),
    and its push settings (``pushSecretSet``, never the secret)."""
    p = params()
    data, source = runtime().subscriptions.get_config(p.topic(), p.subscription())
    return success(data=data, source=source)


@route(subscriptions, "getPushStatus")
def get_push_status() -> Response:
    """A subscription's push settings, deliveries in flight and last failures."""
    p = params()
    return success(data=runtime().subscriptions.push_status(p.topic(), p.subscription()))
