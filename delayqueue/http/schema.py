"""The pieces endpoints are described with in /openapi.json: parameter schemas, request
bodies, examples, and the named schemas of the answers (``components/schemas``).

endpoints.py describes each endpoint with these; openapi.py assembles the document.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from delayqueue.core.status import Status
from delayqueue.core.subscriptions import SUBSCRIPTION_SETTINGS
from delayqueue.settings.topic_setting import PUSH_SETTINGS, SETTINGS, TopicSetting

REF = "#/components/schemas/"


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
GROUP_ID = Param("groupId", string(
    "(ours) The message's group: its messages are delivered one at a time, in order of "
    "(triggerTime, acceptance), the next only once the one delivered has ended (ack, delete, "
    "expiry, retries used up). The msgId rules: at most max-msg-id-length (256) characters, "
    "no control characters; empty counts as absent (no group)."))
ON_DUPLICATE = Param("onDuplicate", {"type": "string", "enum": ["keep", "replace"],
                                     "description": (
    "(ours) What a live namesake (a message with this msgId) meets: keep (the default) answers "
    "it as a duplicate and enqueues nothing; replace (debounce) begins a waiting or ready one "
    "again with this send's body, attributes, triggerTime, ttl (and maxRetry if given), retry "
    "0, a new acceptance order, its earlier receipt stale, answering replaced: true; a "
    "consuming one answers 409, another groupId 400, nothing changed. An ended namesake inside "
    "the topic's dedupWindowMillis answers duplicate: true either way.")})
RECEIPT = Param("receipt", string("The receipt of the delivery being answered; a stale one "
                                  "answers 409 and changes nothing, one not of the receipt's "
                                  "form (hex.hex, or hex.hex.hex in a named subscription) "
                                  "400 (malformed)."))
DELAY = Param("delayMillis", integer("Delay in ms from now (<= 0: due now); at most 100 years."))
TRIGGER = Param("triggerTime", integer("(ours) Absolute due time, ms since the epoch; give "
                                       "at most one of delayMillis and triggerTime.", 0))
ACK_TIMEOUT = Param("ackTimeoutMillis", integer("Ack deadline of this delivery in ms (<= 0: "
                                                "the topic's, then the server's)."))
PULL_COUNT = Param("batch", integer("Most messages to hand out (<= 0 means 1); at most "
                                    "max-batch (1000)."))
LIMIT_DEAD = Param("limit", integer("Most dead letters (1..max-batch).", 1))
EXAMPLE_TOPIC = "orders"
EXAMPLE_ID = "9f0c2b7e4d1a4c0f8e6b5a3d2c1b0a99"
T0 = 1_763_800_000_000

EXAMPLE_MSG = {"topic": EXAMPLE_TOPIC, "msgId": EXAMPLE_ID, "msg": "{\"order\":42}",
               "produceTime": T0, "triggerTime": T0 + 5000, "expireTime": T0 + 3_605_000,
               "maxRetry": 10, "retry": 0, "status": 1}
DELIVERED_MSG = {**EXAMPLE_MSG, "retry": 1, "status": 3, "receipt": "19aaaac3988.1"}
# A delivery as changeVisibility answers it: without its receipt (a pull hands that out).
CONSUMING_MSG = {k: v for k, v in DELIVERED_MSG.items() if k != "receipt"}
GROUPED_MSG = {**EXAMPLE_MSG, "msgId": "5b1e0c9d7a3f4e2b8c6d4a2f0e1b3c5d", "msg": "paid",
               "groupId": "order-42"}
WAITING_INFO = {"sizeOf0To1min": 451, "sizeOf1minTo10min": 0, "sizeOf10minTo30min": 0,
                "sizeOf30minTo1hour": 0, "sizeOf1hourTo6hour": 0, "sizeOf6hourTo1day": 0,
                "sizeOf1dayTo7day": 0, "sizeOf7dayTo30day": 0, "sizeOf30dayToInfinite": 0}
EXAMPLE_INFO = {"topic": EXAMPLE_TOPIC, "waitingQueueSize": 451, "waitingQueueInfo": WAITING_INFO,
                "readyQueueSize": 0, "ackQueueSize": 0, "deadQueueSize": 0, "groupBlockedSize": 0,
                "paused": False, "subscriptions": [
                    {"subscription": "default", "createdTime": None, "readyQueueSize": 0,
                     "ackQueueSize": 0, "deadQueueSize": 0, "groupBlockedSize": 0,
                     "waitingQueueSize": 451, "paused": False}]}
EXAMPLE_CONFIG = {"ttlMillis": 3_600_000, "maxRetry": 2, "ackTimeoutMillis": 30_000,
                  "redeliveryDelayMillis": 500, "redeliveryBackoffMultiplier": 2,
                  "redeliveryMaxDelayMillis": 3_600_000, "deadLetter": True,
                  "deadLetterRetentionMillis": 604_800_000, "deadLetterMaxSize": 100_000,
                  "delayMillis": 0, "maxBacklog": 0, "dedupWindowMillis": 0,
                  "defaultSubscription": True, "description": ""}
EXAMPLE_SOURCE = {name: "server" for name in EXAMPLE_CONFIG} | {
    "maxRetry": "topic", "redeliveryDelayMillis": "topic", "redeliveryBackoffMultiplier": "topic"}


SUBSCRIPTION_RULE = "1-64 characters of A-Z, a-z, 0-9, '.', '_' and '-'"
SUBSCRIPTION = Param("subscription", string(
    "(ours) The subscription to act in: absent, empty or 'default' is the topic's default "
    f"subscription (camellia's one queue); else a named one ({SUBSCRIPTION_RULE}). An "
    "unknown one answers 404.", maxLength=64, pattern="^[A-Za-z0-9._-]{0,64}$"))
NAMED_SUBSCRIPTION = Param("subscription", string(
    f"(ours) The subscription's name: {SUBSCRIPTION_RULE}, not 'default' (the topic's default "
    "subscription always exists and cannot be created or deleted).", minLength=1,
    maxLength=64, pattern="^[A-Za-z0-9._-]{1,64}$"), True)
CONFIGURED_SUBSCRIPTION = Param("subscription", string(
    "(ours) The subscription: absent, empty or 'default' is the topic's default subscription "
    "(its settings are the topic's, but for its push settings); else a named one "
    f"({SUBSCRIPTION_RULE}). An unknown one answers 404.", maxLength=64,
    pattern="^[A-Za-z0-9._-]{0,64}$"))
EXAMPLE_SUBSCRIPTION = {"subscription": "billing", "createdTime": T0, "readyQueueSize": 3,
                        "ackQueueSize": 1, "deadQueueSize": 0, "groupBlockedSize": 0,
                        "waitingQueueSize": 451, "paused": False}
EXAMPLE_SUBSCRIPTIONS = [{**EXAMPLE_SUBSCRIPTION, "subscription": "default",
                          "createdTime": None, "readyQueueSize": 0},
                         EXAMPLE_SUBSCRIPTION]
EXAMPLE_PUSH_URL = "https://billing.example.com/hooks/orders"
EXAMPLE_SUBSCRIPTION_CONFIG = {**EXAMPLE_CONFIG, "ackTimeoutMillis": 60_000, "maxRetry": 5,
                               "pushUrl": EXAMPLE_PUSH_URL, "pushTimeoutMillis": 10_000,
                               "pushConcurrency": 16, "pushSecretSet": True}
EXAMPLE_SUBSCRIPTION_SOURCE = {**EXAMPLE_SOURCE, "ackTimeoutMillis": "subscription",
                               "maxRetry": "subscription", "pushUrl": "subscription",
                               "pushTimeoutMillis": "server", "pushConcurrency": "server"}
EXAMPLE_PUSH_STATUS = {"subscription": "billing", "pushUrl": EXAMPLE_PUSH_URL,
                       "pushTimeoutMillis": 10_000, "pushConcurrency": 16,
                       "pushSecretSet": True, "paused": False, "inFlight": 3, "lastErrors": [
                           {"time": T0 + 61_000, "msgId": EXAMPLE_ID, "outcome": "5xx",
                            "status": 503, "error": "HTTP 503: busy", "millis": 12.5},
                           {"time": T0 + 1_000, "msgId": EXAMPLE_ID, "outcome": "timeout",
                            "status": None, "error": "read timed out", "millis": 10000.4}]}
# What a pull of a push subscription answers (core/queue.py).
EXAMPLE_PUSH_PULL_REFUSED = {"code": 400, "msg": "subscription: 'billing' is a push "
                                                 "subscription (it has a pushUrl): its "
                                                 "messages are POSTed to that URL, not "
                                                 "pulled; clear pushUrl to pull them"}
EXAMPLE_HELD_MSG = {**EXAMPLE_MSG, "status": 2, "subscriptions": {
    "billing": {"status": 3, "retry": 1}, "audit": {"status": 4, "retry": 1}}}


SCHEDULE_ID = Param("scheduleId", string(
    "(ours) The schedule's id, unique within the topic: the msgId rules (no control "
    "characters), at most max-msg-id-length - 15 (241) characters, as its occurrences' msgIds "
    "are '<scheduleId>:<fireTime>'.", minLength=1), True)
EXAMPLE_SCHEDULE = {
    "scheduleId": "nightly-report", "topic": EXAMPLE_TOPIC, "cron": "30 2 * * *",
    "timezone": "Europe/Paris", "everyMillis": None, "msg": "{\"report\":\"daily\"}",
    "attributes": None, "groupId": None, "ttlMillis": None, "maxRetry": None,
    "startTime": T0, "endTime": None, "limit": None, "misfire": "once", "paused": False,
    "createdTime": T0, "sentCount": 1, "missedCount": 0, "lastFireTime": None,
    "nextFireTime": 1_763_861_400_000}
EXAMPLE_FIRE_TIMES = [1_763_861_400_000 + day * 86_400_000 for day in range(5)]


JSON_TYPES = {int: "integer", float: "number", bool: "boolean", str: "string"}


def setting_type(setting: TopicSetting) -> str:
    """The JSON type of a topic setting's value, from the kind the settings table gives."""
    return JSON_TYPES[setting.kind]


def _setting_param(setting: TopicSetting) -> Param:
    """A topic setting as a parameter: a form sends every value as a string."""
    description = f"Topic setting {setting.name}: {setting.rule}."
    if setting_type(setting) == "boolean":
        return Param(setting.name, boolean(description))
    if setting_type(setting) == "string":
        return Param(setting.name, string(description, maxLength=setting.high))
    return Param(setting.name, {"type": [setting_type(setting), "string"],
                                "description": description})


SETTING_PARAMS = tuple(_setting_param(s) for s in SETTINGS)
# The topic settings a subscription may set as its own (createSubscription,
# setSubscriptionConfig).
SUBSCRIPTION_SETTING_PARAMS = tuple(p for p in SETTING_PARAMS if p.name in SUBSCRIPTION_SETTINGS)
PUSH_RULES = {
    "pushUrl": "(ours) Push delivery: each message is POSTed to this http:// or https:// URL "
               "instead of being pulled. No user or password in it; its host must resolve "
               "only to addresses inside the server's push-allowed-networks (default: public "
               "addresses only; loopback, private and link-local ones need the operator's "
               "leave). At most 2048 bytes. Empty: no push (the subscription is pulled "
               "again).",
    "pushTimeoutMillis": "(ours) Connect and read timeout of one push POST, in ms: an "
                         "integer from 100 to 600000 (default: the server's "
                         "push-timeout-millis, 10000).",
    "pushConcurrency": "(ours) Push POSTs in flight for the subscription across the fleet: "
                       "an integer from 1 to 10000 (default: the server's push-concurrency, "
                       "16).",
    "pushSecret": "(ours) The HMAC-SHA256 key the pushes are signed with "
                  "(X-DelayQueue-Signature): text of at most 256 bytes (UTF-8). Write-only: "
                  "never answered or logged (pushSecretSet says whether there is one). Send "
                  "it in the body, never in the query string. Empty: no signature.",
}


def _push_param(setting: TopicSetting) -> Param:
    if setting.kind is str:
        return Param(setting.name, string(PUSH_RULES[setting.name], maxLength=setting.high))
    return Param(setting.name, {"type": ["integer", "string"],
                                "description": PUSH_RULES[setting.name]})


# A subscription's push settings (the default subscription's too): createSubscription and
# setSubscriptionConfig.
PUSH_SETTING_PARAMS = tuple(_push_param(s) for s in PUSH_SETTINGS)


def schemas() -> dict[str, Any]:
    status = {"type": "integer", "enum": [s.value for s in Status],
              "description": ", ".join(f"{s.value} {s.name.lower().replace('_', ' ')}"
                                       for s in Status) + "."}
    envelope = {"code": {"type": "integer", "enum": [200]}, "msg": {"type": "string"}}
    setting_values = {s.name: {"type": setting_type(s)} for s in SETTINGS}
    push_values = {
        "pushUrl": {"type": ["string", "null"], "description": "null: not a push "
                    "subscription."},
        "pushTimeoutMillis": {"type": "integer", "minimum": 100, "maximum": 600_000},
        "pushConcurrency": {"type": "integer", "minimum": 1, "maximum": 10_000},
        "pushSecretSet": {"type": "boolean", "description": "Whether pushes are signed; the "
                          "secret itself is never answered."}}

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
                   "properties": {"code": {"type": "integer",
                                           "enum": [200, 400, 404, 409, 429, 500]},
                                  "msg": {"type": ["string", "null"]},
                                  "delayMsg": ref("DelayMsg"),
                                  "duplicate": {"type": "boolean"},
                                  "replaced": {"type": "boolean"}}}
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
                "groupId": {"type": "string", "description": "(ours) Its group, as sent; absent "
                                                             "when it has none."},
                "attributes": {"type": "object", "additionalProperties": {"type": "string"}},
                "receipt": {"type": "string", "description": "The latest delivery's receipt: "
                            "of a delivery, and of a consuming message in getMsg / listMsg."},
                "ackDeadline": {"type": "integer", "description": "(ours) getMsg / listMsg of "
                                "a consuming message: when its delivery times out."},
                "deadTime": {"type": "integer", "description": "When it became a dead letter "
                             "(listDeadMsg, getMsg)."},
                "subscriptions": {
                    "type": "object", "description": "(ours) getMsg without subscription, "
                    "of a message named subscriptions hold: each one's status and retry "
                    "(the message's own fields are the default subscription's).",
                    "additionalProperties": {
                        "type": "object", "required": ["status", "retry"],
                        "properties": {"status": status,
                                       "retry": {"type": "integer", "minimum": 0}}}},
            },
            "additionalProperties": False,
        },
        "Error": {
            "type": "object", "required": ["code", "msg"],
            "properties": {"code": {"type": "integer",
                                    "enum": [400, 401, 403, 404, 409, 413, 414, 415, 429, 500]},
                           "msg": {"type": "string", "description": "Names the parameter "
                                                                    "and the rule it broke."}},
            "additionalProperties": False,
        },
        "Success": ok({}, ["msg"]),
        "DelayMsgAnswer": ok({"delayMsg": ref("DelayMsg"),
                              "duplicate": {"type": "boolean", "const": True},
                              "replaced": {"type": "boolean", "const": True}}, ["delayMsg"]),
        "DelayMsgListAnswer": ok({"delayMsgList": {"type": "array", "items": ref("DelayMsg")}},
                                 ["delayMsgList"]),
        "DeadPageAnswer": ok({"delayMsgList": {"type": "array", "items": ref("DelayMsg")},
                              "nextCursor": {"type": "string"}}, ["delayMsgList"]),
        "CountAnswer": ok({"count": {"type": "integer", "minimum": 0}}, ["count"]),
        "PurgeAnswer": ok({"count": {"type": "integer", "minimum": 0, "description":
                                     "Messages ended (status 7) by this call."},
                           "remaining": {"type": "integer", "minimum": 0, "description":
                                         "0 when every message accepted before the call has "
                                         "ended; else (the call stopped at its limit) the "
                                         "topic's live messages: call again."}},
                          ["count", "remaining"]),
        "PauseAnswer": ok({"paused": {"type": "boolean"},
                           "changed": {"type": "boolean", "description":
                                       "false when the topic already was so."}},
                          ["paused", "changed"]),
        "MessagePageAnswer": ok({"delayMsgList": {"type": "array", "items": ref("DelayMsg")},
                                 "nextCursor": {"type": "string", "description":
                                                "The next page's cursor; absent at the end."}},
                                ["delayMsgList"]),
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
                "groupBlockedSize": {"type": "integer", "minimum": 0, "description":
                                     "(ours) Due messages waiting behind their group's head "
                                     "(getMsg shows them ready, status 2); not counted in "
                                     "readyQueueSize. Those not yet due count as waiting."},
                "paused": {"type": "boolean", "description": "(ours) pauseTopic: nothing is "
                           "handed out until resumeTopic."},
                "subscriptions": {"type": "array", "items": ref("Subscription"),
                                  "description": "(ours) listSubscriptions: the default "
                                                 "subscription first."},
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
        "BatchAnswer": ok({"code": {"type": "integer", "enum": [200, 400], "description":
                                    "400: an atomic sendMsgBatch was refused and nothing "
                                    "written; each result says why (the refused entries "
                                    "their own code, the others 409)."},
                           "results": {"type": "array", "items": batch_entry}}, ["results"]),
        "Schedule": schedule_schema(),
        "ScheduleAnswer": ok({"data": ref("Schedule")}, ["data"]),
        "ScheduleControlAnswer": ok({"data": ref("Schedule"),
                                     "changed": {"type": "boolean", "description": "false "
                                                 "when it already was so (as pauseTopic)."}},
                                    ["data", "changed"]),
        "SchedulePageAnswer": ok({"data": {"type": "array", "items": ref("Schedule")},
                                  "nextCursor": {"type": "string", "description":
                                                 "The next page's cursor; absent at the "
                                                 "end."}}, ["data"]),
        "ScheduleDeleteAnswer": ok({"deleted": {"type": "boolean", "const": True},
                                    "occurrenceDeleted": {"type": "boolean", "description":
                                                          "true when its waiting occurrence "
                                                          "was deleted with it."}},
                                   ["deleted", "occurrenceDeleted"]),
        "Subscription": subscription_schema(),
        "SubscriptionAnswer": ok({"data": ref("Subscription")}, ["data"]),
        "SubscriptionListAnswer": ok({"data": {"type": "array", "items": ref("Subscription"),
                                               "description": "The default subscription "
                                                              "first."}}, ["data"]),
        "SubscriptionDeleteAnswer": ok({"deleted": {"type": "boolean"}}, ["deleted"]),
        "SubscriptionConfigAnswer": ok({
            "data": {"type": "object", "properties": {**setting_values, **push_values},
                     "required": [*(s.name for s in SETTINGS), *push_values]},
            "source": {"type": "object", "description": "subscription: the value is the "
                       f"subscription's own (only {', '.join(SUBSCRIPTION_SETTINGS)} and the "
                       "push settings can be; the default subscription's only the push "
                       "settings). pushSecretSet has none.",
                       "additionalProperties": {"enum": ["subscription", "topic", "server"]}},
        }, ["data", "source"]),
        "PushError": push_error_schema(),
        "PushStatus": push_status_schema(),
        "PushStatusAnswer": ok({"data": ref("PushStatus")}, ["data"]),
        "Health": {"type": "object", "required": ["code"],
                   "properties": {"code": {"type": "integer", "enum": [200, 500]}}},
    }


def ok_example(**fields: Any) -> dict[str, Any]:
    """A success answer's example: the envelope around ``fields``."""
    return {"code": 200, "msg": "success", **fields}


def batch_body(list_name: str, items: dict[str, Any],
               extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """A batch request's JSON body: the topic and a non-empty array of at most 1000 entries."""
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
                   "maxProperties": 32},
    "groupId": GROUP_ID.schema, "onDuplicate": ON_DUPLICATE.schema}}
ACK_ENTRY = {"type": "object", "required": ["msgId"], "properties": {
    "msgId": MSG_ID.schema, "receipt": RECEIPT.schema, "ack": {"type": "boolean"},
    "delayMillis": {"type": "integer", "minimum": 0}}}
VISIBILITY_ENTRY = {"type": "object", "required": ["msgId", "ackTimeoutMillis"], "properties": {
    "msgId": MSG_ID.schema, "receipt": RECEIPT.schema,
    "ackTimeoutMillis": integer("New deadline from now in ms (0 releases it).", 0)}}


def subscription_schema() -> dict[str, Any]:
    """A subscription as listSubscriptions and createSubscription answer it
    (core/subscriptions.py): its name and its own queue sizes."""
    size = {"type": "integer", "minimum": 0}
    return {
        "type": "object",
        "required": ["subscription", "createdTime", "readyQueueSize", "ackQueueSize",
                     "deadQueueSize", "groupBlockedSize", "waitingQueueSize", "paused"],
        "properties": {
            "subscription": {"type": "string", "description": "'default' for the topic's "
                                                              "default subscription."},
            "createdTime": {"type": ["integer", "null"], "description": "When it was "
                            "created: it receives the messages sent after (null for the "
                            "default subscription, which the topic always has)."},
            "readyQueueSize": size, "ackQueueSize": size, "deadQueueSize": size,
            "groupBlockedSize": size, "waitingQueueSize": size,
            "paused": {"type": "boolean", "description": "pauseTopic with this subscription, "
                       "or the whole topic: nothing is handed out in it."},
            "pushUrl": {"type": "string", "description": "Where its messages are pushed, "
                        "when they are."},
        },
    }


def schedule_schema() -> dict[str, Any]:
    """A recurring schedule as the schedule endpoints answer it (core/schedules.py info)."""
    nullable_int = {"type": ["integer", "null"]}
    nullable_str = {"type": ["string", "null"]}
    return {
        "type": "object",
        "required": ["scheduleId", "topic", "cron", "timezone", "everyMillis", "msg",
                     "attributes", "groupId", "ttlMillis", "maxRetry", "startTime", "endTime",
                     "limit", "misfire", "paused", "createdTime", "sentCount", "missedCount",
                     "lastFireTime", "nextFireTime"],
        "properties": {
            "scheduleId": {"type": "string"}, "topic": {"type": "string"},
            "cron": nullable_str, "timezone": nullable_str, "everyMillis": nullable_int,
            "msg": {"type": "string"},
            "attributes": {"type": ["object", "null"],
                           "additionalProperties": {"type": "string"}},
            "groupId": nullable_str, "ttlMillis": nullable_int, "maxRetry": nullable_int,
            "startTime": {"type": "integer"}, "endTime": nullable_int, "limit": nullable_int,
            "misfire": {"enum": ["once", "skip", "all"]}, "paused": {"type": "boolean"},
            "createdTime": {"type": "integer"},
            "sentCount": {"type": "integer", "minimum": 0, "description": "Occurrences "
                          "delivered or still to be, the waiting one included (one a pause "
                          "deleted before its fire time is not counted): what limit "
                          "counts."},
            "missedCount": {"type": "integer", "minimum": 0, "description": "Fire times not "
                            "sent at their own time (more than the misfire grace late)."},
            "lastFireTime": {**nullable_int, "description": "The latest fire time that has "
                             "come (its occurrence due), null before the first."},
            "nextFireTime": {**nullable_int, "description": "The fire time of the waiting "
                             "occurrence; null while paused or once finished."},
            "nextFireTimes": {"type": "array", "items": {"type": "integer"}, "maxItems": 5,
                              "description": "getSchedule, createSchedule: the next fire "
                                             "times from nextFireTime on (at most 5; none "
                                             "while paused or finished)."},
        },
        "additionalProperties": False,
    }


PUSH_OUTCOMES = ("2xx", "3xx", "4xx", "5xx", "timeout", "connection", "refused")


def push_error_schema() -> dict[str, Any]:
    """One failed push as getPushStatus lists it (background/push.py writes them)."""
    return {
        "type": "object", "required": ["time", "msgId", "outcome", "status", "error", "millis"],
        "properties": {
            "time": {"type": "integer", "description": "When the push ended (ms since the "
                                                       "epoch)."},
            "msgId": {"type": "string"},
            "outcome": {"enum": list(PUSH_OUTCOMES), "description": "The status class, or "
                        "timeout, connection (no answer: refused, reset, DNS), refused (the "
                        "address is outside push-allowed-networks)."},
            "status": {"type": ["integer", "null"], "description": "The HTTP status, when "
                                                                   "there was an answer."},
            "error": {"type": ["string", "null"], "description": "What went wrong, in "
                                                                 "words."},
            "millis": {"type": ["number", "null"], "description": "From the POST to the "
                                                                  "answer or the failure."},
        },
    }


def push_status_schema() -> dict[str, Any]:
    """A subscription's push state as getPushStatus answers it (core/subscriptions.py
    push_status)."""
    return {
        "type": "object",
        "required": ["subscription", "pushUrl", "pushTimeoutMillis", "pushConcurrency",
                     "pushSecretSet", "paused", "inFlight", "lastErrors"],
        "properties": {
            "subscription": {"type": "string", "description": "'default' for the topic's "
                                                              "default subscription."},
            "pushUrl": {"type": ["string", "null"], "description": "null: not a push "
                                                                   "subscription."},
            "pushTimeoutMillis": {"type": "integer", "minimum": 100},
            "pushConcurrency": {"type": "integer", "minimum": 1},
            "pushSecretSet": {"type": "boolean", "description": "Whether pushes are signed "
                              "(the secret itself is never answered)."},
            "paused": {"type": "boolean", "description": "The subscription or its topic is "
                       "paused: nothing is pushed."},
            "inFlight": {"type": "integer", "minimum": 0, "description": "Pushes in flight "
                         "fleet-wide: the subscription's consuming messages (0 when it is not "
                         "a push subscription)."},
            "lastErrors": {"type": "array", "maxItems": 20, "items": ref("PushError"),
                           "description": "Its last failed pushes, newest first (at most 20, "
                                          "kept 7 days)."},
        },
        "additionalProperties": False,
    }
