"""The long-poll hub's memory of quiet topics: it saves pull scripts, and never hides a message.

``long_poll`` runs in threads against a real Redis; the hub's subscriber is not started, so
hints are delivered by calling ``hub.dispatch`` as the subscriber would. Pull scripts are
counted with INFO commandstats.
"""

from __future__ import annotations

import threading
import time

import redis

from delayqueue.background.longpoll import Hub, long_poll
from delayqueue.background.runtime import Runtime
from delayqueue.settings.config import load_settings

from support import wait_until

SAFETY_S = 5.0


def make_runtime(redis_url: str) -> Runtime:
    settings = load_settings(overrides={"redis_url": redis_url, "snapshot_dir": ""})
    return Runtime(settings, client=redis.Redis.from_url(redis_url, decode_responses=True))


def script_calls(client: redis.Redis) -> int:
    stats = client.info("commandstats")
    return sum(stats.get(f"cmdstat_{name}", {}).get("calls", 0) for name in ("evalsha", "eval"))


def hold(rt: Runtime, topic: str, timeout_ms: int) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def run() -> None:
        out["result"] = long_poll(rt.queue, rt.hub, rt.clock, topic, 1, None, timeout_ms,
                                  SAFETY_S)
        out["at"] = time.monotonic()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def test_a_new_long_poll_on_a_quiet_topic_runs_no_pull_script(redis_url, redis_client):
    rt = make_runtime(redis_url)
    leader, _ = hold(rt, "quiet", 3000)
    wait_until(lambda: rt.hub.quiet("quiet", rt.clock.now_ms(), SAFETY_S) is not None, 5,
               interval_s=0.01, message="the first poll never noted the topic quiet")
    before = script_calls(redis_client)
    follower, out = hold(rt, "quiet", 300)
    follower.join(5)
    # Only the pull at its own deadline ran: the first one was answered by the hub's memory.
    assert out["result"].messages == []
    assert script_calls(redis_client) - before == 1
    leader.join(5)


def test_a_hint_makes_waiters_that_trusted_the_memory_pull_again(redis_url, redis_client):
    rt = make_runtime(redis_url)
    first, first_out = hold(rt, "hinted", 5000)
    wait_until(lambda: rt.hub.quiet("hinted", rt.clock.now_ms(), SAFETY_S) is not None, 5,
               interval_s=0.01, message="the first poll never noted the topic quiet")
    second, second_out = hold(rt, "hinted", 1500)
    wait_until(lambda: rt.hub.held() == 2, 5, interval_s=0.01, message="two polls not held")
    sent = rt.queue.send("hinted", "now", delay_ms=0).message
    assert rt.hub.quiet("hinted", rt.clock.now_ms(), SAFETY_S) is not None  # hint not yet in
    rt.hub.dispatch("1 hinted")                                            # ...now it is
    assert rt.hub.quiet("hinted", rt.clock.now_ms(), SAFETY_S) is None
    first.join(5)
    assert [m.msg_id for m in first_out["result"].messages] == [sent.msg_id]
    assert "result" not in second_out          # still held, nothing for it
    second.join(5)
    assert second_out["result"].messages == []


def test_the_memory_ends_at_the_next_due_time_and_after_its_max_age(redis_url, redis_client):
    hub = Hub(redis_client, "unused")
    hub.register("t")
    seq = hub.seq("t")
    hub.note_quiet("t", seq, next_due_ms=10_000)
    assert hub.quiet("t", 9_999, max_age_s=60) is not None
    assert hub.quiet("t", 10_000, max_age_s=60) is None       # due: someone must look
    assert hub.quiet("t", 9_999, max_age_s=0) is None         # too old
    stale = hub.seq("t")
    hub.invalidate("t")
    hub.note_quiet("t", stale, next_due_ms=None)              # a pull that raced a hint
    assert hub.quiet("t", 0, max_age_s=60) is None


def test_a_new_leader_trusts_what_the_old_one_saw_and_still_wakes_at_the_due_time(
        redis_url, redis_client):
    rt = make_runtime(redis_url)
    rt.queue.send("handoff", "a", msg_id="a", delay_ms=300)
    rt.queue.send("handoff", "b", msg_id="b", delay_ms=900)
    first, first_out = hold(rt, "handoff", 5000)
    wait_until(lambda: rt.hub.held() == 1, 5, interval_s=0.01, message="the poll is not held")
    second, second_out = hold(rt, "handoff", 5000)
    first.join(5)
    assert [m.msg_id for m in first_out["result"].messages] == ["a"]
    # The second waiter became leader; it sleeps until b's due time on the first's word.
    second.join(5)
    message = second_out["result"].messages[0]
    assert message.msg_id == "b"
    assert rt.clock.now_ms() >= message.trigger_time
