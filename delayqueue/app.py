"""The Flask application factory."""

from __future__ import annotations

import logging
from typing import Any, Mapping

from flask import Flask, Response, jsonify
from werkzeug.exceptions import HTTPException

from .config import Settings, load_settings
from .errors import DelayQueueError
from .runtime import Runtime

logger = logging.getLogger(__name__)


def create_app(overrides: Mapping[str, Any] | None = None,
               settings: Settings | None = None, runtime: Runtime | None = None) -> Flask:
    """config -> redis -> scripts -> blueprints -> error handlers. Starts no threads."""
    settings = settings or load_settings(overrides=overrides)
    app = Flask(__name__)
    app.json.sort_keys = False
    # Multipart form fields must fit a full message (Flask's default cap is 500 kB); our own
    # check then answers an oversized body with the max-msg-bytes rule. Whole bodies far
    # beyond it are refused by Werkzeug (413, as a JSON envelope).
    app.config["MAX_FORM_MEMORY_SIZE"] = settings.max_msg_bytes + 65536
    app.config["MAX_CONTENT_LENGTH"] = 4 * settings.max_msg_bytes + 65536
    app.extensions["delayqueue"] = runtime or Runtime(settings)

    from .api import delay_queue, health, metrics

    app.register_blueprint(delay_queue)
    app.register_blueprint(health)
    app.register_blueprint(metrics)
    register_error_handlers(app)
    return app


def envelope(code: int, msg: str, http_status: int) -> Response:
    response = jsonify({"code": code, "msg": msg})
    response.status_code = http_status
    return response


def register_error_handlers(app: Flask) -> None:
    """Every failure becomes the JSON envelope; never a stack trace."""

    @app.errorhandler(DelayQueueError)
    def on_delay_queue_error(exc: DelayQueueError) -> Response:
        if exc.code == 500:
            logger.warning("request failed: %s", exc.msg)
        return envelope(exc.code, exc.msg, exc.http_status)

    @app.errorhandler(HTTPException)
    def on_http_error(exc: HTTPException) -> Response:
        return envelope(exc.code or 500, exc.description or exc.name, exc.code or 500)

    @app.errorhandler(Exception)
    def on_unexpected(exc: Exception) -> Response:
        logger.exception("unexpected error")
        return envelope(500, f"internal error: {exc.__class__.__name__}", 200)
