"""The OpenAPI 3.1 document served at /openapi.json, assembled from the endpoint table.

Each row of ``endpoints.ENDPOINTS`` becomes a path, one operation per method, described by
its kind: the envelope endpoints under ``/camellia/`` take GET (query string) and POST (form
or JSON body) alike, the batch endpoints a JSON body only, the console's pages and forms
answer HTML and redirects. tests/http/test_openapi.py holds the document to the Flask routes
and every example to its schema.
"""

from __future__ import annotations

import copy
from functools import lru_cache
from typing import Any, Sequence

from delayqueue import __version__
from delayqueue.settings.value import MAX_DURATION_MS

from .endpoints import (
    ADMIN,
    BATCH,
    CAMELLIA,
    ENDPOINTS,
    FORM,
    HEALTH,
    OURS,
    PAGE,
    PLAIN,
    Endpoint,
)
from .param_rules import (
    BATCH_BODY,
    BROKEN,
    REFUSED,
    Answer,
    cases_answered,
    column,
    markdown_table,
)
from .schema import Param, ref, schemas

# gunicorn refuses a request line (method, path and query string) over limit_request_line
# before any view runs (delayqueue/server/gunicorn_workers.py): any GET with a long enough query.
REQUEST_LINE_TOO_LONG = {
    "description": "The request line (path and query string) is longer than 4094 bytes.",
    "content": {"application/json": {"schema": ref("Error"), "examples": {"too-long": {
        "value": {"code": 414, "msg": "request line: longer than 4094 bytes"}}}}}}
# An example of each parameter error (param_rules.py), as each column answers it.
ERROR_EXAMPLES = {
    "absent": {"code": 400, "msg": "topic: required parameter is missing or empty"},
    "empty": {"code": 400, "msg": "topic: required parameter is missing or empty"},
    "unconvertible": {"code": 400, "msg": "topic: must be a string"},
    "out of range": {"code": 400, "msg": "topic: must not contain '{' or '}' (they would "
                                         "break Redis Cluster hash tags)"},
    "malformed body": {"code": 400, "msg": "body: a JSON body must be an object of "
                                           "parameters"},
}
EXAMPLES = {
    CAMELLIA: {**ERROR_EXAMPLES,
               "absent": {"code": 400, "msg": "topic: required parameter is missing"},
               "empty": {"code": 400, "msg": "topic: must not be empty"}},
    OURS: ERROR_EXAMPLES,
    BATCH_BODY: {**ERROR_EXAMPLES,
                 "malformed body": {"code": 400, "msg": "body: a batch must be a JSON object "
                                                        "(Content-Type: application/json)"}},
}
TOO_LARGE = {"description": "The body is larger than 4 x max-msg-bytes + 64 KiB, as sent or "
                            "once decoded (Content-Encoding: gzip).",
             "content": {"application/json": {"schema": ref("Error"), "examples": {
                 "too-large": {"value": {"code": 413, "msg": "body: larger than 4259840 bytes "
                                                             "(4 x max-msg-bytes + 65536, "
                                                             "max-msg-bytes 1048576)"}},
                 "decoded-too-large": {"value": {
                     "code": 413, "msg": "body: decoded (gzip) body larger than 4259840 bytes "
                                         "(4 x max-msg-bytes + 65536, max-msg-bytes 1048576)"}}}}}}
# body_encoding.py: a Content-Encoding other than gzip, x-gzip or identity.
UNSUPPORTED_ENCODING = {
    "description": "The body's Content-Encoding is not gzip, x-gzip or identity; the answer "
                   "carries Accept-Encoding: gzip, identity.",
    "headers": {"Accept-Encoding": {"schema": {"type": "string", "const": "gzip, identity"}}},
    "content": {"application/json": {"schema": ref("Error"), "examples": {"br": {"value": {
        "code": 415, "msg": "Content-Encoding: 'br' is not accepted; send one of gzip, x-gzip "
                            "or identity (a single coding)"}}}}}}
COMPRESSED_BODIES = (
    "**Compressed bodies.** A request body may be sent with `Content-Encoding: gzip` (or "
    "`x-gzip`; `identity` is none). It is decoded before anything reads it, the access check "
    "included, and every limit holds for the decoded size: one that decodes to more than the "
    "body limit answers HTTP 413 (code 413), a body that is not a valid gzip stream HTTP 400 "
    "(code 400, `body: not a valid gzip stream (...)`), and any other coding, or a list of "
    "codings, HTTP 415 (code 415). Answers are not compressed.")
HEALTH_DOWN = {"description": "Offline, or Redis does not answer.",
               "content": {"application/json": {"schema": ref("Health"),
                                                "examples": {"down": {"value": {"code": 500}}}}}}
CONSOLE_MISSING = {"description": "A required parameter is missing or cannot be converted: "
                                  "the error envelope.",
                   "content": {"application/json": {"schema": ref("Error")}}}
CROSS_SITE = {"description": "A cross-site request, or no Origin / Sec-Fetch-Site.",
              "content": {"application/json": {"schema": ref("Error"), "examples": {
                  "cross-site": {"value": {"code": 403, "msg": "Sec-Fetch-Site: cross-site: "
                                                               "the console accepts writes "
                                                               "only from its own pages"}}}}}}

# The areas the operations are grouped by (each row's ``tag``), in the order a reader meets
# them; /docs shows one section per tag. tests/http/test_openapi.py: every tag an operation
# has is here and every tag here is used.
TAGS = {
    "messages": "One message at a time: send, pull or long-poll, ack or nack, move an ack "
                "deadline, reschedule, look up, delete.",
    "batches": "Up to 1000 entries of one topic in one JSON request (ours): send, ack, "
               "delete, move ack deadlines; one result per entry.",
    "dead letters": "Messages that ran out of deliveries or were nacked past maxRetry: list, "
                    "redrive, purge (ours).",
    "topic controls": "Pause and resume a topic, purge its live messages, list them page by "
                      "page (ours).",
    "topic settings": "A topic's own settings over the server's defaults (ours).",
    "subscriptions": "Named subscriptions of a topic (ours): each receives every message sent "
                     "after it was created, on its own; the subscription parameter of the "
                     "message, dead-letter and control operations acts in one.",
    "schedules": "Recurring schedules (ours): a message sent on a cron expression or every n "
                 "ms, each occurrence an ordinary message of the topic, written once.",
    "monitoring": "Queue sizes, the last monitoring interval (camellia's), Prometheus "
                  "metrics.",
    "health": "Load balancers' probes, and taking a node offline or back online.",
    "console": "The operator's console: HTML pages and their same-origin form posts (ours).",
    "meta": "This document and its reference page, /docs.",
}
BEARER = "bearer"
SECURITY_SCHEMES = {BEARER: {
    "type": "http", "scheme": "bearer",
    "description": "A token's secret, as `Authorization: Bearer <secret>`, wanted only while "
                   "the server's `auth-tokens` setting lists tokens (off by default, as in "
                   "camellia, whose clients send none). Without a valid token: HTTP 401 (code "
                   "401); outside the token's role, namespaces or topics: HTTP 403; over its "
                   "rate or long polls: HTTP 429 with Retry-After. Each operation's "
                   "description says which role it needs; the operations without `security` "
                   "are open to anyone."}}


def _access(endpoint: Endpoint) -> str:
    """What token an operation needs, in words (access.py applies the row's rule)."""
    roles = " or ".join(endpoint.rule.roles)
    if ADMIN not in endpoint.rule.roles:
        roles += " (or admin)"
    topics = ("match the request's topic" if endpoint.rule.scope == "topic"
              else 'cover every topic (`["*"]`, the default)')
    return (f"**Token** (while `auth-tokens` is set): role {roles}; its `namespaces` must "
            f"match the server's namespace, and its `topics` must {topics}.")


PARAMETER_ERRORS = (
    "**Parameter errors.** How a wrong parameter is answered, by whose endpoint it is: each "
    "operation's `x-origin` says whether it is one of camellia's (`camellia`) or ours "
    "(`ours`); the batch endpoints answer by the last column (an entry's own parameters "
    "answer code 400 in that entry's result). Optional parameters sent empty count as "
    "absent.\n\n" + markdown_table())


def _form_schema(params: Sequence[Param]) -> dict[str, Any]:
    return {"type": "object", "properties": {p.name: p.schema for p in params},
            "required": [p.name for p in params if p.required]}


def _query(params: Sequence[Param]) -> list[dict[str, Any]]:
    return [{"name": p.name, "in": "query", "required": p.required, "schema": p.schema}
            for p in params]


WHERE = "the table of parameter errors in info.description"


def _parameter_errors(of: str, answered: Answer) -> dict[str, Any]:
    """An example of each parameter error column ``of`` answers ``answered``."""
    return {f"parameter {name}": {"value": EXAMPLES[of][name]}
            for name in cases_answered(of, answered)}


def _envelope_responses(endpoint: Endpoint) -> dict[str, Any]:
    """The envelope's answers: 200 (the success or error envelope), 400, 413 and 415. The
    parameter errors are the table's (param_rules.py) for the endpoint's column; 413 and 415
    are the body's (app.py, body_encoding.py), whatever the endpoint."""
    health = endpoint.kind == HEALTH
    answer = {"description": "An envelope: code 200, or an error code listed below (HTTP 200 "
                             "unless noted).",
              "content": {"application/json": {
                  "schema": ref(endpoint.answer) if health
                  else {"oneOf": [ref(endpoint.answer), ref("Error")]},
                  "examples": {"success": {"value": endpoint.example}}}}}
    if health:
        return {"200": answer, **({"500": HEALTH_DOWN} if 500 in endpoint.codes else {})}
    codes = sorted({*endpoint.codes, 500})
    answer["description"] += " Envelope codes: " + ", ".join(map(str, codes)) + "."
    answer["content"]["application/json"]["examples"].update(
        {name: {"value": value} for name, value in endpoint.refusals})
    responses: dict[str, Any] = {"200": answer}
    if endpoint.params or endpoint.kind == BATCH:     # without parameters, none can be wrong
        of = column(endpoint)
        if cases_answered(of, BROKEN):
            answer["description"] += (" Code 400 with HTTP 200 for these parameter errors "
                                      f"({WHERE}): " + ", ".join(cases_answered(of, BROKEN)) +
                                      ".")
            answer["content"]["application/json"]["examples"].update(
                _parameter_errors(of, BROKEN))
        responses["400"] = {
            "description": f"Parameter errors ({WHERE}): " +
                           ", ".join(cases_answered(of, REFUSED)) + ".",
            "content": {"application/json": {"schema": ref("Error"),
                                             "examples": _parameter_errors(of, REFUSED)}}}
    responses["413"] = TOO_LARGE
    responses["415"] = UNSUPPORTED_ENCODING
    return responses


def _envelope_operation(endpoint: Endpoint, method: str) -> dict[str, Any]:
    op: dict[str, Any] = {"operationId": f"{endpoint.name}_{method}",
                          "summary": endpoint.summary, "tags": [endpoint.tag],
                          "responses": _envelope_responses(endpoint)}
    if endpoint.kind == BATCH:
        op["requestBody"] = {"required": True, "content": {"application/json": {
            "schema": endpoint.body,
            "examples": {"request": {"value": endpoint.body_example}}}}}
    elif endpoint.params and method == "get":
        op["parameters"] = _query(endpoint.params)
    elif endpoint.params:
        schema = _form_schema(endpoint.params)
        op["requestBody"] = {"content": {
            "application/x-www-form-urlencoded": {"schema": schema},
            "multipart/form-data": {"schema": schema},
            "application/json": {"schema": schema}}}
    return op


def _plain_operation(endpoint: Endpoint, method: str) -> dict[str, Any]:
    content: dict[str, Any] = {"schema": {"type": "string"}
                               if endpoint.media.startswith("text/") else {"type": "object"}}
    if endpoint.example is not None:
        content["example"] = endpoint.example
    return {"operationId": f"{endpoint.name}_{method}", "tags": [endpoint.tag],
            "summary": endpoint.summary,
            "responses": {"200": {"description": endpoint.answer,
                                  "content": {endpoint.media: content}}}}


def _page_operation(endpoint: Endpoint) -> dict[str, Any]:
    """A console page: HTML, or the error envelope when a parameter breaks a rule (HTTP 400
    when a required one is missing or unconvertible, else HTTP 200); HTTP 404 with an HTML
    page where the row's codes hold 404 (the topic page: no such topic)."""
    html = {"text/html": {"schema": {"type": "string"}}}
    responses: dict[str, Any] = {"200": {"description": "An HTML page.", "content": html}}
    if endpoint.params:
        responses["200"] = {"description": "An HTML page, or the error envelope when a "
                                           "parameter breaks a rule.",
                            "content": {**html, "application/json": {"schema": ref("Error")}}}
    if any(p.required for p in endpoint.params):
        responses["400"] = CONSOLE_MISSING
    if 404 in endpoint.codes:
        responses["404"] = {"description": "No such topic: an HTML page that says so and "
                                           "links back (nothing is created).", "content": html}
    return {"operationId": f"console_{endpoint.name}", "tags": [endpoint.tag],
            "summary": endpoint.summary, "parameters": _query(endpoint.params),
            "responses": responses}


def _form_operation(endpoint: Endpoint) -> dict[str, Any]:
    """A console form's POST: refused (403) unless same-origin, else 303 to the topic page."""
    return {
        "operationId": f"console_{endpoint.name}", "tags": [endpoint.tag],
        "summary": endpoint.summary + " Same-origin browser forms only (Sec-Fetch-Site or "
                                      "Origin).",
        "requestBody": {"required": True, "content": {
            "application/x-www-form-urlencoded": {"schema": _form_schema(endpoint.params)}}},
        "responses": {
            "303": {"description": "Done: back to the topic page, which says what was done."},
            "403": CROSS_SITE,
            "200": {"description": "A bad parameter: the error envelope.",
                    "content": {"application/json": {"schema": ref("Error")}}},
            "400": CONSOLE_MISSING}}


def _operation(endpoint: Endpoint, method: str) -> dict[str, Any]:
    if endpoint.kind == PLAIN:
        op = _plain_operation(endpoint, method)
    elif endpoint.kind == PAGE:
        op = _page_operation(endpoint)
    elif endpoint.kind == FORM:
        op = _form_operation(endpoint)
    else:
        op = _envelope_operation(endpoint, method)
    if method == "get":
        op["responses"]["414"] = REQUEST_LINE_TOO_LONG
    op["x-origin"] = endpoint.origin      # camellia's endpoint or ours (the table above)
    if endpoint.rule.scope != "open":
        op["security"] = [{BEARER: []}]
        op["description"] = _access(endpoint)
    return op


@lru_cache(maxsize=1)
def _document() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {"title": "delayqueue", "version": __version__,
                 "description": "camellia-delay-queue's HTTP API and delayqueue's additions. "
                                "Every answer is a JSON envelope {code, msg, ...}; codes other "
                                "than 200 come with HTTP 200 except some parameter errors "
                                "(HTTP 400, below), an oversized body (HTTP 413) and a "
                                "Content-Encoding other than gzip (HTTP 415). Times are ms "
                                f"since the epoch; durations ms, at most {MAX_DURATION_MS}."
                                "\n\n" + COMPRESSED_BODIES + "\n\n" + PARAMETER_ERRORS},
        "servers": [{"url": "/"}],
        "paths": {e.path: {m.lower(): _operation(e, m.lower()) for m in e.methods}
                  for e in ENDPOINTS},
        "tags": [{"name": name, "description": text} for name, text in TAGS.items()],
        "components": {"schemas": schemas(), "securitySchemes": SECURITY_SCHEMES},
    }


def document() -> dict[str, Any]:
    """A fresh copy of the OpenAPI document."""
    return copy.deepcopy(_document())
