"""Fixed-bound time-gap histograms, summable across processes, nodes, topics and intervals."""

from __future__ import annotations

import bisect
import math

# Upper bounds (ms) of the buckets; counts[i] holds samples with BOUNDS[i-1] < gap <= BOUNDS[i].
BOUNDS_MS: tuple[float, ...] = (
    1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000, 60000, math.inf,
)

# Upper bounds (ms) of the HTTP request-duration buckets: finer below a millisecond, where a
# send or an ack answers, and up to the longest long-poll hold (60 s by default).
REQUEST_BOUNDS_MS: tuple[float, ...] = (
    0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, math.inf,
)


def bucket_index(gap_ms: float) -> int:
    """Index of the bucket a gap falls in (negative gaps count in the first bucket)."""
    return bisect.bisect_left(BOUNDS_MS, gap_ms)


def percentile(counts: list[int], p: float, observed_max: float) -> float:
    """The upper bound of the first bucket whose cumulative count reaches ceil(p * total).

    The +inf bucket reports the observed max; so does any bound above the max.
    """
    total = sum(counts)
    if total == 0:
        return 0
    rank = max(1, math.ceil(p * total))
    running = 0
    for bound, count in zip(BOUNDS_MS, counts):
        running += count
        if running >= rank:
            return min(bound, observed_max)
    return observed_max
