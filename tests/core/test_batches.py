"""sendMsgBatch, ackMsgBatch, deleteMsgBatch, changeVisibilityBatch: per-entry answers in order,
a malformed request refused whole with nothing written, and one Redis round trip per batch."""

from __future__ import annotations

import hashlib
import time
import uuid

import pytest
import redis
import requests
from test_bounded_work import make_runtime

from delayqueue.core.clock import ManualClock
from delayqueue.core.errors import BadRequest, DelayQueueError
from delayqueue.core.requests import AckRequest, SendRequest, VisibilityRequest

from support.node import ServerProcess
from support.redis_server import RedisServer
from support.round_trips import RoundTrips

BATCH_LIMIT = 1000


@pytest.fixture(scope="module")
def node_and_db(redis_server):
    """One node for the module, on a Redis database of its own."""
    with redis_server.leased_db_url() as url, ServerProcess(url) as node:
        yield node, redis.Redis.from_url(url, decode_responses=True)


@pytest.fixture
def server(node_and_db):
    return node_and_db[0]


@pytest.fixture
def topic(request):
    return f"{request.node.name[:40]}-{uuid.uuid4().hex[:8]}"


def post(node, endpoint: str, body) -> tuple[int, dict]:
    response = requests.post(f"{node.url}/camellia/delayQueue/{endpoint}", json=body,
                             timeout=15)
    return response.status_code, response.json()


def codes(envelope: dict) -> list[int]:
    assert envelope["code"] == 200, envelope
    return [entry["code"] for entry in envelope["results"]]


def test_send_batch_answers_each_entry_in_order(server, topic):
    status, first = post(server, "sendMsgBatch", {"topic": topic, "msgs": [{"msg": "a",
                                                                            "msgId": "dup"}]})
    assert status == 200 and codes(first) == [200]
    status, answer = post(server, "sendMsgBatch", {"topic": topic, "msgs": [
        {"msg": "one", "msgId": "m1", "delayMillis": 60_000},
        {"msgId": "no-body"},
        {"msg": "again", "msgId": "dup"},
        "not an object",
        {"msg": "two", "msgId": "m2", "attributes": {"k": "v"}, "maxRetry": 2},
        {"msg": "three", "delayMillis": 5, "triggerTime": 10},
        {"msg": "x" * 10, "msgId": "i" * 10_000},
    ]})
    assert status == 200
    results = answer["results"]
    assert codes(answer) == [200, 400, 200, 400, 200, 400, 400]
    assert results[0]["delayMsg"]["msgId"] == "m1" and results[0]["delayMsg"]["status"] == 1
    assert "duplicate" not in results[0]
    assert results[1]["msg"].startswith("msgs[1].msg: ")
    assert results[2]["duplicate"] is True and results[2]["delayMsg"]["msg"] == "a"
    assert results[3]["msg"] == "msgs[3]: must be a JSON object, got str"
    assert results[4]["delayMsg"]["attributes"] == {"k": "v"}
    assert results[4]["delayMsg"]["maxRetry"] == 2 and results[4]["delayMsg"]["status"] == 2
    assert results[5]["msg"].startswith("msgs[5].delayMillis, triggerTime: ")
    assert results[6]["msg"].startswith("msgs[6].msgId: must be at most")
    # What the batch said it stored is what getMsg reads.
    for msg_id, status_code in (("m1", 1), ("m2", 2), ("dup", 2)):
        assert server.call("getMsg", topic=topic, msgId=msg_id)["delayMsg"]["status"] == \
            status_code


def test_ack_batch_mixes_acks_nacks_stale_and_unknown(server, topic):
    _, sent = post(server, "sendMsgBatch", {"topic": topic, "msgs": [
        {"msg": str(i), "msgId": f"m{i}"} for i in range(5)] + [
        {"msg": "later", "msgId": "later", "delayMillis": 60_000}]})
    assert codes(sent) == [200] * 6
    pulled = server.call("pullMsg", topic=topic, batch=5, ackTimeoutMillis=60_000)
    receipts = {m["msgId"]: m["receipt"] for m in pulled["delayMsgList"]}
    assert sorted(receipts) == [f"m{i}" for i in range(5)]
    status, answer = post(server, "ackMsgBatch", {"topic": topic, "acks": [
        {"msgId": "m0", "receipt": receipts["m0"]},
        {"msgId": "m1", "receipt": "0.1"},                        # stale receipt
        {"msgId": "m2", "receipt": receipts["m2"], "ack": False},  # nack: ready again
        {"msgId": "nobody"},
        {"msgId": "later"},                                        # never delivered
        {"receipt": "x"},                                          # no msgId
        {"msgId": "m3", "ack": False, "delayMillis": -1},
        {"msgId": "m0", "receipt": receipts["m0"]},                # acked already: 200
        {"msgId": "m4"},
    ]})
    assert status == 200
    assert codes(answer) == [200, 409, 200, 404, 400, 400, 400, 200, 200]
    assert answer["results"][5]["msg"].startswith("acks[5].msgId: ")
    assert answer["results"][6]["msg"] == "acks[6].delayMillis: must be >= 0, got -1"
    state = {m: server.call("getMsg", topic=topic, msgId=m)["delayMsg"]["status"]
             for m in ("m0", "m1", "m2", "m3", "m4")}
    assert state == {"m0": 4, "m1": 3, "m2": 2, "m3": 3, "m4": 4}


def test_delete_batch(server, topic):
    post(server, "sendMsgBatch", {"topic": topic, "msgs": [{"msg": "a", "msgId": "a"},
                                                            {"msg": "b", "msgId": "b"}]})
    status, answer = post(server, "deleteMsgBatch", {"topic": topic, "msgIds": [
        "a", "nobody", 7, "b", "a"]})
    assert status == 200 and codes(answer) == [200, 404, 400, 200, 404]
    assert answer["results"][2]["msg"] == "msgIds[2]: must be a string, got int"
    assert server.call("getMsg", topic=topic, msgId="a")["delayMsg"]["status"] == 7


@pytest.mark.parametrize("endpoint, body, rule", [
    ("sendMsgBatch", None, "body: a batch must be a JSON object"),
    ("sendMsgBatch", [{"msg": "a"}], "body: a batch must be a JSON object"),
    ("sendMsgBatch", {"msgs": [{"msg": "a"}]}, "topic: required"),
    ("sendMsgBatch", {"topic": "a{b}", "msgs": [{"msg": "a"}]}, "topic: must not contain"),
    ("sendMsgBatch", {"topic": "t", "msgs": []}, "msgs: required, a non-empty JSON array"),
    ("sendMsgBatch", {"topic": "t", "msgs": {"msg": "a"}}, "msgs: required, a non-empty"),
    ("sendMsgBatch", {"topic": "t", "msgs": [{"msg": "a"}] * (BATCH_LIMIT + 1)},
     f"msgs: at most {BATCH_LIMIT} entries, got {BATCH_LIMIT + 1}"),
    ("ackMsgBatch", {"topic": "t", "msgIds": ["a"]}, "acks: required"),
    ("deleteMsgBatch", {"topic": "t", "msgIds": "a"}, "msgIds: required"),
    ("deleteMsgBatch", {"topic": "t", "msgIds": ["a"], "release": "maybe"},
     "release: must be a boolean"),
])
def test_a_malformed_batch_is_refused_whole_and_writes_nothing(node_and_db, endpoint, body,
                                                               rule):
    server, redis_client = node_and_db
    before = redis_client.dbsize()
    if body is None:
        response = requests.post(f"{server.url}/camellia/delayQueue/{endpoint}",
                                 data="{not json", timeout=15,
                                 headers={"Content-Type": "application/json"})
    else:
        response = requests.post(f"{server.url}/camellia/delayQueue/{endpoint}", json=body,
                                 timeout=15)
    answer = response.json()
    assert response.status_code == 400 and answer["code"] == 400, answer
    assert answer["msg"].startswith(rule), answer
    assert redis_client.dbsize() == before


@pytest.fixture
def own_redis(tmp_path):
    """A redis-server of this test alone: INFO commandstats counts only its calls (the
    module's node runs its scheduler on the shared one)."""
    server = RedisServer(tmp_path).start()
    try:
        yield server.url, redis.Redis.from_url(server.url, decode_responses=True)
    finally:
        server.stop()


def test_a_batch_is_one_round_trip_even_after_script_flush(own_redis, monkeypatch):
    redis_url, redis_client = own_redis
    rt = make_runtime(redis_url, ManualClock())
    queue = rt.queue
    # A first send registers the topic and lowers its due index (a second, small trip).
    queue.send("trips", "first", msg_id="first", delay_ms=10)
    before = redis_client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)
    trips = RoundTrips(monkeypatch)
    results = queue.send_batch("trips", [SendRequest(f"b{i}", f"id{i}", delay_ms=60_000)
                                         for i in range(250)])
    assert trips.count == 1
    monkeypatch.undo()
    assert [r.message.msg_id for r in results] == [f"id{i}" for i in range(250)]
    after = redis_client.info("commandstats")["cmdstat_evalsha"]["calls"]
    assert after - before == 3                         # a script call per 100 messages
    # After a Redis restart or failover the scripts are gone: the batch loads them once and
    # runs again only the calls Redis refused (they did nothing).
    redis_client.script_flush()
    trips = RoundTrips(monkeypatch)
    results = queue.send_batch("trips", [SendRequest("again", f"id{i}") for i in range(248, 253)])
    assert [r.duplicate for r in results] == [True, True, False, False, False]
    assert trips.count == 3                            # the batch, SCRIPT LOAD, the rerun
    monkeypatch.undo()
    assert redis_client.zcard(rt.queue.topic_keys("trips").waiting) == 251
    assert redis_client.zcard(rt.queue.topic_keys("trips").ready) == 3


def test_a_message_whose_writes_fail_answers_its_error_and_the_others_stand(own_redis):
    """send.lua takes up to 100 messages a call; each runs under pcall, so one that fails in
    Lua (here: a record that cannot be decoded sits at its slot) answers its own error, as
    its own call would, and the messages before and after it are stored."""
    redis_url, redis_client = own_redis
    rt = make_runtime(redis_url, ManualClock())
    tk = rt.queue.topic_keys("broken")
    redis_client.hset(tk.msgs, hashlib.sha1(b"bad").hexdigest()[:14], "\x01")
    results = rt.queue.send_batch("broken", [SendRequest("a", "m1"), SendRequest("b", "bad"),
                                             SendRequest("c", "m2", delay_ms=5000)])
    assert isinstance(results[1], DelayQueueError) and results[1].code == 500
    assert "redis unavailable: ResponseError" in str(results[1])
    assert [results[0].message.status, results[2].message.status] == [2, 1]
    ready = [member[12:] for member in redis_client.zrange(tk.ready, 0, -1)]   # <seq><slot>
    waiting = [member[12:] for member in redis_client.zrange(tk.waiting, 0, -1)]
    assert ready + waiting == [
        hashlib.sha1(msg_id).hexdigest()[:14] for msg_id in (b"m1", b"m2")]
    assert rt.queue.get("broken", "m2").msg == "c"


def test_equal_msg_ids_in_one_call_store_the_first(own_redis):
    redis_url, _ = own_redis
    rt = make_runtime(redis_url, ManualClock())
    results = rt.queue.send_batch("twice", [SendRequest("first", "same"),
                                            SendRequest("second", "same")])
    assert [r.duplicate for r in results] == [False, True]
    assert results[1].message.msg == "first" == rt.queue.get("twice", "same").msg


def test_one_hint_per_call_names_how_many_messages_are_ready(own_redis):
    """Held long polls wake as many waiters as the hint counts: a call that makes three
    messages ready at once publishes "3 <topic>", once; a call with none ready, nothing."""
    redis_url, redis_client = own_redis
    rt = make_runtime(redis_url, ManualClock())
    subscriber = redis_client.pubsub(ignore_subscribe_messages=True)
    subscriber.subscribe(rt.keys.hint_channel)
    try:
        rt.queue.send_batch("hints", [SendRequest("later", "later", delay_ms=60_000)])
        rt.queue.send_batch("hints", [SendRequest(f"b{i}", f"now{i}") for i in range(3)]
                            + [SendRequest("later2", "later2", delay_ms=60_000)])
        hints = []
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            message = subscriber.get_message(timeout=0.1)   # None also for the subscribe ack
            if message is not None:
                hints.append(message["data"])
    finally:
        subscriber.close()
    assert [h for h in hints if h.endswith(" hints")] == ["3 hints"]


def test_runs_of_acks_go_as_one_script_call_and_answer_in_order(own_redis):
    """ackMsgBatch sends each run of acks between nacks as one ack.lua call (up to 100 acks
    a call), each ack on its own; the answers stay in the entries' order."""
    redis_url, redis_client = own_redis
    rt = make_runtime(redis_url, ManualClock())
    queue = rt.queue
    queue.send_batch("runs", [SendRequest(str(i), f"m{i}") for i in range(8)])
    receipts = {m.msg_id: m.receipt for m in queue.pull("runs", count=8).messages}
    # Both scripts loaded first (a script's first call in a batch is answered NOSCRIPT).
    queue.ack_batch("runs", [AckRequest("m6"), AckRequest("m7", ack=False)])
    before = redis_client.info("commandstats")["cmdstat_evalsha"]["calls"]
    entries = [AckRequest(f"m{i}", receipts[f"m{i}"]) for i in range(3)] + [
        AckRequest("m3", receipts["m3"], False),
        AckRequest("m4", "0.1"),                      # stale receipt: its own answer
        AckRequest("ghost"),
        AckRequest("m5", receipts["m5"]),
        AckRequest("m0", receipts["m0"])]             # acked already, earlier in this batch
    results = queue.ack_batch("runs", entries)
    assert redis_client.info("commandstats")["cmdstat_evalsha"]["calls"] - before == 3
    assert [getattr(r, "code", 200) for r in results] == [200, 200, 200, 200, 409, 404, 200,
                                                          200]
    assert [results[i].msg_id for i in (0, 1, 2, 3, 6, 7)] == ["m0", "m1", "m2", "m3", "m5",
                                                               "m0"]
    assert {m: queue.get("runs", m).status for m in ("m0", "m3", "m4", "m5")} == {
        "m0": 4, "m3": 2, "m4": 3, "m5": 4}


def test_a_visibility_batch_is_one_round_trip_and_counts_the_messages_it_ends(own_redis,
                                                                              monkeypatch):
    """A change_visibility.lua call per entry, all in one round trip; a release that ends a
    message (its deliveries used up) counts it ended and dead-lettered, as changeVisibility
    does, and the others count nothing."""
    redis_url, redis_client = own_redis
    rt = make_runtime(redis_url, ManualClock())
    queue = rt.queue
    queue.send_batch("vis", [SendRequest("a", "last", max_retry=0),
                             SendRequest("b", "more"), SendRequest("c", "held")])
    receipts = {m.msg_id: m.receipt for m in queue.pull("vis", count=3).messages}
    # The script loaded (a script's first call in a batch is answered NOSCRIPT).
    assert queue.change_visibility_batch("vis", [VisibilityRequest("ghost", 1)])[0].code == 404
    rt.monitor.flush()
    before_calls = redis_client.info("commandstats")["cmdstat_evalsha"]["calls"]
    before = rt.monitor.totals()["topics"]["vis"]
    trips = RoundTrips(monkeypatch)
    results = queue.change_visibility_batch("vis", [
        VisibilityRequest("last", 0, receipts["last"]),
        VisibilityRequest("more", 0, receipts["more"]),
        BadRequest("entries[2].msgId: required parameter is missing or empty"),
        VisibilityRequest("held", 60_000, receipts["held"]),
        VisibilityRequest("held", 60_000, "0.1")])
    assert trips.count == 1
    monkeypatch.undo()
    assert redis_client.info("commandstats")["cmdstat_evalsha"]["calls"] - before_calls == 4
    assert [getattr(r, "code", 200) for r in results] == [200, 200, 400, 200, 409]
    assert [results[i].status for i in (0, 1, 3)] == [6, 2, 3]
    rt.monitor.flush()
    after = rt.monitor.totals()["topics"]["vis"]
    assert {name: after[name] - before[name] for name in
            ("triggerMsgEndLife", "deadLettered", "nackMsg", "ackMsg")} == {
        "triggerMsgEndLife": 1, "deadLettered": 1, "nackMsg": 0, "ackMsg": 0}


def test_a_send_batch_counts_replaced_and_deduplicated_sends(own_redis):
    """A replace counts as replaced and as a send (it enqueues a new delivery state); a
    duplicate, of a live message or of one ended inside the dedup window, as deduplicated and
    not as a send; a refused replace as neither."""
    redis_url, _ = own_redis
    rt = make_runtime(redis_url, ManualClock())
    queue = rt.queue
    rt.admin.set_config("dedup", {"dedupWindowMillis": 60_000})
    queue.send_batch("dedup", [SendRequest("x", "live", delay_ms=5_000),
                               SendRequest("x", "ended"), SendRequest("x", "busy")])
    pulled = {m.msg_id: m for m in queue.pull("dedup", count=2).messages}
    queue.ack("dedup", "ended", pulled["ended"].receipt)
    rt.monitor.flush()
    before = rt.monitor.totals()["topics"]["dedup"]
    results = queue.send_batch("dedup", [
        SendRequest("y", "live", on_duplicate="replace"),
        SendRequest("y", "live"),
        SendRequest("y", "ended", on_duplicate="replace"),
        SendRequest("y", "busy", on_duplicate="replace"),
        SendRequest("y", "new", on_duplicate="replace")])
    assert [getattr(r, "code", 200) for r in results] == [200, 200, 200, 409, 200]
    assert [(r.replaced, r.duplicate) for i, r in enumerate(results) if i != 3] == [
        (True, False), (False, True), (False, True), (False, False)]
    rt.monitor.flush()
    after = rt.monitor.totals()["topics"]["dedup"]
    assert {name: after.get(name, 0) - before.get(name, 0)
            for name in ("sendMsg", "replaced", "deduplicated")} == {
        "sendMsg": 2, "replaced": 1, "deduplicated": 2}
