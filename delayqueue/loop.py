"""Background loops: thin drivers around a ``tick()`` that has no threading in it."""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from .lease import Lease

logger = logging.getLogger(__name__)


class Loop:
    """Run ``tick`` until stopped; only while holding ``lease`` when one is given.

    ``tick`` returns how long to sleep (seconds), or None for ``interval_s``. A failing tick
    is logged and retried with backoff; the loop never dies silently. ``nudge()`` cuts the
    current sleep short (the scheduler uses it when a send brings a due time forward).
    """

    def __init__(self, name: str, tick: Callable[[], float | None], interval_s: float,
                 lease: Lease | None = None,
                 on_timing: Callable[[str, float], None] | None = None) -> None:
        self.name = name
        self._tick = tick
        self._interval_s = interval_s
        self._lease = lease
        self._on_timing = on_timing
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"dq-{self.name}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
        if self._lease is not None:
            self._lease.release()

    def nudge(self) -> None:
        """Cut the current sleep short, if this worker is the one doing the work."""
        if self._lease is None or self._lease.held:
            self._wake.set()

    def _sleep(self, seconds: float) -> None:
        self._wake.wait(max(seconds, 0.0))
        self._wake.clear()

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            if self._lease is not None and not self._lease.hold():
                # Try again well within the TTL, so a dead holder is replaced promptly.
                self._sleep(self._lease.ttl_s / 5)
                continue
            started = time.perf_counter()
            try:
                delay = self._tick()
                failures = 0
            except Exception:  # noqa: BLE001 - a loop must survive anything a tick raises
                failures += 1
                if failures == 1 or failures % 100 == 0:
                    logger.exception("%s tick failed (%d in a row)", self.name, failures)
                delay = min(0.1 * 2 ** min(failures, 6), 5.0)
            if self._on_timing is not None:
                self._on_timing(self.name, (time.perf_counter() - started) * 1000.0)
            self._sleep(self._interval_s if delay is None else delay)
