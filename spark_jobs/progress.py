"""What the job tells its user: progress lines on stderr, and the errors that end a run.

Spark's own logging is quieted (``log4j2.properties``); these lines are the job's. Every
failure the input causes is an ``InputError`` carrying its exit code (``monitor_report.main``
prints it as one line).
"""

from __future__ import annotations

import sys
import time

EXIT_FAILED = 1
EXIT_EMPTY_INPUT = 2
EXIT_NO_VALID_LINES = 3


class InputError(Exception):
    """The input cannot produce a report; carries the exit code."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class Progress:
    """The job's own progress lines on stderr, each with the seconds its step took."""

    def __init__(self, quiet: bool = False) -> None:
        self.started = time.monotonic()
        self.step = self.started
        self.quiet = quiet

    def say(self, text: str) -> None:
        now = time.monotonic()
        if not self.quiet:
            print(f"report: {text} [{now - self.step:.1f}s]", file=sys.stderr, flush=True)
        self.step = now

    def note(self, text: str) -> None:
        """A line without a step time."""
        if not self.quiet:
            print(text, file=sys.stderr, flush=True)

    def total(self) -> float:
        return time.monotonic() - self.started


def size_text(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


def dates_text(dates: list[str]) -> str:
    if not dates:
        return "no dates"
    if len(dates) == 1:
        return dates[0]
    return f"{len(dates)} dates, {dates[0]} .. {dates[-1]}"
