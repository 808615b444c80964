"""Graceful operations on a real node (gunicorn, two gevent workers): drain it for the load
balancer with /camellia/health/offline (status 500, and every long poll held by any of its
workers answered at once, empty), then SIGTERM: every long poll held since is answered at
once with an empty list, the leases are released, and the node exits 0 well inside the grace
period.
"""

from __future__ import annotations

import signal
import time
from concurrent.futures import ThreadPoolExecutor

import psutil
import pytest
import redis
import requests

from delayqueue.core.keys import NamespaceKeys

from support import wait_until
from support.node import ServerProcess

pytestmark = pytest.mark.slow
NS = NamespaceKeys("dq", "default")     # the node's keys
GRACE_S = 10
HELD = 20
# The leases a node holds while it runs its loops (the "-gate" keys beside them are fleet-wide
# once-per-interval marks, not held by anyone).
LEASES = (NS.lease("schedule"), NS.lease("snapshot"))


def held_connections(node: ServerProcess) -> int:
    """Connections to the node's port accepted by its workers (the requests they hold)."""
    count = 0
    for worker in node.workers():
        try:
            count += sum(1 for c in worker.net_connections("tcp")
                         if c.status == psutil.CONN_ESTABLISHED and c.laddr.port == node.port)
        except psutil.Error:
            pass
    return count


def long_poll(url: str) -> tuple[float, dict]:
    response = requests.post(url + "/camellia/delayQueue/longPollingMsg", timeout=60,
                             data={"topic": "graceful", "longPollingTimeoutMillis": 50_000})
    return time.monotonic(), response.json()


def hold(pool, node, count):
    polls = [pool.submit(long_poll, node.url) for _ in range(count)]
    wait_until(lambda: held_connections(node) >= count, 15,
               message=lambda: f"{held_connections(node)} polls held")
    return polls


def answered_empty(polls, since: float, within_s: float) -> None:
    answers = [poll.result(timeout=GRACE_S) for poll in polls]
    assert all(body == {"code": 200, "msg": "success", "delayMsgList": []}
               for _, body in answers), answers
    slowest = max(at for at, _ in answers) - since
    assert slowest < within_s, f"held polls answered {slowest:.2f}s after the signal"


def test_offline_then_sigterm_drains_the_node(redis_server):
    with redis_server.leased_db_url() as url:
        client = redis.Redis.from_url(url, decode_responses=True)
        node = ServerProcess(url, workers=2,
                             settings={"graceful-timeout-seconds": GRACE_S}).start()
        try:
            wait_until(lambda: client.exists(LEASES[0]), 10, message="no lease taken")
            # 1. Drain for the load balancer: status says 500, the polls held by both
            #    workers are answered at once; the node still serves what reaches it.
            base = node.url + "/camellia/health/"
            with ThreadPoolExecutor(HELD) as pool:
                polls = hold(pool, node, HELD)
                offline_at = time.monotonic()
                assert requests.post(base + "offline", timeout=5).json() == {"code": 200}
                answered_empty(polls, offline_at, 3.0)
            assert requests.get(base + "status", timeout=5).status_code == 500
            assert node.call("sendMsg", topic="other", msg="still served")["code"] == 200
            node.call("sendMsg", topic="late", msg="for a poll", delayMillis=300)
            late = node.call("longPollingMsg", topic="late", longPollingTimeoutMillis=10_000)
            assert [m["msg"] for m in late["delayMsgList"]] == ["for a poll"]

            # 2. Consumers holding long polls again (nothing to deliver), then SIGTERM: every
            #    held poll answered, empty, long before its 50 s timeout and the grace.
            with ThreadPoolExecutor(HELD) as pool:
                polls = hold(pool, node, HELD)
                signalled = time.monotonic()
                node.process.send_signal(signal.SIGTERM)
                answered_empty(polls, signalled, 3.0)
            # 3. The node exits 0 inside the grace period, its leases released.
            assert node.process.wait(timeout=GRACE_S) == 0
            exited = time.monotonic() - signalled
            assert exited < GRACE_S - 2, f"exited {exited:.1f}s after SIGTERM"
            assert client.exists(*LEASES) == 0
            log = node.log_path.read_text(errors="replace")
            assert "graceful timeout" not in log.lower(), log[-2000:]
            # The message sent while offline is still there for the other nodes.
            assert client.zcard(NS.topic("other").ready) == 1
        finally:
            node.stop()
            client.close()
