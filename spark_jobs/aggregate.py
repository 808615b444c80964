"""Aggregates of snapshot intervals: per topic and per namespace, per hour, day and in total.

The only pass over raw rows is ``topic_hour``: one shuffle by (namespace, topic, hour) and
two hash aggregates on fixed-width columns (per interval, dropping duplicates; then per hour).
Every other table, and the backlog-growth runs, come from the small hourly table.

Base columns of every table (rolled up by sum, max, or "last"):
  snapshot_lines, first_interval_start_ms, last_interval_end_ms, the counters,
  ``<lag>_count/_sum/_max/_counts`` for delivery_lag and scheduling_lag,
  ``<gauge>_sum/_avg/_max/_last`` for waiting_size, ready_size, consuming_size, and the
  waiting-queue delay distribution at the last interval (``waiting_0_1min`` ...).
For namespace rows the gauges are sums over the namespace's topics: avg and last are the
namespace's own figures (exact when topics cover the same intervals); max is the sum of
per-topic maxima, an upper bound on the simultaneous peak.
``with_derived`` adds rates, ratios, lag mean and percentiles.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_jobs.histogram import BUCKETS, bucket_array, percentile, sum_buckets
from spark_jobs.snapshot import COUNTERS, GAUGES, LAGS, WAITING_DELAYS

HOUR_MS = 3_600_000
DAY_MS = 86_400_000
COUNTER_NAMES = [name for _, name in COUNTERS]
LAG_NAMES = [name for _, name in LAGS]
GAUGE_NAMES = [name for _, name in GAUGES]
WAITING_NAMES = [name for _, name in WAITING_DELAYS]
PERCENTILES = ((0.5, "p50"), (0.9, "p90"), (0.99, "p99"))


def _hist_sum(name: str) -> list[Column]:
    return [
        F.sum(f"{name}_count").alias(f"{name}_count"),
        F.sum(f"{name}_sum").alias(f"{name}_sum"),
        F.max(f"{name}_max").alias(f"{name}_max"),
        bucket_array(sum_buckets(F.col(f"{name}_counts"))).alias(f"{name}_counts"),
    ]


def topic_hour(snapshots: DataFrame) -> DataFrame:
    """Valid snapshot rows -> one row per (namespace, topic, date, hour_start).

    Intervals appearing more than once (same namespace, topic, intervalStart) count once: a
    first hash aggregate per interval keeps, field by field, the largest value of the copies
    (the same values when the copies are identical), a second sums the hour. Both reuse one
    shuffle by (namespace, topic, hour). ``ready_by_minute`` holds the ready-queue size per
    minute of the hour (the largest seen in that minute; null where there is no snapshot),
    from which ``ready_growth_runs`` measures backlog growth.
    """
    value_columns = [
        "interval_end",
        *COUNTER_NAMES,
        *[f"{name}_{part}" for name in LAG_NAMES for part in ("count", "sum", "max")],
        *[f"{name}_b{i}" for name in LAG_NAMES for i in range(BUCKETS)],
        *GAUGE_NAMES,
        *WAITING_NAMES,
    ]
    keys = ["namespace", "topic", "hour_start_ms"]
    intervals = (
        snapshots.withColumn("hour_start_ms", F.col("interval_start") - F.col("interval_start") % HOUR_MS)
        .repartition(*keys)
        .groupBy(*keys, "interval_start")
        .agg(*[F.max(name).alias(name) for name in value_columns])
        .withColumn("_minute", ((F.col("interval_start") - F.col("hour_start_ms")) / 60_000).cast("int"))
    )
    last = F.col("interval_start")
    minute = F.col("_minute")
    aggregated = intervals.groupBy(*keys).agg(
        F.count(F.lit(1)).alias("snapshot_lines"),
        F.min("interval_start").alias("first_interval_start_ms"),
        F.max("interval_end").alias("last_interval_end_ms"),
        *[F.sum(name).alias(name) for name in COUNTER_NAMES],
        *[
            c
            for name in LAG_NAMES
            for c in (
                F.sum(f"{name}_count").alias(f"{name}_count"),
                F.sum(f"{name}_sum").alias(f"{name}_sum"),
                F.max(f"{name}_max").alias(f"{name}_max"),
                bucket_array([F.sum(f"{name}_b{i}") for i in range(BUCKETS)]).alias(f"{name}_counts"),
            )
        ],
        *[
            c
            for name in GAUGE_NAMES
            for c in (
                F.sum(name).alias(f"{name}_sum"),
                F.max(name).alias(f"{name}_max"),
                F.max_by(name, last).alias(f"{name}_last"),
            )
        ],
        *[F.max_by(name, last).alias(name) for name in WAITING_NAMES],
        F.array(*[F.max(F.when(minute == m, F.col("ready_size"))) for m in range(60)]).alias("ready_by_minute"),
    )
    for name in GAUGE_NAMES:
        aggregated = aggregated.withColumn(f"{name}_avg", F.col(f"{name}_sum") / F.col("snapshot_lines"))
    return aggregated.withColumn(
        "date", F.date_from_unix_date(F.floor(F.col("hour_start_ms") / DAY_MS).cast("int"))
    ).withColumn("hour_start", F.timestamp_millis("hour_start_ms"))


_RUN = "struct<start:bigint,end:bigint,intervals:int,from_size:bigint,to_size:bigint>"


def ready_growth_runs(topic_hours: DataFrame, min_intervals: int) -> DataFrame:
    """Runs of at least ``min_intervals`` consecutive snapshots (per topic, within a UTC day)
    in which the ready queue grew at every step -> (namespace, topic, date, run_start,
    run_end, intervals, from_size, to_size). Minutes without a snapshot are skipped.
    """
    samples = F.expr(
        "flatten(transform(array_sort(collect_list(struct(hour_start_ms, ready_by_minute))), "
        "h -> transform(h.ready_by_minute, (v, j) -> struct(h.hour_start_ms + j * 60000 AS t, v))))"
    )
    close = (
        f"CASE WHEN acc.n >= {int(min_intervals)} THEN concat(acc.runs, array(named_struct("
        "'start', acc.start, 'end', acc.last_t, 'intervals', acc.n, 'from_size', acc.from_size, "
        "'to_size', acc.prev))) ELSE acc.runs END"
    )
    runs = F.expr(
        "aggregate(samples, named_struct('prev', CAST(NULL AS BIGINT), 'n', 0, 'start', 0L, "
        f"'last_t', 0L, 'from_size', 0L, 'runs', CAST(array() AS array<{_RUN}>)), "
        "(acc, e) -> CASE WHEN e.v IS NULL THEN acc "
        "WHEN acc.prev IS NOT NULL AND e.v > acc.prev THEN named_struct('prev', e.v, 'n', acc.n + 1, "
        "'start', acc.start, 'last_t', e.t, 'from_size', acc.from_size, 'runs', acc.runs) "
        "ELSE named_struct('prev', e.v, 'n', 0, 'start', e.t, 'last_t', e.t, 'from_size', e.v, "
        f"'runs', {close}) END, acc -> {close})"
    )
    return (
        topic_hours.groupBy("namespace", "topic", "date")
        .agg(samples.alias("samples"))
        .select("namespace", "topic", "date", F.explode(runs).alias("run"))
        .select(
            "namespace",
            "topic",
            "date",
            F.timestamp_millis("run.start").alias("run_start"),
            F.timestamp_millis("run.end").alias("run_end"),
            "run.intervals",
            "run.from_size",
            "run.to_size",
        )
    )


def topic_rollup(topic_rows: DataFrame, keys: list[str]) -> DataFrame:
    """Topic rows at a finer time grain -> topic rows grouped by ``keys`` (coarser grain)."""
    last = F.col("last_interval_end_ms")
    aggregated = topic_rows.groupBy(*keys).agg(
        F.sum("snapshot_lines").alias("snapshot_lines"),
        F.min("first_interval_start_ms").alias("first_interval_start_ms"),
        F.max("last_interval_end_ms").alias("last_interval_end_ms"),
        *[F.sum(name).alias(name) for name in COUNTER_NAMES],
        *[c for name in LAG_NAMES for c in _hist_sum(name)],
        *[
            c
            for name in GAUGE_NAMES
            for c in (
                F.sum(f"{name}_sum").alias(f"{name}_sum"),
                F.max(f"{name}_max").alias(f"{name}_max"),
                F.max_by(f"{name}_last", last).alias(f"{name}_last"),
            )
        ],
        *[F.max_by(name, last).alias(name) for name in WAITING_NAMES],
    )
    for name in GAUGE_NAMES:
        aggregated = aggregated.withColumn(f"{name}_avg", F.col(f"{name}_sum") / F.col("snapshot_lines"))
    return aggregated


def namespace_rollup(topic_rows: DataFrame, time_keys: list[str]) -> DataFrame:
    """Topic rows -> namespace rows at the same time grain (``time_keys``)."""
    return topic_rows.groupBy("namespace", *time_keys).agg(
        F.count(F.lit(1)).alias("topics"),
        F.sum("snapshot_lines").alias("snapshot_lines"),
        F.min("first_interval_start_ms").alias("first_interval_start_ms"),
        F.max("last_interval_end_ms").alias("last_interval_end_ms"),
        *[F.sum(name).alias(name) for name in COUNTER_NAMES],
        *[c for name in LAG_NAMES for c in _hist_sum(name)],
        *[
            F.sum(f"{name}_{stat}").alias(f"{name}_{stat}")
            for name in GAUGE_NAMES
            for stat in ("sum", "avg", "max", "last")
        ],
        *[F.sum(name).alias(name) for name in WAITING_NAMES],
    )


def with_derived(table: DataFrame) -> DataFrame:
    """Add per-second rates, ack / redelivery ratios, lag means and p50 / p90 / p99."""
    window_s = (F.col("last_interval_end_ms") - F.col("first_interval_start_ms")) / 1000.0
    derived = [window_s.alias("window_s")]
    derived += [(F.col(name) / window_s).alias(f"{name}_per_s") for name in COUNTER_NAMES]
    delivered = F.when(F.col("delivered") > 0, F.col("delivered"))
    derived += [
        (F.col("acked") / delivered).alias("ack_ratio"),
        (F.col("timed_out") / delivered).alias("redelivery_ratio"),
    ]
    for name in LAG_NAMES:
        count = F.when(F.col(f"{name}_count") > 0, F.col(f"{name}_count"))
        derived.append((F.col(f"{name}_sum") / count).alias(f"{name}_mean_ms"))
        derived += [
            percentile(F.col(f"{name}_counts"), F.col(f"{name}_max"), p).alias(f"{name}_{label}_ms")
            for p, label in PERCENTILES
        ]
    return table.select("*", *derived)


__all__ = [
    "BUCKETS",
    "topic_hour",
    "topic_rollup",
    "namespace_rollup",
    "with_derived",
    "ready_growth_runs",
]
