"""Timing against real processes: never early, long polls and promotion at the due time.

Receive times are client wall-clock stamps; the node follows Redis time and Redis runs on
this machine, so "received before triggerTime" is a real early delivery, with no tolerance.
How late is performance (bench/): here a held poll is bounded against a control measured in
the same run, and a promotion generously, with the fallbacks that would hide a missed due
time (the re-check of held polls, the scheduler's safety scan) set far beyond the bounds.
"""

from __future__ import annotations

import random
import statistics
import threading
import time

import pytest

from support import wait_until
from support.fleet import (
    Ledger,
    consume,
    hold_long_poll,
    now_ms,
    produce,
    start_threads,
    wait_until_held,
)
from support.node import ServerProcess

pytestmark = pytest.mark.timeout(90)

# Lateness a stall of a busy 2-core machine may add (seen under stress-ng --cpu 2 with other
# suites running: a held poll 185 ms late, a promotion 575 ms; bounds of 250 and 300 failed
# there), far below the fallbacks below that a missed due time would fall back to.
MARGIN_MS = 1000
# Held polls re-check every 10 s (1 s by default): a poll not woken at the due time answers
# empty after its 5 s instead of a re-check later.
LONG_POLL_SAFETY_MS = 10_000
# The scheduler's safety scan every 3 s (100 ms by default; below the 5 s lease): a promotion
# not woken at its due time waits for the next scan (about 2.5 s here, each send following a
# promotion that a scan made), so the median of six is far above MARGIN_MS / 2; one or two
# promotions a stall delayed leave the median where it was.
SCHEDULER_SCAN_MS = 3000


@pytest.fixture
def node(redis_url):
    with ServerProcess(redis_url, workers=2) as server:
        yield server


@pytest.mark.timeout(240)
def test_thousands_of_messages_are_never_delivered_before_their_trigger_time(node):
    topics = ["t0", "t1", "t2"]
    rng = random.Random(3)
    plan = [(topics[i % 3], f"e{i}", rng.randint(0, 2000)) for i in range(3000)]
    ledger = Ledger()
    stop = threading.Event()
    # Long pollers and plain pullers, without acks (a long ack timeout keeps them delivered
    # once), so every request is a pull racing the due times.
    consumers = start_threads(
        [(consume, (node.url, t, ledger, stop),
          {"ack_timeout_ms": 60_000, "ack": False, "batch": 5}) for t in topics for _ in range(2)]
        + [(consume, (node.url, t, ledger, stop),
            {"ack_timeout_ms": 60_000, "ack": False, "long_poll": False, "batch": 5})
           for t in topics])
    # A budget, not a bound: a loaded machine took more than 60 s for the 3000 sends.
    end = time.monotonic() + 180
    producers = start_threads([(produce, ([node.url], plan[k::6], ledger, end), {})
                               for k in range(6)])
    for thread in producers:
        thread.join(max(0.0, end - time.monotonic()))
    try:
        wait_until(lambda: ledger.delivered() >= len(ledger.accepted),
                   max(0.0, end - time.monotonic()), interval_s=0.05)
    except AssertionError:
        pass  # the assertions below say how many were not delivered
    stop.set()
    for thread in consumers:
        thread.join(15)
    assert len(ledger.accepted) == len(plan), (len(ledger.accepted), ledger.errors[:5])
    assert ledger.delivered() == len(plan), f"{len(plan) - ledger.delivered()} undelivered"
    lags = [times[0] - ledger.accepted[m]["triggerTime"]
            for m, times in ledger.deliveries.items()]
    print(f"\n{len(lags)} deliveries: receive - triggerTime p50 {statistics.median(lags):.0f} "
          f"ms, max {max(lags):.0f} ms; early: {len(ledger.early)}")
    assert not ledger.early, f"{len(ledger.early)} early deliveries, e.g. {ledger.early[:3]}"
    assert not ledger.errors, ledger.errors[:5]


def held_poll_lag(node: ServerProcess, topic: str, delay_ms: int) -> float:
    """Hold a long poll on a new topic, send a message due in ``delay_ms``; ms from its
    triggerTime to the answer, never before it."""
    thread, result = hold_long_poll(node, topic)
    wait_until_held(node.redis_url, topic, thread, result)  # nothing to hand out yet
    sent = node.call("sendMsg", topic=topic, msg="x", delayMillis=delay_ms)["delayMsg"]
    thread.join(10)
    messages = result["answer"]["delayMsgList"]
    assert [m["msgId"] for m in messages] == [sent["msgId"]], result
    lag = result["at"] - sent["triggerTime"]
    assert lag >= 0, f"answered {-lag:.1f} ms before triggerTime"
    return lag


def test_held_long_poll_is_answered_at_the_due_time_as_promptly_as_on_a_ready_message(
        redis_url):
    """A poll held before its message is due wakes at the due time; the control, a poll
    woken by a message ready at once, measures what this machine adds right now."""
    with ServerProcess(redis_url, workers=2,
                       settings={"long-polling-safety-millis": LONG_POLL_SAFETY_MS}) as node:
        lags: dict[str, list[float]] = {"due in 500 ms": [], "control": []}
        for i in range(8):
            lags["control"].append(held_poll_lag(node, f"lp-control{i}", 0))
            lags["due in 500 ms"].append(held_poll_lag(node, f"lp{i}", 500))
    print(f"\nlong-poll answer - triggerTime (ms): "
          f"{ {k: [round(ln, 1) for ln in v] for k, v in lags.items()} }")
    assert max(lags["due in 500 ms"]) <= max(lags["control"]) + MARGIN_MS, lags


def test_due_message_is_promoted_on_time_with_no_consumer_polling(redis_url):
    lags = []
    with ServerProcess(redis_url, workers=2,
                       settings={"msg-schedule-millis": SCHEDULER_SCAN_MS}) as node:
        for i in range(6):
            lags.append(promotion_lag(node, f"pr{i}", 400 + 37 * i))
    print(f"\npromotion seen - triggerTime (ms): {[round(ln, 1) for ln in lags]}")
    assert statistics.median(lags) <= MARGIN_MS / 2, lags


def promotion_lag(node: ServerProcess, topic: str, delay_ms: int) -> float:
    """Send a message due in ``delay_ms`` that nobody pulls; ms from its triggerTime until
    getMsg (polled every 5 ms) shows it ready, never before it."""
    msg = node.call("sendMsg", topic=topic, msg="x", delayMillis=delay_ms)["delayMsg"]
    trigger = msg["triggerTime"]

    def promoted_at() -> float | None:
        status = node.call("getMsg", topic=msg["topic"], msgId=msg["msgId"])
        received = now_ms()
        state = status["delayMsg"]["status"]
        if state == 2:
            assert received >= trigger, f"promoted {trigger - received:.1f} ms early"
            return received
        assert state == 1, status
        return None

    seen = wait_until(promoted_at, (trigger + 5000 - now_ms()) / 1000, interval_s=0.005,
                      message=f"not promoted 5 s after its triggerTime: {msg}")
    return seen - trigger
