"""Column expressions for the fixed-bound time-gap histograms of the snapshot contract.

``counts[i]`` holds the samples with ``FINITE_BOUNDS_MS[i-1] < gap <= FINITE_BOUNDS_MS[i]``,
and the last count (``BUCKETS - 1``) those above every finite bound; the bounds are fixed, so
histograms add element-wise across topics, intervals and nodes. They are the server's
(``delayqueue.core.histogram.BOUNDS_MS``, whose 16th bound is +inf); the job imports nothing
from the server, and ``tests/spark/test_spark_histogram.py`` keeps the two equal.

Percentile rule (exact bucket arithmetic on the summed counts): the p-th percentile is the
upper bound of the first bucket whose cumulative count is >= ceil(p * total); when that bucket
is the last one (+inf) the observed maximum is reported instead. An empty histogram has no
percentile (null).

Everything here is built from Spark built-in functions, so it runs in the JVM (no Python UDF).
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

FINITE_BOUNDS_MS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000, 60000)
"""The 15 finite upper bounds in ms; the 16th bucket (index 15) is unbounded (+inf)."""

BUCKETS = len(FINITE_BOUNDS_MS) + 1
"""Counts per histogram: one per finite bound, and the unbounded last one."""


def sum_buckets(counts: Column) -> list[Column]:
    """One ``sum`` aggregate per bucket; a null or short array counts as zeros."""
    return [F.sum(F.coalesce(counts.getItem(i), F.lit(0))) for i in range(BUCKETS)]


def bucket_array(bucket_sums: list[Column]) -> Column:
    """Assemble per-bucket aggregates back into one ``array<bigint>`` column."""
    return F.array(*[c.cast("long") for c in bucket_sums])


def cumulative_counts(counts: Column) -> Column:
    """``array<bigint>`` of running sums of a histogram ``counts`` column (plain arithmetic)."""
    running = []
    for i in range(BUCKETS):
        item = counts.getItem(i)
        running.append(item if not running else running[-1] + item)
    return F.array(*running)


def percentile(cumulative: Column, observed_max: Column, p: float) -> Column:
    """The p-th percentile (0 < p <= 1) of a histogram given its ``cumulative_counts``, by the
    rule in the module docstring.

    Plain column expressions (a CASE over the buckets), no higher-order functions: lambdas run
    interpreted, and with them the derived columns of a 20,000-row hourly table took about
    15 s; code-generated they take well under a second. Take the cumulative array from a
    separate projection so it is computed once per row, not once per percentile.
    """
    total = cumulative.getItem(BUCKETS - 1)
    target = F.ceil(F.lit(p) * total)
    # Cumulative counts never decrease, so the first bucket reaching target is the answer.
    result = F.when(total.isNull() | (total <= 0), F.lit(None).cast("long"))
    for i, bound in enumerate(FINITE_BOUNDS_MS):
        result = result.when(cumulative.getItem(i) >= target, F.lit(bound).cast("long"))
    return result.otherwise(observed_max.cast("long"))
