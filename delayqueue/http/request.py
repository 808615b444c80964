"""What every view needs around its one service call: the runtime, the request's parameters
(a batch request's entries too), and the JSON envelope it answers with.

The HTTP API (api.py) and the console (console/views.py) both read requests this way, so
neither view module imports the other.
"""

from __future__ import annotations

from typing import Any, Callable

from flask import Response, current_app, jsonify, request

from delayqueue.background.runtime import Runtime
from delayqueue.core.errors import BadRequest, DelayQueueError, MissingParameter, OutOfMemory

from .endpoints import BY_PATH, OURS
from .params import Params


def runtime() -> Runtime:
    return current_app.extensions["delayqueue"]


def params() -> Params:
    """The query string's parameters, overridden by the body's: a form, or a JSON object.
    A JSON body that does not parse, or is not an object, is not a request the endpoint
    takes: HTTP 400, on every endpoint (as a batch's, read_batch)."""
    req = request._get_current_object()    # one context lookup, not one per attribute
    values: dict[str, Any] = req.args.to_dict() if req.query_string else {}
    if req.is_json:
        body = req.get_json(silent=True)
        if not isinstance(body, dict):
            raise MissingParameter("body: a JSON body must be an object of parameters")
        values.update(body)
    else:
        values.update(req.form.to_dict())
    endpoint = BY_PATH.get(req.url_rule.rule) if req.url_rule is not None else None
    return params_of(values, origin=endpoint.origin if endpoint is not None else OURS)


def params_of(values: dict[str, Any], limits: dict[str, int] | None = None,
              origin: str = OURS) -> Params:
    """``origin``: whose endpoint reads them (endpoints.py), which says how an empty required
    text parameter is answered (param_rules.py)."""
    return Params(values, **(limits or runtime().param_limits), origin=origin)


def read_batch(entries_name: str) -> tuple[str, Params, list[Any]]:
    """A batch request's topic, its other parameters and its entries. A body that is not a
    JSON object with the entries as a non-empty array of at most ``max-batch`` is refused
    whole (HTTP 400): nothing is written."""
    body = request.get_json(silent=True) if request.is_json else None
    if not isinstance(body, dict):
        raise MissingParameter("body: a batch must be a JSON object (Content-Type: "
                               "application/json)")
    entries = body.get(entries_name)
    if not isinstance(entries, list) or not entries:
        raise MissingParameter(f"{entries_name}: required, a non-empty JSON array")
    limit = runtime().settings.max_batch
    if len(entries) > limit:
        raise MissingParameter(f"{entries_name}: at most {limit} entries, got {len(entries)}")
    p = params_of(body)
    try:
        topic = p.topic()
    except DelayQueueError as exc:
        raise MissingParameter(exc.msg) from None
    return topic, p, entries


def batch_subscription(p: Params) -> str | None:
    """A batch's ``subscription`` (beside its topic, for every entry): a bad one refuses the
    whole batch (HTTP 400), as a bad topic does."""
    try:
        return p.subscription()
    except DelayQueueError as exc:
        raise MissingParameter(exc.msg) from None


def entry_params(entries_name: str, index: int, entry: Any, limits: dict[str, int]) -> Params:
    if not isinstance(entry, dict):
        raise BadRequest(f"{entries_name}[{index}]: must be a JSON object, got "
                         f"{type(entry).__name__}")
    return params_of(entry, limits)


def parse_entry(entries_name: str, index: int, parse: Callable[[], Any]) -> Any:
    """One entry parsed, or its error (named ``<entries>[<index>].<parameter>``) returned as
    that entry's answer, so the others still go ahead."""
    try:
        return parse()
    except DelayQueueError as exc:
        error = BadRequest(exc.msg if exc.msg.startswith(f"{entries_name}[")
                           else f"{entries_name}[{index}].{exc.msg}")
        return error


def entry_answers(results: list[Any], answer: Callable[[Any], dict[str, Any]],
                  code: int = 200, msg: str = "success") -> Response:
    """A batch's answer: each entry's result or error, in order (``code``, ``msg``: the
    envelope's, when the batch as a whole was refused). A batch refused because Redis was
    over its maxmemory counts once, as a refused single request does."""
    if any(isinstance(r, OutOfMemory) for r in results):
        runtime().monitor.count_event("redisOutOfMemory")
    return jsonify({"code": code, "msg": msg, "results": [
        {"code": r.code, "msg": r.msg} if isinstance(r, DelayQueueError)
        else {"code": 200, "msg": "success", **answer(r)} for r in results]})


def success(**fields: Any) -> Response:
    return jsonify({"code": 200, "msg": "success", **fields})


def envelope(code: int, msg: str, http_status: int) -> Response:
    """An error's answer: the envelope {code, msg}, with the HTTP status the code calls for."""
    response = jsonify({"code": code, "msg": msg})
    response.status_code = http_status
    return response
