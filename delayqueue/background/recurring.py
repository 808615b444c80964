"""The schedules loop: writes each recurring schedule's next occurrence when its time comes.

One worker of the fleet at a time (lease ``recurring``) runs ``tick``: it reads the schedules
whose pending fire time has come from the namespace's schedule index, at most
``SCHEDULES_PER_TICK``, and advances each (core/schedules.py ``Schedules.advance``: one
compare-and-set script per schedule, so a second worker racing it, after a lost lease or a
kill, writes nothing twice). Every ``REPAIR_MS`` it also runs the repair pass, which puts
back index entries a crash lost and waiting occurrences deleted before their fire time. The
tick has no threads in it: ``Loop`` drives it, tests call it directly.
"""

from __future__ import annotations

import logging
import time

import redis

from delayqueue.core.clock import Clock
from delayqueue.core.keys import NamespaceKeys
from delayqueue.core.schedules import Schedules

logger = logging.getLogger(__name__)

SCHEDULES_PER_TICK = 100      # most schedules one tick advances
TICK_MS = 100                 # the longest sleep between ticks
REPAIR_MS = 5_000             # how often the holder runs the repair pass


class Recurring:
    def __init__(self, schedules: Schedules, clock: Clock, keys: NamespaceKeys,
                 tick_ms: int = TICK_MS, repair_ms: int = REPAIR_MS) -> None:
        self.schedules = schedules
        self.client = schedules.client
        self.clock = clock
        self.keys = keys
        self.tick_ms = tick_ms
        self.repair_ms = repair_ms
        self._repaired_at = float("-inf")

    def tick(self) -> float:
        """Advance every schedule whose time has come (and repair when due); returns the
        seconds to sleep."""
        due = self.advance_due()
        if time.monotonic() - self._repaired_at >= self.repair_ms / 1000:
            self._repaired_at = time.monotonic()
            repaired = self.schedules.repair()
            if repaired:
                logger.info("schedules: wrote %d deleted waiting occurrences again", repaired)
        if due >= SCHEDULES_PER_TICK:
            return 0.0
        head = self.client.zrange(self.keys.schedule_index, 0, 0, withscores=True)
        delay = self.tick_ms / 1000
        if head:
            # 1 ms after the fire time: the clock is a lower bound, never early.
            delay = min(delay, self.clock.seconds_until(int(head[0][1]) + 1))
        return max(delay, 0.0)

    def advance_due(self) -> int:
        """Advance the schedules whose time has come, at most SCHEDULES_PER_TICK; returns
        how many were looked at."""
        now = self.clock.now_ms()
        due = self.client.zrangebyscore(self.keys.schedule_index, "-inf", now, start=0,
                                        num=SCHEDULES_PER_TICK, withscores=True)
        for entry, score in due:
            try:
                self.schedules.advance(entry, score)
            except redis.RedisError:
                raise                        # Redis is away: the loop backs off
            except Exception:  # noqa: BLE001 - one bad schedule must not stop the others
                logger.exception("schedules: advancing %r failed", entry)
        return len(due)
