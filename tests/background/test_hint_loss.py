"""Invariant 8: pub/sub is only a hint. A held long poll gets a message whose hint was lost
within the safety interval, and at its due time once it has seen it."""

from __future__ import annotations

import redis

from delayqueue.core.keys import NamespaceKeys
from delayqueue.core.scripts import Scripts
from delayqueue.core.topic_config import server_defaults
from delayqueue.settings.config import load_settings

from support.fleet import hold_long_poll, wait_until_held
from support.node import ServerProcess

SAFETY_MS = 1000
# A stall of a busy machine may add this much (bench/ has the real figures); a waiter that
# missed its wake-up would come a whole safety interval later.
MARGIN_MS = SAFETY_MS // 2


def send_without_hint(client: redis.Redis, topic: str, msg_id: str, delay_ms: int) -> int:
    """Enqueue through the real send script, but publish its hint where nobody listens."""
    tk = NamespaceKeys("dq", "default").topic(topic)
    seconds, micros = client.time()
    now = seconds * 1000 + micros // 1000
    Scripts(client).send(tk, msg_id, "body", now, now + delay_ms, 60_000, 3, "",
                         "nobody-listens", server_defaults(load_settings(env={})))
    return now + delay_ms


def test_lost_hint_costs_at_most_the_safety_interval(redis_url, redis_client):
    with ServerProcess(redis_url, settings={"long-polling-safety-millis": SAFETY_MS}) as node:
        thread, out = hold_long_poll(node, "lost", 10_000)
        wait_until_held(redis_url, "lost", thread, out)  # its first pull found nothing
        ready_at = send_without_hint(redis_client, "lost", "m1", 0)
        thread.join(15)
        assert [m["msgId"] for m in out["answer"]["delayMsgList"]] == ["m1"]
        assert out["at"] - ready_at <= SAFETY_MS + MARGIN_MS, out["at"] - ready_at


def test_waiter_that_saw_the_due_time_wakes_at_it_without_any_hint(redis_url, redis_client):
    """The 0-hint of a new due time is lost too; after one safety re-check the first waiter
    knows the topic's next due time and wakes at it, not a safety interval later."""
    with ServerProcess(redis_url, settings={"long-polling-safety-millis": SAFETY_MS}) as node:
        thread, out = hold_long_poll(node, "due", 10_000)
        wait_until_held(redis_url, "due", thread, out)
        due = send_without_hint(redis_client, "due", "m2", 2 * SAFETY_MS + 500)
        thread.join(15)
        assert [m["msgId"] for m in out["answer"]["delayMsgList"]] == ["m2"]
        late_ms = out["at"] - due
        assert 0 <= late_ms <= MARGIN_MS, late_ms
