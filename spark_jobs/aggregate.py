"""Aggregates of snapshot intervals: per topic and per namespace, per hour, day and in total.

The only pass over raw rows is ``hour_parts``: one shuffle by (namespace, topic), one sort by
(namespace, topic, day, intervalStart) shared by the windows that drop duplicate intervals and
find backlog-growth runs, and one hash aggregate per hour on fixed-width columns. Every other
table, and the backlog-growth runs, come from that small table.

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

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from spark_jobs.histogram import BUCKETS, bucket_array, cumulative_counts, percentile, sum_buckets
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


_VALUE_COLUMNS = [
    "interval_end",
    *COUNTER_NAMES,
    *[f"{name}_{part}" for name in LAG_NAMES for part in ("count", "sum", "max")],
    *[f"{name}_b{i}" for name in LAG_NAMES for i in range(BUCKETS)],
    *GAUGE_NAMES,
    *WAITING_NAMES,
]
_TOPIC_DAY = ["namespace", "topic", "_day"]


def growth_intervals(snapshots: DataFrame, min_intervals: int) -> DataFrame:
    """Valid snapshot rows -> one row per distinct interval, flagged for backlog growth.

    The one shuffle of the job happens here: ``repartition(namespace, topic)``. Everything after
    it (these windows, the hourly aggregate) needs only that clustering, so Spark adds no
    further exchange; the windows share one sort by (namespace, topic, UTC day, intervalStart).

    De-duplication: copies of an interval (same namespace, topic, intervalStart) count once;
    the copy kept is the first in the order (intervalEnd, then every value column, descending),
    i.e. any one of identical copies, and a deterministic one when copies differ.

    Growth rule (exact, per topic and UTC day, over consecutive snapshots in time order; a
    minute without a snapshot is skipped, not a break): a snapshot "grew" when its
    readyQueueSize is larger than the previous snapshot's. A run is a snapshot that did not
    grow (its start) followed by every following snapshot that grew; its length is the number
    of growth steps. Each row carries ``_run_end_ms``: the row's intervalStart when it is the
    last step of a run of at least ``min_intervals`` steps, else null; the run's start time,
    length and first size ride on that row (``_run_start_ms``, ``_run_steps``,
    ``_run_from``). Consecutive runs are found with the running-count trick: the start of the
    current run is the latest non-growing row at or before this one.
    """
    day = F.floor(F.col("interval_start") / DAY_MS).cast("int").alias("_day")
    tiebreak = [F.col(name).desc() for name in _VALUE_COLUMNS]
    copies = Window.partitionBy(*_TOPIC_DAY).orderBy("interval_start", *tiebreak)
    ordered = Window.partitionBy(*_TOPIC_DAY).orderBy("interval_start")
    so_far = ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    distinct = (
        snapshots.select("*", day)
        .repartition("namespace", "topic")
        .withColumn("_prev_start", F.lag("interval_start").over(copies))
        .filter(F.col("_prev_start").isNull() | (F.col("_prev_start") != F.col("interval_start")))
        .drop("_prev_start")
    )
    grew = F.coalesce(F.col("ready_size") > F.lag("ready_size").over(ordered), F.lit(False))
    flagged = distinct.select("*", grew.alias("_grew"), F.row_number().over(ordered).alias("_n"))
    start = ~F.col("_grew")
    runs = flagged.select(
        "*",
        (F.col("_n") - F.max(F.when(start, F.col("_n"))).over(so_far)).alias("_run_steps"),
        F.max(F.when(start, F.col("interval_start"))).over(so_far).alias("_run_start_ms"),
        F.last(F.when(start, F.col("ready_size")), ignorenulls=True).over(so_far).alias("_run_from"),
        F.lead("_grew").over(ordered).alias("_next_grew"),
    )
    run_end = F.col("_grew") & ~F.coalesce(F.col("_next_grew"), F.lit(False))
    run_end &= F.col("_run_steps") >= int(min_intervals)
    return runs.withColumn("_run_end_ms", F.when(run_end, F.col("interval_start"))).drop(
        "_grew", "_n", "_next_grew"
    )


def hour_parts(snapshots: DataFrame, min_intervals: int) -> DataFrame:
    """Valid snapshot rows -> the one pass over the input: per (namespace, topic, hour) the
    hourly figures, split so that each backlog-growth run ending in the hour has its own row.

    Rows are keyed by (namespace, topic, hour_start_ms, run_end_ms): ``run_end_ms`` is null for
    the hour's ordinary snapshots, and a run's last snapshot forms its own row carrying the
    run's figures. The result is small (hours plus runs); ``topic_hour`` and
    ``ready_growth_runs`` both derive from it, so the input is read once.
    """
    rows = growth_intervals(snapshots, min_intervals).withColumn(
        "hour_start_ms", F.col("interval_start") - F.col("interval_start") % HOUR_MS
    )
    last = F.col("interval_start")
    run_end = F.col("_run_end_ms")
    return rows.groupBy("namespace", "topic", "hour_start_ms", run_end.alias("run_end_ms")).agg(
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
        # One row per run end: these are that row's own values (null on ordinary rows).
        F.max(F.when(run_end.isNotNull(), F.col("_run_start_ms"))).alias("run_start_ms"),
        F.max(F.when(run_end.isNotNull(), F.col("_run_steps"))).alias("run_intervals"),
        F.max(F.when(run_end.isNotNull(), F.col("_run_from"))).alias("run_from_size"),
        F.max(F.when(run_end.isNotNull(), F.col("ready_size"))).alias("run_to_size"),
    )


def _with_time(table: DataFrame) -> DataFrame:
    return table.withColumn(
        "date", F.date_from_unix_date(F.floor(F.col("hour_start_ms") / DAY_MS).cast("int"))
    ).withColumn("hour_start", F.timestamp_millis("hour_start_ms"))


def topic_hour(parts: DataFrame) -> DataFrame:
    """``hour_parts`` rows -> one row per (namespace, topic, date, hour_start).

    Duplicated intervals were dropped in ``growth_intervals``; the hour's parts (its ordinary
    snapshots and any run ends) are summed here; "last" values come from the part holding the
    latest interval.
    """
    run_columns = ["run_end_ms", "run_start_ms", "run_intervals", "run_from_size", "run_to_size"]
    return _with_time(topic_rollup(parts.drop(*run_columns), ["namespace", "topic", "hour_start_ms"]))


def ready_growth_runs(parts: DataFrame) -> DataFrame:
    """``hour_parts`` rows -> one row per backlog-growth run (namespace, topic, date,
    run_start, run_end, intervals, from_size, to_size); see ``growth_intervals`` for the rule."""
    return parts.filter(F.col("run_end_ms").isNotNull()).select(
        "namespace",
        "topic",
        F.date_from_unix_date(F.floor(F.col("run_end_ms") / DAY_MS).cast("int")).alias("date"),
        F.timestamp_millis("run_start_ms").alias("run_start"),
        F.timestamp_millis("run_end_ms").alias("run_end"),
        F.col("run_intervals").cast("int").alias("intervals"),
        F.col("run_from_size").alias("from_size"),
        F.col("run_to_size").alias("to_size"),
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
            percentile(F.col(f"_{name}_cumulative"), F.col(f"{name}_max"), p).alias(f"{name}_{label}_ms")
            for p, label in PERCENTILES
        ]
    cumulative = [cumulative_counts(F.col(f"{name}_counts")).alias(f"_{name}_cumulative") for name in LAG_NAMES]
    return table.select("*", *cumulative).select(*table.columns, *derived)


__all__ = [
    "BUCKETS",
    "topic_hour",
    "topic_rollup",
    "namespace_rollup",
    "with_derived",
    "ready_growth_runs",
    "growth_intervals",
    "hour_parts",
]
