"""Push delivery, as the SDK sees it: a subscription's push state (``push_status``) and what a
receiver is POSTed (``PushDelivery``).

A subscription with a ``push_url`` (``create_subscription(..., push_url=...)`` or
``set_subscription_config``; the default subscription's too) is not pulled: the server POSTs
each delivery to the URL, at most ``push_concurrency`` at a time across the fleet, and acks
it on a 2xx answer; any other answer, a timeout or a failed connection nacks it (redelivered
after the subscription's backoff; a 429 or 503's ``Retry-After`` is the delay). The receiver
checks ``X-DelayQueue-Signature`` with ``verify_signature`` (signature.py) when the
subscription has a ``push_secret``. docs/client.md, "Push subscriptions", has a receiver.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from .model import DEFAULT_SUBSCRIPTION, DelayMsg, _opt_int

# The outcome of one POST, as the server classes it (PushFailure.outcome).
PUSH_OUTCOMES = ("2xx", "3xx", "4xx", "5xx", "timeout", "connection", "refused")


@dataclass(frozen=True)
class PushFailure:
    """One delivery the server could not push (``PushStatus.last_errors``).

    ``outcome``: ``3xx``, ``4xx``, ``5xx`` (the receiver answered ``status``), ``timeout``,
    ``connection`` (no connection, or it broke) or ``refused`` (the URL resolved outside the
    server's push-allowed-networks). ``error``: what went wrong, in words; ``millis``: from
    the POST to its end; ``time``: when, in epoch ms.
    """

    time: int
    msg_id: str
    outcome: str
    status: int | None = None
    error: str = ""
    millis: float | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "PushFailure":
        millis = data.get("millis")
        return cls(time=int(data.get("time") or 0), msg_id=str(data.get("msgId") or ""),
                   outcome=str(data.get("outcome") or ""),
                   status=_opt_int(data.get("status")), error=str(data.get("error") or ""),
                   millis=None if millis is None else float(millis))


@dataclass(frozen=True)
class PushStatus:
    """A subscription's push state (``push_status``): its push settings in force (the secret
    only as ``push_secret_set``), whether it is paused (itself or its topic), its deliveries
    in flight across the fleet, and its last failed pushes, newest first (at most 20, kept
    7 days). ``push_url`` None: not a push subscription (``in_flight`` is then 0).
    """

    topic: str
    subscription: str
    push_url: str | None
    push_timeout_ms: int
    push_concurrency: int
    push_secret_set: bool = False
    paused: bool = False
    in_flight: int = 0
    last_errors: tuple[PushFailure, ...] = ()
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def is_push(self) -> bool:
        return self.push_url is not None

    @classmethod
    def from_json(cls, topic: str, data: Mapping[str, Any]) -> "PushStatus":
        return cls(
            topic=topic, subscription=str(data.get("subscription") or DEFAULT_SUBSCRIPTION),
            push_url=data.get("pushUrl") or None,
            push_timeout_ms=int(data.get("pushTimeoutMillis") or 0),
            push_concurrency=int(data.get("pushConcurrency") or 0),
            push_secret_set=bool(data.get("pushSecretSet")), paused=bool(data.get("paused")),
            in_flight=int(data.get("inFlight") or 0),
            last_errors=tuple(PushFailure.from_json(e) for e in data.get("lastErrors") or ()),
            raw=dict(data))


@dataclass(frozen=True)
class PushDelivery:
    """What one push POSTs, read by a receiver: ``PushDelivery.from_body(request.get_data())``.

    ``message`` is the delivery as ``pull`` answers it (its ``receipt`` included);
    ``subscription`` the subscription it was delivered in. A delivery may come more than once
    (at least once: an answer lost, a timeout): dedupe by ``message.msg_id`` and
    ``message.receipt`` (a redelivery has a new receipt and a higher ``retry``).
    """

    subscription: str
    message: DelayMsg

    @classmethod
    def from_body(cls, body: bytes | str) -> "PushDelivery":
        """Read the POST's JSON body (check its signature first, on the raw bytes).

        Raises:
            ValueError: not a push delivery's body.
        """
        try:
            data = json.loads(body)
            return cls(str(data["subscription"]), DelayMsg.from_json(data["delayMsg"]))
        except (TypeError, KeyError, ValueError, AttributeError) as exc:
            raise ValueError(f"not a push delivery: {exc}") from None
