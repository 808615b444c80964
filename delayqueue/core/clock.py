"""One clock for the whole fleet: the Redis server's.

Every score written or compared in Redis is in Redis time. ``RedisClock`` measures the
offset between this process's monotonic clock and Redis ``TIME`` and reads
``now = redis_base + (monotonic() - local_base)``. The reading is a lower bound of Redis
time (the ``TIME`` reply is pinned to the moment the reply arrived), so a node can be a
round trip late but never early. A node whose wall clock is minutes off still agrees with
every other node, because the wall clock is never read.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

import redis

SYNC_SAMPLES = 3
# now_ms() syncs again (keeping the better reading) at most every POOR_RESYNC_S during the
# first WARMUP_SYNCS syncs of the process, and while the reading's round trip is longer than
# twice the shortest seen plus POOR_SYNC_MARGIN_MS.
WARMUP_SYNCS = 5
POOR_SYNC_MARGIN_MS = 1.0
POOR_RESYNC_S = 0.2


class Clock(Protocol):
    def now_ms(self) -> int: ...


class RedisClock:
    """Follows Redis ``TIME``; re-measured by ``sync()`` (the clock loop calls it)."""

    def __init__(self, client: redis.Redis) -> None:
        self._client = client
        self._lock = threading.Lock()
        self._redis_base_ms: float | None = None
        self._local_base_s = 0.0
        self.round_trip_ms = 0.0
        self.best_round_trip_ms = float("inf")
        self._syncs = 0
        self._synced_at = 0.0
        # Held by the one request improving a poor reading; the others read the clock as it
        # is instead of each sending their own TIME round trips (seen: 0.36 TIME per
        # message under load, several greenlets finding the reading poor at once).
        self._improving = threading.Lock()

    def sync(self, only_if_better: bool = False) -> None:
        """Three ``TIME`` round trips; the shortest is kept. A long one lags: the first may
        open a connection (~5 ms on a Cluster client), and under gevent the reply may wait
        for other greenlets before ``after`` is read (a busy worker just started: seen 5 ms).
        ``only_if_better``: keep the current reading unless this round trip was shorter."""
        samples = []
        for _ in range(SYNC_SAMPLES):
            before = time.monotonic()
            seconds, micros = self._client.time()
            after = time.monotonic()
            samples.append((after - before, seconds * 1000 + micros / 1000.0, before, after))
        _, redis_ms, before, after = min(samples)
        with self._lock:
            self._syncs += 1
            self._synced_at = after
            self.best_round_trip_ms = min(self.best_round_trip_ms, (after - before) * 1000.0)
            if only_if_better and (after - before) * 1000.0 >= self.round_trip_ms:
                return
            # Pin the reply to `after`: true Redis time at `after` is >= redis_ms.
            self._redis_base_ms = redis_ms
            self._local_base_s = after
            self.round_trip_ms = (after - before) * 1000.0

    def now_ms(self) -> int:
        if self._redis_base_ms is None:
            self.sync()
        elif (self._syncs < WARMUP_SYNCS
              or self.round_trip_ms > 2 * self.best_round_trip_ms + POOR_SYNC_MARGIN_MS) \
                and time.monotonic() - self._synced_at >= POOR_RESYNC_S \
                and self._improving.acquire(blocking=False):
            # A reading that may lag by a slow round trip is improved at once, not at the
            # next periodic sync (at most every POOR_RESYNC_S, by one caller at a time, and
            # only to a better one).
            try:
                self.sync(only_if_better=True)
            except redis.RedisError:
                pass  # the current reading stands; the request finds out about Redis itself
            finally:
                self._improving.release()
        with self._lock:
            elapsed_ms = (time.monotonic() - self._local_base_s) * 1000.0
            return int(self._redis_base_ms + elapsed_ms)

    def seconds_until(self, when_ms: int) -> float:
        """Local seconds to sleep until Redis time reaches ``when_ms`` (>= 0)."""
        return max(0.0, (when_ms - self.now_ms()) / 1000.0)


class ManualClock:
    """A clock tests drive by hand."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self._now_ms = now_ms

    def now_ms(self) -> int:
        return self._now_ms

    def advance(self, ms: int) -> None:
        self._now_ms += ms

    def sync(self) -> None:
        pass

    def seconds_until(self, when_ms: int) -> float:
        return max(0.0, (when_ms - self._now_ms) / 1000.0)
