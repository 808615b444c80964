"""Monitor recording takes no lock: samples recorded from many threads while another thread
flushes all reach Redis, each exactly once (core/monitor.py, "recording")."""

from __future__ import annotations

import threading
import time

from delayqueue.core.clock import ManualClock
from delayqueue.core.keys import NamespaceKeys
from delayqueue.core.monitor import Monitor
from delayqueue.core.scripts import Scripts

THREADS = 6
PER_THREAD = 3_000
START_MS = 1_763_596_800_000


def test_flush_under_recording_threads_loses_and_doubles_nothing(redis_client):
    clock = ManualClock(START_MS + 5_000)
    monitor = Monitor(redis_client, NamespaceKeys("dq", "threads"), clock, 60,
                      Scripts(redis_client))
    recording = threading.Event()
    recording.set()
    flushes = 0

    def flusher() -> None:
        nonlocal flushes
        deadline = time.monotonic() + 60
        while recording.is_set() and time.monotonic() < deadline:
            monitor.flush()
            flushes += 1

    def recorder(index: int) -> None:
        for i in range(PER_THREAD):
            monitor.incr("t", "sendMsg")
            monitor.incr("t", "pullMsg", 2, subscription="billing")
            monitor.observe("t", "pullMsgTimeGap", [i % 7])
            monitor.record_request("sendMsg", "200", 1.5)
            monitor.observe_loop("promote", 0.25)
            if i % 500 == 0:
                clock.advance(1_000)  # samples span several 60 s intervals

    flushing = threading.Thread(target=flusher)
    flushing.start()
    threads = [threading.Thread(target=recorder, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    recording.clear()
    flushing.join(timeout=120)
    monitor.flush()

    total = THREADS * PER_THREAD
    assert flushes > 1
    totals = monitor.totals()
    assert totals["topics"]["t"]["sendMsg"] == total
    assert totals["subscriptions"][("t", "billing")]["pullMsg"] == 2 * total
    gaps = totals["topics"]["t"]["pullMsgTimeGap"]
    assert gaps["count"] == total and sum(gaps["counts"]) == total
    assert gaps["sum"] == THREADS * sum(i % 7 for i in range(PER_THREAD))
    assert gaps["max"] == 6
    assert totals["requests"].counts[("sendMsg", "200")] == total
    assert totals["requests"].durations["sendMsg"]["count"] == total
    assert totals["loops"]["promote"]["count"] == total
