"""purgeTopic of 50,000 messages in slices while two consumers pull and ack: every message
ends exactly once (acked or purged), none is handed out after the purge answered, and the
topic ends empty. Standalone only: the other topologies run the small purge tests
(test_conformance_controls_purge.py), and this one alone takes ~20 s."""

from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from delayqueue.core.message import MESSAGE_FIELDS
from delayqueue.core.scripts import lua_source

from support import conformance as api
from support import wait_until
from support.lua import NS

TOTAL = 50_000
BATCH = 1000            # sendMsgBatch entries per request
SLICE = 10_000          # purgeTopic's limit: the purge takes several calls
STATUS = MESSAGE_FIELDS.index("s")


class Consumer:
    """Pulls and acks until stopped; records each delivery with the time its pull was sent."""

    def __init__(self, node, topic: str, stop: threading.Event) -> None:
        self.node, self.topic, self.stop = node, topic, stop
        self.session = requests.Session()           # its own connection: a thread of its own
        self.deliveries: list[tuple[str, float]] = []
        self.acked: list[str] = []
        self.pulls_started: list[float] = []

    def run(self) -> None:
        url = self.node.url + api.API
        deadline = time.monotonic() + 120
        while not self.stop.is_set() and time.monotonic() < deadline:
            started = time.monotonic()
            self.pulls_started.append(started)
            reply = self.session.post(url + "pullMsg", timeout=15, data={
                "topic": self.topic, "batch": 20, "ackTimeoutMillis": 600_000}).json()
            assert reply["code"] == 200, reply
            got = reply["delayMsgList"]
            self.deliveries += [(m["msgId"], started) for m in got]
            if not got:
                continue
            answer = self.session.post(url + "ackMsgBatch", timeout=15, json={
                "topic": self.topic,
                "acks": [{"msgId": m["msgId"], "receipt": m["receipt"]} for m in got]}).json()
            assert answer["code"] == 200, answer
            for m, result in zip(got, answer["results"]):
                assert result["code"] in (200, 404), result      # 404: purged meanwhile
                if result["code"] == 200:
                    self.acked.append(m["msgId"])
        self.session.close()


def final_statuses(raw_redis, topic: str, msg_ids: list[str]) -> Counter:
    """Each message's stored status, read by get.lua behind the node's back (one pipeline,
    not 50,000 requests)."""
    get = raw_redis.register_script(lua_source("get"))
    tk = NS.topic(topic)
    pipe = raw_redis.pipeline(transaction=False)
    for msg_id in msg_ids:
        get(keys=tk.queues, args=[msg_id, ""], client=pipe)
    return Counter(int(reply[STATUS]) if reply else None for reply in pipe.execute())


def test_50000_messages_purged_in_slices_while_two_consumers_pull_and_ack(
        backend, node, topic, raw_redis):
    if backend.name != "standalone":
        pytest.skip("the 50,000-message purge runs on standalone only")
    msg_ids = [f"m{i:05d}" for i in range(TOTAL)]
    for start in range(0, TOTAL, BATCH):
        status_code, reply = api.post_json(node, "sendMsgBatch", {"topic": topic, "msgs": [
            {"msg": "x", "msgId": msg_id} for msg_id in msg_ids[start:start + BATCH]]})
        assert status_code == 200 and {r["code"] for r in reply["results"]} == {200}, reply
    assert api.info(node, topic)["readyQueueSize"] == TOTAL

    stop = threading.Event()
    consumers = [Consumer(node, topic, stop) for _ in range(2)]
    with ThreadPoolExecutor(2) as pool:
        running = [pool.submit(c.run) for c in consumers]
        try:
            # Both consuming before the purge starts.
            wait_until(lambda: all(len(c.deliveries) >= 100 for c in consumers), 30)
            purged, calls = [], 0
            while calls < 20:
                count, remaining = api.purge(node, topic, limit=SLICE)
                calls += 1
                purged.append(count)
                if remaining == 0:
                    break
            answered_at = time.monotonic()
            assert remaining == 0, f"still {remaining} after {calls} calls"
            # Each consumer pulls at least twice more after the purge answered.
            wait_until(lambda: all(sum(t > answered_at for t in c.pulls_started) >= 2
                                   for c in consumers), 30)
        finally:
            stop.set()
            for future in running:
                future.result(timeout=60)

    deliveries = [d for c in consumers for d in c.deliveries]
    acked = [m for c in consumers for m in c.acked]
    delivered = Counter(m for m, _ in deliveries)
    print(f"\n{len(deliveries)} delivered, {len(acked)} acked, purged {purged} "
          f"in {calls} calls")
    assert max(delivered.values()) == 1                    # nothing handed out twice
    assert [m for m, started in deliveries if started > answered_at] == []
    assert len(set(acked)) == len(acked)
    assert sum(purged) + len(acked) == TOTAL               # each ended exactly once
    assert final_statuses(raw_redis, topic, msg_ids) == Counter(
        {4: len(acked), 7: sum(purged)})
    data = api.info(node, topic)
    assert (data["waitingQueueSize"], data["readyQueueSize"], data["ackQueueSize"],
            data["groupBlockedSize"]) == (0, 0, 0, 0)
    assert api.pull(node, topic, batch=10) == []
