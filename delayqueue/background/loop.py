"""Background loops: thin drivers around a ``tick()`` that has no threading in it."""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from .lease import Lease

logger = logging.getLogger(__name__)


class Loop:
    """Run ``tick`` every ``interval_s`` until stopped; only while holding ``lease`` if given.

    With ``tick_returns_delay`` the tick's return value is the next sleep in seconds (None:
    ``interval_s``); otherwise it is ignored, so a tick that happens to return a count can
    never turn into a busy loop. A failing tick is logged and retried with backoff; the loop
    never dies silently. ``nudge()`` cuts the current sleep short (the scheduler uses it when
    a send brings a due time forward).
    """

    def __init__(self, name: str, tick: Callable[[], object], interval_s: float,
                 lease: Lease | None = None,
                 on_timing: Callable[[str, float], None] | None = None,
                 tick_returns_delay: bool = False) -> None:
        self.name = name
        self._tick = tick
        self._tick_returns_delay = tick_returns_delay
        self._interval_s = interval_s
        self._lease = lease
        self._on_timing = on_timing
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def interval_s(self) -> float:
        return self._interval_s

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
                result = self._tick()
                delay = result if self._tick_returns_delay else None
                failures = 0
            except Exception:  # noqa: BLE001 - a loop must survive anything a tick raises
                failures += 1
                if failures == 1 or failures % 100 == 0:
                    logger.exception("%s tick failed (%d in a row)", self.name, failures)
                delay = min(0.1 * 2 ** min(failures, 6), 5.0)
            if self._on_timing is not None:
                self._on_timing(self.name, (time.perf_counter() - started) * 1000.0)
            self._sleep(self._interval_s if delay is None else delay)
