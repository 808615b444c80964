"""The tables' rows: per topic and per namespace, per hour, day and in total.

``hour_rows`` makes the hours of duplicate-free groups (``spark_jobs.aggregate``), ``rollups``
the coarser tables from them, and ``derive_tables`` adds every table's derived columns.

Base columns of every table (rolled up by sum, max, or "last"):
  snapshot_lines, first_interval_start_ms, last_interval_end_ms, the counters (``ended``
  without the dead letters: ``counter_column``),
  ``<lag>_count/_sum/_max/_counts`` for delivery_lag and scheduling_lag,
  ``<gauge>_sum/_avg/_max/_last`` for waiting_size, ready_size, consuming_size,
  group_blocked_size (due messages behind their message group's head) and paused (1 while
  paused: avg is the share of the intervals paused, max whether it was, last whether it is),
  and the waiting-queue delay distribution at the last interval (``waiting_0_1min`` ...).
Topic rows are per subscription (``subscription``: "default", the topic's own lines with its
sends, or a named one's); namespace rows sum every subscription's rows (a message waiting for
two subscriptions counts twice, as two deliveries are due), and ``topics`` counts topics.
For namespace rows the gauges are sums over the namespace's topics: avg and last are the
namespace's own figures (exact when topics cover the same intervals; paused_last is the
number of topics paused); max is the sum of per-topic maxima, an upper bound on the
simultaneous peak.
``with_derived`` adds rates, ratios, lag mean and percentiles.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_jobs import tables
from spark_jobs.aggregate import cached_columns, day_number, value_groups
from spark_jobs.groups import LAST_COLUMNS, VALUE_MASK
from spark_jobs.histogram import BUCKETS, bucket_array, cumulative_counts, percentile, sum_buckets
from spark_jobs.snapshot import (
    BUCKET_COLUMNS,
    COUNTER_NAMES,
    DEFAULT_SUBSCRIPTION,
    GAUGE_NAMES,
    LAG_NAMES,
    PUSH_NAMES,
    VALUE_COLUMNS,
    WAITING_NAMES,
    split_topic,
)
from spark_jobs.tables import BASE_FIELDS

PERCENTILES = ((0.5, "p50"), (0.9, "p90"), (0.99, "p99"))


def counter_column(name: str) -> Column:
    """A counter of an hour's row. The server counts a dead letter twice: in
    triggerMsgEndLife (every message that ended by expiry or exhausted retries) and in
    deadLettered. Every table's ``ended`` leaves the dead letters out (messages that ended
    and were dropped), so ``ended`` and ``dead_lettered`` are apart and their sum is every
    message that ended (docs/report.md, "What it computes")."""
    if name == "ended":
        return (F.col("ended") - F.col("dead_lettered")).alias("ended")
    return F.col(name)


def span_columns(lines: str) -> list[Column]:
    """``snapshot_lines`` (the sum of ``lines``) and the span of the rows' intervals: the
    aggregates every grain shares."""
    return [
        F.sum(lines).alias("snapshot_lines"),
        F.min("first_interval_start_ms").alias("first_interval_start_ms"),
        F.max("last_interval_end_ms").alias("last_interval_end_ms"),
    ]


def gauge_extremes() -> list[Column]:
    """Each queue size's sum and maximum over the rows of one topic."""
    return [
        agg(f"{name}_{stat}").alias(f"{name}_{stat}")
        for name in GAUGE_NAMES
        for stat, agg in (("sum", F.sum), ("max", F.max))
    ]


def hour_rows(groups: DataFrame, merge: bool = True) -> DataFrame:
    """Duplicate-free valid groups -> one row per (namespace, topic, subscription, hour): the
    base columns plus ``date`` and ``hour_start`` (the groups' ``topic_key`` split).
    ``merge=False`` when no hour has more than one block or off-grid line group
    (``shared_hours``: every hour of lines the server writes, at its usual interval
    lengths): each group is then its hour's row as it is, no aggregate needed.
    """
    col = F.col
    maxima = {f"{lag}_max" for lag in LAG_NAMES}
    summed = [
        name for name in VALUE_COLUMNS if name not in LAST_COLUMNS and name not in BUCKET_COLUMNS
    ]
    keys = ["namespace", "topic", "hour_start_ms"]
    if merge:
        hours = (
            value_groups(groups)
            .groupBy(*keys)
            .agg(
                *span_columns("lines"),
                *gauge_extremes(),
                *[(F.max(name) if name in maxima else F.sum(name)).alias(name) for name in summed],
                *[F.sum(name).alias(name) for name in BUCKET_COLUMNS],
                *[F.max(f"{name}_packed").alias(f"{name}_packed") for name in LAST_COLUMNS],
            )
        )
    else:
        hours = value_groups(groups).select(
            *keys,
            col("lines").alias("snapshot_lines"),
            "first_interval_start_ms",
            "last_interval_end_ms",
            *summed,
            *BUCKET_COLUMNS,
            *[f"{name}_{op}" for name in GAUGE_NAMES for op in ("sum", "max")],
            *[f"{name}_packed" for name in LAST_COLUMNS],
        )
    counts = [
        bucket_array([col(f"{lag}_b{i}") for i in range(BUCKETS)]).alias(f"{lag}_counts")
        for lag in LAG_NAMES
    ]
    unpacked = {
        name: (col(f"{name}_packed").bitwiseAND(F.lit(VALUE_MASK))) for name in LAST_COLUMNS
    }
    lines = col("snapshot_lines")
    day = day_number(col("hour_start_ms"))
    return hours.select(
        "namespace",
        *split_topic(),
        F.date_from_unix_date(day).alias("date"),
        "hour_start_ms",
        F.timestamp_millis("hour_start_ms").alias("hour_start"),
        "snapshot_lines",
        "first_interval_start_ms",
        "last_interval_end_ms",
        *[counter_column(name) for name in COUNTER_NAMES],
        *[c for lag in LAG_NAMES for c in (f"{lag}_count", f"{lag}_sum", f"{lag}_max")],
        *counts,
        *[
            c
            for name in GAUGE_NAMES
            for c in (
                col(f"{name}_sum"),
                col(f"{name}_max"),
                unpacked[name].alias(f"{name}_last"),
                (col(f"{name}_sum") / lines).alias(f"{name}_avg"),
            )
        ],
        *[unpacked[name].alias(name) for name in WAITING_NAMES],
    )


def _hist_sum(name: str) -> list[Column]:
    return [
        F.sum(f"{name}_count").alias(f"{name}_count"),
        F.sum(f"{name}_sum").alias(f"{name}_sum"),
        F.max(f"{name}_max").alias(f"{name}_max"),
        bucket_array(sum_buckets(F.col(f"{name}_counts"))).alias(f"{name}_counts"),
    ]


def _topic_aggregates() -> list[Column]:
    last = F.col("last_interval_end_ms")
    return [
        *span_columns("snapshot_lines"),
        *gauge_extremes(),
        *[F.sum(name).alias(name) for name in COUNTER_NAMES],
        *[c for name in LAG_NAMES for c in _hist_sum(name)],
        *[F.max_by(f"{name}_last", last).alias(f"{name}_last") for name in GAUGE_NAMES],
        *[F.max_by(name, last).alias(name) for name in WAITING_NAMES],
        *[
            (F.sum(f"{name}_sum") / F.sum("snapshot_lines")).alias(f"{name}_avg")
            for name in GAUGE_NAMES
        ],
    ]


ROLLUP_KEYS = {
    "topic_hour": ["date", "hour_start_ms", "hour_start"],
    "topic_day": ["date"],
    "topic_total": [],
    "namespace_hour": ["date", "hour_start_ms", "hour_start"],
    "namespace_day": ["date"],
    "namespace_total": [],
}
"""The time keys of each table (beside namespace, and topic and subscription for the topic
tables)."""
NAMESPACE_SOURCE = {
    "namespace_hour": "topic_hour",
    "namespace_day": "topic_day",
    "namespace_total": "topic_total",
}
TIME_KEY_TYPES = {"date": "date", "hour_start_ms": "bigint", "hour_start": "timestamp"}
"""The time keys of the tables, with their SQL types."""
_BASE = [name for name, _ in BASE_FIELDS]


def rollups(rows: DataFrame, source: str, wanted: list[str]) -> dict[str, DataFrame]:
    """Topic rows of table ``source`` (topic_hour or topic_day) -> the ``wanted`` coarser
    tables, in two aggregates: one for every topic table (each row counted once per grain),
    one for every namespace table (over the union of the topic rows it sums). Each table is a
    filter of its aggregate, so a query over several of them computes each aggregate once.
    """
    col = F.col
    needed = set(wanted) | {NAMESPACE_SOURCE[n] for n in wanted if n in NAMESPACE_SOURCE}
    topic_names = [n for n in ROLLUP_KEYS if n.startswith("topic_") and n in needed - {source}]
    result: dict[str, DataFrame] = {source: rows}
    if topic_names:
        grains = F.explode(F.array(*[F.lit(i) for i in range(len(topic_names))]))
        expanded = rows.select(
            "namespace",
            "topic",
            "subscription",
            *ROLLUP_KEYS[source],
            *_BASE,
            grains.alias("_grain"),
        )
        keys = []
        for key in ROLLUP_KEYS[source]:
            kept = [i for i, n in enumerate(topic_names) if key in ROLLUP_KEYS[n]]
            if kept:
                keys.append(F.when(col("_grain").isin(*kept), col(key)).alias(key))
        topic = expanded.groupBy("_grain", "namespace", "topic", "subscription", *keys).agg(
            *cached_columns(("topic_rollup",), _topic_aggregates)
        )
        for i, name in enumerate(topic_names):
            result[name] = topic.filter(col("_grain") == i).select(
                "namespace",
                "topic",
                "subscription",
                *ROLLUP_KEYS[name],
                *[c for c in topic.columns if c in _BASE],
            )
    namespace_names = [n for n in ROLLUP_KEYS if n.startswith("namespace_") and n in needed]
    if namespace_names:
        parts = None
        for i, name in enumerate(namespace_names):
            part = result[NAMESPACE_SOURCE[name]].select(
                F.lit(i).alias("_grain"),
                "namespace",
                (col("subscription") == DEFAULT_SUBSCRIPTION).alias("_topic_row"),
                *[
                    (col(k) if k in ROLLUP_KEYS[name] else F.lit(None).cast(kind)).alias(k)
                    for k, kind in TIME_KEY_TYPES.items()
                ],
                *_BASE,
            )
            parts = part if parts is None else parts.unionByName(part)
        spaces = parts.groupBy("_grain", "namespace", *TIME_KEY_TYPES).agg(
            *cached_columns(("namespace_rollup",), _namespace_aggregates)
        )
        for i, name in enumerate(namespace_names):
            result[name] = spaces.filter(col("_grain") == i).select(
                "namespace",
                *ROLLUP_KEYS[name],
                *[c for c in spaces.columns if c not in ("_grain", "namespace", *TIME_KEY_TYPES)],
            )
    return {name: result[name] for name in wanted}


def _namespace_aggregates() -> list[Column]:
    return [
        # every topic has its own (default subscription's) row, beside its named ones'
        F.count(F.when(F.col("_topic_row"), F.lit(1))).alias("topics"),
        *span_columns("snapshot_lines"),
        *[F.sum(name).alias(name) for name in COUNTER_NAMES],
        *[c for name in LAG_NAMES for c in _hist_sum(name)],
        *[
            F.sum(f"{name}_{stat}").alias(f"{name}_{stat}")
            for name in GAUGE_NAMES
            for stat in ("sum", "avg", "max", "last")
        ],
        *[F.sum(name).alias(name) for name in WAITING_NAMES],
    ]


def with_derived(table: DataFrame) -> DataFrame:
    """Add per-second rates, ack / redelivery ratios, the pushes and their success ratio, lag
    (and push latency) means and p50 / p90 / p99."""
    cumulative, derived = cached_columns(("with_derived",), _derived_columns)
    return table.select("*", *cumulative).select(*table.columns, *derived)


def _derived_columns() -> tuple[list[Column], list[Column]]:
    window_s = (F.col("last_interval_end_ms") - F.col("first_interval_start_ms")) / 1000.0
    derived = [window_s.alias("window_s")]
    derived += [(F.col(name) / window_s).alias(f"{name}_per_s") for name in COUNTER_NAMES]
    delivered = F.when(F.col("delivered") > 0, F.col("delivered"))
    derived += [
        (F.col("acked") / delivered).alias("ack_ratio"),
        (F.col("timed_out") / delivered).alias("redelivery_ratio"),
    ]
    # push delivery: the POSTs answered (every outcome) and the share answered 2xx
    pushed = sum((F.col(name) for name in PUSH_NAMES[1:]), F.col(PUSH_NAMES[0]))
    derived += [
        pushed.alias("pushes"),
        (F.col("push_2xx") / F.when(pushed > 0, pushed)).alias("push_success_ratio"),
    ]
    for name in LAG_NAMES:
        count = F.when(F.col(f"{name}_count") > 0, F.col(f"{name}_count"))
        derived.append((F.col(f"{name}_sum") / count).alias(f"{name}_mean_ms"))
        derived += [
            percentile(F.col(f"_{name}_cumulative"), F.col(f"{name}_max"), p).alias(
                f"{name}_{label}_ms"
            )
            for p, label in PERCENTILES
        ]
    cumulative = [
        cumulative_counts(F.col(f"{name}_counts")).alias(f"_{name}_cumulative")
        for name in LAG_NAMES
    ]
    return cumulative, derived


def derive_tables(frames: dict):
    """Base tables (name -> frame with the table's keys and the base columns) -> the same
    tables with their derived columns, conformed to their schemas.

    The derived columns (rates, ratios, percentiles) are wide expressions, slow to plan: they
    are computed once, over the union of every table, and kept in a local checkpoint, so each
    table's own query is a filter and a projection of it."""
    # The union is materialized first: Spark pushes a projection over a union into each of its
    # branches, which would compile the wide derived expressions once per table.
    union = _union(frames).localCheckpoint(eager=True)
    derived = with_derived(union).localCheckpoint(eager=True)
    return {
        name: tables.conform(derived.filter(F.col("_table") == tag), name)
        for tag, name in enumerate(frames)
    }


def _union(frames: dict):
    """The tables' base columns in one frame, each row tagged with its table (``_table``)."""
    keys = {
        "namespace": "string",
        "topic": "string",
        "subscription": "string",
        **TIME_KEY_TYPES,
        "topics": "bigint",
    }
    union = None
    for tag, (name, frame) in enumerate(frames.items()):
        schema = tables.SCHEMAS[name]
        present = set(frame.columns)
        # SQL text: one call into the JVM for the whole list, not several per column.
        columns = [f"{tag} AS _table"]
        columns += [
            f"CAST({f'`{k}`' if k in present else 'NULL'} AS {t}) AS `{k}`" for k, t in keys.items()
        ]
        columns += [
            f"CAST(`{f.name}` AS {f.dataType.simpleString()}) AS `{f.name}`"
            for f in schema.fields
            if f.name in tables.BASE_NAMES
        ]
        part = frame.selectExpr(*columns)
        union = part if union is None else union.unionByName(part)
    return union
