"""The snapshot line contract (shared/DESIGN.md, "Monitoring and the snapshot contract").

Reading is explicit-schema only, so unknown fields are ignored and a line that does not parse
is counted, never fatal. The job reads files with Spark's JSON source
(``spark.read.schema(SNAPSHOT_SCHEMA).json``, PERMISSIVE, unparseable lines land in
``_corrupt_record``): about three times faster than ``spark.read.text`` + ``from_json``, because
no per-line string column is materialised. ``parse_snapshots`` applies the same schema and the
same classification to a frame of text lines (``from_json``); both go through
``snapshot_rows``. One difference: the JSON source skips blank lines, so the job neither counts
nor reports them (``parse_snapshots`` classifies an empty string as malformed).

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


def snapshot_rows(records: DataFrame) -> DataFrame:
    """Records with ``SNAPSHOT_SCHEMA``'s fields as top-level columns (plus ``source_file`` and
    ``value``, the raw line or null) -> one flat row per line with ``status``.

    Histogram counts become one column per bucket: ``<lag>_b0`` .. ``<lag>_b15``.

    Bad lines keep ``value`` (the raw line when it did not parse) and ``source_file`` so they
    can be reported; the snapshot columns are only meaningful where ``status == 'ok'``.
    """
    field = F.col
    s = F.struct(*[field(name) for name in SNAPSHOT_SCHEMA.fieldNames()])
    columns = [
        _status(s).alias("status"),
        "value",
        "source_file",
        field("schemaVersion").alias("schema_version"),
        field("namespace").alias("namespace"),
        field("topic").alias("topic"),
        field("intervalStart").alias("interval_start"),
        field("intervalEnd").alias("interval_end"),
        *[_zero(field(name)).alias(alias) for name, alias in COUNTERS],
    ]
    for name, alias in LAGS:
        columns += [
            _zero(field(name)["count"]).alias(f"{alias}_count"),
            _zero(field(name)["sum"]).alias(f"{alias}_sum"),
            _zero(field(name)["max"]).alias(f"{alias}_max"),
            # One fixed-width column per bucket keeps the hot aggregations hash-based.
            *[_zero(field(name)["counts"].getItem(i)).alias(f"{alias}_b{i}") for i in range(BUCKETS)],
        ]
    columns += [_zero(field(name)).alias(alias) for name, alias in GAUGES]
    columns += [_zero(field("waitingQueueInfo")[name]).alias(alias) for name, alias in WAITING_DELAYS]
    return records.select(*columns)


def parse_snapshots(lines: DataFrame) -> DataFrame:
    """Text lines (``value``, ``source_file``) -> one flat row per line with ``status``
    (``from_json`` with ``SNAPSHOT_SCHEMA``, then ``snapshot_rows``)."""
    s = F.from_json(F.col("value"), SNAPSHOT_SCHEMA, {"mode": "PERMISSIVE"})
    parsed = lines.select("value", "source_file", s.alias("s"))
    # A line that is not JSON at all gives a null struct: its fields read as null and the
    # null schemaVersion classifies it as malformed.
    return snapshot_rows(parsed.select("value", "source_file", "s.*"))


def valid_snapshots(parsed: DataFrame) -> DataFrame:
    """Only the ``ok`` rows, without the bookkeeping columns."""
    return parsed.filter(F.col("status") == "ok").drop("status", "value", "source_file", "schema_version")


def _identity_json() -> Column:
    return F.to_json(
        F.struct(
            F.col("schema_version").alias("schemaVersion"),
            F.col("namespace").alias("namespace"),
            F.col("topic").alias("topic"),
            F.col("interval_start").alias("intervalStart"),
            F.col("interval_end").alias("intervalEnd"),
        )
    )


def quality_metrics() -> list[Column]:
    """Aggregates over parsed lines for ``DataFrame.observe``: counts plus one example."""
    bad = F.col("status") != "ok"
    return [
        F.count(F.lit(1)).alias("input_lines"),
        F.sum(F.when(F.col("status") == "ok", 1).otherwise(0)).alias("valid_lines"),
        F.sum(F.when(F.col("status") == "malformed", 1).otherwise(0)).alias("malformed_lines"),
        F.sum(F.when(F.col("status") == "unsupported", 1).otherwise(0)).alias("unsupported_lines"),
        F.min(F.when(bad, F.col("source_file"))).alias("example_bad_file"),
        # The JSON source keeps the raw text of unparseable lines only; a line that parsed but
        # failed a check is shown by its identity fields.
        F.min(F.when(bad, F.substring(F.coalesce(F.col("value"), _identity_json()), 1, 200))).alias(
            "example_bad_line"
        ),
    ]
