"""The project's exceptions; each carries the envelope code the API answers with."""

from __future__ import annotations


class DelayQueueError(Exception):
    """Base class: ``code`` is the envelope code, ``http_status`` the HTTP status."""

    code = 500
    http_status = 200

    def __init__(self, msg: str) -> None:
        super().__init__(msg)
        self.msg = msg


class BadRequest(DelayQueueError):
    """A parameter broke a rule, or the message is in a state that forbids the request."""

    code = 400


class MissingParameter(BadRequest):
    """A required parameter is missing or cannot be converted: HTTP 400, as camellia."""

    http_status = 400


class NotFound(DelayQueueError):
    code = 404


class Unavailable(DelayQueueError):
    """Redis is unreachable or a script failed."""

    code = 500


class OutOfMemory(Unavailable):
    """Redis is over its maxmemory and refused a write; nothing was written."""
