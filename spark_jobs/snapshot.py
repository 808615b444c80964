"""The snapshot line contract (docs/design.md, "Monitoring and the snapshot contract").

Reading is explicit-schema only, so unknown fields are ignored and a line that does not parse
is counted, never fatal. The job reads files with Spark's JSON source
(``spark.read.schema(SNAPSHOT_SCHEMA).json``, PERMISSIVE, unparseable lines land in
``_corrupt_record``) or, for local files, with the Arrow reader (``arrow_reader``: the same
rows, flat, through ``flat_snapshot_rows``); the tests apply the same schema and
``snapshot_rows`` to frames of text lines (``from_json``). All classify lines with the same
expressions (``_status``). The JSON source skips blank lines, so the job neither counts nor
reports them.

``waitingQueueInfo`` is read as a map of numbers rather than a struct: Spark's JSON parser
pays a fixed cost per nested object, and this one is 12 % of the parse (docs/report.md).

Subscriptions: version 3 lines carry ``subscription``, a named subscription's line (its
consumer counters and sizes); a line without it (every version-1 and version-2 line), or with
``"default"`` or ``""``, is its topic's default subscription's. The readers key a named
subscription's lines by ``topic_key`` (``<topic>\t<subscription>``: topics and subscription
names never hold a tab, so dedup, groups and growth runs treat each subscription as a topic of
its own); the tables split it back (``split_topic``) into ``topic`` and ``subscription``. A
topic or subscription holding a tab makes the line malformed.

Schema versions 1 and 2 are read alike: version 2 adds the optional counters
``deadLettered`` and ``redriven`` (absent -> 0, so version-1 lines read as zero).
``groupBlockedSize`` (due messages behind their message group's head) was added within
version 1; lines written before it read as 0. So were the topic controls' counters ``purged``
and ``backlogRefused`` (absent -> 0) and the flag ``paused`` (a JSON boolean, read as the
gauge 1 / 0; absent -> 0; any other type makes the line malformed, as a wrong type does
anywhere), and then the debounce and schedule counters ``replaced``, ``deduplicated``,
``scheduleSent`` and ``scheduleMissed`` (absent -> 0), and push delivery's counters
``push2xx`` .. ``pushRefused`` and histogram ``pushMillis``, present only on the line of a
subscription that pushed in the interval (absent -> 0).

A line is classified into ``status``:
  * ``ok``          -- schemaVersion 1, 2 or 3 with namespace, topic, intervalStart <
                       intervalEnd, each histogram, when present, carrying exactly 16
                       counts, and queue sizes in [0, 2^41);
  * ``unsupported`` -- parses and has another schemaVersion;
  * ``misplaced``   -- valid, but in a ``date=YYYY-MM-DD`` directory of another UTC day
                       than its intervalStart (the writer never does this; counting it
                       keeps incremental runs, which read one date directory at a time,
                       equal to full runs);
  * ``malformed``   -- anything else (not JSON, wrong types, missing identity fields).
Counters, histograms and queue sizes that are absent read as zero.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from spark_jobs.histogram import BUCKETS

SUPPORTED_SCHEMA_VERSIONS = (1, 2, 3)
# A named subscription's lines are keyed by "<topic>\t<subscription>" until the tables split it.
SUBSCRIPTION_SEPARATOR = "\t"
DEFAULT_SUBSCRIPTION = "default"
CORRUPT_COLUMN = "_corrupt_record"
DAY_MS = 86_400_000
HOUR_MS = 3_600_000
# Queue sizes are packed with a 22-bit time offset into one long for "last value of the hour"
# aggregates (aggregate.py); Redis sorted sets hold at most 2^32 - 1 members, far below.
MAX_QUEUE_SIZE = 1 << 41

# Push delivery's counters: one per outcome class of a POST (2xx acks; the rest nack).
PUSH_COUNTERS = (
    ("push2xx", "push_2xx"),
    ("push3xx", "push_3xx"),
    ("push4xx", "push_4xx"),
    ("push5xx", "push_5xx"),
    ("pushTimeout", "push_timeout"),
    ("pushConnectionError", "push_connection_error"),
    ("pushRefused", "push_refused"),
)
PUSH_NAMES = [name for _, name in PUSH_COUNTERS]
PUSH_FAILURE_NAMES = PUSH_NAMES[1:]
"""Every push outcome but 2xx: the POSTs that were nacked."""

# (field in the snapshot line, column name in every table)
COUNTERS = (
    ("sendMsg", "sent"),
    ("pullMsg", "delivered"),
    ("ackMsg", "acked"),
    ("nackMsg", "nacked"),
    ("deleteMsg", "deleted"),
    ("getMsg", "got"),
    ("triggerMsgReady", "promoted"),
    # every message that ended (expiry or exhausted retries), dead letters included; the
    # tables' ``ended`` leaves the dead letters out (``rollup.hour_rows``)
    ("triggerMsgEndLife", "ended"),
    ("triggerMsgTimeout", "timed_out"),
    # added to version 1 in place (version 2 is read alike); absent in older lines -> 0
    ("deadLettered", "dead_lettered"),
    ("redriven", "redriven"),
    # added within version 1 (the topic controls): absent in older lines -> 0
    ("purged", "purged"),
    ("backlogRefused", "backlog_refused"),
    # added within version 1 (debounced sends and recurring schedules): absent in older lines
    # -> 0. ``replaced`` sends are in ``sent`` too; ``deduplicated`` re-sends and the
    # schedules' occurrences (``schedule_sent``) are not; ``schedule_missed`` counts fire
    # times, not messages (docs/design.md, "Monitoring and the snapshot contract")
    ("replaced", "replaced"),
    ("deduplicated", "deduplicated"),
    ("scheduleSent", "schedule_sent"),
    ("scheduleMissed", "schedule_missed"),
    # added within version 1 (push delivery), only on the lines of a subscription that pushed
    # in the interval: the POSTs answered, by outcome class; absent -> 0
    *PUSH_COUNTERS,
)
LAGS = (
    ("pullMsgTimeGap", "delivery_lag"),
    ("readyQueueTimeGap", "scheduling_lag"),
    # the push POSTs' latency (ms, same bounds), beside the push counters; absent -> empty
    ("pushMillis", "push_latency"),
)
GAUGES = (
    ("waitingQueueSize", "waiting_size"),
    ("readyQueueSize", "ready_size"),
    ("ackQueueSize", "consuming_size"),
    # added within version 1 (message groups): absent in older lines -> 0
    ("groupBlockedSize", "group_blocked_size"),
)
# Booleans of the line, rolled up as gauges of 1 (true) and 0 (false or absent): avg is the
# share of the intervals, max whether any, last the latest; summed over a namespace's topics,
# the number of topics. Added within version 1 (the topic controls).
FLAGS = (("paused", "paused"),)
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

COUNTER_NAMES = [name for _, name in COUNTERS]
LAG_NAMES = [name for _, name in LAGS]
SIZE_NAMES = [name for _, name in GAUGES]
FLAG_NAMES = [name for _, name in FLAGS]
GAUGE_NAMES = SIZE_NAMES + FLAG_NAMES
"""Every gauge column: the queue sizes (range-checked), then the flags (1 / 0)."""
WAITING_NAMES = [name for _, name in WAITING_DELAYS]
BUCKET_COLUMNS = [f"{lag}_b{i}" for lag in LAG_NAMES for i in range(BUCKETS)]

HISTOGRAM = StructType(
    [
        StructField("count", LongType()),
        StructField("sum", LongType()),
        StructField("max", LongType()),
        StructField("counts", ArrayType(LongType())),
    ]
)

KEY_FIELDS = [
    StructField("schemaVersion", IntegerType()),
    StructField("namespace", StringType()),
    StructField("topic", StringType()),
    StructField("intervalStart", LongType()),
    StructField("intervalEnd", LongType()),
]
"""The fields that say which line this is, first in every reader's rows."""

SUBSCRIPTION_FIELD = StructField("subscription", StringType())
"""Which subscription a line is of (version 3; absent: the default)."""

SNAPSHOT_SCHEMA = StructType(
    [
        *KEY_FIELDS,
        SUBSCRIPTION_FIELD,
        *[StructField(field, LongType()) for field, _ in COUNTERS],
        *[StructField(field, HISTOGRAM) for field, _ in LAGS],
        *[StructField(field, LongType()) for field, _ in GAUGES],
        *[StructField(field, BooleanType()) for field, _ in FLAGS],
        StructField("waitingQueueInfo", MapType(StringType(), LongType())),
        StructField(CORRUPT_COLUMN, StringType()),
    ]
)
"""Schema of one snapshot line; ``_corrupt_record`` receives lines Spark cannot parse."""

# status codes carried as integers through the aggregates (strings would stop them being
# hash aggregates)
STATUS_CODES = {"ok": 0, "malformed": 1, "unsupported": 2, "misplaced": 3}


def _zero(column: Column) -> Column:
    return F.coalesce(column, F.lit(0).cast("long"))


def flag_value(column: Column) -> Column:
    """A boolean field -> 1 when true, 0 when false or absent (a gauge column)."""
    return F.when(column, F.lit(1)).otherwise(F.lit(0)).cast("long")


def file_day(source_file: Column) -> Column:
    """Days since 1970-01-01 of the file's parent directory ``date=YYYY-MM-DD``, else null.

    String functions, not a regular expression: this runs once per line.
    """
    parent = F.substring_index(F.substring_index(source_file, "/", -2), "/", 1)
    text = F.when(parent.startswith("date="), F.substring(parent, 6, 10))
    return F.datediff(F.to_date(text), F.lit("1970-01-01").cast("date"))


def topic_key(topic: Column, subscription: Column) -> Column:
    """The line's key for every grouping: its topic, or ``<topic>\t<subscription>`` for a
    named subscription's line."""
    named = subscription.isNotNull() & ~subscription.isin("", DEFAULT_SUBSCRIPTION)
    return F.when(named, F.concat(topic, F.lit(SUBSCRIPTION_SEPARATOR), subscription)).otherwise(
        topic
    )


def split_topic(key: str = "topic") -> list[Column]:
    """A ``topic_key`` column -> ``topic`` and ``subscription`` (``"default"`` for a topic's
    own lines): the tables' columns."""
    col = F.col(key)
    return [
        F.substring_index(col, SUBSCRIPTION_SEPARATOR, 1).alias("topic"),
        F.when(
            F.instr(col, SUBSCRIPTION_SEPARATOR) > 0,
            F.substring_index(col, SUBSCRIPTION_SEPARATOR, -1),
        )
        .otherwise(F.lit(DEFAULT_SUBSCRIPTION))
        .alias("subscription"),
    ]


def _status(
    file_days: Column | None,
    corrupt: Column,
    histograms_ok: Column,
    sizes: list[Column],
    names_ok: Column | None = None,
) -> Column:
    """The ``STATUS_CODES`` of a line from its parsed fields (see the module docstring):
    ``histograms_ok`` says each histogram is absent or has 16 counts, ``sizes`` are the queue
    sizes (null or a number), ``names_ok`` that neither topic nor subscription holds a tab
    (None: known)."""
    col = F.col
    sizes_ok = F.lit(True)
    for size in sizes:
        sizes_ok = sizes_ok & (size.isNull() | size.between(0, MAX_QUEUE_SIZE - 1))
    identity_ok = (
        col("namespace").isNotNull()
        & col("topic").isNotNull()
        & col("intervalStart").isNotNull()
        & col("intervalEnd").isNotNull()
        & (col("intervalEnd") > col("intervalStart"))
    )
    if names_ok is not None:
        identity_ok = identity_ok & names_ok
    status = (
        F.when(corrupt.isNotNull() | col("schemaVersion").isNull(), STATUS_CODES["malformed"])
        .when(~col("schemaVersion").isin(*SUPPORTED_SCHEMA_VERSIONS), STATUS_CODES["unsupported"])
        .when(~(identity_ok & histograms_ok & sizes_ok), STATUS_CODES["malformed"])
    )
    if file_days is not None:
        day = F.floor(col("intervalStart") / DAY_MS).cast("int")
        status = status.when(file_days.isNotNull() & (file_days != day), STATUS_CODES["misplaced"])
    return status.otherwise(STATUS_CODES["ok"]).cast("int")


def _identity_columns(days: Column | None, topic: Column | None = None) -> list:
    col = F.col
    return [
        "value",
        "source_file",
        (days if days is not None else F.lit(None).cast("int")).alias("file_day"),
        col("schemaVersion").alias("schema_version"),
        col("namespace").alias("namespace"),
        (col("topic") if topic is None else topic).alias("topic"),
        col("intervalStart").alias("interval_start"),
        col("intervalEnd").alias("interval_end"),
    ]


def snapshot_rows(records: DataFrame, check_file_date: bool = True) -> DataFrame:
    """Records with ``SNAPSHOT_SCHEMA``'s fields as top-level columns (plus ``source_file`` and
    ``value``, the raw line or null) -> one flat row per line.

    Columns: ``status`` (``STATUS_CODES``), ``value``, ``source_file``, ``file_day`` (days since
    1970 of the file's ``date=`` directory, or null), ``schema_version``, the identity
    (``namespace``, ``topic``: the ``topic_key``, ``interval_start``, ``interval_end``), the
    counters, per lag
    ``<lag>_count/_sum/_max`` and one column per bucket ``<lag>_b0`` .. ``_b15``, the queue
    sizes, the flags (1 / 0) and the waiting-queue delay distribution. The snapshot columns
    are only meaningful
    where ``status == 0``.
    """
    col = F.col
    days = file_day(col("source_file")) if check_file_date else None
    histograms_ok = F.lit(True)
    for field, _ in LAGS:
        counts = col(field)["counts"]
        histograms_ok = histograms_ok & (counts.isNull() | (F.size(counts) == BUCKETS))
    subscription = col(SUBSCRIPTION_FIELD.name)
    names_ok = ~F.coalesce(
        col("topic").contains(SUBSCRIPTION_SEPARATOR)
        | subscription.contains(SUBSCRIPTION_SEPARATOR),
        col("topic").contains(SUBSCRIPTION_SEPARATOR),
        F.lit(False),
    )
    status = _status(
        days,
        col(CORRUPT_COLUMN),
        histograms_ok,
        [col(field) for field, _ in GAUGES],
        names_ok,
    )
    columns = [
        status.alias("status"),
        *_identity_columns(days, topic_key(col("topic"), subscription)),
        *[_zero(col(name)).alias(alias) for name, alias in COUNTERS],
    ]
    for name, alias in LAGS:
        columns += [
            _zero(col(name)["count"]).alias(f"{alias}_count"),
            _zero(col(name)["sum"]).alias(f"{alias}_sum"),
            _zero(col(name)["max"]).alias(f"{alias}_max"),
            *[_zero(col(name)["counts"].getItem(i)).alias(f"{alias}_b{i}") for i in range(BUCKETS)],
        ]
    columns += [_zero(col(name)).alias(alias) for name, alias in GAUGES]
    columns += [flag_value(col(name)).alias(alias) for name, alias in FLAGS]
    columns += [_zero(col("waitingQueueInfo")[name]).alias(alias) for name, alias in WAITING_DELAYS]
    return records.select(*columns)


def flat_snapshot_rows(records: DataFrame) -> DataFrame:
    """``snapshot_rows`` for records already flat (the Arrow reader's, ``arrow_reader``): the
    identity fields as parsed, ``file_day`` (``file_day`` of ``source_file``, computed once per
    file), ``<lag>_size`` (the number of counts, null when absent), and every value column of
    ``snapshot_rows`` under its name, nulls already zero. A queue size read as zero passes the
    range check as its absent value does, so the status is the same."""
    col = F.col
    days = col("file_day")
    histograms_ok = F.lit(True)
    for _, alias in LAGS:
        size = col(f"{alias}_size")
        histograms_ok = histograms_ok & (size.isNull() | (size == BUCKETS))
    status = _status(
        days, F.lit(None).cast("string"), histograms_ok, [col(name) for name in SIZE_NAMES]
    )
    return records.select(
        status.alias("status"),
        *_identity_columns(days),
        *[col(name) for name in VALUE_COLUMNS],
    )


VALUE_COLUMNS = [
    *COUNTER_NAMES,
    *[f"{name}_{part}" for name in LAG_NAMES for part in ("count", "sum", "max")],
    *BUCKET_COLUMNS,
    *GAUGE_NAMES,
    *WAITING_NAMES,
]
"""Every per-line value column of ``snapshot_rows`` (all bigint, never null)."""


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


def example_metrics() -> list[Column]:
    """Aggregates over parsed lines for ``DataFrame.observe``: the first bad line (its file and
    text), for the report and stderr."""
    status = F.col("status")
    bad = status.isin(*[code for name, code in STATUS_CODES.items() if name != "ok"])
    return [
        F.min(F.when(bad, F.col("source_file"))).alias("example_bad_file"),
        # The JSON source keeps the raw text of unparseable lines only; a line that parsed but
        # failed a check is shown by its identity fields.
        F.min(F.when(bad, F.substring(F.coalesce(F.col("value"), _identity_json()), 1, 200))).alias(
            "example_bad_line"
        ),
    ]
