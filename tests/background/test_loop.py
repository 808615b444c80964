"""Background loop driver: ticks, delays, failures, leases."""

from __future__ import annotations

import threading
import time

from delayqueue.background.loop import Loop

from support import wait_until


class SleepRecordingLoop(Loop):
    """A Loop that records each sleep it asks for (seconds), in order."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.asked: list[float] = []

    def _sleep(self, seconds: float) -> None:
        self.asked.append(seconds)
        super()._sleep(seconds)


def tick_times(loop: Loop, ticks: list[float], count: int, timeout_s: float) -> list[float]:
    """Run ``loop`` until its tick has run ``count`` times; the gaps between the ticks (s)."""
    loop.start()
    try:
        wait_until(lambda: len(ticks) >= count, timeout_s,
                   message=lambda: f"{len(ticks)} ticks, not {count}")
    finally:
        loop.stop()
    return [b - a for a, b in zip(ticks, ticks[1:count])]


# The sleeps are asserted as asked and as never shorter (a timed wait may end this much early
# by the clocks' rounding); how much longer a loaded machine makes them is not asserted.
TIMER_S = 0.002


def test_a_tick_returning_a_count_does_not_turn_into_a_busy_loop():
    ticks: list[float] = []
    loop = SleepRecordingLoop("count", lambda: ticks.append(time.monotonic()) or 0,
                              interval_s=0.1)
    gaps = tick_times(loop, ticks, 5, timeout_s=5)
    # Every 100 ms, not thousands a second (a returned 0 taken as the next sleep).
    assert loop.asked[:4] == [0.1] * 4, loop.asked
    assert all(gap >= 0.1 - TIMER_S for gap in gaps), gaps


def test_a_tick_that_returns_its_delay_sets_the_next_sleep():
    ticks: list[float] = []
    loop = SleepRecordingLoop("delay", lambda: ticks.append(time.monotonic()) or 0.02,
                              interval_s=10, tick_returns_delay=True)
    # Ten ticks within 5 s: the 10 s interval was never slept; each sleep was the 20 ms asked.
    gaps = tick_times(loop, ticks, 10, timeout_s=5)
    assert loop.asked[:9] == [0.02] * 9, loop.asked
    assert all(gap >= 0.02 - TIMER_S for gap in gaps), gaps


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
