"""Exponential back-off with jitter, for loops that retry a failing server."""

from __future__ import annotations

import random
from typing import Callable


class Backoff:
    """Delays that double from ``base_s`` up to ``max_s``; each is drawn from [d/2, d].

    Half the delay is fixed so a failing server is never hammered in a hot loop; the random
    half spreads many consumers apart so they do not return in lock-step after an outage.
    """

    def __init__(self, base_s: float = 0.1, max_s: float = 10.0,
                 rand: Callable[[], float] = random.random) -> None:
        if base_s <= 0 or max_s < base_s:
            raise ValueError("need 0 < base_s <= max_s")
        self.base_s = base_s
        self.max_s = max_s
        self.attempts = 0
        self._rand = rand

    def next(self) -> float:
        """The delay before the next attempt."""
        ceiling = min(self.max_s, self.base_s * 2.0 ** min(self.attempts, 32))
        self.attempts += 1
        return float(ceiling / 2 + self._rand() * ceiling / 2)

    def reset(self) -> None:
        self.attempts = 0
