"""getTopicInfo's waiting buckets at their exact edges (the service over the scripts, with a
hand-set clock).
"""

from __future__ import annotations

from delayqueue.core.monitor import Monitor
from delayqueue.core.queue import DelayQueue
from delayqueue.settings.config import load_settings

from support.lua import NS


def test_topic_info_buckets_are_half_open_at_their_edges(redis_client, scripts, clock):
    monitor = Monitor(redis_client, NS, clock, 60, scripts)
    queue = DelayQueue(redis_client, scripts, clock, monitor, load_settings(env={}))
    minute = 60_000
    edges = {"a": minute - 1, "b": minute, "c": 10 * minute - 1, "d": 10 * minute,
             "e": 30 * 24 * 60 * minute, "f": 30 * 24 * 60 * minute - 1, "g": 1}
    for msg_id, delay in edges.items():
        queue.send("edges", "x", msg_id=msg_id, delay_ms=delay)
    info = queue.topic_info("edges")["waitingQueueInfo"]
    assert info["sizeOf0To1min"] == 2              # g, a
    assert info["sizeOf1minTo10min"] == 2          # b, c
    assert info["sizeOf10minTo30min"] == 1         # d
    assert info["sizeOf7dayTo30day"] == 1          # f
    assert info["sizeOf30dayToInfinite"] == 1      # e
    assert sum(info.values()) == len(edges)
    clock.advance(2)                               # g is overdue now: still first bucket
    assert queue.topic_info("edges")["waitingQueueInfo"]["sizeOf0To1min"] == 3
