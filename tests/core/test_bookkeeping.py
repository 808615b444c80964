"""Namespace bookkeeping (registry, due index) is never the truth about a message."""

from __future__ import annotations

import redis
from test_bounded_work import make_runtime

from delayqueue.core.clock import ManualClock


def test_send_answers_success_when_only_the_bookkeeping_after_its_script_fails(
        redis_url, redis_client, monkeypatch):
    """The message is stored by the script; a failed bookkeeping write after it must not
    turn that into a 500 (a client retry without msgId would then enqueue it twice). On one
    Redis the script lowers the due index itself and the registry bump rides in its round
    trip; what is left after it, the "0 <topic>" hint of a due time within the hint horizon,
    goes in a pipeline of its own, which is made to fail here."""
    rt = make_runtime(redis_url, ManualClock())
    execute = redis.client.Pipeline.execute
    failed = []

    def bookkeeping_fails(self, *args, **kwargs):
        if not any(command[0] == "EVALSHA" for command, _ in self.command_stack):
            failed.append([command[0] for command, _ in self.command_stack])
            raise redis.ConnectionError("connection lost after the script")
        return execute(self, *args, **kwargs)

    monkeypatch.setattr(redis.client.Pipeline, "execute", bookkeeping_fails)
    result = rt.queue.send("flaky", "x", delay_ms=500)
    monkeypatch.undo()
    assert failed == [["PUBLISH"]]
    assert not result.duplicate
    assert rt.queue.get("flaky", result.message.msg_id).status == 1
    assert redis_client.zscore(rt.keys.topics, "flaky") is not None
    assert redis_client.zscore(rt.keys.due, "flaky") == result.message.trigger_time
    rt.queue.send("flaky", "y", delay_ms=200)
    assert redis_client.zscore(rt.keys.due, "flaky") == result.message.trigger_time - 300


def test_a_topic_its_consumers_promote_is_visited_later_one_without_them_exactly(
        redis_url, redis_client):
    """schedule-defer-millis: a visit that finds nothing to do (a pull promoted the topic
    first) puts the topic's next visit that much after its next due time; a visit that does
    work keeps it exact."""
    clock = ManualClock()
    rt = make_runtime(redis_url, clock)
    defer = rt.settings.schedule_defer_millis
    assert defer > 0
    t0 = clock.now_ms()
    for topic in ("consumed", "unconsumed"):
        rt.queue.send(topic, "a", msg_id="a", delay_ms=1000)
        rt.queue.send(topic, "b", msg_id="b", delay_ms=2000)
    clock.advance(1000)
    assert [m.msg_id for m in rt.queue.pull("consumed").messages] == ["a"]
    rt.scheduler.run_due()
    due = dict(redis_client.zrange(rt.keys.due, 0, -1, withscores=True))
    assert due["unconsumed"] == t0 + 2000
    assert due["consumed"] == t0 + 2000 + defer
    assert rt.queue.get("unconsumed", "a").status == 2
    # The deferred visit promotes "b" (nobody pulled it): the next one is exact again.
    clock.advance(1000 + defer)
    rt.queue.send("consumed", "c", msg_id="c", delay_ms=500)
    rt.scheduler.run_due()
    assert rt.queue.get("consumed", "b").status == 2
    assert redis_client.zscore(rt.keys.due, "consumed") == clock.now_ms() + 500
