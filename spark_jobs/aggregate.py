"""Aggregates of snapshot intervals: per topic and per namespace, per hour, day and in total.

The pass over the input is one aggregate into the groups of ``spark_jobs.groups`` (blocks of
on-grid lines per topic-hour, off-grid lines one by one, events for the lines of a non-empty
ready queue, bad lines per status and date): ``line_groups`` computes it with Spark
expressions for Spark's JSON source, partially on the map side before the only shuffle, and
the Arrow reader per file in its tasks (``groups.group_lines``), so raw lines never cross the
shuffle, and those it reads never reach the JVM.

Duplicates (an interval written twice) are found on that small result, exactly:
``duplicate_keys`` flags a topic-day when a block counts more lines than slots, an off-grid
interval holds two lines, or one hour mixes interval lengths. Only those topic-days are read
again, their copies dropped (``drop_duplicate_lines``: the copy kept is the one with the
largest hash of its values, so identical copies count once and differing ones
deterministically), and their lines re-grouped one per group. Everything after works on
duplicate-free groups: ``hour_rows`` sums them per topic and hour, ``growth_runs`` finds the
backlog-growth runs.

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

from spark_jobs.groups import (
    EXAMPLE_COLUMNS,
    GROUP_KEYS,
    GROUP_VALUES,
    KIND_BAD,
    KIND_BLOCK,
    KIND_EVENT,
    KIND_LINE,
    LAST_COLUMNS,
    SLOTS,
    VALUE_BITS,
    VALUE_MASK,
)
from spark_jobs.histogram import BUCKETS, bucket_array, cumulative_counts, percentile, sum_buckets
from spark_jobs.snapshot import (
    BUCKET_COLUMNS,
    COUNTER_NAMES,
    DAY_MS,
    GAUGE_NAMES,
    HOUR_MS,
    LAG_NAMES,
    STATUS_CODES,
    VALUE_COLUMNS,
    WAITING_NAMES,
)
from spark_jobs.tables import BASE_FIELDS

PERCENTILES = ((0.5, "p50"), (0.9, "p90"), (0.99, "p99"))


_COLUMNS: dict = {}


def _cached(key: tuple, build):
    """The column list ``build()`` makes, built once per JVM. Column expressions are unresolved,
    so one list serves every frame; building one costs a call into the JVM per operator (the
    roll-ups' lists hold hundreds), which a run paid again for each table, and the tests for
    each run."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None:
        return build()
    full = (id(gateway), *key)
    if full not in _COLUMNS:
        _COLUMNS[full] = build()
    return _COLUMNS[full]


def _shl(value: Column, bits: Column) -> Column:
    """``value << bits`` with a column shift count (``F.shiftleft`` takes a constant)."""
    return F.call_function("shiftleft", value, bits)


def _div(a: Column, b: Column) -> Column:
    """Integer division of non-negative longs."""
    return ((a - F.pmod(a, b)) / b).cast("long")


def line_groups(rows: DataFrame, one_per_line: bool = False) -> DataFrame:
    """``snapshot_rows`` output (every status) -> its groups (``groups.GROUP_SCHEMA``; see
    ``spark_jobs.groups``). ``one_per_line`` puts every valid line in a group of its own and
    makes no events (used for de-duplicated lines)."""
    kinds, keyed, aggregates = _cached(
        ("line_groups", one_per_line), lambda: _group_columns(one_per_line)
    )
    grouped = rows.select("*", *kinds).select(*keyed).groupBy(*GROUP_KEYS).agg(*aggregates)
    return grouped.select(
        *GROUP_KEYS,
        *[name for name, _, _ in GROUP_VALUES],
        *[F.lit(None).cast("string").alias(name) for name in EXAMPLE_COLUMNS],
    )


def _group_columns(one_per_line: bool) -> tuple[list[Column], list[Column], list[Column]]:
    col = F.col
    ok = col("status") == STATUS_CODES["ok"]
    start, end = col("interval_start"), col("interval_end")
    length = end - start
    hour = start - F.pmod(start, F.lit(HOUR_MS))
    offset = start - hour
    on_grid = (length > 0) & (F.pmod(F.lit(HOUR_MS), length) == 0) & (F.pmod(start, length) == 0)
    slot = _div(offset, length)
    if one_per_line:
        kinds = [F.when(ok, KIND_LINE).otherwise(KIND_BAD).alias("_kind")]
    else:
        kind = F.when(ok & on_grid, KIND_BLOCK).when(ok, KIND_LINE).otherwise(KIND_BAD)
        # An on-grid line with a non-empty ready queue counts in its block and as an event.
        event = ok & on_grid & (col("ready_size") > 0)
        kinds = [
            F.explode(
                F.when(event, F.array(kind, F.lit(KIND_EVENT))).otherwise(F.array(kind))
            ).alias("_kind")
        ]
    kind = col("_kind")
    bit = F.when(
        ok & on_grid, _shl(F.lit(1).cast("long"), F.pmod(slot, F.lit(SLOTS)).cast("int"))
    ).otherwise(F.lit(0).cast("long"))
    keyed = [
        col("status"),
        F.when(ok, col("namespace")).alias("namespace"),
        F.when(ok, col("topic")).alias("topic"),
        F.when(ok, hour).alias("hour_start_ms"),
        kind.alias("kind"),
        F.when(kind == KIND_BLOCK, length).alias("grid_ms"),
        F.when(kind == KIND_BLOCK, _div(slot, F.lit(SLOTS))).when(ok, start).alias("position"),
        F.when(~ok, col("file_day")).alias("bad_file_day"),
        bit.alias("_bit"),
        F.when(col("ready_size") == 0, bit).otherwise(F.lit(0).cast("long")).alias("_zero_bit"),
        length.alias("_length"),
        start,
        end,
        *[col(name) for name in VALUE_COLUMNS],
        *[
            (F.shiftleft(offset, VALUE_BITS) + col(name)).alias(f"_packed_{name}")
            for name in LAST_COLUMNS
        ],
        # One growth step per event (the Arrow reader's tasks leave out the events inside a
        # growth run and give the next one their steps: groups._events).
        F.when(kind == KIND_EVENT, F.lit(1).cast("long")).alias("_steps"),
    ]
    ops = {"sum": F.sum, "max": F.max, "min": F.min, "bit_or": F.bit_or}

    def value(source: str) -> Column:
        # Events carry only what the growth rule reads (their ready queue and steps).
        if one_per_line or source in ("_packed_ready_size", "_steps"):
            return col(source)
        return F.when(col("kind") != KIND_EVENT, col(source))

    aggregates = [
        (F.count(F.lit(1)) if op == "count" else ops[op](value(source))).alias(name)
        for name, op, source in GROUP_VALUES
    ]
    return kinds, keyed, aggregates


def valid_groups(groups: DataFrame) -> DataFrame:
    """The groups of valid lines (blocks, off-grid lines and events)."""
    return groups.filter(F.col("status") == STATUS_CODES["ok"])


def value_groups(groups: DataFrame) -> DataFrame:
    """The groups that hold each valid line once: blocks and off-grid lines (not events)."""
    return groups.filter((F.col("status") == STATUS_CODES["ok"]) & (F.col("kind") != KIND_EVENT))


def shared_hours(groups: DataFrame) -> DataFrame:
    """The hours holding more than one block or off-grid line group (``hour_rows`` merges
    them): (namespace, topic, hour_start_ms)."""
    hour = ["namespace", "topic", "hour_start_ms"]
    return (
        value_groups(groups)
        .groupBy(*hour)
        .agg(F.count(F.lit(1)).alias("groups"))
        .filter(F.col("groups") > 1)
        .select(*hour)
    )


def _day(hour_ms: Column) -> Column:
    return F.floor(hour_ms / DAY_MS).cast("int")


def duplicate_keys(groups: DataFrame) -> DataFrame:
    """Groups -> (namespace, topic, day) whose lines may hold a duplicate interval (see the
    module docstring); ``day`` is days since 1970. Two lines of one interval are either of one
    length, so in the same slot of one block or the same off-grid position, or of two lengths
    in one hour. Groups of one block or position from several files are summed here."""
    col = F.col
    valid = value_groups(groups)
    hour = ["namespace", "topic", "hour_start_ms"]
    # An hour mixing blocks and off-grid lines is rebuilt line by line too: the Arrow reader
    # leaves out events inside a block's growth runs (groups._events), which only holds
    # where nothing else interleaves with the block's lines.
    mixed = (
        valid.groupBy(*hour)
        .agg(
            F.min("length_min").alias("shortest"),
            F.max("length_max").alias("longest"),
            F.min("kind").alias("first_kind"),
            F.max("kind").alias("last_kind"),
        )
        .filter((col("shortest") != col("longest")) | (col("first_kind") != col("last_kind")))
        .select(*hour)
    )
    copies = (
        valid.filter(col("kind") == KIND_LINE)
        .groupBy(*hour, "position")
        .agg(F.sum("lines").alias("lines"))
        .filter(col("lines") > 1)
        .select(*hour)
    )
    # A block read from several files (its lines split between them) is rebuilt too, for the
    # same reason.
    crowded = (
        valid.filter(col("kind") == KIND_BLOCK)
        .groupBy(*hour, "grid_ms", "position")
        .agg(
            F.bit_count(F.bit_or("slot_mask")).alias("slots"),
            F.sum("lines").alias("lines"),
            F.count(F.lit(1)).alias("parts"),
        )
        .filter((col("slots") != col("lines")) | (col("parts") > 1))
        .select(*hour)
    )
    # New names (aliases) for the keys: joined back to a checkpoint of ``groups``, the same
    # attribute ids on both sides would be a conflict Spark does not resolve (SPARK-42805).
    return (
        mixed.unionByName(copies)
        .unionByName(crowded)
        .select(
            col("namespace").alias("namespace"),
            col("topic").alias("topic"),
            _day(col("hour_start_ms")).alias("day"),
        )
        .distinct()
    )


def drop_duplicate_lines(rows: DataFrame) -> DataFrame:
    """Valid flat rows -> one row per (namespace, topic, intervalStart): the copy with the
    largest hash of its values (then the latest intervalEnd)."""
    copies = Window.partitionBy("namespace", "topic", "interval_start").orderBy(
        F.col("_hash").desc(), F.col("interval_end").desc()
    )
    return (
        rows.withColumn("_hash", F.xxhash64(*VALUE_COLUMNS))
        .withColumn("_copy", F.row_number().over(copies))
        .filter(F.col("_copy") == 1)
        .drop("_hash", "_copy")
    )


def deduplicated_groups(groups: DataFrame, dirty: DataFrame, source: DataFrame) -> DataFrame:
    """Valid groups (events included) with the topic-days in ``dirty`` (``duplicate_keys``)
    rebuilt from ``source`` (``snapshot_rows`` holding at least every line of those
    topic-days): their lines de-duplicated and grouped one per group."""
    col = F.col
    day_keys = ["namespace", "topic", "day"]
    flagged = (
        source.filter(col("status") == STATUS_CODES["ok"])
        .withColumn("day", F.floor(col("interval_start") / DAY_MS).cast("int"))
        .join(F.broadcast(dirty), day_keys, "left_semi")
        .drop("day")
    )
    exact = line_groups(drop_duplicate_lines(flagged), one_per_line=True)
    clean = (
        valid_groups(groups)
        .withColumn("day", _day(col("hour_start_ms")))
        .join(F.broadcast(dirty), day_keys, "left_anti")
        .drop("day")
    )
    return clean.unionByName(exact)


def _span(lines: str) -> list[Column]:
    """``snapshot_lines`` (the sum of ``lines``) and the span of the rows' intervals: the
    aggregates every grain shares."""
    return [
        F.sum(lines).alias("snapshot_lines"),
        F.min("first_interval_start_ms").alias("first_interval_start_ms"),
        F.max("last_interval_end_ms").alias("last_interval_end_ms"),
    ]


def _gauge_extremes() -> list[Column]:
    """Each queue size's sum and maximum over the rows of one topic."""
    return [
        agg(f"{name}_{stat}").alias(f"{name}_{stat}")
        for name in GAUGE_NAMES
        for stat, agg in (("sum", F.sum), ("max", F.max))
    ]


def hour_rows(groups: DataFrame, merge: bool = True) -> DataFrame:
    """Duplicate-free valid groups -> one row per (namespace, topic, hour): the base columns
    plus ``date`` and ``hour_start``. ``merge=False`` when no hour has more than one block or
    off-grid line group (``shared_hours``: every hour of lines the server writes, at its
    usual interval lengths): each group is then its hour's row as it is, no aggregate needed.
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
                *_span("lines"),
                *_gauge_extremes(),
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
    day = _day(col("hour_start_ms"))
    return hours.select(
        "namespace",
        "topic",
        F.date_from_unix_date(day).alias("date"),
        "hour_start_ms",
        F.timestamp_millis("hour_start_ms").alias("hour_start"),
        "snapshot_lines",
        "first_interval_start_ms",
        "last_interval_end_ms",
        *COUNTER_NAMES,
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


def _high_bit(mask: Column) -> Column:
    """Index of the highest set bit of a non-zero long (exact: from its binary string)."""
    return (F.length(F.bin(mask)) - 1).cast("long")


def growth_runs(groups: DataFrame, min_intervals: int) -> DataFrame:
    """Duplicate-free valid groups -> one row per ready-queue growth run of at least
    ``min_intervals`` steps: namespace, topic, date, run_start, run_end, intervals,
    from_size, to_size.

    Rule (exact, per topic and UTC day, over consecutive snapshots in time order; a minute
    without a snapshot is skipped, not a break): a snapshot "grew" when its readyQueueSize is
    larger than the previous snapshot's. A run is a snapshot that did not grow (its start)
    followed by every following snapshot that grew; its length is the number of growth steps.

    The points followed one by one are the events (on-grid lines whose ready queue is not
    empty) and the off-grid lines; a block's other slots hold empty ready queues
    (``zero_mask``), and only those can be a point's previous snapshot without being points
    themselves. An event stands for ``steps`` growth steps (the Arrow reader leaves out the
    events inside a block's growth run: ``groups._events``); a run's length is their sum. A
    point's previous snapshot is either the previous point or the latest empty
    slot before it, whichever is later; blocks never overlap (one grid per topic-hour, else
    the topic-day went through ``drop_duplicate_lines`` and has no blocks), so the block
    holding that slot is the latest block with an empty slot starting at or before the point.
    """
    col = F.col
    valid = valid_groups(groups)
    day_keys = ["namespace", "topic", "day"]
    grid = col("grid_ms")
    t0 = col("hour_start_ms") + col("position") * SLOTS * grid
    blocks = (
        valid.filter(col("kind") == KIND_BLOCK)
        .groupBy("namespace", "topic", "hour_start_ms", "grid_ms", "position")
        .agg(F.bit_or("zero_mask").alias("mask"))
        .filter(col("mask") != 0)
        .select(
            "namespace",
            "topic",
            _day(col("hour_start_ms")).alias("day"),
            t0.alias("t0"),
            F.least(t0 + SLOTS * grid, col("hour_start_ms") + HOUR_MS).alias("t1"),
            grid.alias("grid"),
            "mask",
            (t0 + _high_bit(col("mask")) * grid).alias("zmax"),
        )
    )
    lines = valid.filter(col("kind").isin(KIND_LINE, KIND_EVENT)).select(
        "namespace",
        "topic",
        _day(col("hour_start_ms")).alias("day"),
        col("position").alias("s"),
        col("ready_size_packed").bitwiseAND(F.lit(VALUE_MASK)).alias("ready"),
        F.coalesce(col("steps"), F.lit(1).cast("long")).alias("weight"),
    )
    # Only the topic-days with points can grow: most blocks are of topics that never do.
    blocks = blocks.join(lines.select(*day_keys).distinct(), day_keys, "left_semi")
    blocks = blocks.withColumn(
        "prev_zmax", F.lag("zmax").over(Window.partitionBy(*day_keys).orderBy("t0"))
    )
    block_events = blocks.select(
        *day_keys,
        col("t0").alias("time"),
        F.lit(0).alias("ord"),
        F.struct("t0", "t1", "grid", "mask", "zmax", "prev_zmax").alias("block"),
        F.lit(None).cast("long").alias("ready"),
        F.lit(None).cast("long").alias("weight"),
    )
    block_type = block_events.schema["block"].dataType
    events = block_events.unionByName(
        lines.select(
            *day_keys,
            col("s").alias("time"),
            F.lit(1).alias("ord"),
            F.lit(None).cast(block_type).alias("block"),
            "ready",
            "weight",
        )
    )
    ordered = Window.partitionBy(*day_keys).orderBy("time", "ord")
    so_far = ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    before = ordered.rowsBetween(Window.unboundedPreceding, -1)
    is_line = col("ord") == 1
    seen = events.select(
        *day_keys,
        "time",
        "ord",
        "ready",
        "weight",
        F.last("block", ignorenulls=True).over(so_far).alias("b"),
        F.last(F.when(is_line, col("time")), ignorenulls=True).over(before).alias("prev_line_s"),
        F.last(F.when(is_line, col("ready")), ignorenulls=True)
        .over(before)
        .alias("prev_line_ready"),
    ).filter(is_line)
    s = col("time")
    b = col("b")
    below = F.ceil((s - b["t0"]) / b["grid"]).cast("int")
    partial_mask = F.when(below >= SLOTS, b["mask"]).otherwise(
        b["mask"].bitwiseAND(_shl(F.lit(1).cast("long"), below) - 1)
    )
    straddle_zero = F.when(partial_mask != 0, b["t0"] + _high_bit(partial_mask) * b["grid"])
    zero = (
        F.when(b.isNull(), F.lit(None).cast("long"))
        .when(b["t1"] > s, F.coalesce(straddle_zero, b["prev_zmax"]))
        .otherwise(b["zmax"])
    )
    with_zero = seen.select(
        *day_keys,
        s.alias("s"),
        "ready",
        "weight",
        "prev_line_s",
        "prev_line_ready",
        zero.alias("zero"),
    )
    prev_is_zero = col("zero").isNotNull() & (
        col("prev_line_s").isNull() | (col("zero") > col("prev_line_s"))
    )
    steps = with_zero.select(
        *day_keys,
        "s",
        "ready",
        "weight",
        F.when(prev_is_zero, col("zero")).otherwise(col("prev_line_s")).alias("prev_s"),
        F.when(prev_is_zero, F.lit(0).cast("long"))
        .otherwise(col("prev_line_ready"))
        .alias("prev_ready"),
        (~prev_is_zero & col("prev_line_s").isNotNull()).alias("prev_is_line"),
    ).withColumn("grew", col("prev_s").isNotNull() & (col("ready") > col("prev_ready")))
    by_time = Window.partitionBy(*day_keys).orderBy("s")
    new_run = col("grew") & ~(
        col("prev_is_line") & F.coalesce(F.lag("grew").over(by_time), F.lit(False))
    )
    numbered = steps.withColumn("_new", new_run.cast("int")).withColumn(
        "run", F.sum("_new").over(by_time.rowsBetween(Window.unboundedPreceding, Window.currentRow))
    )
    runs = (
        numbered.filter("grew")
        .groupBy(*day_keys, "run")
        .agg(
            F.sum("weight").alias("intervals"),
            F.min_by("prev_s", "s").alias("run_start_ms"),
            F.min_by("prev_ready", "s").alias("from_size"),
            F.max("s").alias("run_end_ms"),
            F.max_by("ready", "s").alias("to_size"),
        )
        .filter(col("intervals") >= int(min_intervals))
    )
    return runs.select(
        "namespace",
        "topic",
        F.date_from_unix_date("day").alias("date"),
        F.timestamp_millis("run_start_ms").alias("run_start"),
        F.timestamp_millis("run_end_ms").alias("run_end"),
        col("intervals").cast("int").alias("intervals"),
        "from_size",
        "to_size",
    )


# ---- roll-ups and derived columns (small tables) -------------------------------------------


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
        *_span("snapshot_lines"),
        *_gauge_extremes(),
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
"""The time keys of each table (beside namespace, and topic for the topic tables)."""
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
            "namespace", "topic", *ROLLUP_KEYS[source], *_BASE, grains.alias("_grain")
        )
        keys = []
        for key in ROLLUP_KEYS[source]:
            kept = [i for i, n in enumerate(topic_names) if key in ROLLUP_KEYS[n]]
            if kept:
                keys.append(F.when(col("_grain").isin(*kept), col(key)).alias(key))
        topic = expanded.groupBy("_grain", "namespace", "topic", *keys).agg(
            *_cached(("topic_rollup",), _topic_aggregates)
        )
        for i, name in enumerate(topic_names):
            result[name] = topic.filter(col("_grain") == i).select(
                "namespace", "topic", *ROLLUP_KEYS[name], *[c for c in topic.columns if c in _BASE]
            )
    namespace_names = [n for n in ROLLUP_KEYS if n.startswith("namespace_") and n in needed]
    if namespace_names:
        parts = None
        for i, name in enumerate(namespace_names):
            part = result[NAMESPACE_SOURCE[name]].select(
                F.lit(i).alias("_grain"),
                "namespace",
                *[
                    (col(k) if k in ROLLUP_KEYS[name] else F.lit(None).cast(kind)).alias(k)
                    for k, kind in TIME_KEY_TYPES.items()
                ],
                *_BASE,
            )
            parts = part if parts is None else parts.unionByName(part)
        spaces = parts.groupBy("_grain", "namespace", *TIME_KEY_TYPES).agg(
            *_cached(("namespace_rollup",), _namespace_aggregates)
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
        F.count(F.lit(1)).alias("topics"),
        *_span("snapshot_lines"),
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
    """Add per-second rates, ack / redelivery ratios, lag means and p50 / p90 / p99."""
    cumulative, derived = _cached(("with_derived",), _derived_columns)
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


__all__ = [
    "BUCKETS",
    "line_groups",
    "value_groups",
    "duplicate_keys",
    "drop_duplicate_lines",
    "deduplicated_groups",
    "hour_rows",
    "shared_hours",
    "growth_runs",
    "rollups",
    "with_derived",
]
