"""Long loops over every topic that let the worker's other greenlets run.

A node's worker is a gevent process: a greenlet busy in Python holds every other one of its
process, its long polls and the scheduler's loops among them, until it waits on I/O. A
/metrics scrape or a snapshot interval over 100,000 topics is seconds of Python (folding
counters, formatting lines), which made a message due in an idle topic seconds late
(bench/idle_topics.py). ``cooperative`` hands the loop's items on and sleeps 0 s every
``every`` of them: under gevent a switch to whatever else is ready, in a plain thread a
release of the GIL.
"""

from __future__ import annotations

import time
from typing import Iterable, Iterator, TypeVar

T = TypeVar("T")

EVERY = 500   # items between two yields: well under a millisecond of work each time


def cooperative(items: Iterable[T], every: int = EVERY) -> Iterator[T]:
    for i, item in enumerate(items, 1):
        yield item
        if i % every == 0:
            time.sleep(0)
