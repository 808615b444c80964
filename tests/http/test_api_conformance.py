"""Conformance of the HTTP API (docs/api.md) against live gunicorn nodes.

Servers are module-scoped and every test uses a topic of its own, so nothing is flushed
between tests. ``node`` runs the defaults (with a 1 s monitoring interval); ``short_node``
keeps ended messages for only 500 ms; ``hint_node`` re-checks held polls only every 30 s.
Each runs on a Redis database of its own: nodes sharing one would share the scheduler lease,
and the settings of whichever held it (retention, for one) would apply to the others' topics.
"""

from __future__ import annotations

import re
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from support import wait_until
from support.fleet import wait_until_pulled
from support.lua import NS, read, slot_of
from support.node import ServerProcess
from support.topologies import TOPOLOGIES, backend_named

BASE = "/camellia/delayQueue/"
HOUR = 3_600_000
MIB = 1024 * 1024
REGISTRY = "dq:{default}:topics"
# Lateness a stall of a busy 2-core machine may add (under stress-ng --cpu 2 with other
# suites running: a promotion seen 338 ms after triggerTime, a held poll answered 0.29 s
# after its message's 1.5 s ack timeout; bounds of 120 ms and 0.09 s failed there), far
# below what a missed due time falls back to: the 5 s repair sweep, the 30 s re-check.
PROMOTION_SEEN_LATE_MS = 1000
ACK_TIMEOUT_WAKE_LATE_S = 1.0


# -- fixtures & helpers ------------------------------------------------------------------
HINT_SETTINGS = {"long-polling-safety-millis": 30_000}


@pytest.fixture(scope="module", params=TOPOLOGIES)
def backend(request):
    """Every test of the module runs on a standalone Redis, on Sentinel and on a Cluster."""
    return backend_named(request, request.param)


def node_on(backend, settings, own_namespace=True):
    """A node on a Redis database (standalone) or namespace (topologies) of its own: nodes
    sharing one would share the scheduler lease, and the settings of whichever held it
    (retention, for one) would apply to the others' topics. ``placement`` is what a second
    node needs to share its data."""
    with backend.place(own_namespace) as (url, placement), \
            ServerProcess(url, settings={**settings, **placement}) as server:
        server.placement = placement
        yield server


@pytest.fixture(scope="module")
def node(backend):
    # The default namespace: tests name its keys (REGISTRY).
    yield from node_on(backend, {"monitor-interval-seconds": 1}, own_namespace=False)


@pytest.fixture(scope="module")
def raw_redis(node, backend):
    """A client of ``node``'s database."""
    client = backend.client(node.redis_url)
    yield client
    client.close()


@pytest.fixture(scope="module")
def short_node(backend, node):
    yield from node_on(backend, {"end-life-msg-expire-millis": 500})


@pytest.fixture(scope="module")
def hint_node(backend, node):
    """Held long polls re-check on their own only every 30 s: wake-ups must come from
    hints or the topic's next due time."""
    yield from node_on(backend, HINT_SETTINGS)


@pytest.fixture(scope="module")
def hint_peer(hint_node):
    """A second node on ``hint_node``'s data, with the same settings."""
    with ServerProcess(hint_node.redis_url,
                       settings={**HINT_SETTINGS, **hint_node.placement}) as server:
        yield server


@pytest.fixture
def topic(request):
    name = re.sub(r"[^A-Za-z0-9_]", "_", request.node.name)[:60]
    return f"{name}-{uuid.uuid4().hex[:8]}"


def post(server, endpoint, **params):
    """(HTTP status, envelope) of a form POST."""
    response = requests.post(server.url + BASE + endpoint, data=params, timeout=15)
    return response.status_code, response.json()


def send(server, topic, **params):
    params.setdefault("msg", "hello")
    reply = server.call("sendMsg", topic=topic, **params)
    assert reply["code"] == 200, reply
    return reply["delayMsg"]


def pull(server, topic, **params):
    reply = server.call("pullMsg", topic=topic, **params)
    assert reply["code"] == 200, reply
    return reply["delayMsgList"]


def get(server, topic, msg_id):
    return server.call("getMsg", topic=topic, msgId=msg_id)


def status(server, topic, msg_id):
    reply = get(server, topic, msg_id)
    return reply["delayMsg"]["status"] if reply["code"] == 200 else reply["code"]


def info(server, topic):
    reply = server.call("getTopicInfo", topic=topic)
    assert reply["code"] == 200, reply
    return reply["data"]


def redis_now_ms(client) -> int:
    seconds, micros = client.time()
    return seconds * 1000 + micros // 1000


def assert_nothing_written(client, topic):
    assert client.zscore(REGISTRY, topic) is None
    assert client.keys(f"*{topic}*") == []


# -- sendMsg ----------------------------------------------------------------------------
def test_send_of_due_message_answers_ready_with_defaults(node, topic):
    status_code, reply = post(node, "sendMsg", topic=topic, msg="hi")
    assert status_code == 200
    assert reply["code"] == 200 and reply["msg"] == "success"
    assert "duplicate" not in reply
    m = reply["delayMsg"]
    assert set(m) == {"topic", "msgId", "msg", "produceTime", "triggerTime", "expireTime",
                      "maxRetry", "retry", "status"}
    assert m["topic"] == topic and m["msg"] == "hi"
    assert re.fullmatch(r"[0-9a-f]{32}", m["msgId"])
    assert m["status"] == 2 and m["retry"] == 0 and m["maxRetry"] == 10
    assert m["triggerTime"] == m["produceTime"]
    assert m["expireTime"] == m["triggerTime"] + HOUR


def test_send_with_delay_answers_waiting_and_counts_ttl_from_trigger_time(node, topic):
    m = send(node, topic, msgId="m1", delayMillis=5000, ttlMillis=1000, maxRetry=3)
    assert m["msgId"] == "m1" and m["status"] == 1
    assert m["triggerTime"] == m["produceTime"] + 5000
    assert m["expireTime"] == m["triggerTime"] + 1000
    assert m["maxRetry"] == 3
    assert get(node, topic, "m1")["delayMsg"] == m


def test_send_non_positive_ttl_and_negative_max_retry_mean_the_defaults(node, topic):
    m = send(node, topic, delayMillis=-50, ttlMillis=0, maxRetry=-1)
    assert m["status"] == 2 and m["triggerTime"] == m["produceTime"]
    assert m["expireTime"] == m["triggerTime"] + HOUR and m["maxRetry"] == 10
    m = send(node, topic, ttlMillis=-5)
    assert m["expireTime"] == m["triggerTime"] + HOUR
    assert send(node, topic, maxRetry=0)["maxRetry"] == 0


def test_send_with_trigger_time_uses_the_absolute_time(node, topic, raw_redis):
    future = redis_now_ms(raw_redis) + 120_000
    m = send(node, topic, msgId="f", triggerTime=future)
    assert m["triggerTime"] == future and m["status"] == 1
    assert m["expireTime"] == future + HOUR
    past = redis_now_ms(raw_redis) - 5000
    m = send(node, topic, msgId="p", triggerTime=past)        # in the past: due now (fix)
    assert m["status"] == 2 and m["triggerTime"] == m["produceTime"] >= past + 5000
    assert m["expireTime"] == m["triggerTime"] + HOUR


def test_send_with_both_delay_and_trigger_time_is_refused_and_writes_nothing(node, topic,
                                                                           raw_redis):
    status_code, reply = post(node, "sendMsg", topic=topic, msg="x", delayMillis=10,
                              triggerTime=redis_now_ms(raw_redis))
    assert status_code == 200 and reply["code"] == 400
    assert "delayMillis" in reply["msg"] and "triggerTime" in reply["msg"]
    assert_nothing_written(raw_redis, topic)


def test_send_of_live_msg_id_returns_stored_message_as_duplicate(node, topic):
    first = send(node, topic, msgId="d", msg="first", delayMillis=60_000)
    reply = node.call("sendMsg", topic=topic, msgId="d", msg="second")
    assert reply["code"] == 200 and reply["duplicate"] is True
    assert reply["delayMsg"] == first
    data = info(node, topic)
    assert (data["waitingQueueSize"], data["readyQueueSize"], data["ackQueueSize"]) == (1, 0, 0)
    # Also while consuming.
    send(node, topic, msgId="c", msg="one")
    pull(node, topic)
    reply = node.call("sendMsg", topic=topic, msgId="c", msg="two")
    assert reply["duplicate"] is True and reply["delayMsg"]["status"] == 3
    data = info(node, topic)
    assert (data["waitingQueueSize"], data["readyQueueSize"], data["ackQueueSize"]) == (1, 0, 1)


def test_send_of_acked_msg_id_replaces_it(node, topic):
    send(node, topic, msgId="r", msg="first")
    pull(node, topic)
    assert node.call("ackMsg", topic=topic, msgId="r")["code"] == 200
    reply = node.call("sendMsg", topic=topic, msgId="r", msg="second")
    assert reply["code"] == 200 and "duplicate" not in reply
    m = reply["delayMsg"]
    assert m["msg"] == "second" and m["status"] == 2 and m["retry"] == 0
    assert [x["msg"] for x in pull(node, topic)] == ["second"]


# -- pullMsg ----------------------------------------------------------------------------
def test_pull_hands_out_oldest_trigger_time_first(node, topic):
    delays = [900, 600, 300, 0]
    sent = [send(node, topic, msgId=f"m{d}", delayMillis=d) for d in delays]
    wait_until(lambda: info(node, topic)["waitingQueueSize"] == 0, 10)
    got = pull(node, topic, batch=10)
    assert [m["msgId"] for m in got] == ["m0", "m300", "m600", "m900"]
    assert [m["triggerTime"] for m in got] == sorted(m["triggerTime"] for m in sent)


def test_pull_order_follows_trigger_time_not_send_order(node, topic, raw_redis):
    due = redis_now_ms(raw_redis) + 300
    for i, offset in enumerate([10, 40, 20, 30]):
        send(node, topic, msgId=f"m{i}", triggerTime=due - offset)
    time.sleep(max(0.0, (due - redis_now_ms(raw_redis)) / 1000) + 0.05)
    assert [m["msgId"] for m in pull(node, topic, batch=10)] == ["m1", "m3", "m2", "m0"]


def test_pull_delivers_in_batches_and_marks_consuming(node, topic):
    for i in range(5):
        send(node, topic, msgId=f"m{i}")
    first = pull(node, topic, batch=3, ackTimeoutMillis=60_000)
    assert len(first) == 3
    assert all(m["status"] == 3 and m["retry"] == 1 for m in first)
    assert len(pull(node, topic, batch=0)) == 1          # batch <= 0 means 1
    assert len(pull(node, topic, batch=3)) == 1
    assert pull(node, topic, batch=3) == []
    data = info(node, topic)
    assert (data["readyQueueSize"], data["ackQueueSize"]) == (0, 5)
    assert status(node, topic, first[0]["msgId"]) == 3


@pytest.mark.parametrize("ack_timeout", [None, 0, -5, 1234])
def test_pull_ack_timeout_sets_the_ack_deadline(node, topic, raw_redis, ack_timeout):
    send(node, topic, msgId="a")
    params = {} if ack_timeout is None else {"ackTimeoutMillis": ack_timeout}
    before = redis_now_ms(raw_redis)
    pull(node, topic, **params)
    after = redis_now_ms(raw_redis)
    deadline = raw_redis.zscore(f"dq:{{default:{topic}}}:ack",
                                slot_of(raw_redis, NS.topic(topic), "a"))
    expected = 30_000 if ack_timeout is None or ack_timeout <= 0 else ack_timeout
    # The server's clock trails Redis TIME by at most a round trip; never leads it.
    assert before + expected - 250 <= deadline <= after + expected


def test_pull_of_empty_or_unknown_topic_answers_empty_list(node, topic):
    status_code, reply = post(node, "pullMsg", topic=topic)
    assert status_code == 200
    assert reply == {"code": 200, "msg": "success", "delayMsgList": []}


def test_pull_never_hands_out_a_waiting_message(node, topic):
    send(node, topic, msgId="w", delayMillis=60_000)
    assert pull(node, topic, batch=10) == []
    assert status(node, topic, "w") == 1


# -- ack / nack -------------------------------------------------------------------------
def test_ack_without_ack_param_acks(node, topic):
    send(node, topic, msgId="a")
    pull(node, topic)
    status_code, reply = post(node, "ackMsg", topic=topic, msgId="a")
    assert status_code == 200 and reply["code"] == 200
    assert status(node, topic, "a") == 4
    assert info(node, topic)["ackQueueSize"] == 0


def test_ack_of_already_acked_message_answers_200_again(node, topic):
    send(node, topic, msgId="a")
    pull(node, topic)
    assert node.call("ackMsg", topic=topic, msgId="a", ack="true")["code"] == 200
    assert node.call("ackMsg", topic=topic, msgId="a", ack="true")["code"] == 200
    assert status(node, topic, "a") == 4


def test_ack_of_waiting_message_is_400_and_changes_nothing(node, topic):
    send(node, topic, msgId="w", delayMillis=60_000)
    reply = node.call("ackMsg", topic=topic, msgId="w")
    assert reply["code"] == 400 and "msgId" in reply["msg"]
    assert status(node, topic, "w") == 1
    assert info(node, topic)["waitingQueueSize"] == 1


def test_ack_of_unknown_message_is_404(node, topic, raw_redis):
    reply = node.call("ackMsg", topic=topic, msgId="ghost")
    assert reply["code"] == 404
    assert raw_redis.keys(f"*{topic}*ghost*") == []


def test_nack_makes_message_pullable_again_with_retry_incremented(node, topic):
    send(node, topic, msgId="n")
    assert pull(node, topic)[0]["retry"] == 1
    assert node.call("ackMsg", topic=topic, msgId="n", ack="false")["code"] == 200
    assert status(node, topic, "n") == 2
    again = pull(node, topic)
    assert [m["msgId"] for m in again] == ["n"] and again[0]["retry"] == 2


def test_nack_of_non_consuming_message_is_400_and_changes_nothing(node, topic):
    send(node, topic, msgId="w", delayMillis=60_000)
    send(node, topic, msgId="r")
    for msg_id in ("w", "r"):
        reply = node.call("ackMsg", topic=topic, msgId=msg_id, ack="false")
        assert reply["code"] == 400 and "msgId" in reply["msg"]
    assert (status(node, topic, "w"), status(node, topic, "r")) == (1, 2)
    data = info(node, topic)
    assert (data["waitingQueueSize"], data["readyQueueSize"]) == (1, 1)
    assert [m["msgId"] for m in pull(node, topic, batch=10)] == ["r"]


def test_nack_of_unknown_message_is_404_and_writes_nothing(node, topic, raw_redis):
    reply = node.call("ackMsg", topic=topic, msgId="ghost", ack="false")
    assert reply["code"] == 404
    assert raw_redis.keys(f"*{topic}*ghost*") == []
    assert info(node, topic)["readyQueueSize"] == 0


def test_max_retry_zero_delivers_once_then_nack_ends_it_with_status_6(node, topic):
    send(node, topic, msgId="z", maxRetry=0)
    assert pull(node, topic)[0]["retry"] == 1
    assert node.call("ackMsg", topic=topic, msgId="z", ack="false")["code"] == 200
    assert status(node, topic, "z") == 6
    assert pull(node, topic) == []


def test_max_retry_zero_ack_timeout_ends_it_with_status_6(node, topic):
    send(node, topic, msgId="z", maxRetry=0)
    assert len(pull(node, topic, ackTimeoutMillis=200)) == 1
    wait_until(lambda: status(node, topic, "z") == 6, 10)
    assert pull(node, topic) == []
    data = info(node, topic)
    assert (data["readyQueueSize"], data["ackQueueSize"]) == (0, 0)


def test_retries_exhausted_by_ack_timeouts_end_with_status_6(node, topic):
    send(node, topic, msgId="x", maxRetry=1)
    assert pull(node, topic, ackTimeoutMillis=200)[0]["retry"] == 1
    wait_until(lambda: status(node, topic, "x") == 2, 10)      # timed out, redeliverable
    assert pull(node, topic, ackTimeoutMillis=200)[0]["retry"] == 2
    wait_until(lambda: status(node, topic, "x") == 6, 10)
    assert get(node, topic, "x")["delayMsg"]["retry"] == 2
    assert pull(node, topic) == []


def test_late_ack_after_ack_timeout_acks_and_prevents_redelivery(node, topic):
    send(node, topic, msgId="late")
    pull(node, topic, ackTimeoutMillis=200)
    m = wait_until(lambda: (lambda r: r if r["status"] == 2 else None)(
        get(node, topic, "late")["delayMsg"]), 10)
    assert m["retry"] == 1
    assert node.call("ackMsg", topic=topic, msgId="late")["code"] == 200
    assert status(node, topic, "late") == 4
    assert pull(node, topic) == []
    assert info(node, topic)["readyQueueSize"] == 0


def test_never_delivered_message_expires_with_status_5(node, topic):
    send(node, topic, msgId="ready", ttlMillis=300)
    send(node, topic, msgId="waiting", delayMillis=200, ttlMillis=200)
    wait_until(lambda: status(node, topic, "ready") == 5, 10)
    wait_until(lambda: status(node, topic, "waiting") == 5, 10)
    data = info(node, topic)
    assert (data["waitingQueueSize"], data["readyQueueSize"]) == (0, 0)
    assert pull(node, topic) == []


@pytest.mark.parametrize("ack", ["true", "false"])
def test_ack_or_nack_of_expired_exhausted_or_deleted_message_is_404(node, topic, ack):
    send(node, topic, msgId="exhausted", maxRetry=0)
    assert [m["msgId"] for m in pull(node, topic, batch=10)] == ["exhausted"]
    send(node, topic, msgId="expired", ttlMillis=200)
    node.call("ackMsg", topic=topic, msgId="exhausted", ack="false")
    send(node, topic, msgId="deleted")
    node.call("deleteMsg", topic=topic, msgId="deleted")
    wait_until(lambda: status(node, topic, "expired") == 5, 10)
    for msg_id, ended in (("expired", 5), ("exhausted", 6), ("deleted", 7)):
        assert status(node, topic, msg_id) == ended
        assert node.call("ackMsg", topic=topic, msgId=msg_id, ack=ack)["code"] == 404
        assert status(node, topic, msg_id) == ended


def test_due_message_becomes_ready_on_time_without_any_consumer(node, topic, raw_redis):
    m = send(node, topic, msgId="d", delayMillis=500)
    assert m["status"] == 1
    wait_until(lambda: status(node, topic, "d") == 2, 5, interval_s=0.02)
    late_ms = redis_now_ms(raw_redis) - m["triggerTime"]
    print(f"\npromotion seen {late_ms} ms after triggerTime")
    # The scheduler promotes it at its due time, not the 5 s repair sweep.
    assert 0 <= late_ms < PROMOTION_SEEN_LATE_MS, late_ms


# -- deleteMsg / getMsg -----------------------------------------------------------------
def test_delete_of_consuming_message_then_ack_is_404_and_status_7(node, topic):
    send(node, topic, msgId="d")
    pull(node, topic)
    assert node.call("deleteMsg", topic=topic, msgId="d")["code"] == 200
    assert node.call("ackMsg", topic=topic, msgId="d")["code"] == 404
    assert status(node, topic, "d") == 7
    data = info(node, topic)
    assert (data["readyQueueSize"], data["ackQueueSize"]) == (0, 0)


def test_delete_of_waiting_message_removes_it_from_every_queue(node, topic):
    send(node, topic, msgId="d", delayMillis=60_000)
    assert node.call("deleteMsg", topic=topic, msgId="d", release="false")["code"] == 200
    assert status(node, topic, "d") == 7
    assert info(node, topic)["waitingQueueSize"] == 0


def test_delete_with_release_removes_the_body(node, topic, raw_redis):
    send(node, topic, msgId="d")
    assert node.call("deleteMsg", topic=topic, msgId="d", release="true")["code"] == 200
    assert get(node, topic, "d")["code"] == 404
    assert read(raw_redis, NS.topic(topic), "d") == (None, None)     # not even retained
    assert pull(node, topic) == []


def test_delete_of_unknown_or_ended_message_is_404(node, topic):
    assert node.call("deleteMsg", topic=topic, msgId="ghost")["code"] == 404
    send(node, topic, msgId="a")
    pull(node, topic)
    node.call("ackMsg", topic=topic, msgId="a")
    assert node.call("deleteMsg", topic=topic, msgId="a")["code"] == 404
    assert status(node, topic, "a") == 4
    assert node.call("deleteMsg", topic=topic, msgId="a", release="true")["code"] == 404
    assert get(node, topic, "a")["code"] == 404


def test_get_of_unknown_message_is_404(node, topic):
    status_code, reply = post(node, "getMsg", topic=topic, msgId="ghost")
    assert status_code == 200 and reply["code"] == 404 and "delayMsg" not in reply


def test_ended_message_is_retained_then_gone(short_node, topic):
    send(short_node, topic, msgId="a")
    pull(short_node, topic)
    assert short_node.call("ackMsg", topic=topic, msgId="a")["code"] == 200
    assert status(short_node, topic, "a") == 4
    wait_until(lambda: get(short_node, topic, "a")["code"] == 404, 10)
    # After retention the id is free: a new message, not a duplicate.
    reply = short_node.call("sendMsg", topic=topic, msgId="a", msg="again")
    assert "duplicate" not in reply and reply["delayMsg"]["status"] == 2


# -- long polling -----------------------------------------------------------------------
def test_long_poll_returns_at_once_when_a_message_is_ready(node, topic):
    send(node, topic, msgId="r")
    started = time.monotonic()
    reply = node.call("longPollingMsg", topic=topic, longPollingTimeoutMillis=20_000)
    assert time.monotonic() - started < 5
    assert reply["code"] == 200 and [m["msgId"] for m in reply["delayMsgList"]] == ["r"]
    assert reply["delayMsgList"][0]["status"] == 3


def test_long_poll_holds_then_answers_empty_after_its_timeout(node, topic):
    started = time.monotonic()
    reply = node.call("longPollingMsg", topic=topic, longPollingTimeoutMillis=800)
    elapsed = time.monotonic() - started
    assert reply == {"code": 200, "msg": "success", "delayMsgList": []}
    assert 0.75 <= elapsed < 8


def test_long_poll_returns_message_that_becomes_due_while_held(node, topic, raw_redis):
    m = send(node, topic, msgId="soon", delayMillis=1000)
    started = time.monotonic()
    reply = node.call("longPollingMsg", topic=topic, longPollingTimeoutMillis=20_000)
    answered_at = redis_now_ms(raw_redis)
    elapsed = time.monotonic() - started
    assert [x["msgId"] for x in reply["delayMsgList"]] == ["soon"]
    assert answered_at >= m["triggerTime"]                 # never early
    assert 0.5 <= elapsed < 10                              # held, then answered


def held_poll(pool, server, topic, timeout_ms=20_000, **params):
    """Start a long poll in the background; returns (future, start time)."""
    started = time.monotonic()
    future = pool.submit(server.call, "longPollingMsg", timeout=30, topic=topic,
                         longPollingTimeoutMillis=timeout_ms, **params)
    return future, started


def wait_until_held(future, server=None, fresh_topic=None, seconds=0.5):
    """Wait until a long poll is held: on a topic never used before, until its first pull
    registered the topic; otherwise (the registry cannot tell) for ``seconds``."""
    if fresh_topic is not None:
        wait_until_pulled(server.redis_url, fresh_topic,
                          namespace=server.placement.get("namespace", "default"))
    else:
        time.sleep(seconds)
    assert not future.done(), "the long poll answered before anything was ready"


def test_held_long_poll_wakes_when_a_ready_message_is_sent(hint_node, topic):
    with ThreadPoolExecutor(1) as pool:
        future, _ = held_poll(pool, hint_node, topic)
        wait_until_held(future, hint_node, topic)
        sent_at = time.monotonic()
        send(hint_node, topic, msgId="now")
        reply = future.result(timeout=25)
        assert [m["msgId"] for m in reply["delayMsgList"]] == ["now"]
        assert time.monotonic() - sent_at < 5


def test_held_long_poll_wakes_at_the_trigger_time_of_a_message_sent_while_held(
        hint_node, topic, raw_redis):
    with ThreadPoolExecutor(1) as pool:
        future, _ = held_poll(pool, hint_node, topic)
        wait_until_held(future, hint_node, topic)
        m = send(hint_node, topic, msgId="later", delayMillis=1000)
        sent_at = time.monotonic()
        reply = future.result(timeout=25)
        answered_at = redis_now_ms(raw_redis)
        assert [x["msgId"] for x in reply["delayMsgList"]] == ["later"]
        assert answered_at >= m["triggerTime"]
        assert time.monotonic() - sent_at < 6


def test_held_long_poll_wakes_on_nack(hint_node, topic):
    send(hint_node, topic, msgId="n")
    assert len(pull(hint_node, topic)) == 1
    with ThreadPoolExecutor(1) as pool:
        future, _ = held_poll(pool, hint_node, topic)
        wait_until_held(future)
        nacked_at = time.monotonic()
        assert hint_node.call("ackMsg", topic=topic, msgId="n", ack="false")["code"] == 200
        reply = future.result(timeout=25)
        assert [(m["msgId"], m["retry"]) for m in reply["delayMsgList"]] == [("n", 2)]
        assert time.monotonic() - nacked_at < 5


def test_held_long_poll_wakes_on_ack_timeout(hint_node, topic):
    send(hint_node, topic, msgId="t")
    pulled_at = time.monotonic()
    assert len(pull(hint_node, topic, ackTimeoutMillis=1500)) == 1
    with ThreadPoolExecutor(1) as pool:
        future, _ = held_poll(pool, hint_node, topic)
        wait_until_held(future)
        reply = future.result(timeout=25)
        elapsed = time.monotonic() - pulled_at
        print(f"\nredelivered to the held poll {elapsed:.3f} s after the pull (ack timeout 1.5 s)")
        assert [(m["msgId"], m["retry"]) for m in reply["delayMsgList"]] == [("t", 2)]
        assert 1.2 <= elapsed < 1.5 + ACK_TIMEOUT_WAKE_LATE_S, elapsed


def test_held_long_poll_wakes_when_another_node_makes_a_message_ready(hint_node, hint_peer,
                                                                       topic):
    with ThreadPoolExecutor(1) as pool:
        future, _ = held_poll(pool, hint_node, topic)
        wait_until_held(future, hint_node, topic)
        sent_at = time.monotonic()
        send(hint_peer, topic, msgId="elsewhere")
        reply = future.result(timeout=25)
        assert [m["msgId"] for m in reply["delayMsgList"]] == ["elsewhere"]
        assert time.monotonic() - sent_at < 5


def test_every_held_long_poll_gets_one_of_several_messages(hint_node, topic):
    with ThreadPoolExecutor(3) as pool:
        polls = [held_poll(pool, hint_node, topic)[0] for _ in range(3)]
        time.sleep(0.5)
        assert not any(f.done() for f in polls)
        sent_at = time.monotonic()
        for i in range(3):
            send(hint_node, topic, msgId=f"m{i}")
        got = [m["msgId"] for f in polls for m in f.result(timeout=25)["delayMsgList"]]
        assert sorted(got) == ["m0", "m1", "m2"]
        assert time.monotonic() - sent_at < 6


# -- topic info -------------------------------------------------------------------------
def test_topic_info_shape_and_sizes(node, topic):
    send(node, topic, msgId="w", delayMillis=60_000 * 20)
    send(node, topic, msgId="r")
    send(node, topic, msgId="c")
    pull(node, topic)
    status_code, reply = post(node, "getTopicInfo", topic=topic)
    assert status_code == 200 and reply["code"] == 200
    data = reply["data"]
    assert list(data) == ["topic", "waitingQueueSize", "waitingQueueInfo", "readyQueueSize",
                          "ackQueueSize", "deadQueueSize"]          # the last one is ours
    assert data["topic"] == topic
    assert list(data["waitingQueueInfo"]) == [
        "sizeOf0To1min", "sizeOf1minTo10min", "sizeOf10minTo30min", "sizeOf30minTo1hour",
        "sizeOf1hourTo6hour", "sizeOf6hourTo1day", "sizeOf1dayTo7day", "sizeOf7dayTo30day",
        "sizeOf30dayToInfinite"]
    assert (data["waitingQueueSize"], data["readyQueueSize"], data["ackQueueSize"]) == (1, 1, 1)
    assert data["waitingQueueInfo"]["sizeOf10minTo30min"] == 1


def test_topic_info_buckets_do_not_overlap_at_their_edges(node, topic):
    minute = 60_000
    # Inside a bucket, with room for the milliseconds between send and query.
    inside = {"a": 30_000, "b": 5 * minute, "c": 20 * minute, "d": 45 * minute,
              "e": 3 * 60 * minute, "f": 12 * 60 * minute, "g": 3 * 1440 * minute,
              "h": 10 * 1440 * minute, "i": 40 * 1440 * minute}
    for msg_id, delay in inside.items():
        send(node, topic, msgId=msg_id, delayMillis=delay)
    # Exactly at an edge: by query time it is at the edge (counted in the upper bucket)
    # or a few ms under it (the lower one) -- never in both.
    for msg_id, delay in {"e1": minute, "e2": 10 * minute, "e3": 30 * minute}.items():
        send(node, topic, msgId=msg_id, delayMillis=delay)
    data = info(node, topic)
    b = data["waitingQueueInfo"]
    assert data["waitingQueueSize"] == 12
    assert sum(b.values()) == 12
    # Each edge message sits in the bucket above its edge or the one below, once.
    assert b["sizeOf0To1min"] + b["sizeOf1minTo10min"] + b["sizeOf10minTo30min"] \
        + b["sizeOf30minTo1hour"] == 7
    assert 1 <= b["sizeOf0To1min"] <= 2 and 1 <= b["sizeOf30minTo1hour"] <= 2
    assert 1 <= b["sizeOf1minTo10min"] <= 3 and 1 <= b["sizeOf10minTo30min"] <= 3
    for name in ("sizeOf1hourTo6hour", "sizeOf6hourTo1day", "sizeOf1dayTo7day",
                 "sizeOf7dayTo30day", "sizeOf30dayToInfinite"):
        assert b[name] == 1


def test_topic_info_list_lists_every_known_topic(node, topic):
    other = topic + "-other"
    send(node, topic, msgId="a")
    send(node, other, msgId="b", delayMillis=60_000)
    status_code, reply = post(node, "getTopicInfoList")
    assert status_code == 200 and reply["code"] == 200
    by_topic = {entry["topic"]: entry for entry in reply["data"]}
    assert by_topic[topic]["readyQueueSize"] == 1
    assert by_topic[other]["waitingQueueSize"] == 1
    assert "waitingQueueInfo" in by_topic[other]


# -- monitoring -------------------------------------------------------------------------
def test_monitor_data_reports_the_last_interval_with_camellia_keys(node, raw_redis, topic):
    expected = {"sendMsg": 2, "pullMsg": 2, "ackMsg": 2, "deleteMsg": 0, "getMsg": 1,
                "triggerMsgReady": 0, "triggerMsgEndLife": 0, "triggerMsgTimeout": 0}
    for attempt in range(3):
        t = f"{topic}-{attempt}"
        # Start early in an interval so every request lands in it; the server's clock may
        # trail Redis TIME by up to a round trip, hence the margins on both sides.
        wait_until(lambda: 150 <= redis_now_ms(raw_redis) % 1000 <= 400, 3, interval_s=0.005)
        interval = redis_now_ms(raw_redis) // 1000
        send(node, t, msgId="a")
        send(node, t, msgId="b")
        pull(node, t, batch=2)
        node.call("ackMsg", topic=t, msgId="a")
        node.call("ackMsg", topic=t, msgId="b", ack="false")      # a nack counts as ackMsg
        get(node, t, "a")
        done = redis_now_ms(raw_redis)
        if done // 1000 != interval or done % 1000 > 900:
            continue                                              # straddled: try again
        wait_until(lambda: redis_now_ms(raw_redis) // 1000 > interval, 3, interval_s=0.01)
        while redis_now_ms(raw_redis) // 1000 < interval + 2:
            reply = node.call("getMonitorData")
            if redis_now_ms(raw_redis) // 1000 != interval + 1:
                break
            assert reply["code"] == 200
            data = reply["data"]
            stats = [s for s in data["requestStatsList"] if s["topic"] == t]
            if stats and {k: stats[0][k] for k in expected} == expected:
                assert set(data) == {"requestStatsList", "pullMsgTimeGapStatsList",
                                     "readyQueueTimeGapStatsList"}
                assert set(stats[0]) == {"topic", *expected}
                gaps = [g for g in data["pullMsgTimeGapStatsList"] if g["topic"] == t]
                assert len(gaps) == 1
                assert {"topic", "count", "avg", "max", "p50", "p99"} <= set(gaps[0])
                assert gaps[0]["count"] == 2
                assert 0 <= gaps[0]["p50"] <= gaps[0]["p99"]
                return
            time.sleep(0.05)
    pytest.fail("getMonitorData never showed the interval's counts")


def test_metrics_is_prometheus_text_with_queue_sizes(node, topic):
    send(node, topic, msgId="w", delayMillis=60_000)
    send(node, topic, msgId="r")
    response = requests.get(node.url + "/metrics", timeout=10)
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(response.text)}
    assert "delayqueue_queue_size" in families
    sizes = {s.labels["state"]: s.value for s in families["delayqueue_queue_size"].samples
             if s.labels.get("topic") == topic}
    assert sizes["waiting"] == 1 and sizes["ready"] == 1
    pull(node, topic)

    def flushed():
        text = requests.get(node.url + "/metrics", timeout=10).text
        fams = {f.name: f for f in text_string_to_metric_families(text)}
        sent = [s.value for s in fams["delayqueue_messages"].samples
                if s.labels.get("topic") == topic and s.labels.get("op") == "sendMsg"
                and s.name.endswith("_total")]
        gaps = [s for s in fams["delayqueue_time_gap_milliseconds"].samples
                if s.labels.get("topic") == topic and s.name.endswith("_count")]
        return fams if sent == [2] and gaps else None

    fams = wait_until(flushed, 10, interval_s=0.2)
    assert fams["delayqueue_time_gap_milliseconds"].type == "histogram"
    loops = {s.labels["loop"] for s in
             fams["delayqueue_scheduler_loop_duration_milliseconds"].samples}
    assert "schedule" in loops


# -- health -----------------------------------------------------------------------------
def test_health_status_follows_online_and_offline(node):
    url = node.url + "/camellia/health/"
    status_response = requests.get(url + "status", timeout=5)
    assert status_response.status_code == 200 and status_response.json() == {"code": 200}
    try:
        assert requests.get(url + "offline", timeout=5).json() == {"code": 200}
        offline = requests.get(url + "status", timeout=5)
        assert offline.status_code == 500 and offline.json() == {"code": 500}
        check = requests.get(url + "check", timeout=5)
        assert check.status_code == 200 and check.json() == {"code": 200}
    finally:
        assert requests.post(url + "online", timeout=5).json() == {"code": 200}
    back = requests.get(url + "status", timeout=5)
    assert back.status_code == 200 and back.json() == {"code": 200}


# -- transport --------------------------------------------------------------------------
def test_json_body_is_accepted(node, topic):
    response = requests.post(node.url + BASE + "sendMsg", timeout=10,
                             json={"topic": topic, "msg": "j", "msgId": "j", "delayMillis": 0,
                                   "maxRetry": 2})
    reply = response.json()
    assert reply["code"] == 200 and reply["delayMsg"]["maxRetry"] == 2
    response = requests.post(node.url + BASE + "pullMsg", timeout=10,
                             json={"topic": topic, "batch": 5})
    assert [m["msgId"] for m in response.json()["delayMsgList"]] == ["j"]
    response = requests.post(node.url + BASE + "ackMsg", timeout=10,
                             json={"topic": topic, "msgId": "j", "ack": True})
    assert response.json()["code"] == 200
    assert status(node, topic, "j") == 4


@pytest.mark.parametrize("endpoint", ["sendMsg", "pullMsg", "getMsg", "getTopicInfo",
                                      "getTopicInfoList", "getMonitorData"])
def test_get_and_post_are_both_accepted(node, topic, endpoint):
    params = {"topic": topic, "msg": "x", "msgId": "x"}
    if endpoint == "getMsg":
        send(node, topic, msgId="x")
    for method in (requests.get, requests.post):
        kwargs = {"params": params} if method is requests.get else {"data": params}
        response = method(node.url + BASE + endpoint, timeout=10, **kwargs)
        assert response.status_code == 200, (method, response.text)
        assert response.json()["code"] == 200


@pytest.mark.parametrize("spelling,acks", [
    ("true", True), ("TRUE", True), ("1", True), ("yes", True), ("Yes", True), ("on", True),
    ("ON", True), ("false", False), ("False", False), ("0", False), ("no", False),
    ("NO", False), ("off", False), ("oFf", False)])
def test_boolean_spellings_are_accepted_in_any_case(node, topic, spelling, acks):
    send(node, topic, msgId="b")
    pull(node, topic)
    reply = node.call("ackMsg", topic=topic, msgId="b", ack=spelling)
    assert reply["code"] == 200
    assert status(node, topic, "b") == (4 if acks else 2)


def test_unknown_boolean_spelling_is_http_400(node, topic):
    send(node, topic, msgId="b")
    pull(node, topic)
    status_code, reply = post(node, "ackMsg", topic=topic, msgId="b", ack="maybe")
    assert status_code == 400 and reply["code"] == 400 and "ack" in reply["msg"]
    assert status(node, topic, "b") == 3


# -- validation -------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["topic_too_long", "topic_brace_open", "topic_brace_close",
                                  "topic_control_char", "msg_id_too_long",
                                  "msg_id_control_char", "msg_too_large",
                                  "msg_too_large_multibyte"])
def test_send_that_breaks_a_rule_is_code_400_naming_the_parameter_and_writes_nothing(
        node, topic, raw_redis, case):
    params = {"topic": topic, "msg": "x", "msgId": "m"}
    checked = topic
    name = {"topic_too_long": "topic", "topic_brace_open": "topic",
            "topic_brace_close": "topic", "topic_control_char": "topic",
            "msg_id_too_long": "msgId", "msg_id_control_char": "msgId",
            "msg_too_large": "msg", "msg_too_large_multibyte": "msg"}[case]
    if case == "topic_too_long":
        params["topic"] = checked = (topic + "x" * 300)[:257]
    elif case == "topic_brace_open":
        params["topic"] = topic + "{"
    elif case == "topic_brace_close":
        params["topic"] = topic + "}"
    elif case == "topic_control_char":
        params["topic"] = topic + "\x01"
    elif case == "msg_id_too_long":
        params["msgId"] = "i" * 257
    elif case == "msg_id_control_char":
        params["msgId"] = "a\nb"
    elif case == "msg_too_large":
        params["msg"] = "x" * (MIB + 1)
    else:
        params["msg"] = "é" * (MIB // 2) + "x"        # 1 MiB + 1 byte in UTF-8
    status_code, reply = post(node, "sendMsg", **params)
    assert status_code == 200
    assert reply["code"] == 400
    assert reply["msg"].startswith(name + ":"), reply["msg"]
    assert_nothing_written(raw_redis, checked)
    assert_nothing_written(raw_redis, topic)


def test_limits_themselves_are_accepted(node, topic):
    m = send(node, topic, msgId="i" * 256, msg="x" * MIB)
    assert len(m["msg"]) == MIB
    long_topic = (topic + "t" * 300)[:256]
    assert send(node, long_topic, msgId="m")["topic"] == long_topic
    assert len(pull(node, topic, batch=1000)) == 1


def test_batch_over_1000_is_code_400_and_pulls_nothing(node, topic):
    send(node, topic, msgId="r")
    status_code, reply = post(node, "pullMsg", topic=topic, batch=1001)
    assert status_code == 200 and reply["code"] == 400 and reply["msg"].startswith("batch")
    assert status(node, topic, "r") == 2


def test_long_polling_timeout_over_60000_is_code_400(node, topic, raw_redis):
    status_code, reply = post(node, "longPollingMsg", topic=topic,
                              longPollingTimeoutMillis=60_001)
    assert status_code == 200 and reply["code"] == 400
    assert reply["msg"].startswith("longPollingTimeoutMillis")
    assert_nothing_written(raw_redis, topic)


@pytest.mark.parametrize("params,name", [
    ({"msg": "x", "delayMillis": "abc"}, "delayMillis"),
    ({"msg": "x", "ttlMillis": "1.5"}, "ttlMillis"),
    ({"msg": "x", "maxRetry": "many"}, "maxRetry"),
    ({"msg": "x", "triggerTime": "soon"}, "triggerTime"),
    ({}, "msg"),
    ({"msg": ""}, "msg"),
])
def test_unconvertible_or_missing_send_parameter_is_http_400(node, topic, raw_redis, params,
                                                            name):
    status_code, reply = post(node, "sendMsg", topic=topic, **params)
    assert status_code == 400 and reply["code"] == 400
    assert reply["msg"].startswith(name), reply["msg"]
    assert_nothing_written(raw_redis, topic)


@pytest.mark.parametrize("endpoint", ["sendMsg", "pullMsg", "longPollingMsg", "ackMsg",
                                      "getMsg", "deleteMsg", "getTopicInfo"])
def test_missing_topic_is_http_400(node, endpoint):
    status_code, reply = post(node, endpoint, msg="x", msgId="m")
    assert status_code == 400 and reply["code"] == 400 and reply["msg"].startswith("topic")


@pytest.mark.parametrize("endpoint", ["ackMsg", "getMsg", "deleteMsg"])
def test_missing_msg_id_is_http_400(node, topic, endpoint):
    status_code, reply = post(node, endpoint, topic=topic)
    assert status_code == 400 and reply["code"] == 400 and reply["msg"].startswith("msgId")


def test_rejected_pull_and_ack_register_no_topic(node, topic, raw_redis):
    post(node, "pullMsg", topic=topic, batch=5000)
    post(node, "pullMsg", topic=topic, ackTimeoutMillis="x")
    post(node, "ackMsg", topic=topic, msgId="m", ack="perhaps")
    post(node, "longPollingMsg", topic=topic, longPollingTimeoutMillis="x")
    assert_nothing_written(raw_redis, topic)


def test_non_object_json_body_is_rejected(node):
    response = requests.post(node.url + BASE + "sendMsg", timeout=10, json=["topic", "msg"])
    assert response.json()["code"] == 400
    assert "body" in response.json()["msg"]


def test_multipart_form_body_up_to_the_limit_is_accepted_and_beyond_it_refused(node, topic):
    url = f"{node.url}/camellia/delayQueue/sendMsg"
    ok = requests.post(url, files={"topic": (None, topic), "msg": (None, "x" * 900_000)}).json()
    assert ok["code"] == 200, ok
    too_big = requests.post(
        url, files={"topic": (None, topic), "msg": (None, "x" * (1_048_576 + 1))}).json()
    assert too_big["code"] == 400 and too_big["msg"].startswith("msg:"), too_big


# -- the wire: one send per response (delayqueue/server/gunicorn_workers.py) -----------------------
def test_responses_with_and_without_body_keep_a_keep_alive_connection_in_step(node):
    """Headers travel with the body in one send; a HEAD answer (no body) still gets its
    headers, and the next request on the same connection is answered correctly."""
    import http.client
    from urllib.parse import urlsplit

    url = urlsplit(node.url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=5)
    try:
        for method in ("GET", "HEAD", "POST", "HEAD", "GET"):
            conn.request(method, "/camellia/health/check")
            response = conn.getresponse()
            body = response.read()
            assert response.status == 200
            assert response.getheader("Content-Type") == "application/json"
            assert body == (b"" if method == "HEAD" else b'{"code":200}\n')
            assert int(response.getheader("Content-Length")) == len(b'{"code":200}\n')
    finally:
        conn.close()
