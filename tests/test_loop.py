"""Background loop driver: ticks, delays, failures, leases."""

from __future__ import annotations

import threading
import time

from delayqueue.loop import Loop


def run_for(loop: Loop, seconds: float) -> None:
    loop.start()
    time.sleep(seconds)
    loop.stop()


def test_a_tick_returning_a_count_does_not_turn_into_a_busy_loop():
    ticks = []
    loop = Loop("count", lambda: ticks.append(1) or 0, interval_s=0.1)
    run_for(loop, 0.55)
    assert 3 <= len(ticks) <= 8, len(ticks)   # about every 100 ms, not thousands


def test_a_tick_that_returns_its_delay_sets_the_next_sleep():
    ticks = []
    loop = Loop("delay", lambda: ticks.append(1) or 0.02, interval_s=10,
                tick_returns_delay=True)
    run_for(loop, 0.5)
    assert len(ticks) >= 10, len(ticks)


def test_a_failing_tick_is_retried_and_the_loop_survives():
    calls = []
    recovered = threading.Event()

    def tick() -> None:
        calls.append(1)
        if len(calls) < 3:
            raise RuntimeError("boom")
        recovered.set()

    loop = Loop("flaky", tick, interval_s=0.01)
    loop.start()
    assert recovered.wait(5)
    loop.stop()
