"""The pass's groups in Spark, and the duplicate intervals found on them.

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
duplicate-free groups: ``rollup.hour_rows`` sums them per topic and hour,
``growth.growth_runs`` finds the backlog-growth runs.
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
)
from spark_jobs.snapshot import DAY_MS, HOUR_MS, STATUS_CODES, VALUE_COLUMNS

_COLUMNS: dict = {}


def cached_columns(key: tuple, build):
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


def shift_left(value: Column, bits: Column) -> Column:
    """``value << bits`` with a column shift count (``F.shiftleft`` takes a constant)."""
    return F.call_function("shiftleft", value, bits)


def _div(a: Column, b: Column) -> Column:
    """Integer division of non-negative longs."""
    return ((a - F.pmod(a, b)) / b).cast("long")


def line_groups(rows: DataFrame, one_per_line: bool = False) -> DataFrame:
    """``snapshot_rows`` output (every status) -> its groups (``groups.GROUP_SCHEMA``; see
    ``spark_jobs.groups``). ``one_per_line`` puts every valid line in a group of its own and
    makes no events (used for de-duplicated lines)."""
    kinds, keyed, aggregates = cached_columns(
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
        ok & on_grid, shift_left(F.lit(1).cast("long"), F.pmod(slot, F.lit(SLOTS)).cast("int"))
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


def day_number(hour_ms: Column) -> Column:
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
            day_number(col("hour_start_ms")).alias("day"),
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
        .withColumn("day", day_number(col("hour_start_ms")))
        .join(F.broadcast(dirty), day_keys, "left_anti")
        .drop("day")
    )
    return clean.unionByName(exact)


__all__ = [
    "cached_columns",
    "day_number",
    "deduplicated_groups",
    "drop_duplicate_lines",
    "duplicate_keys",
    "line_groups",
    "shared_hours",
    "shift_left",
    "valid_groups",
    "value_groups",
]
