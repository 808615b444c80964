"""Subscriptions in the console: the topic page's list of them, and a named one's own page.

A named subscription is a queue of its own over its topic's messages (core/subscriptions.py):
its own ready, consuming and dead letters, its own settings over the topic's, its own pause.
Its page shows the topic page's sections for that queue, from the same templates
(_sizes.html, _messages.html, _settings.html, _dead_letters.html) with ``subscription`` set,
so each link and form carries it. The default subscription has no page of its own: a request
without ``subscription`` addresses it, and the topic page is its page.

A page or form names the subscription by the ``subscription`` parameter, checked by the
core's one rule (``subscription_name``): an empty value or ``default`` is the default, a name
outside the pattern is a 400 naming the parameter.
"""

from __future__ import annotations

from typing import Any, Callable

from flask import url_for

from delayqueue.core.errors import NotFound
from delayqueue.core.queue import DelayQueue
from delayqueue.core.subscriptions import Subscriptions, subscription_name
from delayqueue.http.params import Params

SUBSCRIPTION = "subscription"


def chosen(p: Params) -> str | None:
    """The form's subscription: None for the default (absent, empty or ``default``)."""
    return subscription_name(p.string(SUBSCRIPTION))


def named(p: Params) -> str:
    """A subscription page's subscription: a named one (the default's page is the topic
    page), so absent is a missing parameter and ``default`` a 400 naming it."""
    name = subscription_name(p.string(SUBSCRIPTION, required=True), named=True)
    assert name is not None       # named=True: the default is refused, never None
    return name


def listing(queue: DelayQueue, topic: str, info: dict[str, Any] | None = None
            ) -> list[dict[str, Any]]:
    """The topic's subscriptions, the default first, with their sizes: getTopicInfo's
    ``subscriptions`` when the page has read it already, else listSubscriptions's."""
    if info is not None and "subscriptions" in info:
        return info["subscriptions"]
    return Subscriptions(queue).list(topic)


def info_of(rows: list[dict[str, Any]], topic: str, name: str) -> dict[str, Any]:
    """One named subscription's row of the listing (its sizes, paused, createdTime).

    Raises:
        NotFound: the topic has no subscription ``name``.
    """
    for row in rows:
        if row["subscription"] == name:
            return row
    raise NotFound(f"subscription: no subscription {name!r} of topic {topic!r}")


def page_link(topic: str, subscription: str | None) -> Callable[..., str]:
    """``here(**args)``: the URL of the page showing this queue (the subscription's page, or
    the topic page for the default) with ``args``; a None value is left out."""
    def here(**args: Any) -> str:
        if subscription is None:
            return url_for("console.topic", topic=topic, **args)
        return url_for("console.subscription", topic=topic, subscription=subscription, **args)
    return here
