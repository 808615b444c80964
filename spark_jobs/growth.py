"""The ready queue's growth runs, from the pass's groups (the ``ready_backlog_growing`` finding).

The rule follows the snapshots of a topic one by one, per UTC day; the groups keep only what
it needs of them (``spark_jobs.groups``: the events, the off-grid lines and the empty slots of
each block), so the runs are found exactly without the lines.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from spark_jobs.aggregate import day_number, shift_left, valid_groups
from spark_jobs.groups import KIND_BLOCK, KIND_EVENT, KIND_LINE, SLOTS, VALUE_MASK
from spark_jobs.snapshot import HOUR_MS, split_topic


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
            day_number(col("hour_start_ms")).alias("day"),
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
        day_number(col("hour_start_ms")).alias("day"),
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
        b["mask"].bitwiseAND(shift_left(F.lit(1).cast("long"), below) - 1)
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
        *split_topic(),
        F.date_from_unix_date("day").alias("date"),
        F.timestamp_millis("run_start_ms").alias("run_start"),
        F.timestamp_millis("run_end_ms").alias("run_end"),
        col("intervals").cast("int").alias("intervals"),
        "from_size",
        "to_size",
    )
