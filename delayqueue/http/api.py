"""The HTTP API's views: camellia's shapes. Views parse, make one service call, serialise.

Each view's path, methods and access rule are its row in endpoints.py (``@route``).
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, jsonify

from delayqueue.background.longpoll import long_poll
from delayqueue.core.errors import BadRequest, DelayQueueError, MissingParameter, redis_errors
from delayqueue.core.requests import AckRequest, SendRequest, SendResult, VisibilityRequest
from delayqueue.core.topic_controls import BLOCKED, PURGE_LIMIT, PURGE_MAX, VIEWS
from delayqueue.monitoring.metrics import render_metrics
from delayqueue.monitoring.monitor_text import monitor_string

from .endpoints import route
from .openapi import document
from .params import Params
from .request import (
    batch_subscription,
    entry_answers,
    entry_params,
    params,
    params_of,
    parse_entry,
    read_batch,
    runtime,
    success,
)

api = Blueprint("api", __name__)


@route(api, "sendMsg")
def send_msg() -> Response:
    p = params()
    topic = p.topic()
    result = runtime().queue.send_batch(topic, [send_request(p)])[0]
    if isinstance(result, DelayQueueError):
        raise result
    return success(**sent(result))


def send_request(p: Params) -> SendRequest:
    body, msg_id = p.body(), p.msg_id(required=False)
    delay_ms, trigger_ms = p.duration("delayMillis"), p.trigger_time()
    if delay_ms is not None and trigger_ms is not None:
        raise BadRequest("delayMillis, triggerTime: give at most one of them")
    return SendRequest(body, msg_id, delay_ms, trigger_ms, p.duration("ttlMillis"),
                       p.max_retry(), p.attributes(), p.group_id(), p.on_duplicate())


def sent(result: SendResult) -> dict[str, Any]:
    return {"delayMsg": result.message.to_json(),
            **({"duplicate": True} if result.duplicate else {}),
            **({"replaced": True} if result.replaced else {})}


@route(api, "sendMsgBatch")
def send_msg_batch() -> Response:
    topic, p, entries = read_batch("msgs")
    atomic = p.boolean("atomic", default=False)
    rt = runtime()
    requests = [parse_entry("msgs", i, lambda i=i, e=e: send_request(
        entry_params("msgs", i, e, rt.param_limits))) for i, e in enumerate(entries)]
    results = rt.queue.send_batch(topic, requests, atomic=atomic)
    if atomic and any(isinstance(r, DelayQueueError) for r in results):
        failed = next((r for r in results if isinstance(r, DelayQueueError) and r.code == 500),
                      None)
        if failed is not None:
            raise failed    # Redis or the script failed: the whole call did
        # All or nothing, and it was nothing: the answer says so, each entry says why.
        return entry_answers(results, sent, code=400,
                             msg="msgs: atomic batch refused, nothing was written")
    return entry_answers(results, sent)


@route(api, "ackMsgBatch")
def ack_msg_batch() -> Response:
    topic, p, entries = read_batch("acks")
    subscription = batch_subscription(p)

    def ack_request(p: Params) -> AckRequest:
        return AckRequest(p.msg_id(), p.receipt(), p.boolean("ack", default=True),
                          p.non_negative("delayMillis"))

    rt = runtime()
    requests = [parse_entry("acks", i, lambda i=i, e=e: ack_request(
        entry_params("acks", i, e, rt.param_limits))) for i, e in enumerate(entries)]
    results = rt.queue.ack_batch(topic, requests, subscription=subscription)
    return entry_answers(results, lambda _: {})


@route(api, "deleteMsgBatch")
def delete_msg_batch() -> Response:
    topic, p, entries = read_batch("msgIds")
    release = p.boolean("release", default=False)
    rt = runtime()
    msg_ids = [parse_entry("msgIds", i, lambda e=e: params_of({"msgId": e}, rt.param_limits)
                           .msg_id())
               if isinstance(e, str) else
               BadRequest(f"msgIds[{i}]: must be a string, got {type(e).__name__}")
               for i, e in enumerate(entries)]
    results = rt.queue.delete_batch(topic, msg_ids, release)
    return entry_answers(results, lambda _: {})


@route(api, "pullMsg")
def pull_msg() -> Response:
    p = params()
    topic, count, subscription = p.topic(), p.pull_count(), p.subscription()
    result = runtime().queue.pull(topic, count, p.duration("ackTimeoutMillis"),
                                  subscription=subscription)
    return success(delayMsgList=[m.to_json() for m in result.messages])


@route(api, "longPollingMsg")
def long_polling_msg() -> Response:
    p = params()
    topic, count, subscription = p.topic(), p.pull_count(), p.subscription()
    rt = runtime()
    s = rt.settings
    result = long_poll(rt.queue, rt.hub, rt.clock, topic, count, p.duration("ackTimeoutMillis"),
                       p.long_polling_timeout(s.long_polling_timeout_millis),
                       s.long_polling_safety_millis / 1000.0, subscription)
    return success(delayMsgList=[m.to_json() for m in result.messages])


@route(api, "ackMsg")
def ack_msg() -> Response:
    p = params()
    topic, msg_id, ack = p.topic(), p.msg_id(), p.boolean("ack", default=True)
    receipt, delay_ms = p.receipt(), p.non_negative("delayMillis")
    subscription = p.subscription()
    queue = runtime().queue
    if ack:
        queue.ack(topic, msg_id, receipt, subscription=subscription)
    else:
        queue.nack(topic, msg_id, receipt, delay_ms, subscription=subscription)
    return success()


@route(api, "changeVisibility")
def change_visibility() -> Response:
    p = params()
    topic, msg_id = p.topic(), p.msg_id()
    message = runtime().queue.change_visibility(
        topic, msg_id, p.non_negative("ackTimeoutMillis", required=True), p.receipt(),
        subscription=p.subscription())
    return success(delayMsg=message.to_json())


@route(api, "changeVisibilityBatch")
def change_visibility_batch() -> Response:
    topic, p, entries = read_batch("entries")
    subscription = batch_subscription(p)

    def visibility_request(p: Params) -> VisibilityRequest:
        msg_id = p.msg_id()
        return VisibilityRequest(msg_id, p.non_negative("ackTimeoutMillis", required=True),
                                 p.receipt())

    rt = runtime()
    requests = [parse_entry("entries", i, lambda i=i, e=e: visibility_request(
        entry_params("entries", i, e, rt.param_limits))) for i, e in enumerate(entries)]
    results = rt.queue.change_visibility_batch(topic, requests, subscription=subscription)
    return entry_answers(results, lambda message: {"delayMsg": message.to_json()})


@route(api, "rescheduleMsg")
def reschedule_msg() -> Response:
    p = params()
    topic, msg_id = p.topic(), p.msg_id()
    delay_ms, trigger_ms = p.duration("delayMillis"), p.trigger_time()
    if delay_ms is None and trigger_ms is None:
        raise MissingParameter("delayMillis, triggerTime: give one of them")
    if delay_ms is not None and trigger_ms is not None:
        raise BadRequest("delayMillis, triggerTime: give only one of them")
    message = runtime().queue.reschedule(topic, msg_id, delay_ms=delay_ms,
                                         trigger_time_ms=trigger_ms)
    return success(delayMsg=message.to_json())


@route(api, "listDeadMsg")
def list_dead_msg() -> Response:
    p = params()
    topic, limit, cursor = p.topic(), p.limit(100), p.string("cursor")
    page = runtime().admin.list(topic, limit, cursor, subscription=p.subscription())
    extra = {"nextCursor": page.next_cursor} if page.next_cursor else {}
    return success(delayMsgList=[m.to_json() for m in page.messages], **extra)


@route(api, "redriveDeadMsg")
def redrive_dead_msg() -> Response:
    p = params()
    topic, msg_id, limit = p.topic(), p.msg_id(required=False), p.limit(1000)
    return success(count=runtime().admin.redrive(topic, msg_id, limit,
                                                 subscription=p.subscription()))


@route(api, "purgeDeadMsg")
def purge_dead_msg() -> Response:
    p = params()
    topic, msg_id = p.topic(), p.msg_id(required=False)
    return success(count=runtime().admin.purge(topic, msg_id, subscription=p.subscription()))


@route(api, "pauseTopic")
def pause_topic() -> Response:
    """Without ``subscription`` the whole topic (every subscription); with one, that one."""
    p = params()
    topic = p.topic()
    changed = runtime().controls.pause(topic, subscription=p.subscription())
    return success(paused=True, changed=changed)


@route(api, "resumeTopic")
def resume_topic() -> Response:
    p = params()
    topic = p.topic()
    changed = runtime().controls.resume(topic, subscription=p.subscription())
    return success(paused=False, changed=changed)


@route(api, "purgeTopic")
def purge_topic() -> Response:
    p = params()
    topic, limit = p.topic(), p.integer("limit")
    if limit is not None and not 1 <= limit <= PURGE_MAX:
        raise BadRequest(f"limit: must be between 1 and {PURGE_MAX}, got {limit}")
    result = runtime().controls.purge(topic, limit or PURGE_LIMIT)
    return success(count=result.count, remaining=result.remaining)


@route(api, "listMsg")
def list_msg() -> Response:
    p = params()
    topic, status, blocked = p.topic(), p.integer("status"), p.boolean("groupBlocked", False)
    limit, cursor = p.limit(100), p.string("cursor") or None
    subscription = p.subscription()
    if blocked:
        if status is not None:
            raise BadRequest("status, groupBlocked: give one of them, not both")
        view = BLOCKED
    elif status is None:
        raise MissingParameter("status: required (1 waiting, 2 ready, 3 consuming) unless "
                               "groupBlocked=true")
    elif status not in VIEWS:
        raise BadRequest(f"status: must be 1 (waiting), 2 (ready) or 3 (consuming), got "
                         f"{status}")
    else:
        view = VIEWS[status]
    page = runtime().controls.list(topic, view, limit, cursor, subscription=subscription)
    extra = {"nextCursor": page.next_cursor} if page.next_cursor else {}
    return success(delayMsgList=[m.to_json() for m in page.messages], **extra)


@route(api, "setTopicConfig")
def set_topic_config() -> Response:
    p = params()
    topic, reset = p.topic(), p.boolean("reset", default=False)
    data, source = runtime().admin.set_config(topic, p.values, reset)
    return success(data=data, source=source)


@route(api, "getTopicConfig")
def get_topic_config() -> Response:
    data, source = runtime().admin.get_config(params().topic())
    return success(data=data, source=source)


@route(api, "getMsg")
def get_msg() -> Response:
    p = params()
    topic, msg_id = p.topic(), p.msg_id()
    # Without a subscription the message as the default subscription holds it, with
    # "subscriptions" (each named one's status and retry) when named ones hold it too.
    message = runtime().queue.get(topic, msg_id, subscription=p.subscription())
    return success(delayMsg=message.to_json())


@route(api, "deleteMsg")
def delete_msg() -> Response:
    p = params()
    runtime().queue.delete(p.topic(), p.msg_id(), p.boolean("release", default=False))
    return success()


@route(api, "getMonitorData")
def get_monitor_data() -> Response:
    with redis_errors():
        return success(data=runtime().monitor.monitor_data())


@route(api, "getMonitorString")
def get_monitor_string() -> Response:
    rt = runtime()
    with redis_errors():
        data = rt.monitor.monitor_data()
        infos = rt.queue.topic_infos(rt.queue.topics())
    start = rt.monitor.interval_start(rt.clock.now_ms()) - rt.monitor.interval_ms
    text = monitor_string(data, infos, rt.settings.namespace, start,
                          rt.monitor.interval_ms // 1000)
    return Response(text, content_type="text/plain; charset=utf-8")


@route(api, "getTopicInfo")
def get_topic_info() -> Response:
    return success(data=runtime().queue.topic_info(params().topic()))


@route(api, "getTopicInfoList")
def get_topic_info_list() -> Response:
    queue = runtime().queue
    return success(data=queue.topic_infos(queue.topics()))


@route(api, "status")
def status() -> Response:
    rt = runtime()
    ok = rt.is_online() and rt.healthy()
    response = jsonify({"code": 200 if ok else 500})
    response.status_code = 200 if ok else 500
    return response


@route(api, "check")
def check() -> Response:
    return jsonify({"code": 200})


@route(api, "online")
def online() -> Response:
    runtime().set_online(True)
    return jsonify({"code": 200})


@route(api, "offline")
def offline() -> Response:
    runtime().set_online(False)
    return jsonify({"code": 200})


@route(api, "metrics")
def prometheus() -> Response:
    """Answers even when Redis cannot be read: delayqueue_redis_up 0, no fleet series."""
    rt = runtime()
    sizes = rt.metrics_sizes     # this process's cache: only changed topics are read again
    body, content_type = render_metrics(
        rt.monitor, sizes.queue_sizes, rt.nodes.long_polls, rt.settings.metrics_max_topics,
        sizes.subscription_sizes, totals=sizes.totals)
    return Response(body, content_type=content_type)


@route(api, "openapi")
def openapi() -> Response:
    return jsonify(document())
