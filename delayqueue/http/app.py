"""The Flask application factory."""

from __future__ import annotations

import io
import logging
from typing import Any, Callable, Iterable, Mapping

from flask import Flask, Request, Response, current_app, request
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from delayqueue.background.runtime import Runtime
from delayqueue.core.errors import DelayQueueError, OutOfMemory
from delayqueue.settings.config import Settings, load_settings

from .access import register_access
from .audit import register_audit
from .body_encoding import register_body_encoding
from .form import FormRequest
from .headers import register_headers
from .jsonio import OrjsonProvider
from .request import envelope
from .request_metrics import register_request_metrics

logger = logging.getLogger(__name__)

# Room for the other parameters next to a body of max-msg-bytes (see create_app).
BODY_SLACK_BYTES = 65536


def create_app(overrides: Mapping[str, Any] | None = None,
               settings: Settings | None = None, runtime: Runtime | None = None) -> Flask:
    """config -> redis -> scripts -> blueprints -> error handlers. Starts no threads."""
    settings = settings or load_settings(overrides=overrides)
    app = Flask(__name__)
    app.json = OrjsonProvider(app)
    app.request_class = FormRequest   # a small form read in one parse_qsl call (form.py)
    # Multipart form fields must fit a full message (Flask's default cap is 500 kB); our own
    # check then answers an oversized body with the max-msg-bytes rule. Whole bodies far
    # beyond it (4x: a form-encoded body can triple in size) are refused by Werkzeug before
    # they are read: HTTP 413 with the envelope {"code": 413, "msg": "body: ..."}.
    app.config["MAX_FORM_MEMORY_SIZE"] = settings.max_msg_bytes + BODY_SLACK_BYTES
    app.config["MAX_CONTENT_LENGTH"] = 4 * settings.max_msg_bytes + BODY_SLACK_BYTES
    app.config["DELAYQUEUE_MAX_MSG_BYTES"] = settings.max_msg_bytes
    app.extensions["delayqueue"] = runtime or Runtime(settings)

    from delayqueue.http.console.views import console

    from .api import api
    from .docs_page import docs
    from .schedule_api import schedules
    from .subscription_api import subscriptions

    app.register_blueprint(api)
    app.register_blueprint(schedules)
    app.register_blueprint(subscriptions)
    app.register_blueprint(console)
    app.register_blueprint(docs)
    register_error_handlers(app)
    # Decoding wraps the app first so that StreamedBodyLimit, outside it, bounds a chunked
    # compressed body before it is decoded; both ahead of the access check.
    register_body_encoding(app, body_limit_rule(app.config))
    register_body_limit(app)
    register_access(app, settings)
    register_headers(app)
    register_audit(app)
    register_request_metrics(app, app.extensions["delayqueue"].monitor)
    return app


# Set in the WSGI environ by StreamedBodyLimit when a chunked body was over the limit.
_BODY_TOO_LARGE = "delayqueue.body_too_large"


class StreamedBodyLimit:
    """WSGI middleware: a body without Content-Length (chunked) is read here, at most
    MAX_CONTENT_LENGTH + 1 bytes, and handed on as a complete, bounded body.

    Werkzeug enforces MAX_CONTENT_LENGTH on such a stream by stopping at the limit: a form
    or ``get_data()`` read then quietly gets the first MAX_CONTENT_LENGTH bytes, no error.
    Here a longer body is marked instead, and the request is refused with 413 like one
    whose Content-Length is over the limit. A malformed chunk raises gunicorn's own parse
    error here, before any answer is started, so the worker answers it (400, as JSON).
    """

    def __init__(self, wsgi_app: Callable[..., Iterable[bytes]], limit: int) -> None:
        self.wsgi_app = wsgi_app
        self.limit = limit

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        if ("chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
                and environ.get("wsgi.input_terminated")):
            stream, parts, size = environ["wsgi.input"], [], 0
            while size <= self.limit:
                part = stream.read(min(65536, self.limit + 1 - size))
                if not part:
                    break
                parts.append(part)
                size += len(part)
            if size > self.limit:
                environ[_BODY_TOO_LARGE] = True  # the rest is drained (or the socket closed)
                parts = []
            environ["wsgi.input"] = io.BytesIO(b"".join(parts))
        return self.wsgi_app(environ, start_response)


def register_body_limit(app: Flask) -> None:
    """413 for a body over MAX_CONTENT_LENGTH on every endpoint, read or not, chunked or not."""
    limit = app.config["MAX_CONTENT_LENGTH"]
    app.wsgi_app = StreamedBodyLimit(app.wsgi_app, limit)  # type: ignore[method-assign]

    @app.before_request
    def refuse_large_body() -> None:
        length = request.content_length
        if request.environ.get(_BODY_TOO_LARGE) or (length is not None and length > limit):
            raise RequestEntityTooLarge()


def register_error_handlers(app: Flask) -> None:
    """Every failure becomes the JSON envelope; never a stack trace."""

    @app.errorhandler(DelayQueueError)
    def on_delay_queue_error(exc: DelayQueueError) -> Response:
        if isinstance(exc, OutOfMemory):
            app.extensions["delayqueue"].monitor.count_event("redisOutOfMemory")
        if exc.code == 500:
            logger.warning("request failed: %s", exc.msg)
        response = envelope(exc.code, exc.msg, exc.http_status)
        response.headers.update(exc.headers)
        return response

    @app.errorhandler(RequestEntityTooLarge)
    def on_too_large(exc: RequestEntityTooLarge) -> Response:
        return envelope(413, too_large_msg(request), 413)

    @app.errorhandler(HTTPException)
    def on_http_error(exc: HTTPException) -> Response:
        return envelope(exc.code or 500, exc.description or exc.name, exc.code or 500)

    @app.errorhandler(Exception)
    def on_unexpected(exc: Exception) -> Response:
        logger.exception("unexpected error")
        return envelope(500, f"internal error: {exc.__class__.__name__}", 200)


def body_limit_rule(config: Mapping[str, Any]) -> str:
    """Where the whole-body limit (MAX_CONTENT_LENGTH) comes from, for its 413 messages."""
    return (f"4 x max-msg-bytes + {BODY_SLACK_BYTES}, max-msg-bytes "
            f"{config.get('DELAYQUEUE_MAX_MSG_BYTES')}")


def too_large_msg(req: Request) -> str:
    """Which of Werkzeug's size limits refused the request (all raise the same 413)."""
    config = current_app.config
    body_limit = config.get("MAX_CONTENT_LENGTH")
    body = f"body: larger than {body_limit} bytes ({body_limit_rule(config)})"
    form = (f"a multipart field larger than {config.get('MAX_FORM_MEMORY_SIZE')} bytes "
            f"(max-msg-bytes + {BODY_SLACK_BYTES}) or more than {config.get('MAX_FORM_PARTS')} "
            "parts")
    length = req.content_length
    if req.environ.get(_BODY_TOO_LARGE) or (body_limit is not None and length is not None
                                            and length > body_limit):
        return body
    if req.mimetype == "multipart/form-data":  # the body fits (a chunked one was measured)
        return f"form: {form}"
    return body
