"""Scheduler leases on redis-py's ``Lock`` (token-checked extend and release)."""

from __future__ import annotations

import logging
import time

import redis
from redis.exceptions import LockError

logger = logging.getLogger(__name__)


class Lease:
    """Held by at most one worker of the fleet; the holder renews it every third of its TTL.

    Losing it (Redis outage, a pause past the TTL) means stepping down, never crashing.
    Because every script is safe to run twice, a lease only avoids wasted work.
    """

    def __init__(self, client: redis.Redis, name: str, ttl_s: float) -> None:
        self.name = name
        self.ttl_s = ttl_s
        self._lock = client.lock(name, timeout=ttl_s, blocking=False, thread_local=False)
        self._renewed_at = 0.0
        self.held = False

    def hold(self) -> bool:
        """True while this worker holds the lease, acquiring or renewing it as needed."""
        try:
            if self.held:
                if time.monotonic() - self._renewed_at >= self.ttl_s / 3:
                    self._lock.reacquire()
                    self._renewed_at = time.monotonic()
                return True
            if self._lock.acquire(blocking=False):
                self.held = True
                self._renewed_at = time.monotonic()
                logger.info("took lease %s", self.name)
            return self.held
        except LockError:
            logger.warning("lost lease %s; stepping down", self.name)
        except redis.RedisError as exc:
            logger.warning("lease %s unreachable (%s); stepping down", self.name, exc)
        self.held = False
        return False

    def release(self) -> None:
        if self.held:
            self.held = False
            try:
                self._lock.release()
            except (LockError, redis.RedisError):
                pass


def once_per(client: redis.Redis, key: str, interval_ms: int) -> bool:
    """True for exactly one caller in the fleet per ``interval_ms`` (SET NX PX as a gate).

    For infrequent jobs (recycling, due-index repair) whose holder would sleep far longer
    than a lease's TTL.
    """
    return bool(client.set(key, "1", nx=True, px=interval_ms))
