"""RedisClock: a poor reading (a slow TIME round trip) is improved by one caller at a time."""

from __future__ import annotations

import threading
import time

from delayqueue.core.clock import WARMUP_SYNCS, RedisClock


class SlowTime:
    """A Redis client whose TIME takes ``delay`` seconds; counts the calls."""

    def __init__(self, client) -> None:
        self.client = client
        self.calls = 0
        self.delay = 0.0
        self._lock = threading.Lock()

    def time(self):
        with self._lock:
            self.calls += 1
        time.sleep(self.delay)
        return self.client.time()


def test_callers_finding_the_reading_poor_at_once_send_one_sync_not_one_each(redis_client):
    slow = SlowTime(redis_client)
    clock = RedisClock(slow)
    clock.sync()
    # As after a slow round trip, long enough ago to be improved: every caller finds it poor.
    clock._syncs, clock.best_round_trip_ms, clock.round_trip_ms = WARMUP_SYNCS, 0.01, 50.0
    clock._synced_at = 0.0
    slow.calls, slow.delay = 0, 0.05
    start = threading.Barrier(20)
    readings: list[int] = []

    def read() -> None:
        start.wait()
        readings.append(clock.now_ms())

    threads = [threading.Thread(target=read) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(readings) == 20
    assert slow.calls == 3          # one sync (its three samples), not one per caller
