"""Dead letters (ours): which messages enter, listDeadMsg's cursor, redrive, purge, and
the queue's size and retention. The memory one costs: bench/dead_letter_memory.py."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import requests

from support import conformance as api
from support import wait_until
from support.lua import NS, read
from support.node import ServerProcess
from support.redis_server import RedisServer


def test_messages_that_end_with_status_6_enter_the_dead_letter_queue(node, topic):
    api.send(node, topic, msgId="n", maxRetry=1, attributes=json.dumps({"k": "v"}))
    api.pull_one(node, topic, "n")
    assert api.nack(node, topic, "n")["code"] == 200
    api.pull_one(node, topic, "n")
    assert api.nack(node, topic, "n")["code"] == 200            # deliveries used up
    api.send(node, topic, msgId="c", maxRetry=0)
    api.change_visibility(node, topic, "c", 0, api.pull_one(node, topic, "c")["receipt"])
    api.send(node, topic, msgId="t", maxRetry=0)
    api.pull_one(node, topic, "t", ackTimeoutMillis=300)           # times out, none left
    api.send(node, topic, msgId="e", ttlMillis=300)
    api.pull_one(node, topic, "e", ackTimeoutMillis=600)           # life ends while consumed
    api.send(node, topic, msgId="a")
    api.pull_one(node, topic, "a")
    assert api.ack(node, topic, "a")["code"] == 200                # 4
    api.send(node, topic, msgId="d", delayMillis=60_000)
    assert api.call(node, "deleteMsg", topic=topic, msgId="d")["code"] == 200   # 7
    api.send(node, topic, msgId="x", ttlMillis=200)                # 5, never delivered
    wait_until(lambda: [api.status(node, topic, i) for i in "tex"] == [6, 6, 5], 10)
    assert api.status(node, topic, "n") == 6 and api.status(node, topic, "c") == 6
    assert api.dead_size(node, topic) == 4
    reply = api.list_dead(node, topic)
    entries = {m["msgId"]: m for m in reply["delayMsgList"]}
    assert set(entries) == {"n", "c", "t", "e"}
    assert "nextCursor" not in reply
    for m in entries.values():
        assert m["status"] == 6 and isinstance(m["deadTime"], int)
        assert "receipt" not in m and api.CAMELLIA_FIELDS <= set(m)
    assert entries["n"]["retry"] == 2 and entries["n"]["attributes"] == {"k": "v"}
    dead_times = [m["deadTime"] for m in reply["delayMsgList"]]
    assert dead_times == sorted(dead_times)
    assert [m["msgId"] for m in reply["delayMsgList"]][:2] == ["n", "c"]   # oldest death first
    assert api.get_msg(node, topic, "n")["status"] == 6


def test_dead_letters_outlive_end_life_retention_unless_dead_letter_is_off(short_node,
                                                                           topic):
    off = topic + "-off"
    api.set_config(short_node, off, deadLetter="false")
    api.kill(short_node, topic, "kept")
    api.kill(short_node, off, "dropped")
    assert api.list_dead(short_node, off)["delayMsgList"] == []
    assert api.dead_size(short_node, off) == 0
    # end-life-msg-expire-millis is 500 ms on this node.
    wait_until(lambda: api.get(short_node, off, "dropped")["code"] == 404, 10)
    assert api.get_msg(short_node, topic, "kept")["status"] == 6
    assert api.dead_ids(short_node, topic) == ["kept"]
    assert api.dead_size(short_node, topic) == 1


def test_a_resend_of_a_dead_msg_id_replaces_the_dead_letter(node, topic):
    """Decision: a dead letter is an ended message, so a send of its msgId replaces it (as
    for any retained ended message) and it leaves the dead-letter queue; a redrive never
    touches the new, live message."""
    api.kill(node, topic, "x")
    reply = api.call(node, "sendMsg", topic=topic, msgId="x", msg="second", delayMillis=60_000)
    assert reply["code"] == 200 and "duplicate" not in reply
    assert reply["delayMsg"]["status"] == 1 and reply["delayMsg"]["retry"] == 0
    assert api.dead_ids(node, topic) == [] and api.dead_size(node, topic) == 0
    assert api.call(node, "redriveDeadMsg", topic=topic, msgId="x")["code"] == 404
    assert api.call(node, "redriveDeadMsg", topic=topic)["count"] == 0
    assert api.call(node, "purgeDeadMsg", topic=topic)["count"] == 0
    m = api.get_msg(node, topic, "x")
    assert (m["status"], m["msg"]) == (1, "second")
    data = api.info(node, topic)
    assert (data["waitingQueueSize"], data["readyQueueSize"]) == (1, 0)


def test_delete_with_release_of_a_dead_letter_removes_it_from_the_dead_letter_queue(
        node, topic, raw_redis):
    """Decision: deleteMsg of a dead letter answers 404 (an ended message, as documented);
    with release=true its body goes, and so does its dead-letter entry (no phantom)."""
    api.kill(node, topic, "x")
    api.kill(node, topic, "y")
    assert api.call(node, "deleteMsg", topic=topic, msgId="x")["code"] == 404
    assert api.dead_ids(node, topic) == ["x", "y"]
    assert api.call(node, "deleteMsg", topic=topic, msgId="x", release="true")["code"] == 404
    assert api.get(node, topic, "x")["code"] == 404
    assert api.dead_ids(node, topic) == ["y"] and api.dead_size(node, topic) == 1
    assert api.call(node, "redriveDeadMsg", topic=topic)["count"] == 1
    assert [m["msgId"] for m in api.pull(node, topic, batch=10)] == ["y"]
    assert read(raw_redis, NS.topic(topic), "x") == (None, None)     # not even retained


def test_list_dead_msg_pages_with_a_cursor_without_gaps_or_repeats(node, topic):
    together = [f"t{i:02d}" for i in range(15)]
    for msg_id in together:
        api.send(node, topic, msgId=msg_id, maxRetry=0)
    assert len(api.pull(node, topic, batch=15, ackTimeoutMillis=300)) == 15
    wait_until(lambda: api.dead_size(node, topic) == 15, 10)   # one timeout sweep: equal deadTimes
    one_by_one = [f"n{i:02d}" for i in range(10)]
    for msg_id in one_by_one:
        api.kill(node, topic, msg_id)
    first = api.list_dead(node, topic, limit=10)
    assert len(first["delayMsgList"]) == 10 and first["nextCursor"]
    late = [f"z{i}" for i in range(3)]
    for msg_id in late:                           # more deaths while paging: at the end
        api.kill(node, topic, msg_id)
    pages = [first["delayMsgList"]]
    cursor = first["nextCursor"]
    while cursor:
        reply = api.list_dead(node, topic, limit=10, cursor=cursor)
        pages.append(reply["delayMsgList"])
        cursor = reply.get("nextCursor")
        assert len(pages) < 10
    assert [len(p) for p in pages] == [10, 10, 8]
    seen = [m["msgId"] for page in pages for m in page]
    assert len(seen) == len(set(seen)) == 28
    assert set(seen) == set(together + one_by_one + late)
    assert seen[-3:] == late
    dead_times = [m["deadTime"] for page in pages for m in page]
    assert dead_times == sorted(dead_times)
    assert api.dead_size(node, topic) == 28


def test_list_dead_msg_validates_limit_and_cursor(node, topic):
    api.kill(node, topic, "a")
    reply = api.list_dead(node, topic)
    assert [m["msgId"] for m in reply["delayMsgList"]] == ["a"] and "nextCursor" not in reply
    for bad in (0, 1001, -1):
        status_code, reply = api.post(node, "listDeadMsg", topic=topic, limit=bad)
        assert reply["code"] == 400 and reply["msg"].startswith("limit"), (bad, reply)
    status_code, reply = api.post(node, "listDeadMsg", topic=topic, limit="ten")
    assert status_code == 400 and reply["code"] == 400
    status_code, reply = api.post(node, "listDeadMsg", topic=topic, cursor="not a cursor")
    assert reply["code"] == 400 and reply["msg"].startswith("cursor"), reply
    empty = api.list_dead(node, topic + "-unknown")
    assert empty["delayMsgList"] == [] and "nextCursor" not in empty


def test_redrive_one_then_the_oldest_then_the_rest(node, topic, raw_redis):
    receipts = {msg_id: api.kill(node, topic, msg_id, ttlMillis=5000,
                                 attributes=json.dumps({"id": msg_id})) for msg_id in "abcde"}
    api.set_config(node, topic, ttlMillis=120_000)
    api.send(node, topic, msgId="sibling")                     # ready before the redrive
    before = api.redis_now_ms(raw_redis)
    reply = api.call(node, "redriveDeadMsg", topic=topic, msgId="c")
    after = api.redis_now_ms(raw_redis)
    assert reply == {"code": 200, "msg": "success", "count": 1}
    m = api.get_msg(node, topic, "c")
    assert m["status"] == 2 and m["retry"] == 0 and m["maxRetry"] == 0
    assert before - api.CLOCK_SLACK <= m["triggerTime"] <= after
    assert m["expireTime"] == m["triggerTime"] + 120_000
    assert m["attributes"] == {"id": "c"}
    assert api.dead_ids(node, topic) == ["a", "b", "d", "e"]
    assert api.call(node, "redriveDeadMsg", topic=topic, msgId="c")["code"] == 404
    assert api.call(node, "redriveDeadMsg", topic=topic, msgId="ghost")["code"] == 404
    assert api.call(node, "redriveDeadMsg", topic=topic, limit=2)["count"] == 2   # the oldest
    assert api.dead_ids(node, topic) == ["d", "e"]
    assert api.call(node, "redriveDeadMsg", topic=topic)["count"] == 2
    assert api.call(node, "redriveDeadMsg", topic=topic)["count"] == 0
    assert api.dead_size(node, topic) == 0
    got = api.pull(node, topic, batch=10)
    # Redriven ones queue at the tail, in the order they were redriven (oldest death first).
    assert [x["msgId"] for x in got] == ["sibling", "c", "a", "b", "d", "e"]
    assert all(x["retry"] == 1 for x in got)
    # The receipt of the delivery before the death is stale now.
    api.assert_stale(api.ack(node, topic, "b", receipts["b"]))
    # A redriven maxRetry-0 message dies again on its nack.
    a = next(x for x in got if x["msgId"] == "a")
    assert api.nack(node, topic, "a", a["receipt"])["code"] == 200
    assert api.dead_ids(node, topic) == ["a"]


def test_redrive_all_in_slices_of_1000_and_purge_the_rest(node, topic):
    count = 1100
    url = node.url + api.API + "sendMsg"

    def send_slice(start):
        with requests.Session() as session:
            for i in range(start, count, 8):
                reply = session.post(url, data={"topic": topic, "msgId": f"m{i:04d}",
                                                "msg": "x", "maxRetry": 0}, timeout=15).json()
                assert reply["code"] == 200, reply

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(send_slice, range(8)))
    assert len(api.pull(node, topic, batch=1000, ackTimeoutMillis=300)) == 1000
    assert len(api.pull(node, topic, batch=100, ackTimeoutMillis=300)) == 100
    wait_until(lambda: api.dead_size(node, topic) == count, 15)
    assert api.call(node, "redriveDeadMsg", topic=topic, limit=1001)["code"] == 400
    assert api.call(node, "redriveDeadMsg", topic=topic)["count"] == 1000
    assert api.dead_size(node, topic) == 100
    assert api.info(node, topic)["readyQueueSize"] == 1000
    reply = api.call(node, "purgeDeadMsg", topic=topic)
    assert reply == {"code": 200, "msg": "success", "count": 100}
    assert api.dead_size(node, topic) == 0


def test_redrive_works_after_every_node_restarted(tmp_path, topic):
    server = RedisServer(tmp_path / "redis").start()
    try:
        with ThreadPoolExecutor(2) as pool:
            first = list(pool.map(lambda _: ServerProcess(server.url).start(), range(2)))
        try:
            api.kill(first[0], topic, "r1")
            api.kill(first[1], topic, "r2")
        finally:
            api.SESSION.close()
            with ThreadPoolExecutor(2) as pool:
                list(pool.map(lambda n: n.stop(), first))
        with ServerProcess(server.url) as fresh:
            assert api.dead_ids(fresh, topic) == ["r1", "r2"]
            assert api.call(fresh, "redriveDeadMsg", topic=topic, msgId="r2")["count"] == 1
            assert api.call(fresh, "redriveDeadMsg", topic=topic)["count"] == 1
            got = api.pull(fresh, topic, batch=10)
            assert [m["msgId"] for m in got] == ["r2", "r1"]
            assert api.dead_size(fresh, topic) == 0
            api.SESSION.close()
    finally:
        server.stop()


def test_purge_one_and_all(node, topic, raw_redis):
    for msg_id in "abcd":
        api.kill(node, topic, msg_id)
    reply = api.call(node, "purgeDeadMsg", topic=topic, msgId="b")
    assert reply == {"code": 200, "msg": "success", "count": 1}
    assert api.get(node, topic, "b")["code"] == 404               # decision: purged = gone
    assert api.call(node, "purgeDeadMsg", topic=topic, msgId="b")["code"] == 404
    assert api.dead_ids(node, topic) == ["a", "c", "d"]
    assert api.call(node, "purgeDeadMsg", topic=topic)["count"] == 3
    assert api.dead_ids(node, topic) == [] and api.dead_size(node, topic) == 0
    assert all(api.get(node, topic, i)["code"] == 404 for i in "acd")
    assert api.call(node, "purgeDeadMsg", topic=topic)["count"] == 0
    assert raw_redis.exists(NS.topic(topic).msgs, NS.topic(topic).ended) == 0


def test_dead_letter_max_size_drops_the_oldest(node, topic):
    api.set_config(node, topic, deadLetterMaxSize=3)
    for msg_id in "abcde":
        api.kill(node, topic, msg_id)
    assert api.dead_ids(node, topic) == ["c", "d", "e"]
    assert api.dead_size(node, topic) == 3
    api.set_config(node, topic, deadLetterMaxSize=1)               # lowering drops at once
    assert api.dead_ids(node, topic) == ["e"]
    assert api.dead_size(node, topic) == 1
    api.set_config(node, topic, deadLetterMaxSize=10)
    assert api.dead_ids(node, topic) == ["e"]


def test_dead_letter_retention_drops_it_when_it_passes(node, topic):
    api.set_config(node, topic, deadLetterRetentionMillis=500)
    api.kill(node, topic, "old")
    assert api.dead_ids(node, topic) == ["old"] and api.dead_size(node, topic) == 1
    killed = time.monotonic()
    wait_until(lambda: api.dead_size(node, topic) == 0 and api.dead_ids(node, topic) == [],
               15, interval_s=0.05)
    gone_after = time.monotonic() - killed
    print(f"\ndead letter with a 500 ms retention gone after {gone_after:.2f} s")
    assert api.get(node, topic, "old")["code"] == 404
    assert gone_after >= 0.4
