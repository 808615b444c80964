"""getTopicInfo and getTopicInfoList: the shape, the queue sizes and the waiting-time
buckets."""

from __future__ import annotations

import pytest

from support import conformance as api

pytestmark = pytest.mark.every_topology


def test_topic_info_shape_and_sizes(node, topic):
    api.send(node, topic, msgId="w", delayMillis=60_000 * 20)
    api.send(node, topic, msgId="r")
    api.send(node, topic, msgId="c")
    api.pull(node, topic)
    status_code, reply = api.post(node, "getTopicInfo", topic=topic)
    assert status_code == 200 and reply["code"] == 200
    data = reply["data"]
    assert list(data) == ["topic", "waitingQueueSize", "waitingQueueInfo", "readyQueueSize",
                          "ackQueueSize", "deadQueueSize",         # the last three are ours
                          "groupBlockedSize", "paused", "subscriptions"]
    assert data["paused"] is False
    # Every subscription with its sizes: here only the default one, the same sizes.
    assert [(i["subscription"], i["readyQueueSize"], i["ackQueueSize"])
            for i in data["subscriptions"]] == [("default", 1, 1)]
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
        api.send(node, topic, msgId=msg_id, delayMillis=delay)
    # Exactly at an edge: by query time it is at the edge (counted in the upper bucket)
    # or a few ms under it (the lower one) -- never in both.
    for msg_id, delay in {"e1": minute, "e2": 10 * minute, "e3": 30 * minute}.items():
        api.send(node, topic, msgId=msg_id, delayMillis=delay)
    data = api.info(node, topic)
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
    api.send(node, topic, msgId="a")
    api.send(node, other, msgId="b", delayMillis=60_000)
    status_code, reply = api.post(node, "getTopicInfoList")
    assert status_code == 200 and reply["code"] == 200
    by_topic = {entry["topic"]: entry for entry in reply["data"]}
    assert by_topic[topic]["readyQueueSize"] == 1
    assert by_topic[other]["waitingQueueSize"] == 1
    assert "waitingQueueInfo" in by_topic[other]
