"""The acceptance test of recurring schedules (issue 27 item 1): ``everyMillis=1000`` for
ten seconds on two real nodes, the one running the schedules loop killed with ``kill -9``
(master and workers) and restarted in the middle: every occurrence is written once, none is
skipped, and none is delivered before its fire time."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
import requests

from support import wait_until
from support.node import ServerProcess

pytestmark = pytest.mark.timeout(120)

TTL_MS = 2000                # lease-ttl-millis: the survivor takes the loop over this soon
RUN_S = 10.0
LEASE = "dq:{default}:lease:recurring"


def redis_now_ms(client) -> int:
    seconds, micros = client.time()
    return seconds * 1000 + micros // 1000


def test_every_occurrence_once_never_early_across_a_kill_9_and_restart(redis_url,
                                                                      redis_client):
    settings = {"lease-ttl-millis": TTL_MS}
    first = ServerProcess(redis_url, workers=2, settings=settings).start()
    second = None
    try:
        # The first node's workers take the loop's lease before the second node exists, so
        # the kill below is the kill of the loop's holder.
        wait_until(lambda: redis_client.exists(LEASE), 10, interval_s=0.05,
                   message="no worker took the recurring lease")
        second = ServerProcess(redis_url, workers=2, settings=settings).start()
        created = first.call("createSchedule", topic="every", scheduleId="s", msg="tick",
                             everyMillis=1000)
        assert created["code"] == 200, created
        start = created["data"]["nextFireTime"]
        received: list[tuple[str, int, int]] = []      # (msgId, triggerTime, Redis time)
        stop = threading.Event()
        errors: list[BaseException] = []

        def consume() -> None:
            """Long polls on the node that is never killed; every delivery acked."""
            session = requests.Session()
            try:
                while not stop.is_set():
                    reply = session.post(second.url + "/camellia/delayQueue/longPollingMsg",
                                         data={"topic": "every", "batch": 10,
                                               "longPollingTimeoutMillis": 500},
                                         timeout=10).json()
                    at = redis_now_ms(redis_client)
                    for m in reply.get("delayMsgList", []):
                        received.append((m["msgId"], m["triggerTime"], at))
                        session.post(second.url + "/camellia/delayQueue/ackMsg",
                                     data={"topic": "every", "msgId": m["msgId"],
                                           "receipt": m["receipt"]}, timeout=10)
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                errors.append(exc)

        consumer = threading.Thread(target=consume, daemon=True)
        consumer.start()
        time.sleep(RUN_S * 0.4)
        holder = redis_client.get(LEASE)
        assert holder, "the loop's lease is not held"
        os.killpg(first.process.pid, signal.SIGKILL)   # master and workers, no goodbye
        first.process.wait()
        time.sleep(RUN_S * 0.2)
        first.start()                                  # restarted on the same data
        time.sleep(RUN_S * 0.4)
        taken = redis_client.get(LEASE)
        assert taken and taken != holder, "no other worker took the loop over"
        deleted = second.call("deleteSchedule", topic="every", scheduleId="s")
        assert deleted["code"] == 200, deleted
        end = redis_now_ms(redis_client)
        # Every fire time written before the delete comes, then the consumer stops.

        def delivered_up_to_the_last_written() -> bool:
            fires = {int(msg_id.rpartition(":")[2]) for msg_id, _, _ in received}
            return bool(fires) and max(fires) >= end - 1000 - TTL_MS and all(
                f in fires for f in range(start, max(fires) + 1, 1000))

        wait_until(delivered_up_to_the_last_written, 15, interval_s=0.1,
                   message=lambda: f"received {sorted(r[0] for r in received)}")
        time.sleep(1.5)                                # nothing more may come
        stop.set()
        consumer.join(15)
        assert errors == []
        ids = [msg_id for msg_id, _, _ in received]
        assert len(ids) == len(set(ids)), f"an occurrence was delivered twice: {ids}"
        fires = [int(msg_id.rpartition(":")[2]) for msg_id in ids]      # delivery order
        # The first fire time is the create answer's nextFireTime, or the one before it: an
        # everyMillis schedule fires at its creation time + k x everyMillis, and k = 0 may be
        # due (and written by the loop) before the answer is made.
        assert fires[0] in (start - 1000, start), (start, fires)
        assert fires == list(range(fires[0], fires[-1] + 1, 1000)), f"skipped one: {fires}"
        assert fires[-1] - start >= (RUN_S - 2) * 1000, fires
        for msg_id, trigger, at in received:
            fire = int(msg_id.rpartition(":")[2])
            assert trigger >= fire and at >= fire, (msg_id, trigger, at)
        late = sum(1 for msg_id, trigger, _ in received
                   if trigger > int(msg_id.rpartition(":")[2]))
        print(f"\n{len(fires)} occurrences, every one once; {late} written after their fire "
              f"time (the lease takeover)")
    finally:
        if second is not None:
            second.stop()
        first.stop()
