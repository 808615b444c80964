"""Helpers of the HTTP conformance tests (tests/http/test_conformance_*.py): the API called
as camellia's SDK calls it (form POSTs), and Redis read behind the node's back.

The nodes run in the default namespace (tests/http/conftest.py), so the keys a test reads are
``NS``'s (built by delayqueue.core.keys, never spelled out). Requests go through one
keep-alive ``SESSION``: the fixtures close it before they stop a node, so a graceful stop
never waits on an idle connection of ours.
"""

from __future__ import annotations

import pytest
import requests

from support.lua import NS, slot_of

API = "/camellia/delayQueue/"
HOUR = 3_600_000
DAY = 86_400_000
MIB = 1024 * 1024
# The nine fields of camellia's DelayMsg: all a camellia client ever sees of a message.
CAMELLIA_FIELDS = {"topic", "msgId", "msg", "produceTime", "triggerTime", "expireTime",
                   "maxRetry", "retry", "status"}
CLOCK_SLACK = 250   # the server's clock trails Redis TIME by at most a round trip

SESSION = requests.Session()


# -- the API -----------------------------------------------------------------------------
def post(server, endpoint, **params):
    """(HTTP status, envelope) of a form POST; parameters given as None are left out."""
    data = {k: v for k, v in params.items() if v is not None}
    response = SESSION.post(server.url + API + endpoint, data=data, timeout=15)
    return response.status_code, response.json()


def call(server, endpoint, **params):
    return post(server, endpoint, **params)[1]


def post_json(server, endpoint, body):
    response = SESSION.post(server.url + API + endpoint, json=body, timeout=15)
    return response.status_code, response.json()


def send(server, topic, **params):
    params.setdefault("msg", "hello")
    reply = call(server, "sendMsg", topic=topic, **params)
    assert reply["code"] == 200, reply
    return reply["delayMsg"]


def pull(server, topic, **params):
    reply = call(server, "pullMsg", topic=topic, **params)
    assert reply["code"] == 200, reply
    return reply["delayMsgList"]


def pull_one(server, topic, msg_id, **params):
    got = pull(server, topic, **params)
    assert [m["msgId"] for m in got] == [msg_id], got
    return got[0]


def ack(server, topic, msg_id, receipt=None, **params):
    return call(server, "ackMsg", topic=topic, msgId=msg_id, receipt=receipt, **params)


def nack(server, topic, msg_id, receipt=None, **params):
    return call(server, "ackMsg", topic=topic, msgId=msg_id, ack="false", receipt=receipt,
                **params)


def change_visibility(server, topic, msg_id, ack_timeout_ms, receipt=None):
    return call(server, "changeVisibility", topic=topic, msgId=msg_id,
                ackTimeoutMillis=ack_timeout_ms, receipt=receipt)


def get(server, topic, msg_id):
    return call(server, "getMsg", topic=topic, msgId=msg_id)


def get_msg(server, topic, msg_id):
    reply = get(server, topic, msg_id)
    assert reply["code"] == 200, reply
    return reply["delayMsg"]


def status(server, topic, msg_id):
    """The message's status, or the answer's code when there is no message (404)."""
    reply = get(server, topic, msg_id)
    return reply["delayMsg"]["status"] if reply["code"] == 200 else reply["code"]


def info(server, topic):
    reply = call(server, "getTopicInfo", topic=topic)
    assert reply["code"] == 200, reply
    return reply["data"]


def dead_size(server, topic):
    return info(server, topic)["deadQueueSize"]


def set_config(server, topic, **settings):
    reply = call(server, "setTopicConfig", topic=topic, **settings)
    assert reply["code"] == 200, reply
    return reply


def get_config(server, topic):
    reply = call(server, "getTopicConfig", topic=topic)
    assert reply["code"] == 200, reply
    return reply


def list_dead(server, topic, **params):
    reply = call(server, "listDeadMsg", topic=topic, **params)
    assert reply["code"] == 200, reply
    return reply


def dead_ids(server, topic):
    """msgIds of every dead letter of the topic, oldest death first (follows the cursor)."""
    ids, cursor = [], None
    for _ in range(200):
        reply = list_dead(server, topic, limit=1000, cursor=cursor)
        ids += [m["msgId"] for m in reply["delayMsgList"]]
        cursor = reply.get("nextCursor")
        if not cursor:
            return ids
    pytest.fail("listDeadMsg never ended")


def kill(server, topic, msg_id, **send_params):
    """A dead letter: a maxRetry 0 message delivered once and nacked (status 6); returns the
    receipt of that delivery."""
    send(server, topic, msgId=msg_id, maxRetry=0, **send_params)
    receipt = pull_one(server, topic, msg_id)["receipt"]
    assert nack(server, topic, msg_id)["code"] == 200
    assert status(server, topic, msg_id) == 6
    return receipt


def assert_stale(reply):
    assert reply["code"] == 409, reply
    assert reply["msg"].startswith("receipt:") and "stale" in reply["msg"], reply


# -- the topic controls (pauseTopic, resumeTopic, purgeTopic, listMsg) ---------------------
def pause(server, topic):
    reply = call(server, "pauseTopic", topic=topic)
    assert reply["code"] == 200 and reply["paused"] is True, reply
    return reply


def resume(server, topic):
    reply = call(server, "resumeTopic", topic=topic)
    assert reply["code"] == 200 and reply["paused"] is False, reply
    return reply


def purge(server, topic, limit=None):
    """(count, remaining) of one purgeTopic call."""
    reply = call(server, "purgeTopic", topic=topic, limit=limit)
    assert reply["code"] == 200, reply
    return reply["count"], reply["remaining"]


def list_page(server, topic, **params):
    """One listMsg page: (its messages, its nextCursor or None)."""
    reply = call(server, "listMsg", topic=topic, **params)
    assert reply["code"] == 200, reply
    return reply["delayMsgList"], reply.get("nextCursor")


def list_all(server, topic, pages=200, cursor=None, **params):
    """Every message of a listMsg view (after ``cursor``), following the cursor (at most
    ``pages`` pages)."""
    messages = []
    for _ in range(pages):
        page, cursor = list_page(server, topic, cursor=cursor, **params)
        messages += page
        if not cursor:
            return messages
    pytest.fail("listMsg never ended")


def ids(messages):
    return [m["msgId"] for m in messages]


# -- Redis, behind the node's back -------------------------------------------------------
def redis_now_ms(client) -> int:
    """Redis TIME in ms: the clock the nodes follow."""
    seconds, micros = client.time()
    return seconds * 1000 + micros // 1000


def ack_deadline(client, topic, msg_id):
    """The ack deadline of the message's delivery (the ack zset holds its slot)."""
    return client.zscore(NS.topic(topic).ack, slot_of(client, NS.topic(topic), msg_id))


def assert_nothing_written(client, topic):
    assert client.zscore(NS.topics, topic) is None
    assert client.keys(f"*{topic}*") == []


def dump(client, topic):
    """Every key of the topic's slot with its content: compared before and after a refusal."""
    out = {}
    for key in sorted(client.keys(f"*{topic}*")):
        kind = client.type(key)
        if kind == "hash":
            value = client.dump(key)      # a topic's msgs hash holds binary records
        elif kind == "zset":
            value = client.zrange(key, 0, -1, withscores=True)
        elif kind == "string":
            value = client.get(key)
        elif kind == "list":
            value = client.lrange(key, 0, -1)
        elif kind == "set":
            value = sorted(client.smembers(key))
        elif kind == "stream":
            value = client.xrange(key)
        else:
            value = None
        out[key] = (kind, value)
    return out
