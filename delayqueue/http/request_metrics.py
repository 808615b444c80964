"""Every answered request, counted by route and code and timed, for /metrics.

The route is the endpoint table's name for the matched path (``sendMsg``, never the raw path,
so the label's values are bounded), the Flask endpoint for a route outside the table
(``static``), ``UNMATCHED`` when nothing matched (404, 405). The code is the
answer's envelope ``code`` when the body is a JSON object that starts with it (every envelope
does: orjson keeps key order), else the HTTP status: a refused ``sendMsg`` answers HTTP 200
with code 429 on camellia's routes, and it is the code a client acts on.

The record is a few dict updates in the process's ``Monitor``, flushed into Redis with the
other counts, so /metrics on any worker answers for the fleet (docs/benchmarks.md: its cost).
Answers gunicorn writes itself (a malformed request line) never reach Flask and are not
counted.
"""

from __future__ import annotations

import re
from time import perf_counter
from typing import Callable, Iterable

from flask import Flask, Response, request

from delayqueue.core.monitor import Monitor

from .endpoints import BY_PATH

UNMATCHED = "_unmatched"
_STARTED = "delayqueue.request_started"
_ENVELOPE_CODE = re.compile(rb'\{"code":(-?\d{1,6})[,}]')
ROUTES = {path: endpoint.name for path, endpoint in BY_PATH.items()}


def answer_code(response: Response) -> str:
    """The envelope's code when the answer is one, else the HTTP status. Reads the body
    jsonify made (one bytes object in a list) in place: no copy, no header parsing."""
    body = response.response
    if type(body) is list and body and response.content_type == "application/json":
        found = _ENVELOPE_CODE.match(body[0])
        if found:
            return found.group(1).decode()
    return str(response.status_code)


class RequestTimer:
    """WSGI middleware, outermost: notes when the request arrived, before the body is
    decoded or limited, so the duration covers all the app does."""

    def __init__(self, wsgi_app: Callable[..., Iterable[bytes]]) -> None:
        self.wsgi_app = wsgi_app

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        environ[_STARTED] = perf_counter()
        return self.wsgi_app(environ, start_response)


def register_request_metrics(app: Flask, monitor: Monitor) -> None:
    """Count each request as its answer leaves the app (an answer a ``before_request`` hook
    or an error handler made too). Called last in ``create_app``: its timer wraps the other
    middleware."""
    app.wsgi_app = RequestTimer(app.wsgi_app)  # type: ignore[method-assign]

    @app.after_request
    def count_request(response: Response) -> Response:
        req = request._get_current_object()   # one look-up, not one per attribute
        started = req.environ.get(_STARTED)
        if started is not None:
            rule = req.url_rule
            route = UNMATCHED if rule is None else ROUTES.get(rule.rule, rule.endpoint)
            monitor.record_request(route, answer_code(response),
                                   (perf_counter() - started) * 1000)
        return response
