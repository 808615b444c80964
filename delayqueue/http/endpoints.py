"""Every endpoint of the server, once: its path and methods, who may call it, whose it is
(camellia's or ours), and how /openapi.json describes it.

Routing (``route`` registers each view at its row's path and methods), the access check
(access.py reads the row's ``rule``), the parameters (request.py reads the row's ``origin``:
an empty required text parameter answers as param_rules.py says for it) and the OpenAPI
document (openapi.py) all read ``ENDPOINTS``. Adding an endpoint is a row here and a view
decorated with ``@route``; a route registered any other way is refused to every token while
``auth-tokens`` is set.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence, TypeVar

from flask import Blueprint

from .schema import (
    ACK_ENTRY,
    ACK_TIMEOUT,
    CONFIGURED_SUBSCRIPTION,
    CONSUMING_MSG,
    DELAY,
    DELIVERED_MSG,
    EXAMPLE_CONFIG,
    EXAMPLE_FIRE_TIMES,
    EXAMPLE_HELD_MSG,
    EXAMPLE_ID,
    EXAMPLE_INFO,
    EXAMPLE_MSG,
    EXAMPLE_PUSH_PULL_REFUSED,
    EXAMPLE_PUSH_STATUS,
    EXAMPLE_SCHEDULE,
    EXAMPLE_SOURCE,
    EXAMPLE_SUBSCRIPTION,
    EXAMPLE_SUBSCRIPTION_CONFIG,
    EXAMPLE_SUBSCRIPTION_SOURCE,
    EXAMPLE_SUBSCRIPTIONS,
    EXAMPLE_TOPIC,
    GROUP_ID,
    GROUPED_MSG,
    LIMIT_DEAD,
    MSG_ID,
    NAMED_SUBSCRIPTION,
    ON_DUPLICATE,
    OPTIONAL_MSG_ID,
    PULL_COUNT,
    PUSH_SETTING_PARAMS,
    RECEIPT,
    SCHEDULE_ID,
    SEND_ENTRY,
    SETTING_PARAMS,
    SUBSCRIPTION,
    SUBSCRIPTION_SETTING_PARAMS,
    T0,
    TOPIC,
    TRIGGER,
    VISIBILITY_ENTRY,
    Param,
    batch_body,
    boolean,
    integer,
    ok_example,
    string,
)

PRODUCE, CONSUME, ADMIN = "produce", "consume", "admin"


@dataclass(frozen=True)
class Rule:
    """Who may call an endpoint while ``auth-tokens`` is set."""
    roles: tuple[str, ...]      # any one of these (admin may do everything)
    scope: str                  # "topic": the topic parameter must match the token's patterns;
    #                             "namespace": the token must cover every topic of it; "open"


def topic(*roles: str) -> Rule:
    return Rule(roles, "topic")


def namespace(*roles: str) -> Rule:
    return Rule(roles, "namespace")


OPEN = Rule((), "open")

# How an endpoint is called and what it answers (openapi.py describes each kind its way).
ENVELOPE = "envelope"   # GET with a query string or POST with a form or JSON; the envelope
BATCH = "batch"         # POST of a JSON body of many entries; the envelope, one result each
HEALTH = "health"       # {"code": 200} (or 500) only
PLAIN = "plain"         # a body of its own: text, or a JSON document
PAGE = "page"           # a console page: HTML
FORM = "form"           # a console form's POST: 303 back to a page

# Whose endpoint it is. camellia's (its server's paths: what its SDK calls) answer an empty
# required text parameter as camellia does; ours keep our own rule (params.py, docs/api.md
# "Parameter errors").
CAMELLIA, OURS = "camellia", "ours"

Q = "/camellia/delayQueue/"
GET_POST = ("GET", "POST")
POST = ("POST",)


@dataclass(frozen=True)
class Endpoint:
    """One row of the table: what routing, the access check and the OpenAPI document read."""
    name: str                        # the view's key in the table; camellia's name for its own
    path: str
    methods: tuple[str, ...]
    rule: Rule
    kind: str
    tag: str
    summary: str
    params: tuple[Param, ...] = ()
    answer: str = ""                 # the schema of the code-200 answer (PLAIN: what it is)
    example: Any = None              # the code-200 answer
    codes: tuple[int, ...] = ()      # envelope codes besides 200 (500 always); HEALTH: (500,)
    #                                  when it may answer HTTP 500
    body: dict[str, Any] | None = None    # BATCH: the JSON body's schema
    body_example: dict[str, Any] | None = None
    media: str = "application/json"  # PLAIN: the body's content type
    origin: str = OURS               # CAMELLIA: an endpoint camellia's server has
    refusals: tuple[tuple[str, dict[str, Any]], ...] = ()   # (name, answer): examples of
    #                                  codes besides 200 that are not parameter errors


def camellia(name: str, rule: Rule, summary: str, answer: str, example: dict[str, Any],
             params: Sequence[Param] = (), codes: tuple[int, ...] = (400,),
             tag: str = "messages", origin: str = CAMELLIA,
             methods: tuple[str, ...] = GET_POST,
             refusals: tuple[tuple[str, dict[str, Any]], ...] = ()) -> Endpoint:
    """An endpoint of camellia's API (``ours``: one of ours beside them, called the same
    way; our new write routes take POST only)."""
    return Endpoint(name, Q + name, methods, rule, ENVELOPE, tag, summary, tuple(params),
                    answer, example, codes, origin=origin, refusals=refusals)


def ours(*args: Any, **kwargs: Any) -> Endpoint:
    return camellia(*args, **kwargs, origin=OURS)


def batch(name: str, rule: Rule, summary: str, example: dict[str, Any],
          body: dict[str, Any], body_example: dict[str, Any]) -> Endpoint:
    return Endpoint(name, Q + name, ("POST",), rule, BATCH, "batches", summary,
                    answer="BatchAnswer", example=example, codes=(400,), body=body,
                    body_example=body_example)


def health(name: str, rule: Rule, summary: str, codes: tuple[int, ...] = ()) -> Endpoint:
    return Endpoint(name, "/camellia/health/" + name, GET_POST, rule, HEALTH, "health",
                    summary, answer="Health", example={"code": 200}, codes=codes,
                    origin=CAMELLIA)


# The console shows and changes every topic: admin only. A browser sends no bearer token,
# so with tokens on the console is reached through a proxy that adds an admin's.
def page(name: str, path: str, summary: str, params: Sequence[Param],
         codes: tuple[int, ...] = ()) -> Endpoint:
    """``codes``: HTTP statuses of the page besides 200 (404: the topic page's unknown
    topic)."""
    return Endpoint(name, path, ("GET",), namespace(ADMIN), PAGE, "console", summary,
                    tuple(params), codes=codes)


def form(name: str, path: str, summary: str, params: Sequence[Param]) -> Endpoint:
    return Endpoint(name, path, ("POST",), namespace(ADMIN), FORM, "console", summary,
                    tuple(params))


RESET = Param("reset", boolean("Drop every topic value first."))
# A pull of a push subscription (its messages are POSTed, not pulled): code 400.
PUSH_PULL = (("push-subscription", EXAMPLE_PUSH_PULL_REFUSED),)
# The console's queue: a named subscription's (its page, and the forms sent from it), or the
# topic's default subscription when absent, empty or "default". (Its create and delete forms
# take schema.NAMED_SUBSCRIPTION, as the API's createSubscription does.)
CONSOLE_SUBSCRIPTION = Param("subscription", string(
    "A named subscription of the topic (1-64 of A-Z a-z 0-9 . _ -); absent, empty or "
    "'default': the topic's default subscription.", pattern="^[A-Za-z0-9._-]{0,64}$"))
SCHEDULE_PARAMS = (
    Param("cron", string("A cron expression of 5 fields (minute hour day-of-month month "
                         "day-of-week), in timezone; give cron or everyMillis.")),
    Param("timezone", string("The cron's IANA time zone (default UTC).")),
    Param("everyMillis", integer("Fire every this many ms from startTime (>= 1000); give "
                                 "cron or everyMillis.", 1000)),
    Param("msg", string("Each occurrence's body: at most max-msg-bytes of UTF-8.",
                        minLength=1), True),
    Param("attributes", {"type": ["string", "object"], "description":
                         "Each occurrence's attributes: a JSON object of strings to strings "
                         "(JSON text in a form)."}),
    GROUP_ID,
    Param("ttlMillis", integer("Each occurrence's life after its triggerTime (absent: the "
                               "topic's when it is written).", 1)),
    Param("maxRetry", integer("Each occurrence's deliveries beyond the first (absent: the "
                              "topic's when it is written).", 0)),
    Param("startTime", integer("The first fire time is at or after it (ms since the epoch; "
                               "default: now).", 0)),
    Param("endTime", integer("No fire time after it (inclusive; ms since the epoch).", 0)),
    Param("limit", integer("Most occurrences in all.", 1)),
    Param("misfire", {"type": "string", "enum": ["once", "skip", "all"], "description":
                      "Fire times missed by more than the grace (60 s), while no node ran "
                      "the schedule: once (default) one occurrence now for the latest, skip "
                      "none, all one each (at most 1000)."}),
)
SCHEDULE_ANSWER = ok_example(data={**EXAMPLE_SCHEDULE, "nextFireTimes": EXAMPLE_FIRE_TIMES})
# The console's sort columns and chart spans (console/fleet_view.py SORTS and SPANS: a test
# keeps them equal).
CONSOLE_SORTS = ("topic", "backlog", "waiting", "ready", "consuming", "blocked", "dead",
                 "sendRate", "deliveryRate", "lagP50", "lagP99")
CONSOLE_SPANS = ("5m", "1h", "6h", "24h")

ENDPOINTS: tuple[Endpoint, ...] = (
    camellia("sendMsg", topic(PRODUCE),
             "Send a message, due after delayMillis or at triggerTime; messages due at the same "
             "time leave in the order they were accepted. A live namesake is kept (duplicate: "
             "true) or, with onDuplicate=replace, begun again (replaced: true).",
             "DelayMsgAnswer", ok_example(delayMsg=EXAMPLE_MSG),
             [TOPIC, OPTIONAL_MSG_ID,
              Param("msg", string("The body: at most max-msg-bytes (1 MiB) of UTF-8.",
                                  minLength=1), True),
              DELAY, TRIGGER,
              Param("ttlMillis", integer("Life after triggerTime in ms (<= 0: the default).")),
              Param("maxRetry", integer("Deliveries allowed beyond the first (< 0: the "
                                        "default).")),
              Param("attributes", {"type": ["string", "object"], "description":
                                   "A JSON object of string keys to string values (JSON text "
                                   "in a form); at most 32 keys and 8 KiB."}),
              GROUP_ID, ON_DUPLICATE], (400, 409)),
    camellia("pullMsg", topic(CONSUME), "Take up to batch ready messages (short poll), in "
             "the order they became ready, at most one per message group; in subscription, "
             "that subscription's. A push subscription (one with a pushUrl, the default one "
             "included) is not pulled: code 400.",
             "DelayMsgListAnswer", ok_example(delayMsgList=[DELIVERED_MSG]),
             [TOPIC, ACK_TIMEOUT, PULL_COUNT, SUBSCRIPTION], (400, 404), refusals=PUSH_PULL),
    camellia("longPollingMsg", topic(CONSUME), "As pullMsg, holding the request until a "
             "message is ready or the timeout passes (a push subscription: code 400 at "
             "once).", "DelayMsgListAnswer",
             ok_example(delayMsgList=[]),
             [TOPIC, ACK_TIMEOUT, PULL_COUNT,
              Param("longPollingTimeoutMillis", integer("Longest hold in ms (<= 0: the "
                                                        "server's); at most 60000.")),
              SUBSCRIPTION], (400, 404), refusals=PUSH_PULL),
    camellia("ackMsg", topic(CONSUME), "Ack (ack=true) or nack (ack=false) a delivered "
             "message, in the subscription it was delivered in.", "Success", ok_example(),
             [TOPIC, MSG_ID, Param("ack", boolean("true: ack; false: nack. Default true.")),
              RECEIPT, Param("delayMillis", integer("Nack only: back to waiting for this "
                                                    "long.", 0)), SUBSCRIPTION],
             (400, 404, 409)),
    ours("changeVisibility", topic(CONSUME), "Move a delivery's ack deadline (0 releases "
         "it).", "DelayMsgAnswer", ok_example(delayMsg=CONSUMING_MSG),
         [TOPIC, MSG_ID, RECEIPT,
          Param("ackTimeoutMillis", integer("New deadline from now in ms.", 0), True),
          SUBSCRIPTION], (400, 404, 409)),
    ours("rescheduleMsg", topic(PRODUCE), "Give a waiting or ready message a new "
         "triggerTime.", "DelayMsgAnswer", ok_example(delayMsg=EXAMPLE_MSG),
         [TOPIC, MSG_ID, DELAY, TRIGGER], (400, 404)),
    camellia("getMsg", topic(PRODUCE, CONSUME), "A message with its true current status: "
             "in subscription, that subscription's; without, the default subscription's, "
             "with subscriptions (each named one's status and retry) when named ones hold it.",
             "DelayMsgAnswer", ok_example(delayMsg=EXAMPLE_HELD_MSG),
             [TOPIC, MSG_ID, SUBSCRIPTION], (400, 404)),
    camellia("deleteMsg", topic(PRODUCE, CONSUME), "Delete a live message (release=true "
             "drops its body too).", "Success", ok_example(),
             [TOPIC, MSG_ID, Param("release", boolean("Also remove the body now."))],
             (400, 404)),
    ours("listDeadMsg", topic(CONSUME), "A page of the topic's dead letters, oldest "
         "death first.", "DeadPageAnswer",
         ok_example(delayMsgList=[{**DELIVERED_MSG, "status": 6, "deadTime": T0 + 90_000}],
                    nextCursor="1763800090000:" + EXAMPLE_ID),
         [TOPIC, LIMIT_DEAD, Param("cursor", string("nextCursor of the previous page.")),
          SUBSCRIPTION], (400, 404), tag="dead letters"),
    ours("redriveDeadMsg", topic(ADMIN), "Dead letters back to ready (one, or up to "
         "limit).", "CountAnswer", ok_example(count=1),
         [TOPIC, OPTIONAL_MSG_ID, LIMIT_DEAD, SUBSCRIPTION], (400, 404), tag="dead letters"),
    ours("purgeDeadMsg", topic(ADMIN), "Remove one dead letter, or all of the topic's (of "
         "the subscription's).", "CountAnswer", ok_example(count=3),
         [TOPIC, OPTIONAL_MSG_ID, SUBSCRIPTION], (400, 404), tag="dead letters"),
    ours("pauseTopic", topic(ADMIN), "Pause a topic (every subscription), or with "
         "subscription that one: nothing is handed out (pulls answer empty, long polls wait) "
         "until resumeTopic; sends, promotion, ack timeouts and ttl go on. An unknown topic "
         "answers 404 and is not created.", "PauseAnswer",
         ok_example(paused=True, changed=True), [TOPIC, SUBSCRIPTION], (400, 404),
         tag="topic controls", methods=POST),
    ours("resumeTopic", topic(ADMIN), "Resume a paused topic (or subscription): long polls "
         "held meanwhile answer at once.", "PauseAnswer",
         ok_example(paused=False, changed=True), [TOPIC, SUBSCRIPTION], (400, 404),
         tag="topic controls", methods=POST),
    ours("purgeTopic", topic(ADMIN), "End every live message accepted before the call with "
         "status 7, at most limit per call, in bounded slices. An unknown topic answers 404.",
         "PurgeAnswer", ok_example(count=232, remaining=0),
         [TOPIC, Param("limit", integer("Most messages to end (1..1000000; default 10000).",
                                        1))], (400, 404), tag="topic controls",
         methods=POST),
    ours("listMsg", topic(CONSUME), "A page of a topic's live messages: status 1 by "
         "triggerTime, 2 in delivery order, 3 by ack deadline; or groupBlocked=true, the "
         "messages waiting behind their group's head. Pages have no gaps or repeats among "
         "the messages that stayed in place.", "MessagePageAnswer",
         ok_example(delayMsgList=[EXAMPLE_MSG], nextCursor="WzE3NjM4MDAwMDUwMDAsIi4uLiJd"),
         [TOPIC, Param("status", {"type": "integer", "enum": [1, 2, 3], "description":
                                  "1 waiting, 2 ready, 3 consuming; required unless "
                                  "groupBlocked=true."}),
          Param("groupBlocked", boolean("List the messages blocked behind their group's "
                                        "head instead (each group in its order).")),
          Param("limit", integer("Most messages (1..max-batch; default 100).", 1)),
          Param("cursor", string("nextCursor of the previous page.")), SUBSCRIPTION],
         (400, 404), tag="topic controls"),
    ours("setTopicConfig", topic(ADMIN), "Set (or reset=true: drop) the topic's own "
         "settings.", "TopicConfigAnswer",
         ok_example(data=EXAMPLE_CONFIG, source=EXAMPLE_SOURCE),
         [TOPIC, *SETTING_PARAMS, RESET], tag="topic settings"),
    ours("getTopicConfig", topic(PRODUCE, CONSUME), "The effective settings of a topic "
         "and their source.", "TopicConfigAnswer",
         ok_example(data=EXAMPLE_CONFIG, source=EXAMPLE_SOURCE), [TOPIC],
         tag="topic settings"),
    ours("createSubscription", topic(ADMIN), "Create a named subscription: from now on it "
         "receives every message sent to the topic, each on its own (status, retry, receipt, "
         "ack deadline, backoff, dead letter). The settings given become its own; for an "
         "existing one only the values given change. At most max-subscriptions-per-topic. "
         "With pushUrl its messages are POSTed there instead of being pulled.",
         "SubscriptionAnswer", ok_example(data=EXAMPLE_SUBSCRIPTION),
         [TOPIC, NAMED_SUBSCRIPTION, *SUBSCRIPTION_SETTING_PARAMS, *PUSH_SETTING_PARAMS],
         (400,), tag="subscriptions", methods=POST),
    ours("deleteSubscription", topic(ADMIN), "Delete a named subscription: its state of "
         "every message is dropped, in slices.", "SubscriptionDeleteAnswer",
         ok_example(deleted=True), [TOPIC, NAMED_SUBSCRIPTION], (400, 404),
         tag="subscriptions", methods=POST),
    ours("listSubscriptions", topic(PRODUCE, CONSUME), "The topic's subscriptions with "
         "their queue sizes, the default one first.", "SubscriptionListAnswer",
         ok_example(data=EXAMPLE_SUBSCRIPTIONS), [TOPIC], (400, 404), tag="subscriptions",
         methods=POST),
    ours("setSubscriptionConfig", topic(ADMIN), "Set (or reset=true: drop) a "
         "subscription's own settings. The default subscription's own are its push settings "
         "only (its other settings are the topic's: setTopicConfig; any other answers 400 "
         "naming it).", "SubscriptionConfigAnswer",
         ok_example(data=EXAMPLE_SUBSCRIPTION_CONFIG, source=EXAMPLE_SUBSCRIPTION_SOURCE),
         [TOPIC, CONFIGURED_SUBSCRIPTION, *SUBSCRIPTION_SETTING_PARAMS, *PUSH_SETTING_PARAMS,
          Param("reset", boolean("Drop every value of the subscription's own first (the "
                                 "default subscription's: its push settings)."))],
         (400, 404), tag="subscriptions", methods=POST),
    ours("getSubscriptionConfig", topic(PRODUCE, CONSUME), "The effective settings of a "
         "subscription and their source: the subscription's own, the topic's or the "
         "server's; its push settings (never the secret: pushSecretSet).",
         "SubscriptionConfigAnswer",
         ok_example(data=EXAMPLE_SUBSCRIPTION_CONFIG, source=EXAMPLE_SUBSCRIPTION_SOURCE),
         [TOPIC, CONFIGURED_SUBSCRIPTION], (400, 404), tag="subscriptions", methods=POST),
    ours("getPushStatus", topic(PRODUCE, CONSUME), "A subscription's push delivery: its "
         "push settings (never the secret), deliveries in flight fleet-wide, whether it is "
         "paused, and its last failed pushes, newest first.", "PushStatusAnswer",
         ok_example(data=EXAMPLE_PUSH_STATUS), [TOPIC, SUBSCRIPTION], (400, 404),
         tag="subscriptions", methods=POST),
    ours("createSchedule", topic(PRODUCE), "Create a recurring schedule, or replace the one "
         "with this scheduleId (its waiting occurrence deleted, the first written anew): "
         "each fire time becomes an ordinary message, msgId '<scheduleId>:<fireTime>', "
         "written exactly once, the next one always waiting.", "ScheduleAnswer",
         SCHEDULE_ANSWER, [TOPIC, SCHEDULE_ID, *SCHEDULE_PARAMS], (400,), tag="schedules",
         methods=POST),
    ours("listSchedules", topic(PRODUCE, CONSUME), "A page of schedules by (topic, "
         "scheduleId): the topic's, or without topic every topic's (a token limited to "
         "some topics must give one). An unknown topic answers 404.", "SchedulePageAnswer",
         ok_example(data=[EXAMPLE_SCHEDULE]),
         [Param("topic", TOPIC.schema),
          Param("limit", integer("Most schedules (1..max-batch; default 100).", 1)),
          Param("cursor", string("nextCursor of the previous page."))], (400, 403, 404),
         tag="schedules"),
    ours("getSchedule", topic(PRODUCE, CONSUME), "A schedule with its next fire times.",
         "ScheduleAnswer", SCHEDULE_ANSWER, [TOPIC, SCHEDULE_ID], (400, 404),
         tag="schedules"),
    ours("deleteSchedule", topic(PRODUCE), "Delete a schedule and its waiting occurrence "
         "(one already due goes on).", "ScheduleDeleteAnswer",
         ok_example(deleted=True, occurrenceDeleted=True), [TOPIC, SCHEDULE_ID], (400, 404),
         tag="schedules", methods=POST),
    ours("pauseSchedule", topic(PRODUCE), "Pause a schedule: its waiting occurrence is "
         "deleted and nothing fires until resumeSchedule.", "ScheduleControlAnswer",
         ok_example(data={**EXAMPLE_SCHEDULE, "paused": True, "nextFireTime": None},
                    changed=True), [TOPIC, SCHEDULE_ID], (400, 404), tag="schedules",
         methods=POST),
    ours("resumeSchedule", topic(PRODUCE), "Resume a schedule: its next fire time from now "
         "is written; the fire times the pause covered are skipped, not missed.",
         "ScheduleControlAnswer", ok_example(data=EXAMPLE_SCHEDULE, changed=True),
         [TOPIC, SCHEDULE_ID], (400, 404), tag="schedules", methods=POST),
    camellia("getMonitorData", namespace(ADMIN), "The last complete monitoring interval, "
             "fleet-wide.", "MonitorDataAnswer",
             ok_example(data={
                 "requestStatsList": [{"topic": EXAMPLE_TOPIC, "sendMsg": 35, "pullMsg": 12,
                                       "deleteMsg": 0, "ackMsg": 12, "getMsg": 0,
                                       "triggerMsgReady": 24, "triggerMsgEndLife": 0,
                                       "triggerMsgTimeout": 0}],
                 "pullMsgTimeGapStatsList": [{"topic": EXAMPLE_TOPIC, "count": 12,
                                              "avg": 35.25, "max": 84, "p50": 50, "p99": 84}],
                 "readyQueueTimeGapStatsList": []}), codes=(), tag="monitoring"),
    camellia("getTopicInfo", topic(PRODUCE, CONSUME), "Queue sizes of one topic.",
             "TopicInfoAnswer", ok_example(data=EXAMPLE_INFO), [TOPIC], tag="monitoring"),
    camellia("getTopicInfoList", namespace(ADMIN), "Queue sizes of every known topic.",
             "TopicInfoListAnswer", ok_example(data=[EXAMPLE_INFO]), codes=(),
             tag="monitoring"),
    batch("sendMsgBatch", topic(PRODUCE), "Send up to 1000 messages to one topic in one "
          "request.",
          ok_example(results=[{"code": 200, "msg": "success", "delayMsg": EXAMPLE_MSG},
                              {"code": 200, "msg": "success", "delayMsg": EXAMPLE_MSG,
                               "duplicate": True},
                              {"code": 200, "msg": "success", "delayMsg": GROUPED_MSG},
                              {"code": 400, "msg": "msg: required parameter is missing or "
                                                   "empty"}]),
          batch_body("msgs", SEND_ENTRY, {"atomic": {
              "type": "boolean", "description": "(ours) Every entry is written or none (one "
              "script call, every check before its first write). A refused entry (400, 409, "
              "429) makes the answer code 400, with each refused entry's own code and every "
              "other entry code 409 \"not written\"; a duplicate is not a refusal, nor is a "
              "replace, but a replace of a consuming message (409) or with another groupId "
              "(400) is."}}),
          {"topic": EXAMPLE_TOPIC, "msgs": [{"msg": "hello", "delayMillis": 5000},
                                            {"msg": "again", "msgId": "m2"},
                                            {"msg": "paid", "groupId": "order-42"}]}),
    batch("ackMsgBatch", topic(CONSUME), "Ack or nack up to 1000 messages of one topic.",
          ok_example(results=[{"code": 200, "msg": "success"},
                              {"code": 409, "msg": "receipt: stale receipt: the message was "
                                                   "delivered again since"}]),
          batch_body("acks", ACK_ENTRY, {"subscription": SUBSCRIPTION.schema}),
          {"topic": EXAMPLE_TOPIC, "acks": [{"msgId": "m1", "receipt": "19aaaac3988.1"},
                                            {"msgId": "m2", "ack": False}]}),
    batch("changeVisibilityBatch", topic(CONSUME), "Move the ack deadlines of up to 1000 "
          "deliveries of one topic (0 releases one).",
          ok_example(results=[{"code": 200, "msg": "success", "delayMsg": CONSUMING_MSG},
                              {"code": 409, "msg": "receipt: stale receipt: message 'm2' "
                                                   "was delivered again since (status 3, "
                                                   "retry 2)"}]),
          batch_body("entries", VISIBILITY_ENTRY, {"subscription": SUBSCRIPTION.schema}),
          {"topic": EXAMPLE_TOPIC, "entries": [
              {"msgId": EXAMPLE_ID, "receipt": "19aaaac3988.1", "ackTimeoutMillis": 60_000},
              {"msgId": "m2", "receipt": "19aaaac2dd0.2", "ackTimeoutMillis": 0}]}),
    batch("deleteMsgBatch", topic(PRODUCE, CONSUME), "Delete up to 1000 messages of one "
          "topic.",
          ok_example(results=[{"code": 200, "msg": "success"},
                              {"code": 404, "msg": "msgId: no live message m9 in topic "
                                                   "orders"}]),
          batch_body("msgIds", MSG_ID.schema, {"release": {"type": "boolean"}}),
          {"topic": EXAMPLE_TOPIC, "msgIds": ["m1", "m9"], "release": False}),
    health("status", OPEN, "200 while the node is online and Redis answers, else HTTP 500.",
           codes=(500,)),                                    # load balancers' probes
    health("check", OPEN, "200 while the process lives."),
    health("online", namespace(ADMIN), "Put this node back online."),
    health("offline", namespace(ADMIN), "Take this node offline: health/status answers 500 "
           "so a load balancer drains it, and the long polls it holds answer at once "
           "(empty)."),
    Endpoint("getMonitorString", Q + "getMonitorString", GET_POST, namespace(ADMIN), PLAIN,
             "monitoring", "camellia's text view: getMonitorData's last interval and every "
             "topic's sizes, as aligned plain-text tables.", answer="Plain text.",
             example="delayqueue monitor, namespace default: interval 2025-11-22T08:00:00Z "
                     "+ 60s, every node\n\n== request stats ==\ntopic   sendMsg  pullMsg"
                     "  ...\norders       35       12  ...\n", media="text/plain",
             origin=CAMELLIA),
    page("fleet", "/dashboard/", "Every topic by backlog: sizes, rates, lag; refreshes itself.",
         [Param("page", integer("Page number, from 1.", 1)),
          Param("size", {"type": "integer", "enum": [25, 50, 100, 200]}),
          Param("refresh", integer("Seconds between refreshes (1..3600; default 5).", 1)),
          Param("fragment", string("Any value: only the table (what the page refreshes "
                                   "with).")),
          Param("sort", {"type": "string", "enum": list(CONSOLE_SORTS),
                         "description": "The column to sort by (default backlog); ties by "
                                        "name."}),
          Param("order", {"type": "string", "enum": ["asc", "desc"],
                          "description": "Sort order (default: desc, asc for topic)."}),
          Param("q", string("Show only the topics whose name holds this text."))]),
    page("nodes", "/dashboard/nodes", "The fleet's nodes (version, uptime, held long polls, "
         "last seen: the node registry) and Redis (memory, version, role, health).", []),
    page("topic", "/dashboard/topic", "One topic: description, sizes, pause / resume and "
         "purge, a test-message form, its messages a queue and a page at a time, charts over "
         "a span, settings, dead letters; HTTP 404 for a topic that does not exist.",
         [TOPIC, Param("cursor", string("The dead-letter page to show (listDeadMsg's "
                                        "cursor).")),
          Param("view", {"type": "string", "enum": ["waiting", "ready", "consuming", "blocked"],
                         "description": "The messages to list: waiting by triggerTime, ready "
                                        "in delivery order, consuming by ack deadline, blocked "
                                        "behind their group's head (default: the first of "
                                        "them holding messages)."}),
          Param("size", {"type": "integer", "enum": [25, 50, 100],
                         "description": "Messages a page (default 25)."}),
          Param("msgCursor", string("The messages' page to show (listMsg's nextCursor).")),
          Param("span", {"type": "string", "enum": list(CONSOLE_SPANS),
                         "description": "What the charts cover, up to now (default 1h)."}),
          Param("done", string("What a form did (the form's 303 sets it).")),
          Param("error", string("What a form was refused (the form's 303 sets it)."))],
         codes=(404,)),
    page("subscription", "/dashboard/subscription", "One named subscription of a topic: its "
         "sizes, pause / resume, its messages a queue and a page at a time, its settings "
         "with their source, its dead letters, its deletion; HTTP 404 for a topic or "
         "subscription that does not exist.",
         [TOPIC, NAMED_SUBSCRIPTION,
          Param("cursor", string("The dead-letter page to show (listDeadMsg's cursor).")),
          Param("view", {"type": "string", "enum": ["waiting", "ready", "consuming", "blocked"],
                         "description": "The messages to list, as on the topic page."}),
          Param("size", {"type": "integer", "enum": [25, 50, 100],
                         "description": "Messages a page (default 25)."}),
          Param("msgCursor", string("The messages' page to show (listMsg's nextCursor).")),
          Param("done", string("What a form did (the form's 303 sets it).")),
          Param("error", string("What a form was refused (the form's 303 sets it)."))],
         codes=(404,)),
    page("message", "/dashboard/message", "Message lookup: its state and fields (with "
         "subscription: as that subscription holds it).",
         [Param("topic", TOPIC.schema), Param("msgId", MSG_ID.schema), CONSOLE_SUBSCRIPTION]),
    form("redrive", "/dashboard/topic/redrive", "Redrive one dead letter (msgId) or up to "
         "limit, of the topic or of a subscription.",
         [TOPIC, CONSOLE_SUBSCRIPTION, OPTIONAL_MSG_ID, LIMIT_DEAD]),
    form("purge", "/dashboard/topic/purge", "Purge one dead letter (msgId) or all, of the "
         "topic or of a subscription.", [TOPIC, CONSOLE_SUBSCRIPTION, OPTIONAL_MSG_ID]),
    form("settings", "/dashboard/topic/settings", "Set the topic's settings (empty fields "
         "unchanged; description written when it differs from the current), or with "
         "subscription that subscription's (reset: drop its own values first).",
         [TOPIC, CONSOLE_SUBSCRIPTION, *SETTING_PARAMS, RESET]),
    form("pause", "/dashboard/topic/pause", "Pause the topic (pauseTopic), or one "
         "subscription of it; an unknown topic or subscription is refused on the topic page.",
         [TOPIC, CONSOLE_SUBSCRIPTION]),
    form("resume", "/dashboard/topic/resume", "Resume the topic (resumeTopic), or one "
         "subscription of it.", [TOPIC, CONSOLE_SUBSCRIPTION]),
    form("subscriptionCreate", "/dashboard/subscription/create", "Create a named "
         "subscription (createSubscription, its name only): 303 to its page; a refused name "
         "is said on the topic page.", [TOPIC, NAMED_SUBSCRIPTION]),
    form("subscriptionDelete", "/dashboard/subscription/delete", "Delete a named "
         "subscription (deleteSubscription): 303 to the topic page.",
         [TOPIC, NAMED_SUBSCRIPTION]),
    form("purgeMessages", "/dashboard/topic/purgeMessages", "Purge the topic (purgeTopic): "
         "end up to 10,000 live messages; the topic page says how many were purged and how "
         "many remain.", [TOPIC]),
    form("publish", "/dashboard/topic/publish", "Send a test message (sendMsg's msg and "
         "delayMillis); the topic page shows its msgId.",
         [TOPIC, Param("msg", string("The body.", minLength=1), True),
          Param("delayMillis", integer("Delay in ms (default: the topic's delayMillis).", 0))]),
    # The console pages' script and style sheet: admin like the pages (the proxy that adds
    # an admin's token for the pages adds it for these).
    Endpoint("consoleScript", "/dashboard/console.js", ("GET",), namespace(ADMIN), PLAIN,
             "console",
             "The console pages' script (confirmations, refresh, chart readouts).",
             answer="JavaScript.", media="text/javascript"),
    Endpoint("consoleStyle", "/dashboard/console.css", ("GET",), namespace(ADMIN), PLAIN,
             "console", "The console pages' style sheet.", answer="CSS.", media="text/css"),
    Endpoint("metrics", "/metrics", ("GET",), namespace(ADMIN), PLAIN, "monitoring",
             "Prometheus text: fleet-wide counters, queue sizes, dead letters, the oldest "
             "ready age, time-gap histograms, scheduler loop timings, HTTP requests; and "
             "whether Redis could be read (still HTTP 200 when not).",
             answer="Prometheus exposition format 0.0.4.",
             example="delayqueue_queue_size{topic=\"orders\",state=\"ready\"} 3.0\n",
             media="text/plain"),
    Endpoint("openapi", "/openapi.json", ("GET",), OPEN, PLAIN, "meta", "This document.",
             answer="OpenAPI 3.1."),                 # the public description of this API
    # The reference page and its renderer's files (docs_page.py): open like the document.
    Endpoint("docs", "/docs", ("GET",), OPEN, PLAIN, "meta", "This API's reference: an HTML "
             "page that renders /openapi.json in the browser (Swagger UI, served by the node "
             "itself: no network needed).", answer="An HTML page.", media="text/html"),
    Endpoint("docsScript", "/docs/swagger-ui-bundle.js", ("GET",), OPEN, PLAIN, "meta",
             "The /docs page's script: Swagger UI, vendored.", answer="JavaScript.",
             media="text/javascript"),
    Endpoint("docsStyle", "/docs/swagger-ui.css", ("GET",), OPEN, PLAIN, "meta",
             "The /docs page's style sheet: Swagger UI's, vendored.", answer="CSS.",
             media="text/css"),
)
BY_NAME = {e.name: e for e in ENDPOINTS}
BY_PATH = {e.path: e for e in ENDPOINTS}

View = TypeVar("View", bound=Callable[..., Any])


def route(blueprint: Blueprint, name: str) -> Callable[[View], View]:
    """Register the decorated view on ``blueprint`` at the path and methods of row ``name``."""
    endpoint = BY_NAME[name]
    return blueprint.route(endpoint.path, methods=list(endpoint.methods))
