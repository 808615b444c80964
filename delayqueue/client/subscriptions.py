"""The subscription calls of both clients, as plans (plan.py): createSubscription,
deleteSubscription, listSubscriptions, getSubscriptionConfig, setSubscriptionConfig; and the
``subscription`` parameter every consuming call adds (``with_subscription``).

Every topic has its default subscription, the one a call without ``subscription`` consumes
from (a camellia client's only one). A named subscription receives every message sent to the
topic after it was created, each on its own: its own status, retries, receipts, ack deadline,
backoff and dead letters (docs/api.md, Subscriptions), so two services can each consume every
message of one topic. Names are 1 to 64 characters of ``A-Z a-z 0-9 . _ -``; the server checks
them and its 400 names ``subscription`` (BadRequestError).

Any subscription, the default one too, may be a push subscription: with ``push_url`` set the
server POSTs each delivery to that URL instead of waiting for pulls (push.py); its push
settings are its own, never the topic's, and ``push_status`` shows how its pushes fare.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from .model import (
    DEFAULT_SUBSCRIPTION,
    SubscriptionConfig,
    SubscriptionInfo,
    push_params,
    settings_params,
)
from .plan import Plan, Request
from .push import PushStatus


def with_subscription(params: dict[str, Any], subscription: str | None) -> dict[str, Any]:
    """``params`` with the ``subscription`` parameter when one is named: None or "" leave it
    out (the default subscription, all a camellia server knows); "default" is sent as given."""
    if subscription:
        params["subscription"] = subscription
    return params


def subscription_kw(subscription: str | None) -> dict[str, str]:
    """The ``subscription=`` keyword of a client call, or none for the default subscription:
    the consumer's calls name it only when they must, so a client without subscriptions (a
    test's stand-in, an older subclass) still serves a consumer of the default one."""
    return {"subscription": subscription} if subscription else {}


class SubscriptionPlans:
    """The subscription calls, mixed into ``Plans`` (one written-once plan per call)."""

    def create_subscription(self, topic: str, subscription: str, *,
                            push_url: str | None = None,
                            push_timeout_ms: int | timedelta | None = None,
                            push_concurrency: int | None = None,
                            push_secret: str | None = None,
                            **settings: Any) -> Plan[SubscriptionInfo]:
        """Create the named ``subscription`` of ``topic``; it receives every message sent
        after this call. Again for an existing one, it changes only the settings given.

        ``settings``: the subscription's own values of the topic settings a subscription may
        set (``ack_timeout_ms``, ``max_retry``, ``redelivery_delay_ms``,
        ``redelivery_backoff_multiplier``, ``redelivery_max_delay_ms``, ``dead_letter``,
        ``dead_letter_retention_ms``, ``dead_letter_max_size``; spelled as for
        ``set_topic_config``). Returns the subscription with its queue sizes.

        Push delivery (None: left as it is): ``push_url`` (http or https; the server POSTs
        each delivery there instead of waiting for pulls, "" makes it pulled again),
        ``push_timeout_ms`` (100 ms to 10 min, one POST's connect and read timeout),
        ``push_concurrency`` (1 to 10000 deliveries in flight, fleet-wide) and
        ``push_secret`` (at most 256 bytes; signs every delivery, ``verify_signature``;
        "" stops signing). Unset, the timeout and concurrency are the server's defaults.

        Raises:
            ValueError: an unknown setting, or a value of the wrong kind (nothing sent).
            BadRequestError: (400) a bad name (``default`` included), a setting a
                subscription cannot have, the topic's most subscriptions reached, or a push
                URL the server refuses (not http(s), credentials in it, a host that does not
                resolve or resolves outside its push-allowed-networks).
        """
        params = {"topic": topic, "subscription": subscription, **settings_params(settings),
                  **push_params({"push_url": push_url, "push_timeout_ms": push_timeout_ms,
                                 "push_concurrency": push_concurrency,
                                 "push_secret": push_secret})}
        # Sent again after a lost answer: the second call finds it and sets the same values.
        envelope = yield Request("createSubscription", params, idempotent=True)
        return SubscriptionInfo.from_json(envelope.get("data") or {"subscription": subscription})

    def delete_subscription(self, topic: str, subscription: str) -> Plan[None]:
        """Delete the named subscription: its messages' state in it is dropped (the server
        does it in slices), and a message no other subscription holds is freed.

        Raises:
            SubscriptionNotFoundError: (404) no such subscription.
            BadRequestError: (400) ``default``, which cannot be deleted.
        """
        # Not re-sent: after a lost answer the second call would answer 404 for a success.
        yield Request("deleteSubscription", {"topic": topic, "subscription": subscription},
                      idempotent=False)

    def list_subscriptions(self, topic: str) -> Plan[list[SubscriptionInfo]]:
        """The topic's subscriptions with their queue sizes, the default one first."""
        envelope = yield Request("listSubscriptions", {"topic": topic}, idempotent=True)
        return [SubscriptionInfo.from_json(s) for s in envelope.get("data") or []]

    def get_subscription_config(self, topic: str, subscription: str | None = None
                                ) -> Plan[SubscriptionConfig]:
        """The subscription's effective settings, each with its source: ``"subscription"``
        (its own value), ``"topic"`` or ``"server"``; None (or "default") the default
        subscription's (the topic's, and its push settings).

        Raises:
            SubscriptionNotFoundError: (404) no such subscription.
        """
        name = subscription or DEFAULT_SUBSCRIPTION
        envelope = yield Request("getSubscriptionConfig",
                                 {"topic": topic, "subscription": name}, idempotent=True)
        return SubscriptionConfig.of(topic, name, envelope.get("data") or {},
                                     envelope.get("source"))

    def set_subscription_config(self, topic: str, subscription: str | None = None,
                                reset: bool = False, *, push_url: str | None = None,
                                push_timeout_ms: int | timedelta | None = None,
                                push_concurrency: int | None = None,
                                push_secret: str | None = None,
                                **settings: Any) -> Plan[SubscriptionConfig]:
        """Set the subscription's own settings (as ``create_subscription`` takes them, push
        settings included); ``reset=True`` first drops every value set on it, so it
        follows its topic (and the server's push defaults) again. Returns the settings now
        in force.

        ``subscription`` None (or "default"): the default subscription, which takes the push
        settings only (its other settings are the topic's: ``set_topic_config``); with
        ``reset=True`` its push settings are dropped.

        Raises:
            ValueError: an unknown setting, or a value of the wrong kind (nothing sent).
            BadRequestError: (400) a value the server refuses (a push URL as
                ``create_subscription`` says), a setting a subscription cannot have, or a
                setting other than push ones for the default subscription; nothing is
                written.
            SubscriptionNotFoundError: (404) no such subscription.
        """
        name = subscription or DEFAULT_SUBSCRIPTION
        params: dict[str, Any] = {
            "topic": topic, "subscription": name, **settings_params(settings),
            **push_params({"push_url": push_url, "push_timeout_ms": push_timeout_ms,
                           "push_concurrency": push_concurrency, "push_secret": push_secret})}
        if reset:
            params["reset"] = "true"
        envelope = yield Request("setSubscriptionConfig", params, idempotent=True)
        return SubscriptionConfig.of(topic, name, envelope.get("data") or {},
                                     envelope.get("source"))

    def push_status(self, topic: str, subscription: str | None = None) -> Plan[PushStatus]:
        """The subscription's push state (None: the default subscription's): its push
        settings (never the secret: ``push_secret_set``), whether it is paused, deliveries
        in flight across the fleet, and its last failed pushes, newest first.

        Raises:
            SubscriptionNotFoundError: (404) no such subscription.
        """
        envelope = yield Request("getPushStatus", with_subscription({"topic": topic},
                                                                    subscription),
                                 idempotent=True)
        return PushStatus.from_json(topic, envelope.get("data") or {})
