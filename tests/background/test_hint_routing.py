"""Hints routed to one process (lua/includes/group.lua publish_ready, background/longpoll.py):
a message made ready wakes one waiter in the fleet, not one per process, and a hint is never
lost to a process that cannot take it. Two real hubs (each its own subscriber thread, as two
worker processes have) on one real Redis; pull scripts are counted by wrapping the queue."""

from __future__ import annotations

import threading
import time

import redis

from delayqueue.background.longpoll import Hub, long_poll
from delayqueue.background.runtime import Runtime
from delayqueue.settings.config import load_settings

from support import wait_until

SAFETY_S = 5.0     # longer than every wait below: only a hint can wake a held poll in time


def make_runtime(redis_url: str) -> Runtime:
    settings = load_settings(overrides={"redis_url": redis_url, "snapshot_dir": ""})
    return Runtime(settings, client=redis.Redis.from_url(redis_url, decode_responses=True))


class CountingQueue:
    """The runtime's queue, with its pulls counted (empty ones apart)."""

    def __init__(self, queue) -> None:
        self.queue = queue
        self.pulls = 0
        self.empty = 0
        self._lock = threading.Lock()

    def pull(self, *args, **kwargs):
        result = self.queue.pull(*args, **kwargs)
        with self._lock:
            self.pulls += 1
            self.empty += not result.messages
        return result


def started_hub(rt: Runtime) -> Hub:
    hub = Hub(redis.Redis.from_url(rt.settings.redis_url, decode_responses=True),
              rt.keys.hint_channel)
    hub.pass_hint = lambda topic, hub_id, leave, count: rt.scripts.hint_pass(
        rt.keys.topic(topic), hub_id, leave, rt.keys.hint_channel, count)   # as Runtime's
    hub.start()
    wait_until(hub.subscribed.is_set, 5, interval_s=0.01, message="hub never subscribed")
    return hub


def hold(queue, hub: Hub, rt: Runtime, topic: str, timeout_ms: int = 4000) -> tuple:
    out: dict = {}

    def run() -> None:
        started = time.monotonic()
        out["result"] = long_poll(queue, hub, rt.clock, topic, 1, None, timeout_ms, SAFETY_S)
        out["after_s"] = time.monotonic() - started

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def test_each_ready_message_wakes_one_waiter_of_the_fleet_not_one_per_process(
        redis_url, redis_client):
    rt = make_runtime(redis_url)
    hubs = [started_hub(rt), started_hub(rt)]
    queue = CountingQueue(rt.queue)
    messages = 30
    received: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()

    def consumer(hub: Hub) -> None:
        while not stop.is_set():
            result = long_poll(queue, hub, rt.clock, "routed", 1, None, 2000, SAFETY_S)
            for m in result.messages:
                rt.queue.ack("routed", m.msg_id, m.receipt)
                with lock:
                    received.append(m.msg_id)

    threads = [threading.Thread(target=consumer, args=(hub,), daemon=True)
               for hub in hubs for _ in range(2)]
    for t in threads:
        t.start()
    wait_until(lambda: all(hub.held() == 2 for hub in hubs), 5, interval_s=0.01,
               message="the four polls were never held")
    wait_until(lambda: redis_client.zcard(rt.queue.topic_keys("routed").base + ":hubs") == 2,
               5, interval_s=0.01, message="both hubs never registered for the topic")
    for i in range(messages):
        rt.queue.send("routed", "x", msg_id=f"m{i}")
        time.sleep(0.03)
    wait_until(lambda: len(received) == messages, 10, interval_s=0.01,
               message="not every message was delivered")
    stop.set()
    for hub in hubs:
        hub.release_held()
    for t in threads:
        t.join(5)
    for hub in hubs:
        hub.stop()
    assert sorted(received) == sorted(f"m{i}" for i in range(messages))
    # Before routing each send woke a waiter in each hub: one empty pull per message. Now
    # the empty ones are the first pull of each hub, the releases at the end, and a hint a
    # hub with no idle waiter passed on now and then.
    assert queue.empty <= 4 + 4 + messages // 10, (queue.pulls, queue.empty)


def test_a_hub_whose_waiters_left_passes_its_hint_on_to_every_hub(redis_url, redis_client):
    rt = make_runtime(redis_url)
    gone, waiting = started_hub(rt), started_hub(rt)
    hubs_key = rt.queue.topic_keys("passed").base + ":hubs"
    thread, out = hold(rt.queue, waiting, rt, "passed")
    wait_until(lambda: redis_client.zscore(hubs_key, waiting.id) is not None, 5,
               interval_s=0.01, message="the waiting hub never registered")
    # Only the hub that has no waiter (any more) is registered: the hint goes to it.
    redis_client.delete(hubs_key)
    redis_client.zadd(hubs_key, {gone.id: rt.clock.now_ms() + 60_000})
    sent = rt.queue.send("passed", "x").message
    thread.join(SAFETY_S)
    assert [m.msg_id for m in out["result"].messages] == [sent.msg_id]
    assert out["after_s"] < SAFETY_S / 2      # woken by the hint passed on, not by its timer
    # with no idle waiter there, the hub left: the next hint goes to every hub at once
    assert redis_client.zscore(hubs_key, gone.id) is None
    for hub in (gone, waiting):
        hub.stop()


def test_a_hint_for_a_hub_nobody_hears_goes_to_every_hub_and_the_hub_leaves(
        redis_url, redis_client):
    rt = make_runtime(redis_url)
    waiting = started_hub(rt)
    hubs_key = rt.queue.topic_keys("unheard").base + ":hubs"
    thread, out = hold(rt.queue, waiting, rt, "unheard")
    wait_until(lambda: redis_client.zscore(hubs_key, waiting.id) is not None, 5,
               interval_s=0.01, message="the waiting hub never registered")
    redis_client.delete(hubs_key)
    redis_client.zadd(hubs_key, {"0badc0ffee00": rt.clock.now_ms() + 60_000})  # its process died
    sent = rt.queue.send("unheard", "x").message
    thread.join(SAFETY_S)
    assert [m.msg_id for m in out["result"].messages] == [sent.msg_id]
    assert out["after_s"] < SAFETY_S / 2
    assert redis_client.zscore(hubs_key, "0badc0ffee00") is None
    waiting.stop()
