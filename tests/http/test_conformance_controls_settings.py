"""The producer's topic settings (ours): delayMillis (the delay of a send that names none),
description (free text), and maxBacklog (sends refused with code 429 once the topic holds that
many live messages, exactly, even under concurrent senders)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from support import conformance as api

pytestmark = pytest.mark.every_topology

QUOTA = "topic: backlog quota exceeded: "


def test_a_send_that_names_no_delay_waits_the_topics_delay_millis(node, topic, raw_redis):
    api.set_config(node, topic, delayMillis=60_000)
    before = api.redis_now_ms(raw_redis)
    m = api.send(node, topic, msgId="default")
    after = api.redis_now_ms(raw_redis)
    assert m["status"] == 1
    assert before + 60_000 - api.CLOCK_SLACK <= m["triggerTime"] <= after + 60_000
    assert m["expireTime"] == m["triggerTime"] + api.HOUR
    assert api.send(node, topic, msgId="zero", delayMillis=0)["status"] == 2
    assert api.send(node, topic, msgId="short", delayMillis=30_000)["triggerTime"] < \
        m["triggerTime"] + 30_000
    assert api.send(node, topic, msgId="at", triggerTime=before)["status"] == 2
    reply = api.post_json(node, "sendMsgBatch", {"topic": topic, "msgs": [
        {"msg": "x", "msgId": "batched"}, {"msg": "x", "msgId": "batched0", "delayMillis": 0}]})
    assert [r["delayMsg"]["status"] for r in reply[1]["results"]] == [1, 2]
    assert api.ids(api.list_all(node, topic, status=1)) == ["short", "default", "batched"]


def test_the_description_round_trips_within_its_limits(node, topic):
    text = "Orders of the shop\tv2\nowner: team ä"
    reply = api.set_config(node, topic, description=text)
    assert reply["data"]["description"] == text and reply["source"]["description"] == "topic"
    assert api.get_config(node, topic)["data"]["description"] == text
    status_code, reply = api.post_json(node, "setTopicConfig",
                                       {"topic": topic, "description": "é" * 512})
    assert reply["code"] == 200 and reply["data"]["description"] == "é" * 512   # 1024 bytes
    for bad in ("é" * 512 + "x", "bell\x07", "nul\x00"):
        status_code, reply = api.post(node, "setTopicConfig", topic=topic, description=bad)
        assert (status_code, reply["code"]) == (200, 400), reply
        assert reply["msg"].startswith("description:"), reply
    assert api.get_config(node, topic)["data"]["description"] == "é" * 512


def assert_refused(reply):
    assert reply["code"] == 429, reply
    assert reply["msg"].startswith(QUOTA), reply


def test_sends_over_max_backlog_answer_429_and_only_live_messages_count(node, topic):
    api.set_config(node, topic, maxBacklog=3)
    api.send(node, topic, msgId="a")
    api.send(node, topic, msgId="b", delayMillis=api.HOUR)
    api.send(node, topic, msgId="c")
    status_code, reply = api.post(node, "sendMsg", topic=topic, msgId="d", msg="x")
    assert status_code == 200
    assert reply == {"code": 429, "msg": f"{QUOTA}topic '{topic}' holds its maxBacklog live "
                                         "messages; nothing was written"}
    assert api.status(node, topic, "d") == 404
    # A live duplicate is answered as ever: it adds nothing.
    assert api.call(node, "sendMsg", topic=topic, msgId="a", msg="x")["duplicate"] is True
    # An acked and a deleted message no longer count.
    api.pull_one(node, topic, "a")
    assert api.ack(node, topic, "a")["code"] == 200
    assert api.call(node, "deleteMsg", topic=topic, msgId="b")["code"] == 200
    reply = api.post_json(node, "sendMsgBatch", {"topic": topic, "msgs": [
        {"msg": "x", "msgId": f"e{i}"} for i in range(4)]})[1]
    assert reply["code"] == 200
    assert [r["code"] for r in reply["results"]] == [200, 200, 429, 429]
    assert_refused(reply["results"][2])
    assert [api.status(node, topic, f"e{i}") for i in range(4)] == [2, 2, 404, 404]
    data = api.info(node, topic)
    assert data["readyQueueSize"] + data["waitingQueueSize"] + data["ackQueueSize"] == 3
    api.set_config(node, topic, maxBacklog=0)                        # 0: no limit
    api.send(node, topic, msgId="f")


def race(node, topic, prefix, attempts_each):
    """8 senders at once, 4 of single sends and 4 of batches of 10, each ``attempts_each``
    messages; returns (accepted, refused)."""
    url = node.url + api.API
    counts = {200: 0, 429: 0}
    lock = threading.Lock()
    start = threading.Barrier(8)

    def sender(n, batched):
        session, answers = requests.Session(), []
        start.wait(timeout=30)
        ids = [f"{prefix}-{n}-{i}" for i in range(attempts_each)]
        if batched:
            for at in range(0, attempts_each, 10):
                reply = session.post(url + "sendMsgBatch", timeout=15, json={
                    "topic": topic, "msgs": [{"msg": "x", "msgId": m}
                                             for m in ids[at:at + 10]]}).json()
                answers += reply["results"]
        else:
            for m in ids:
                answers.append(session.post(url + "sendMsg", timeout=15,
                                            data={"topic": topic, "msgId": m,
                                                  "msg": "x"}).json())
        session.close()
        for answer in answers:
            if answer["code"] == 429:
                assert answer["msg"].startswith(QUOTA), answer
        with lock:
            for answer in answers:
                counts[answer["code"]] += 1     # any other code: a KeyError, the test fails

    with ThreadPoolExecutor(8) as pool:
        for future in [pool.submit(sender, n, n % 2 == 1) for n in range(8)]:
            future.result(timeout=120)
    return counts[200], counts[429]


def test_concurrent_senders_never_take_the_backlog_past_max_backlog(node, topic):
    api.set_config(node, topic, maxBacklog=50)
    # Nothing leaves the topic during a race: what was accepted is the live count, so one
    # send let through over the quota would show as 51.
    assert race(node, topic, "first", 40) == (50, 270)
    data = api.info(node, topic)
    assert (data["readyQueueSize"], data["waitingQueueSize"], data["ackQueueSize"]) == \
        (50, 0, 0)
    # Ten consumed (acked) make room for exactly ten more.
    for m in api.pull(node, topic, batch=10):
        assert api.ack(node, topic, m["msgId"], receipt=m["receipt"])["code"] == 200
    assert race(node, topic, "second", 10) == (10, 70)
    assert api.info(node, topic)["readyQueueSize"] == 50
