"""changeVisibilityBatch (ours): each entry answered exactly as changeVisibility answers it,
in request order; a malformed request refused whole with nothing written."""

from __future__ import annotations

import pytest
import requests

from support import conformance as api

BATCH_LIMIT = 1000      # the node's max-batch (the default)


def batch(node, topic, entries):
    status_code, reply = api.post_json(node, "changeVisibilityBatch",
                                       {"topic": topic, "entries": entries})
    assert status_code == 200 and reply["code"] == 200 and reply["msg"] == "success", reply
    assert len(reply["results"]) == len(entries), reply
    return reply["results"]


def test_mixed_entries_each_answer_as_change_visibility_would_in_order(node, topic, raw_redis):
    api.set_config(node, topic, redeliveryDelayMillis=60_000)   # no backoff for a give-up
    for msg_id in ("a", "b", "c"):
        api.send(node, topic, msgId=msg_id)
    pulled = api.pull(node, topic, batch=3, ackTimeoutMillis=60_000)
    receipts = {m["msgId"]: m["receipt"] for m in pulled}
    assert sorted(receipts) == ["a", "b", "c"]
    api.send(node, topic, msgId="waiting", delayMillis=60_000)
    api.send(node, topic, msgId="ready")
    before = api.redis_now_ms(raw_redis)
    results = batch(node, topic, [
        {"msgId": "a", "receipt": receipts["a"], "ackTimeoutMillis": 120_000},  # 0: extended
        {"msgId": "b", "receipt": "0.1", "ackTimeoutMillis": 1000},             # 1: stale
        {"msgId": "ghost", "ackTimeoutMillis": 1000},                           # 2: unknown
        {"msgId": "waiting", "ackTimeoutMillis": 1000},                         # 3: waiting
        {"msgId": "ready", "ackTimeoutMillis": 1000},                           # 4: ready
        {"msgId": "b", "receipt": receipts["b"], "ackTimeoutMillis": -1},       # 5: < 0
        {"receipt": receipts["c"], "ackTimeoutMillis": 1000},                   # 6: no msgId
        {"msgId": "c", "receipt": receipts["c"]},                               # 7: no timeout
        {"msgId": "c", "ackTimeoutMillis": "soon"},                             # 8: not a number
        "c",                                                                    # 9: no object
        {"msgId": "c", "receipt": receipts["c"], "ackTimeoutMillis": 0},        # 10: released
    ])
    after = api.redis_now_ms(raw_redis)
    assert [r["code"] for r in results] == [200, 409, 404, 400, 400, 400, 400, 400, 400, 400,
                                            200]
    assert results[0]["msg"] == "success" and results[0]["delayMsg"]["msgId"] == "a"
    assert results[0]["delayMsg"]["status"] == 3 and "receipt" not in results[0]["delayMsg"]
    deadline = api.ack_deadline(raw_redis, topic, "a")
    assert before + 120_000 - api.CLOCK_SLACK <= deadline <= after + 120_000
    assert results[10]["delayMsg"]["msgId"] == "c" and results[10]["delayMsg"]["status"] == 2
    assert results[5]["msg"] == "entries[5].ackTimeoutMillis: must be >= 0, got -1"
    assert results[6]["msg"].startswith("entries[6].msgId: ")
    assert results[7]["msg"].startswith("entries[7].ackTimeoutMillis: ")
    assert results[8]["msg"].startswith("entries[8].ackTimeoutMillis: ")
    assert results[9]["msg"] == "entries[9]: must be a JSON object, got str"
    # The refusals changed nothing: changeVisibility answers each exactly the same now.
    for i, (msg_id, receipt) in ((1, ("b", "0.1")), (2, ("ghost", None)),
                                 (3, ("waiting", None)), (4, ("ready", None))):
        assert api.change_visibility(node, topic, msg_id, 1000, receipt) == results[i], i
    _, single = api.post(node, "changeVisibility", topic=topic, msgId="b",
                         receipt=receipts["b"], ackTimeoutMillis=-1)
    assert results[5]["msg"] == "entries[5]." + single["msg"]
    assert api.status(node, topic, "b") == 3
    # The released one is ready again, behind "ready"; the extended one is not.
    again = api.pull(node, topic, batch=10, ackTimeoutMillis=60_000)
    assert [m["msgId"] for m in again] == ["ready", "c"]
    assert again[1]["retry"] == 2 and again[1]["receipt"] != receipts["c"]


def test_entries_apply_in_request_order(node, topic):
    api.send(node, topic, msgId="m")
    receipt = api.pull_one(node, topic, "m", ackTimeoutMillis=60_000)["receipt"]
    results = batch(node, topic, [
        {"msgId": "m", "receipt": receipt, "ackTimeoutMillis": 90_000},
        {"msgId": "m", "receipt": receipt, "ackTimeoutMillis": 0},      # given up
        {"msgId": "m", "receipt": receipt, "ackTimeoutMillis": 90_000},  # now ready: 400
    ])
    assert [r["code"] for r in results] == [200, 200, 400]
    assert [r["delayMsg"]["status"] for r in results[:2]] == [3, 2]
    assert results[2]["msg"].startswith("msgId: ") and "not being consumed" in results[2]["msg"]
    # Reversed, the same three leave it consuming: the release comes first.
    receipt = api.pull_one(node, topic, "m", ackTimeoutMillis=60_000)["receipt"]
    results = batch(node, topic, [
        {"msgId": "m", "receipt": receipt, "ackTimeoutMillis": 0},
        {"msgId": "m", "receipt": receipt, "ackTimeoutMillis": 90_000},
    ])
    assert [r["code"] for r in results] == [200, 400]
    assert api.status(node, topic, "m") == 2


def test_a_release_out_of_deliveries_ends_it_dead(node, topic):
    api.send(node, topic, msgId="z", maxRetry=0)
    api.send(node, topic, msgId="y")
    pulled = {m["msgId"]: m["receipt"] for m in api.pull(node, topic, batch=2)}
    results = batch(node, topic, [{"msgId": "z", "receipt": pulled["z"], "ackTimeoutMillis": 0},
                                  {"msgId": "y", "receipt": pulled["y"], "ackTimeoutMillis": 0}])
    assert [(r["code"], r["delayMsg"]["status"]) for r in results] == [(200, 6), (200, 2)]
    assert api.dead_ids(node, topic) == ["z"]
    assert [m["msgId"] for m in api.pull(node, topic, batch=10)] == ["y"]


# Each body as a function of the topic and one valid entry (the message's own receipt).
@pytest.mark.parametrize("body, rule", [
    (None, "body: a batch must be a JSON object"),
    (lambda t, e: [e], "body: a batch must be a JSON object"),
    (lambda t, e: {"entries": [e]}, "topic: required"),
    (lambda t, e: {"topic": t + "{", "entries": [e]}, "topic: must not contain"),
    (lambda t, e: {"topic": t}, "entries: required, a non-empty JSON array"),
    (lambda t, e: {"topic": t, "entries": []}, "entries: required, a non-empty JSON array"),
    (lambda t, e: {"topic": t, "entries": e}, "entries: required, a non-empty JSON array"),
    (lambda t, e: {"topic": t, "entries": [e] * (BATCH_LIMIT + 1)},
     f"entries: at most {BATCH_LIMIT} entries, got {BATCH_LIMIT + 1}"),
], ids=["not JSON", "an array", "no topic", "bad topic", "no entries", "empty entries",
        "entries an object", "too many"])
def test_a_malformed_request_is_refused_whole_and_writes_nothing(node, topic, raw_redis, body,
                                                                 rule):
    api.send(node, topic, msgId="m")
    receipt = api.pull_one(node, topic, "m", ackTimeoutMillis=60_000)["receipt"]
    before = api.dump(raw_redis, topic)
    url = node.url + api.API + "changeVisibilityBatch"
    if body is None:
        response = requests.post(url, data="{not json", timeout=15,
                                 headers={"Content-Type": "application/json"})
    else:
        entry = {"msgId": "m", "receipt": receipt, "ackTimeoutMillis": 0}
        response = requests.post(url, json=body(topic, entry), timeout=15)
    answer = response.json()
    assert response.status_code == 400 and answer["code"] == 400, answer
    assert answer["msg"].startswith(rule), answer
    assert api.dump(raw_redis, topic) == before
    assert api.status(node, topic, "m") == 3


def test_post_only(node, topic):
    response = requests.get(node.url + api.API + "changeVisibilityBatch",
                            params={"topic": topic}, timeout=15)
    assert response.status_code == 405
