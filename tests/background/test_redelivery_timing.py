"""The redelivery backoff, measured against the clock (docs/api.md, "Nack with a delay, and
the redelivery backoff").

With redeliveryDelayMillis=100, redeliveryBackoffMultiplier=2, redeliveryMaxDelayMillis=1000
a message waits 100, 200, 400, 800 and 1000 ms before its 2nd to 6th deliveries:
``delay = min(max, base * multiplier ** (retry - 1))``, ``retry`` = deliveries so far.

Every time is the server's own where it can be: the due time is the redelivered message's
``triggerTime`` (its new due time), the delivery time is its ack deadline (read from the ack
queue) minus the ack timeout the pull gave, the nack time is bracketed by Redis ``TIME``
read just before and after the nack, and an ack deadline is the score the server wrote.
The whole nack -> redelivery gap is also measured on this process's monotonic clock, from
sending the nack to receiving the redelivery. Nothing may be early; lateness must stay under
a small tolerance. ``pytest -s`` prints the measured delays.
"""

from __future__ import annotations

import re
import time
import uuid

import pytest
import redis
import requests

from support.lua import NS, slot_of
from support.node import ServerProcess

BASE = "/camellia/delayQueue/"
EXPECTED_MS = [100, 200, 400, 800, 1000]     # before deliveries 2..6
SETTINGS = {"redeliveryDelayMillis": 100, "redeliveryBackoffMultiplier": 2,
            "redeliveryMaxDelayMillis": 1000, "maxRetry": 5}
CLOCK_SLACK = 250          # the server's clock may trail Redis TIME by a round trip, never lead
# Lateness allowed on top of the expected delay, ~3x the worst seen over 3 runs on the
# development machine (1 gevent worker, loopback):
# - a due redelivery reaching a held long poll: 1-7 ms after a nack, 1-16 ms after a timeout;
# - nack sent -> redelivery received, local clock: expected + 5-16 ms (three HTTP calls);
# - ack deadline -> the timeout processed: 2-7 ms, or ~103 ms when the scheduler deferred the
#   topic (`schedule-defer-millis`, 100 by default: "ack timeouts ... may be this much
#   later", README configuration table); allowed: the deferral + 3x the rest.
NACK_DELIVERY_TOLERANCE_MS = 25
TIMEOUT_DELIVERY_TOLERANCE_MS = 50
WALL_TOLERANCE_MS = 50
WALL_OUTLIER_MS = 200   # the one redelivery a machine stall may delay (below)
SCHEDULE_DEFER_MS = 100
TIMEOUT_TOLERANCE_MS = SCHEDULE_DEFER_MS + 25
LONG_POLL_MS = 5000
CONSUMING_MS = 60_000


@pytest.fixture(scope="module")
def node(redis_server):
    """A node on a database of its own (the function-scoped fixtures flush database 0)."""
    with redis_server.leased_db_url() as url, ServerProcess(url) as server:
        yield server
        _session.close()      # no keep-alive connection for the graceful stop to wait on


@pytest.fixture(scope="module")
def raw_redis(node):
    client = redis.Redis.from_url(node.redis_url, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def topic(request):
    name = re.sub(r"[^A-Za-z0-9_]", "_", request.node.name)[:60]
    return f"{name}-{uuid.uuid4().hex[:8]}"


_session = requests.Session()


def call(server, endpoint, **params):
    data = {k: v for k, v in params.items() if v is not None}
    reply = _session.post(server.url + BASE + endpoint, data=data, timeout=30).json()
    assert reply["code"] == 200, (endpoint, reply)
    return reply


def redis_now_ms(client) -> int:
    seconds, micros = client.time()
    return seconds * 1000 + micros // 1000


def long_poll(server, topic, ack_timeout_ms):
    reply = call(server, "longPollingMsg", topic=topic, longPollingTimeoutMillis=LONG_POLL_MS,
                 ackTimeoutMillis=ack_timeout_ms)
    assert len(reply["delayMsgList"]) == 1, reply
    return reply["delayMsgList"][0]


def deadline_of(client, topic, msg_id) -> int:
    score = client.zscore(f"dq:{{default:{topic}}}:ack", slot_of(client, NS.topic(topic), msg_id))
    assert score is not None
    return int(score)


def configure(server, topic):
    reply = call(server, "setTopicConfig", topic=topic, **SETTINGS)
    for name, value in SETTINGS.items():
        assert reply["data"][name] == value and reply["source"][name] == "topic"


def print_rows(title, header, rows):
    print(f"\n{title}")
    print("  " + "  ".join(f"{h:>12}" for h in header))
    for row in rows:
        print("  " + "  ".join(f"{v:>12}" for v in row))


def test_nack_backoff_follows_the_formula_never_early(node, topic, raw_redis):
    configure(node, topic)
    call(node, "sendMsg", topic=topic, msgId="p", msg="poison")
    m = long_poll(node, topic, CONSUMING_MS)
    rows, checks = [], []
    for retry, expected in enumerate(EXPECTED_MS, start=1):
        assert m["retry"] == retry
        nack_before = redis_now_ms(raw_redis)
        sent = time.monotonic()
        call(node, "ackMsg", topic=topic, msgId="p", ack="false", receipt=m["receipt"])
        nack_after = redis_now_ms(raw_redis)
        waiting = call(node, "getMsg", topic=topic, msgId="p")["delayMsg"]
        due = waiting["triggerTime"]
        m = long_poll(node, topic, CONSUMING_MS)
        answered = time.monotonic()
        delivered = deadline_of(raw_redis, topic, "p") - CONSUMING_MS
        wall_gap = round((answered - sent) * 1000, 1)
        rows.append((retry + 1, expected, due - nack_after, due - nack_before,
                     delivered - due, wall_gap))
        checks.append((retry, expected, waiting, due, nack_before, nack_after, m, delivered,
                       wall_gap))
    print_rows("nack backoff (ms): delivery; expected delay; delay the server set, bracketed "
               "by Redis TIME around the nack (lo, hi); delivery - due time (server clock); "
               "nack sent -> redelivery received (local monotonic clock)",
               ("delivery", "expected", "set >=", "set <=", "deliv late", "wall gap"), rows)
    for retry, expected, waiting, due, nack_before, nack_after, m, delivered, wall_gap \
            in checks:
        assert waiting["status"] == 1 and waiting["retry"] == retry
        # The delay the server set: its due time minus its nack time (bracketed).
        assert due - nack_after <= expected <= due - nack_before + CLOCK_SLACK, \
            (retry, due - nack_after, due - nack_before)
        assert m["triggerTime"] == due and m["retry"] == retry + 1
        assert delivered >= due, f"delivery {retry + 1} {due - delivered} ms early"
        assert delivered - due <= NACK_DELIVERY_TOLERANCE_MS, rows
        assert expected <= wall_gap <= expected + WALL_OUTLIER_MS, rows
    # End to end (client clock) the redeliveries follow the formula too; the server's own
    # times above are the exact check, and one client-side stall of the shared 2-core
    # machine (seen once: 94 ms on the first, server-side 1 ms late) is not the server's.
    slow = [row for row, check in zip(rows, checks) if check[8] > check[1] + WALL_TOLERANCE_MS]
    assert len(slow) <= 1, rows
    # The 6th delivery was the last (maxRetry 5): its nack ends the message, dead.
    assert m["retry"] == 6
    call(node, "ackMsg", topic=topic, msgId="p", ack="false", receipt=m["receipt"])
    assert call(node, "getMsg", topic=topic, msgId="p")["delayMsg"]["status"] == 6
    dead = call(node, "listDeadMsg", topic=topic)["delayMsgList"]
    assert [x["msgId"] for x in dead] == ["p"]


def test_backoff_on_ack_timeout_uses_the_same_formula_as_nack(node, topic, raw_redis):
    ack_timeout = 300
    configure(node, topic)
    call(node, "sendMsg", topic=topic, msgId="t", msg="slow")
    m = long_poll(node, topic, ack_timeout)
    deadline = deadline_of(raw_redis, topic, "t")
    rows, checks = [], []
    for retry, expected in enumerate(EXPECTED_MS, start=1):
        assert m["retry"] == retry
        m = long_poll(node, topic, ack_timeout)          # never acked: wait for the next
        new_deadline = deadline_of(raw_redis, topic, "t")
        delivered = new_deadline - ack_timeout
        due = m["triggerTime"]
        previous = deadline - ack_timeout
        # The timeout ran at (due - delay): never before the deadline.
        rows.append((retry + 1, ack_timeout + expected, delivered - previous,
                     due - deadline, due - expected - deadline, delivered - due))
        checks.append((retry, expected, m, deadline, due, delivered, previous))
        deadline = new_deadline
    print_rows("ack-timeout backoff (ms): delivery; expected gap between deliveries (ack "
               "timeout + delay); measured gap; deadline -> due time (expected: the delay); "
               "lateness of the timeout; delivery - due time (all server clock)",
               ("delivery", "expected", "gap", "backoff", "timeout late", "deliv late"), rows)
    for retry, expected, m, deadline, due, delivered, previous in checks:
        assert m["retry"] == retry + 1
        assert due - expected >= deadline, f"delivery {retry + 1}: timed out early"
        assert due - expected - deadline <= TIMEOUT_TOLERANCE_MS, rows
        assert delivered >= due, f"delivery {retry + 1} {due - delivered} ms early"
        assert delivered - due <= TIMEOUT_DELIVERY_TOLERANCE_MS, rows
        assert delivered - previous >= ack_timeout + expected, rows
    assert m["retry"] == 6
    limit = time.monotonic() + 5
    while call(node, "getMsg", topic=topic, msgId="t")["delayMsg"]["status"] != 6:
        assert time.monotonic() < limit, "the last delivery's timeout never ended it"
        time.sleep(0.02)
    dead = call(node, "listDeadMsg", topic=topic)["delayMsgList"]
    assert [x["msgId"] for x in dead] == ["t"]
