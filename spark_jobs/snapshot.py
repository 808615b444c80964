"""The snapshot line contract (shared/DESIGN.md, "Monitoring and the snapshot contract").

Reading is explicit-schema only: ``from_json`` with ``SNAPSHOT_SCHEMA`` on each text line, so
unknown fields are ignored and a line that does not parse is counted, never fatal.

A line is classified into ``status``:
  * ``ok``          -- schemaVersion 1 with namespace, topic, intervalStart < intervalEnd, and
                       each histogram, when present, carrying exactly 16 counts;
  * ``unsupported`` -- parses and has a schemaVersion other than 1;
  * ``malformed``   -- anything else (not JSON, wrong types, missing identity fields).
Counters, histograms and queue sizes that are absent read as zero.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from spark_jobs.histogram import BUCKETS

SUPPORTED_SCHEMA_VERSION = 1
CORRUPT_COLUMN = "_corrupt_record"

# (field in the snapshot line, column name in every table)
COUNTERS = (
    ("sendMsg", "sent"),
    ("pullMsg", "delivered"),
    ("ackMsg", "acked"),
    ("nackMsg", "nacked"),
    ("deleteMsg", "deleted"),
    ("getMsg", "got"),
    ("triggerMsgReady", "promoted"),
    ("triggerMsgEndLife", "ended"),
    ("triggerMsgTimeout", "timed_out"),
)
LAGS = (("pullMsgTimeGap", "delivery_lag"), ("readyQueueTimeGap", "scheduling_lag"))
GAUGES = (
    ("waitingQueueSize", "waiting_size"),
    ("readyQueueSize", "ready_size"),
    ("ackQueueSize", "consuming_size"),
)
WAITING_DELAYS = (
    ("sizeOf0To1min", "waiting_0_1min"),
    ("sizeOf1minTo10min", "waiting_1_10min"),
    ("sizeOf10minTo30min", "waiting_10_30min"),
    ("sizeOf30minTo1hour", "waiting_30_60min"),
    ("sizeOf1hourTo6hour", "waiting_1_6h"),
    ("sizeOf6hourTo1day", "waiting_6_24h"),
    ("sizeOf1dayTo7day", "waiting_1_7d"),
    ("sizeOf7dayTo30day", "waiting_7_30d"),
    ("sizeOf30dayToInfinite", "waiting_30d_plus"),
)

_HISTOGRAM = StructType(
    [
        StructField("count", LongType()),
        StructField("sum", LongType()),
        StructField("max", LongType()),
        StructField("counts", ArrayType(LongType())),
    ]
)

SNAPSHOT_SCHEMA = StructType(
    [
        StructField("schemaVersion", IntegerType()),
        StructField("namespace", StringType()),
        StructField("topic", StringType()),
        StructField("intervalStart", LongType()),
        StructField("intervalEnd", LongType()),
        *[StructField(field, LongType()) for field, _ in COUNTERS],
        *[StructField(field, _HISTOGRAM) for field, _ in LAGS],
        *[StructField(field, LongType()) for field, _ in GAUGES],
        StructField(
            "waitingQueueInfo",
            StructType([StructField(field, LongType()) for field, _ in WAITING_DELAYS]),
        ),
        StructField(CORRUPT_COLUMN, StringType()),
    ]
)
"""Schema of one snapshot line; ``_corrupt_record`` receives lines Spark cannot parse."""


def _zero(column: Column) -> Column:
    return F.coalesce(column, F.lit(0).cast("long"))


def _status(s: Column) -> Column:
    histograms_ok = F.lit(True)
    for field, _ in LAGS:
        counts = s[field]["counts"]
        histograms_ok = histograms_ok & (counts.isNull() | (F.size(counts) == BUCKETS))
    identity_ok = (
        s["namespace"].isNotNull()
        & s["topic"].isNotNull()
        & s["intervalStart"].isNotNull()
        & s["intervalEnd"].isNotNull()
        & (s["intervalEnd"] > s["intervalStart"])
    )
    return (
        F.when(s.isNull() | s[CORRUPT_COLUMN].isNotNull() | s["schemaVersion"].isNull(), "malformed")
        .when(s["schemaVersion"] != SUPPORTED_SCHEMA_VERSION, "unsupported")
        .when(identity_ok & histograms_ok, "ok")
        .otherwise("malformed")
    )


def parse_snapshots(lines: DataFrame) -> DataFrame:
    """Text lines (``value``, ``source_file``) -> one flat row per line with ``status``.

    Histogram counts become one column per bucket: ``<lag>_b0`` .. ``<lag>_b15``.

    Bad lines keep ``value`` and ``source_file`` so they can be reported; the snapshot
    columns are only meaningful where ``status == 'ok'``.
    """
    s = F.from_json(F.col("value"), SNAPSHOT_SCHEMA, {"mode": "PERMISSIVE"})
    parsed = lines.select("value", "source_file", s.alias("s"))
    s = F.col("s")
    columns = [
        _status(s).alias("status"),
        "value",
        "source_file",
        s["namespace"].alias("namespace"),
        s["topic"].alias("topic"),
        s["intervalStart"].alias("interval_start"),
        s["intervalEnd"].alias("interval_end"),
        *[_zero(s[field]).alias(name) for field, name in COUNTERS],
    ]
    for field, name in LAGS:
        columns += [
            _zero(s[field]["count"]).alias(f"{name}_count"),
            _zero(s[field]["sum"]).alias(f"{name}_sum"),
            _zero(s[field]["max"]).alias(f"{name}_max"),
            # One fixed-width column per bucket keeps the hot aggregations hash-based.
            *[_zero(s[field]["counts"].getItem(i)).alias(f"{name}_b{i}") for i in range(BUCKETS)],
        ]
    columns += [_zero(s[field]).alias(name) for field, name in GAUGES]
    columns += [_zero(s["waitingQueueInfo"][field]).alias(name) for field, name in WAITING_DELAYS]
    return parsed.select(*columns)


def valid_snapshots(parsed: DataFrame) -> DataFrame:
    """Only the ``ok`` rows, without the bookkeeping columns."""
    return parsed.filter(F.col("status") == "ok").drop("status", "value", "source_file")


def quality_metrics() -> list[Column]:
    """Aggregates over parsed lines for ``DataFrame.observe``: counts plus one example."""
    bad = F.col("status") != "ok"
    return [
        F.count(F.lit(1)).alias("input_lines"),
        F.sum(F.when(F.col("status") == "ok", 1).otherwise(0)).alias("valid_lines"),
        F.sum(F.when(F.col("status") == "malformed", 1).otherwise(0)).alias("malformed_lines"),
        F.sum(F.when(F.col("status") == "unsupported", 1).otherwise(0)).alias("unsupported_lines"),
        F.min(F.when(bad, F.col("source_file"))).alias("example_bad_file"),
        F.min(F.when(bad, F.substring(F.col("value"), 1, 200))).alias("example_bad_line"),
    ]
