"""wait_until: every test waits for a state this way, never with a bare sleep."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout_s: float, interval_s: float = 0.02,
               message: str | Callable[[], str] | None = None) -> T:
    """Call ``predicate`` until it returns something truthy, and return that value.

    It is called at least once, and once more at the deadline, so a slow machine never fails
    a condition that became true during the last sleep. ``message`` (a string, or a callable
    giving one, e.g. to show the state reached) explains a timeout.

    Raises:
        AssertionError: still falsy after ``timeout_s`` seconds.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        time.sleep(min(interval_s, remaining))
    text = message() if callable(message) else message
    raise AssertionError(f"{text or 'condition not met'} (waited {timeout_s:g} s; "
                         f"last value {value!r})")
