"""Namespace bookkeeping (registry, due index) is never the truth about a message."""

from __future__ import annotations

import redis

from delayqueue.clock import ManualClock
from test_bounded_work import make_runtime


def test_send_answers_success_when_only_the_bookkeeping_after_its_script_fails(
        redis_url, redis_client, monkeypatch):
    """The message is stored by the script; a failed registry/due-index write must not turn
    that into a 500 (a client retry without msgId would then enqueue it twice)."""
    rt = make_runtime(redis_url, ManualClock())

    def broken_execute(self, *args, **kwargs):
        raise redis.ConnectionError("connection lost after the script")

    monkeypatch.setattr(redis.client.Pipeline, "execute", broken_execute)
    result = rt.queue.send("flaky", "x", delay_ms=1000)
    monkeypatch.undo()
    assert not result.duplicate
    assert rt.queue.get("flaky", result.message.msg_id).status == 1
    assert redis_client.zscore(rt.keys.topics, "flaky") is None   # retried on next use
    rt.queue.pull("flaky")
    assert redis_client.zscore(rt.keys.topics, "flaky") is not None
