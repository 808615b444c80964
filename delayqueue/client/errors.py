"""One exception hierarchy for every failure the client reports."""

from __future__ import annotations

from typing import Any


class DelayQueueError(Exception):
    """Base class. ``code`` is the server's envelope code (None when no server answered);
    ``envelope`` the whole answer when there was one (an atomic batch's refusal carries the
    reason of each entry in it)."""

    def __init__(self, msg: str, code: int | None = None,
                 envelope: dict[str, Any] | None = None) -> None:
        super().__init__(msg)
        self.code = code
        self.msg = msg
        self.envelope = envelope

    def __str__(self) -> str:
        return self.msg if self.code is None else f"{self.msg} (code {self.code})"


class BadRequestError(DelayQueueError):
    """Code 400: a parameter broke a rule, or the message is in the wrong state."""


class NotFoundError(DelayQueueError):
    """Code 404: no such message (or topic, schedule, subscription)."""


class SubscriptionNotFoundError(NotFoundError):
    """Code 404 naming ``subscription``: the topic has no subscription of that name (never
    created, or deleted). Not "no such message": ``get`` raises it instead of answering None.
    """


class StaleReceiptError(DelayQueueError):
    """Code 409: the receipt is not the message's latest delivery's; nothing changed.

    The message was handed out again (after an ack timeout or a nack) since this delivery,
    so whoever holds the older receipt no longer owns it: do not retry with that receipt.
    """


class MessageConsumingError(DelayQueueError):
    """Code 409 answering a send with ``on_duplicate="replace"``: the message with that msgId
    is being consumed (status 3), so it cannot be replaced; nothing was written. Retry once
    its delivery has ended, or send under another msgId.
    """


class AccessDeniedError(DelayQueueError):
    """Code 401 (no valid token) or 403 (the token lacks the role, namespace or topic)."""


class RateLimitedError(DelayQueueError):
    """Code 429: over the token's request rate or concurrent long polls; retry later."""


class BacklogExceededError(DelayQueueError):
    """Code 429 answering a send: the topic holds its ``maxBacklog`` live messages, so nothing
    was written. Retry once consumers have caught up (or raise the topic's maxBacklog).

    Not a RateLimitedError: that one is the token's request rate (HTTP 429, Retry-After);
    this one comes in HTTP 200, as every refusal of a message does.
    """


class ServerError(DelayQueueError):
    """Code 500 (Redis unreachable, script error), or an answer that is not the envelope."""


class UnavailableError(DelayQueueError):
    """No server node could be reached (connection refused, timed out, reset)."""


class UnsupportedError(DelayQueueError):
    """The server has no such endpoint (HTTP 404): an older server, or camellia's."""


ERRORS_BY_CODE: dict[int, type[DelayQueueError]] = {
    400: BadRequestError,
    404: NotFoundError,
    401: AccessDeniedError,
    403: AccessDeniedError,
    409: StaleReceiptError,
    429: RateLimitedError,
    500: ServerError,
}


def error_for(code: int, msg: str | None, http_status: int | None = None,
              envelope: dict[str, Any] | None = None) -> DelayQueueError:
    """The exception for an envelope whose code is not 200 (``http_status``: the answer's,
    which tells a full topic's 429, in HTTP 200, from the token rate limit's HTTP 429; a
    409 about the msgId, not the receipt, is a replace of a message being consumed; a 404
    about the subscription is an unknown subscription, not a missing message)."""
    cls = BacklogExceededError if code == 429 and http_status == 200 else \
        MessageConsumingError if code == 409 and (msg or "").startswith("msgId:") else \
        SubscriptionNotFoundError if code == 404 and (msg or "").startswith("subscription") \
        else ERRORS_BY_CODE.get(code, ServerError)
    return cls(msg or f"server answered code {code}", code, envelope)
