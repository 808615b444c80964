"""The project's exceptions; each carries the envelope code the API answers with."""

from __future__ import annotations

import contextlib
from typing import Iterator

import redis
from redis.exceptions import RedisClusterException


class DelayQueueError(Exception):
    """Base class: ``code`` is the envelope code, ``http_status`` the HTTP status."""

    code = 500
    http_status = 200

    def __init__(self, msg: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(msg)
        self.msg = msg
        self.headers = headers or {}


class BadRequest(DelayQueueError):
    """A parameter broke a rule, or the message is in a state that forbids the request."""

    code = 400


class MissingParameter(BadRequest):
    """A required parameter is missing or cannot be converted: HTTP 400, as camellia."""

    http_status = 400


class NotFound(DelayQueueError):
    code = 404


class Conflict(DelayQueueError):
    """A receipt that is not the latest delivery's: the message was delivered again since."""

    code = 409


class Unauthorized(DelayQueueError):
    """No valid bearer token where authentication is on: HTTP 401."""

    code = 401
    http_status = 401


class Forbidden(DelayQueueError):
    """A valid token outside its rights (role, namespace, topic): HTTP 403."""

    code = 403
    http_status = 403


class PayloadTooLarge(DelayQueueError):
    """A body over the body limit once decoded (a gzip body): HTTP 413, as one over it on the
    wire."""

    code = 413
    http_status = 413


class UnsupportedMediaType(DelayQueueError):
    """A request body in a Content-Encoding the server does not decode: HTTP 415."""

    code = 415
    http_status = 415


class TooManyRequests(DelayQueueError):
    """Over a token's request rate or concurrent long polls: HTTP 429 with Retry-After."""

    code = 429
    http_status = 429


class BacklogExceeded(DelayQueueError):
    """A send to a topic holding its maxBacklog live messages: code 429 in HTTP 200 (a
    camellia SDK takes any HTTP status but 200 for a sick node and would try another)."""

    code = 429


class Unavailable(DelayQueueError):
    """Redis is unreachable or a script failed."""

    code = 500


class OutOfMemory(Unavailable):
    """Redis is over its maxmemory and refused a write; nothing was written."""


@contextlib.contextmanager
def redis_errors() -> Iterator[None]:
    """Translate redis-py failures into the project's 500 errors, chained."""
    try:
        yield
    except (redis.RedisError, RedisClusterException) as exc:
        raise as_error(exc) from exc


def as_error(exc: Exception) -> DelayQueueError:
    """A failure as the error the API answers: ours as it is, a redis-py one as a 500 (the
    cause chained, as ``redis_errors`` raises it). A round trip answers such failures in
    place of a call's reply."""
    if isinstance(exc, DelayQueueError):
        return exc
    unknown = no_subscription(exc)
    if unknown is not None:
        return NotFound(f"subscription: no subscription '{unknown}' on this topic")
    pushed = script_refusal(exc, "PUSHSUBSCRIPTION ")
    if pushed is not None:
        return BadRequest(f"subscription: '{pushed}' is a push subscription (it has a "
                          "pushUrl): its messages are POSTed to that URL, not pulled; clear "
                          "pushUrl to pull them")
    if is_out_of_memory(exc):
        error: DelayQueueError = OutOfMemory(
            f"Redis is out of memory (over its maxmemory); nothing was written: {exc}")
    else:
        error = Unavailable(f"redis unavailable: {exc.__class__.__name__}: {exc}")
    error.__cause__ = exc
    return error


def is_out_of_memory(exc: redis.RedisError) -> bool:
    """Redis refused a write over maxmemory: redis-py's OutOfMemoryError, or (Redis 6) a
    script error wrapping the same OOM reply."""
    return isinstance(exc, redis.exceptions.OutOfMemoryError) or (
        isinstance(exc, redis.ResponseError) and "OOM command not allowed" in str(exc))


def no_subscription(exc: Exception) -> str | None:
    """The name in a script's refusal of a call in a named subscription that does not exist
    (lua/includes/keys.lua answers the error "NOSUBSCRIPTION <name>"), else None."""
    return script_refusal(exc, "NOSUBSCRIPTION ")


def script_refusal(exc: Exception, word: str) -> str | None:
    """The subscription named in a script's error reply "<word><name>", else None."""
    if isinstance(exc, redis.ResponseError):
        text = str(exc)
        at = text.find(word)
        if at >= 0:
            words = text[at + len(word):].split()
            return words[0] if words else ""
    return None
