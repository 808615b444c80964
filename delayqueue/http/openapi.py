"""The OpenAPI 3.1 document served at /openapi.json, built from the description below.

One entry per endpoint (``ENDPOINTS``): its parameters, its answer schema with an example,
and the envelope codes it can answer. Endpoints under ``/camellia/`` accept GET (query
string) and POST (form or JSON body) alike, so each gets both operations. The batch
endpoints take a JSON body only. tests/http/test_openapi.py holds the document to the Flask
routes and every example to its schema.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from delayqueue import __version__
from delayqueue.core.topic_config import MAX_DURATION_MS, SETTINGS

REF = "#/components/schemas/"
BASE = "/camellia/delayQueue/"


def ref(name: str) -> dict[str, str]:
    return {"$ref": REF + name}


def integer(description: str, minimum: int | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "integer", "description": description}
    if minimum is not None:
        schema["minimum"] = minimum
    return schema


def string(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **extra}


def boolean(description: str) -> dict[str, Any]:
    return {"type": ["boolean", "string"],
            "description": description + " Strings: true/false/1/0/yes/no/on/off, any case."}


@dataclass(frozen=True)
class Param:
    name: str
    schema: dict[str, Any]
    required: bool = False


TOPIC = Param("topic", string("Topic name: at most max-topic-length (256) characters, no '{', "
                              "'}' or control characters.", minLength=1), True)
MSG_ID = Param("msgId", string("Message id, unique within the topic: at most "
                               "max-msg-id-length (256) characters.", minLength=1), True)
OPTIONAL_MSG_ID = Param("msgId", MSG_ID.schema)
RECEIPT = Param("receipt", string("The receipt of the delivery being answered; a stale one "
                                  "answers 409 and changes nothing."))
DELAY = Param("delayMillis", integer("Delay in ms from now (<= 0: due now); at most 100 years."))
TRIGGER = Param("triggerTime", integer("(ours) Absolute due time, ms since the epoch; give "
                                       "at most one of delayMillis and triggerTime.", 0))
ACK_TIMEOUT = Param("ackTimeoutMillis", integer("Ack deadline of this delivery in ms (<= 0: "
                                                "the topic's, then the server's)."))
BATCH = Param("batch", integer("Most messages to hand out (<= 0 means 1); at most max-batch "
                               "(1000)."))
LIMIT_DEAD = Param("limit", integer("Most dead letters (1..max-batch).", 1))
EXAMPLE_TOPIC = "orders"
EXAMPLE_ID = "9f0c2b7e4d1a4c0f8e6b5a3d2c1b0a99"
T0 = 1_763_800_000_000

EXAMPLE_MSG = {"topic": EXAMPLE_TOPIC, "msgId": EXAMPLE_ID, "msg": "{\"order\":42}",
               "produceTime": T0, "triggerTime": T0 + 5000, "expireTime": T0 + 3_605_000,
               "maxRetry": 10, "retry": 0, "status": 1}
DELIVERED_MSG = {**EXAMPLE_MSG, "retry": 1, "status": 3, "receipt": "1-7c2e"}
WAITING_INFO = {"sizeOf0To1min": 451, "sizeOf1minTo10min": 0, "sizeOf10minTo30min": 0,
                "sizeOf30minTo1hour": 0, "sizeOf1hourTo6hour": 0, "sizeOf6hourTo1day": 0,
                "sizeOf1dayTo7day": 0, "sizeOf7dayTo30day": 0, "sizeOf30dayToInfinite": 0}
EXAMPLE_INFO = {"topic": EXAMPLE_TOPIC, "waitingQueueSize": 451, "waitingQueueInfo": WAITING_INFO,
                "readyQueueSize": 0, "ackQueueSize": 0, "deadQueueSize": 0}
EXAMPLE_CONFIG = {"ttlMillis": 3_600_000, "maxRetry": 2, "ackTimeoutMillis": 30_000,
                  "redeliveryDelayMillis": 500, "redeliveryBackoffMultiplier": 2,
                  "redeliveryMaxDelayMillis": 3_600_000, "deadLetter": True,
                  "deadLetterRetentionMillis": 604_800_000, "deadLetterMaxSize": 100_000}
EXAMPLE_SOURCE = {name: "server" for name in EXAMPLE_CONFIG} | {
    "maxRetry": "topic", "redeliveryDelayMillis": "topic", "redeliveryBackoffMultiplier": "topic"}


def _setting_schema(name: str, rule: str) -> dict[str, Any]:
    if name == "deadLetter":
        return boolean(f"Topic setting {name}: {rule}.")
    if name == "redeliveryBackoffMultiplier":
        return {"type": ["number", "string"], "description": f"Topic setting {name}: {rule}."}
    return {"type": ["integer", "string"], "description": f"Topic setting {name}: {rule}."}


SETTING_PARAMS = [Param(s.name, _setting_schema(s.name, s.rule)) for s in SETTINGS]


def schemas() -> dict[str, Any]:
    status = {"type": "integer", "enum": [1, 2, 3, 4, 5, 6, 7],
              "description": "1 waiting, 2 ready, 3 consuming, 4 acked, 5 expired, "
                             "6 retry exhausted, 7 deleted."}
    envelope = {"code": {"type": "integer", "enum": [200]}, "msg": {"type": "string"}}
    setting_values = {s.name: ({"type": "boolean"} if s.name == "deadLetter" else
                               {"type": "number"} if s.name == "redeliveryBackoffMultiplier"
                               else {"type": "integer"}) for s in SETTINGS}

    def ok(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
        return {"type": "object", "required": ["code", *required],
                "properties": {**envelope, **properties}}

    time_gap = {"type": "object", "required": ["topic", "count", "avg", "max"],
                "properties": {"topic": {"type": "string"}, "count": {"type": "integer"},
                               "avg": {"type": "number"}, "max": {"type": "number"},
                               "p50": {"type": "number"}, "p99": {"type": "number"}}}
    request_stats = {"type": "object", "required": ["topic"],
                     "properties": {"topic": {"type": "string"}, **{
                         name: {"type": "integer", "minimum": 0} for name in (
                             "sendMsg", "pullMsg", "deleteMsg", "ackMsg", "getMsg",
                             "triggerMsgReady", "triggerMsgEndLife", "triggerMsgTimeout")}}}
    batch_entry = {"type": "object", "required": ["code"],
                   "properties": {"code": {"type": "integer", "enum": [200, 400, 404, 409, 500]},
                                  "msg": {"type": ["string", "null"]},
                                  "delayMsg": ref("DelayMsg"),
                                  "duplicate": {"type": "boolean"}}}
    return {
        "DelayMsg": {
            "type": "object",
            "required": ["topic", "msgId", "msg", "produceTime", "triggerTime", "expireTime",
                         "maxRetry", "retry", "status"],
            "properties": {
                "topic": {"type": "string"}, "msgId": {"type": "string"},
                "msg": {"type": "string"}, "produceTime": {"type": "integer"},
                "triggerTime": {"type": "integer"}, "expireTime": {"type": "integer"},
                "maxRetry": {"type": "integer", "minimum": 0},
                "retry": {"type": "integer", "minimum": 0}, "status": status,
                "attributes": {"type": "object", "additionalProperties": {"type": "string"}},
                "receipt": {"type": "string", "description": "This delivery's receipt."},
                "deadTime": {"type": "integer", "description": "When it became a dead letter."},
            },
            "additionalProperties": False,
        },
        "Error": {
            "type": "object", "required": ["code", "msg"],
            "properties": {"code": {"type": "integer",
                                    "enum": [400, 401, 403, 404, 409, 413, 414, 429, 500]},
                           "msg": {"type": "string", "description": "Names the parameter "
                                                                    "and the rule it broke."}},
            "additionalProperties": False,
        },
        "Success": ok({}, ["msg"]),
        "DelayMsgAnswer": ok({"delayMsg": ref("DelayMsg"),
                              "duplicate": {"type": "boolean", "const": True}}, ["delayMsg"]),
        "DelayMsgListAnswer": ok({"delayMsgList": {"type": "array", "items": ref("DelayMsg")}},
                                 ["delayMsgList"]),
        "DeadPageAnswer": ok({"delayMsgList": {"type": "array", "items": ref("DelayMsg")},
                              "nextCursor": {"type": "string"}}, ["delayMsgList"]),
        "CountAnswer": ok({"count": {"type": "integer", "minimum": 0}}, ["count"]),
        "TopicConfigAnswer": ok({
            "data": {"type": "object", "properties": setting_values,
                     "required": [s.name for s in SETTINGS]},
            "source": {"type": "object", "additionalProperties": {"enum": ["topic", "server"]}},
        }, ["data", "source"]),
        "TopicInfo": {
            "type": "object",
            "required": ["topic", "waitingQueueSize", "waitingQueueInfo", "readyQueueSize",
                         "ackQueueSize"],
            "properties": {
                "topic": {"type": "string"},
                "waitingQueueSize": {"type": "integer", "minimum": 0},
                "waitingQueueInfo": {"type": "object", "required": list(WAITING_INFO),
                                     "properties": {name: {"type": "integer", "minimum": 0}
                                                    for name in WAITING_INFO}},
                "readyQueueSize": {"type": "integer", "minimum": 0},
                "ackQueueSize": {"type": "integer", "minimum": 0},
                "deadQueueSize": {"type": "integer", "minimum": 0},
            },
        },
        "TopicInfoAnswer": ok({"data": ref("TopicInfo")}, ["data"]),
        "TopicInfoListAnswer": ok({"data": {"type": "array", "items": ref("TopicInfo")}},
                                  ["data"]),
        "MonitorDataAnswer": ok({"data": {
            "type": "object",
            "required": ["requestStatsList", "pullMsgTimeGapStatsList",
                         "readyQueueTimeGapStatsList"],
            "properties": {
                "requestStatsList": {"type": "array", "items": request_stats},
                "pullMsgTimeGapStatsList": {"type": "array", "items": time_gap},
                "readyQueueTimeGapStatsList": {"type": "array", "items": time_gap},
            }}}, ["data"]),
        "BatchAnswer": ok({"results": {"type": "array", "items": batch_entry}}, ["results"]),
        "Health": {"type": "object", "required": ["code"],
                   "properties": {"code": {"type": "integer", "enum": [200, 500]}}},
    }


@dataclass(frozen=True)
class Endpoint:
    path: str
    summary: str
    answer: str                       # schema name of the code-200 answer
    example: dict[str, Any]
    params: list[Param] = field(default_factory=list)
    codes: tuple[int, ...] = (400,)   # envelope codes other than 200 (500 always)
    tag: str = "messages"
    json_body: dict[str, Any] | None = None   # batch endpoints: the JSON body schema
    body_example: dict[str, Any] | None = None


def _ok(**fields: Any) -> dict[str, Any]:
    return {"code": 200, "msg": "success", **fields}


def _batch_body(list_name: str, items: dict[str, Any], extra: dict[str, Any] | None = None
                ) -> dict[str, Any]:
    return {"type": "object", "required": ["topic", list_name],
            "properties": {"topic": TOPIC.schema,
                           list_name: {"type": "array", "minItems": 1, "maxItems": 1000,
                                       "items": items},
                           **(extra or {})}}


SEND_ENTRY = {"type": "object", "required": ["msg"], "properties": {
    "msg": {"type": "string", "minLength": 1}, "msgId": MSG_ID.schema, "delayMillis": DELAY.schema,
    "triggerTime": TRIGGER.schema, "ttlMillis": {"type": "integer"},
    "maxRetry": {"type": "integer"},
    "attributes": {"type": "object", "additionalProperties": {"type": "string"},
                   "maxProperties": 32}}}
ACK_ENTRY = {"type": "object", "required": ["msgId"], "properties": {
    "msgId": MSG_ID.schema, "receipt": RECEIPT.schema, "ack": {"type": "boolean"},
    "delayMillis": {"type": "integer", "minimum": 0}}}

ENDPOINTS: list[Endpoint] = [
    Endpoint(BASE + "sendMsg", "Send a message, due after delayMillis or at triggerTime.",
             "DelayMsgAnswer", _ok(delayMsg=EXAMPLE_MSG),
             [TOPIC, OPTIONAL_MSG_ID,
              Param("msg", string("The body: at most max-msg-bytes (1 MiB) of UTF-8.",
                                  minLength=1), True),
              DELAY, TRIGGER,
              Param("ttlMillis", integer("Life after triggerTime in ms (<= 0: the default).")),
              Param("maxRetry", integer("Deliveries allowed beyond the first (< 0: the "
                                        "default).")),
              Param("attributes", {"type": ["string", "object"], "description":
                                   "A JSON object of string keys to string values (JSON text "
                                   "in a form); at most 32 keys and 8 KiB."})]),
    Endpoint(BASE + "pullMsg", "Take up to batch ready messages (short poll).",
             "DelayMsgListAnswer", _ok(delayMsgList=[DELIVERED_MSG]),
             [TOPIC, ACK_TIMEOUT, BATCH]),
    Endpoint(BASE + "longPollingMsg", "As pullMsg, holding the request until a message is "
             "ready or the timeout passes.", "DelayMsgListAnswer", _ok(delayMsgList=[]),
             [TOPIC, ACK_TIMEOUT, BATCH,
              Param("longPollingTimeoutMillis", integer("Longest hold in ms (<= 0: the "
                                                        "server's); at most 60000."))]),
    Endpoint(BASE + "ackMsg", "Ack (ack=true) or nack (ack=false) a delivered message.",
             "Success", _ok(),
             [TOPIC, MSG_ID, Param("ack", boolean("true: ack; false: nack. Default true.")),
              RECEIPT, Param("delayMillis", integer("Nack only: back to waiting for this "
                                                    "long.", 0))], (400, 404, 409)),
    Endpoint(BASE + "changeVisibility", "Move a delivery's ack deadline (0 releases it).",
             "DelayMsgAnswer", _ok(delayMsg=DELIVERED_MSG),
             [TOPIC, MSG_ID, RECEIPT,
              Param("ackTimeoutMillis", integer("New deadline from now in ms.", 0), True)],
             (400, 404, 409)),
    Endpoint(BASE + "rescheduleMsg", "Give a waiting or ready message a new triggerTime.",
             "DelayMsgAnswer", _ok(delayMsg=EXAMPLE_MSG), [TOPIC, MSG_ID, DELAY, TRIGGER],
             (400, 404)),
    Endpoint(BASE + "getMsg", "A message with its true current status.", "DelayMsgAnswer",
             _ok(delayMsg=EXAMPLE_MSG), [TOPIC, MSG_ID], (400, 404)),
    Endpoint(BASE + "deleteMsg", "Delete a live message (release=true drops its body too).",
             "Success", _ok(), [TOPIC, MSG_ID, Param("release", boolean("Also remove the "
                                                                        "body now."))],
             (400, 404)),
    Endpoint(BASE + "listDeadMsg", "A page of the topic's dead letters, oldest death first.",
             "DeadPageAnswer",
             _ok(delayMsgList=[{**DELIVERED_MSG, "status": 6, "deadTime": T0 + 90_000}],
                 nextCursor="1763800090000:" + EXAMPLE_ID),
             [TOPIC, LIMIT_DEAD, Param("cursor", string("nextCursor of the previous page."))],
             tag="dead letters"),
    Endpoint(BASE + "redriveDeadMsg", "Dead letters back to ready (one, or up to limit).",
             "CountAnswer", _ok(count=1), [TOPIC, OPTIONAL_MSG_ID, LIMIT_DEAD],
             tag="dead letters"),
    Endpoint(BASE + "purgeDeadMsg", "Remove one dead letter, or all of the topic's.",
             "CountAnswer", _ok(count=3), [TOPIC, OPTIONAL_MSG_ID], tag="dead letters"),
    Endpoint(BASE + "setTopicConfig", "Set (or reset=true: drop) the topic's own settings.",
             "TopicConfigAnswer", _ok(data=EXAMPLE_CONFIG, source=EXAMPLE_SOURCE),
             [TOPIC, *SETTING_PARAMS, Param("reset", boolean("Drop every topic value "
                                                             "first."))],
             tag="topic settings"),
    Endpoint(BASE + "getTopicConfig", "The effective settings of a topic and their source.",
             "TopicConfigAnswer", _ok(data=EXAMPLE_CONFIG, source=EXAMPLE_SOURCE), [TOPIC],
             tag="topic settings"),
    Endpoint(BASE + "getMonitorData", "The last complete monitoring interval, fleet-wide.",
             "MonitorDataAnswer",
             _ok(data={"requestStatsList": [{"topic": EXAMPLE_TOPIC, "sendMsg": 35,
                                             "pullMsg": 12, "deleteMsg": 0, "ackMsg": 12,
                                             "getMsg": 0, "triggerMsgReady": 24,
                                             "triggerMsgEndLife": 0, "triggerMsgTimeout": 0}],
                       "pullMsgTimeGapStatsList": [{"topic": EXAMPLE_TOPIC, "count": 12,
                                                    "avg": 35.25, "max": 84, "p50": 50,
                                                    "p99": 84}],
                       "readyQueueTimeGapStatsList": []}), [], (), "monitoring"),
    Endpoint(BASE + "getTopicInfo", "Queue sizes of one topic.", "TopicInfoAnswer",
             _ok(data=EXAMPLE_INFO), [TOPIC], tag="monitoring"),
    Endpoint(BASE + "getTopicInfoList", "Queue sizes of every known topic.",
             "TopicInfoListAnswer", _ok(data=[EXAMPLE_INFO]), [], (), "monitoring"),
    Endpoint(BASE + "sendMsgBatch", "Send up to 1000 messages to one topic in one request.",
             "BatchAnswer",
             _ok(results=[{"code": 200, "msg": "success", "delayMsg": EXAMPLE_MSG},
                          {"code": 200, "msg": "success", "delayMsg": EXAMPLE_MSG,
                           "duplicate": True},
                          {"code": 400, "msg": "msg: required parameter is missing or empty"}]),
             codes=(400,), tag="batches", json_body=_batch_body("msgs", SEND_ENTRY),
             body_example={"topic": EXAMPLE_TOPIC, "msgs": [{"msg": "hello", "delayMillis": 5000},
                                                            {"msg": "again", "msgId": "m2"}]}),
    Endpoint(BASE + "ackMsgBatch", "Ack or nack up to 1000 messages of one topic.",
             "BatchAnswer",
             _ok(results=[{"code": 200, "msg": "success"},
                          {"code": 409, "msg": "receipt: stale receipt: the message was "
                                               "delivered again since"}]),
             codes=(400,), tag="batches", json_body=_batch_body("acks", ACK_ENTRY),
             body_example={"topic": EXAMPLE_TOPIC, "acks": [{"msgId": "m1", "receipt": "1-7c2e"},
                                                            {"msgId": "m2", "ack": False}]}),
    Endpoint(BASE + "deleteMsgBatch", "Delete up to 1000 messages of one topic.",
             "BatchAnswer",
             _ok(results=[{"code": 200, "msg": "success"},
                          {"code": 404, "msg": "msgId: no live message m9 in topic orders"}]),
             codes=(400,), tag="batches",
             json_body=_batch_body("msgIds", MSG_ID.schema,
                                   {"release": {"type": "boolean"}}),
             body_example={"topic": EXAMPLE_TOPIC, "msgIds": ["m1", "m9"], "release": False}),
    Endpoint("/camellia/health/status", "200 while the node is online and Redis answers, "
             "else HTTP 500.", "Health", {"code": 200}, [], (), "health"),
    Endpoint("/camellia/health/check", "200 while the process lives.", "Health",
             {"code": 200}, [], (), "health"),
    Endpoint("/camellia/health/online", "Put this node back online.", "Health", {"code": 200},
             [], (), "health"),
    Endpoint("/camellia/health/offline", "Take this node offline: health/status answers 500 "
             "so a load balancer drains it, and the long polls it holds answer at once "
             "(empty).", "Health", {"code": 200}, [], (), "health"),
]
BATCH_PATHS = {e.path for e in ENDPOINTS if e.json_body is not None}


def _form_schema(params: list[Param]) -> dict[str, Any]:
    return {"type": "object", "properties": {p.name: p.schema for p in params},
            "required": [p.name for p in params if p.required]}


def _responses(endpoint: Endpoint) -> dict[str, Any]:
    answer = {"description": "An envelope: code 200, or an error code listed below (HTTP 200 "
                             "unless noted).",
              "content": {"application/json": {
                  "schema": {"oneOf": [ref(endpoint.answer), ref("Error")]}
                  if endpoint.tag != "health" else ref(endpoint.answer),
                  "examples": {"success": {"value": endpoint.example}}}}}
    codes = sorted({*endpoint.codes, 500}) if endpoint.tag != "health" else []
    if codes:
        answer["description"] += " Envelope codes: " + ", ".join(map(str, codes)) + "."
    responses: dict[str, Any] = {"200": answer}
    if endpoint.tag == "health":
        if endpoint.path.endswith("/status"):
            responses["500"] = {"description": "Offline, or Redis does not answer.",
                                "content": {"application/json": {
                                    "schema": ref("Health"),
                                    "examples": {"down": {"value": {"code": 500}}}}}}
        return responses
    if any(p.required for p in endpoint.params) or endpoint.json_body:
        responses["400"] = {
            "description": "A required parameter is missing or cannot be converted.",
            "content": {"application/json": {"schema": ref("Error"), "examples": {
                "missing": {"value": {"code": 400, "msg": "topic: required parameter is "
                                                          "missing or empty"}}}}}}
    responses["413"] = {"description": "The body is larger than 4 x max-msg-bytes + 64 KiB.",
                        "content": {"application/json": {"schema": ref("Error")}}}
    return responses


def _operation(endpoint: Endpoint, method: str) -> dict[str, Any]:
    name = endpoint.path.rstrip("/").rsplit("/", 1)[-1]
    op: dict[str, Any] = {"operationId": f"{name}_{method}", "summary": endpoint.summary,
                          "tags": [endpoint.tag], "responses": _responses(endpoint)}
    if endpoint.json_body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {
            "schema": endpoint.json_body,
            "examples": {"request": {"value": endpoint.body_example}}}}}
        return op
    if method == "get":
        if endpoint.params:
            op["parameters"] = [{"name": p.name, "in": "query", "required": p.required,
                                 "schema": p.schema} for p in endpoint.params]
    elif endpoint.params:
        schema = _form_schema(endpoint.params)
        op["requestBody"] = {"content": {
            "application/x-www-form-urlencoded": {"schema": schema},
            "multipart/form-data": {"schema": schema},
            "application/json": {"schema": schema}}}
    return op


# gunicorn refuses a request line (method, path and query string) over limit_request_line
# before any view runs (delayqueue/server/gunicorn_workers.py): any GET with a long enough query.
REQUEST_LINE_TOO_LONG = {
    "description": "The request line (path and query string) is longer than 4094 bytes.",
    "content": {"application/json": {"schema": ref("Error"), "examples": {"too-long": {
        "value": {"code": 414, "msg": "request line: longer than 4094 bytes"}}}}}}


def _paths() -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for endpoint in ENDPOINTS:
        methods = ("post",) if endpoint.json_body is not None else ("get", "post")
        paths[endpoint.path] = {m: _operation(endpoint, m) for m in methods}
    text_view = {
        "tags": ["monitoring"],
        "summary": "camellia's text view: getMonitorData's last interval and every topic's "
                   "sizes, as aligned plain-text tables.",
        "responses": {"200": {"description": "Plain text.", "content": {"text/plain": {
            "schema": {"type": "string"},
            "example": "delayqueue monitor, namespace default: interval 2025-11-22T08:00:00Z "
                       "+ 60s, every node\n\n== request stats ==\ntopic   sendMsg  pullMsg"
                       "  ...\norders       35       12  ...\n"}}}}}
    paths[BASE + "getMonitorString"] = {
        m: {**copy.deepcopy(text_view), "operationId": f"getMonitorString_{m}"}
        for m in ("get", "post")}
    paths.update(_console_paths())
    paths["/metrics"] = {"get": {
        "operationId": "metrics_get", "tags": ["monitoring"],
        "summary": "Prometheus text: fleet-wide counters, queue sizes, time-gap histograms, "
                   "scheduler loop timings.",
        "responses": {"200": {"description": "Prometheus exposition format 0.0.4.",
                              "content": {"text/plain": {"schema": {"type": "string"},
                                                         "example": "delayqueue_queue_size{"
                                                                    "topic=\"orders\",state="
                                                                    "\"ready\"} 3.0\n"}}}}}}
    paths["/openapi.json"] = {"get": {
        "operationId": "openapi_get", "tags": ["meta"], "summary": "This document.",
        "responses": {"200": {"description": "OpenAPI 3.1.",
                              "content": {"application/json": {"schema": {"type": "object"}}}}}}}
    for ops in paths.values():
        if "get" in ops:
            ops["get"]["responses"]["414"] = REQUEST_LINE_TOO_LONG
    return paths



CONSOLE_PAGES = (
    ("/dashboard/", "fleet", "Every topic by backlog: sizes, rates, lag; refreshes itself.",
     [Param("page", integer("Page number, from 1.", 1)),
      Param("size", {"type": "integer", "enum": [25, 50, 100, 200]}),
      Param("refresh", integer("Seconds between refreshes (1..3600; default 5).", 1)),
      Param("fragment", string("Any value: only the table (what the page refreshes with)."))]),
    ("/dashboard/topic", "topic", "One topic: last-hour charts, sizes, settings, dead letters.",
     [TOPIC, Param("cursor", string("The dead-letter page to show (listDeadMsg's cursor)."))]),
    ("/dashboard/message", "message", "Message lookup: its state and fields.",
     [Param("topic", TOPIC.schema), Param("msgId", MSG_ID.schema)]),
)
CONSOLE_WRITES = (
    ("/dashboard/topic/redrive", "redrive", "Redrive one dead letter (msgId) or up to limit.",
     [TOPIC, OPTIONAL_MSG_ID, LIMIT_DEAD]),
    ("/dashboard/topic/purge", "purge", "Purge one dead letter (msgId) or all.",
     [TOPIC, OPTIONAL_MSG_ID]),
    ("/dashboard/topic/settings", "settings", "Set the topic's settings (empty fields unchanged).",
     [TOPIC, *SETTING_PARAMS, Param("reset", boolean("Drop every topic value first."))]),
)


CONSOLE_MISSING = {"description": "A required parameter is missing or cannot be converted: "
                                  "the error envelope.",
                   "content": {"application/json": {"schema": ref("Error")}}}


def _console_paths() -> dict[str, Any]:
    """The console: HTML pages, and form POSTs refused (403) unless same-origin. A page or
    form whose parameter breaks a rule answers the error envelope instead (HTTP 400 when
    a required one is missing or unconvertible, else HTTP 200)."""
    html = {"text/html": {"schema": {"type": "string"}}}
    paths: dict[str, Any] = {}
    for path, name, summary, params in CONSOLE_PAGES:
        responses: dict[str, Any] = {"200": {"description": "An HTML page.", "content": html}}
        if any(p.required for p in params):
            responses["200"] = {"description": "An HTML page, or the error envelope when a "
                                               "parameter breaks a rule.",
                                "content": {**html, "application/json": {"schema": ref("Error")}}}
            responses["400"] = CONSOLE_MISSING
        paths[path] = {"get": {
            "operationId": f"console_{name}", "tags": ["console"], "summary": summary,
            "parameters": [{"name": p.name, "in": "query", "required": p.required,
                            "schema": p.schema} for p in params],
            "responses": responses}}
    for path, name, summary, params in CONSOLE_WRITES:
        paths[path] = {"post": {
            "operationId": f"console_{name}", "tags": ["console"],
            "summary": summary + " Same-origin browser forms only (Sec-Fetch-Site or Origin).",
            "requestBody": {"required": True, "content": {
                "application/x-www-form-urlencoded": {"schema": _form_schema(params)}}},
            "responses": {
                "303": {"description": "Done: back to the topic page, which says what was done."},
                "403": {"description": "A cross-site request, or no Origin / Sec-Fetch-Site.",
                        "content": {"application/json": {"schema": ref("Error"), "examples": {
                            "cross-site": {"value": {"code": 403, "msg": "Sec-Fetch-Site: "
                                                     "cross-site: the console accepts writes "
                                                     "only from its own pages"}}}}}},
                "200": {"description": "A bad parameter: the error envelope.",
                        "content": {"application/json": {"schema": ref("Error")}}},
                "400": CONSOLE_MISSING}}}
    return paths


@lru_cache(maxsize=1)
def _document() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {"title": "delayqueue", "version": __version__,
                 "description": "camellia-delay-queue's HTTP API and delayqueue's additions. "
                                "Every answer is a JSON envelope {code, msg, ...}; codes other "
                                "than 200 come with HTTP 200 except a missing or unconvertible "
                                "parameter (HTTP 400) and an oversized body (HTTP 413). Times "
                                f"are ms since the epoch; durations ms, at most "
                                f"{MAX_DURATION_MS}."},
        "servers": [{"url": "/"}],
        "paths": _paths(),
        "components": {"schemas": schemas()},
    }


def document() -> dict[str, Any]:
    """A fresh copy of the OpenAPI document."""
    return copy.deepcopy(_document())
