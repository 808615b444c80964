"""Every output table's explicit schema, and the helpers that write and read them with it.

A table is always written from a frame conformed to its schema (same columns, order and
types) and always read back with that schema, so an empty table (a quiet day without
findings: no Parquet file at all) reads as an empty frame, never as "unable to infer schema".
Date-partitioned tables are replaced one ``date=YYYY-MM-DD`` directory at a time, which is
what makes incremental runs idempotent.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql.types import (
    ArrayType,
    DataType,
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from spark_jobs.snapshot import COUNTER_NAMES, GAUGE_NAMES, LAG_NAMES, WAITING_NAMES

LONG, DOUBLE, STRING = LongType(), DoubleType(), StringType()

BASE_FIELDS: list[tuple[str, DataType]] = [
    ("snapshot_lines", LONG),
    ("first_interval_start_ms", LONG),
    ("last_interval_end_ms", LONG),
    *[(name, LONG) for name in COUNTER_NAMES],
    *[
        field
        for lag in LAG_NAMES
        for field in (
            (f"{lag}_count", LONG),
            (f"{lag}_sum", LONG),
            (f"{lag}_max", LONG),
            (f"{lag}_counts", ArrayType(LONG)),
        )
    ],
    *[
        field
        for gauge in GAUGE_NAMES
        for field in (
            (f"{gauge}_sum", LONG),
            (f"{gauge}_max", LONG),
            (f"{gauge}_last", LONG),
            (f"{gauge}_avg", DOUBLE),
        )
    ],
    *[(name, LONG) for name in WAITING_NAMES],
]
DERIVED_FIELDS: list[tuple[str, DataType]] = [
    ("window_s", DOUBLE),
    *[(f"{name}_per_s", DOUBLE) for name in COUNTER_NAMES],
    ("ack_ratio", DOUBLE),
    ("redelivery_ratio", DOUBLE),
    ("pushes", LONG),
    ("push_success_ratio", DOUBLE),
    *[
        field
        for lag in LAG_NAMES
        for field in (
            (f"{lag}_mean_ms", DOUBLE),
            (f"{lag}_p50_ms", LONG),
            (f"{lag}_p90_ms", LONG),
            (f"{lag}_p99_ms", LONG),
        )
    ],
]
BASE_NAMES = frozenset(name for name, _ in BASE_FIELDS)
QUALITY_COUNTS = (
    "input_lines",
    "valid_lines",
    "malformed_lines",
    "unsupported_lines",
    "misplaced_lines",
    "duplicate_lines",
    "distinct_intervals",
)
"""The input's quality counts, per date (``input_quality_daily``) and in all (``input_quality``)."""
_NS = [("namespace", STRING)]
# A topic's rows are per subscription: "default" (the topic's own lines) or a named one.
_TOPIC = [("namespace", STRING), ("topic", STRING), ("subscription", STRING)]
_DATE = [("date", DateType())]
_HOUR = [("hour_start_ms", LONG), ("hour_start", TimestampType())]
_TOPICS = [("topics", LONG)]


def _schema(fields: list[tuple[str, DataType]]) -> StructType:
    return StructType([StructField(name, kind, True) for name, kind in fields])


SCHEMAS: dict[str, StructType] = {
    "topic_hour": _schema(_TOPIC + _DATE + _HOUR + BASE_FIELDS + DERIVED_FIELDS),
    "topic_day": _schema(_TOPIC + _DATE + BASE_FIELDS + DERIVED_FIELDS),
    "topic_total": _schema(_TOPIC + BASE_FIELDS + DERIVED_FIELDS),
    "namespace_hour": _schema(_NS + _DATE + _HOUR + _TOPICS + BASE_FIELDS + DERIVED_FIELDS),
    "namespace_day": _schema(_NS + _DATE + _TOPICS + BASE_FIELDS + DERIVED_FIELDS),
    "namespace_total": _schema(_NS + _TOPICS + BASE_FIELDS + DERIVED_FIELDS),
    "ready_growth_runs": _schema(
        _TOPIC
        + _DATE
        + [
            ("run_start", TimestampType()),
            ("run_end", TimestampType()),
            ("intervals", IntegerType()),
            ("from_size", LONG),
            ("to_size", LONG),
        ]
    ),
    "findings": _schema(
        [
            ("kind", STRING),
            *_TOPIC,
            *_DATE,
            ("time", TimestampType()),
            ("figure", DOUBLE),
            ("unit", STRING),
            ("detail", STRING),
        ]
    ),
    "input_quality_daily": _schema(_DATE + [(name, LONG) for name in QUALITY_COUNTS]),
    "input_quality": _schema(
        [(name, LONG) for name in QUALITY_COUNTS]
        + [("example_bad_file", STRING), ("example_bad_line", STRING)]
    ),
}
"""Every Parquet table under the output directory, by name."""

DATED_TABLES = tuple(name for name, schema in SCHEMAS.items() if "date" in schema.fieldNames())
WHOLE_INPUT_TABLES = tuple(name for name in SCHEMAS if name not in DATED_TABLES)
LARGE_TABLES = ("topic_hour",)
"""One row per topic and hour: the tables whose Parquet encoding is worth several tasks."""


def _same_columns(a: StructType, b: StructType) -> bool:
    def fields(schema: StructType) -> list:
        return [(f.name, f.dataType, f.nullable) for f in schema.fields]

    return fields(a) == fields(b)


def conform(df: DataFrame, name: str) -> DataFrame:
    """``df`` with exactly table ``name``'s columns, in order, cast to its types (``df`` itself
    when it has them already)."""
    schema = SCHEMAS[name]
    if _same_columns(df.schema, schema):
        return df
    # SQL text: one call into the JVM for the whole list, not several per column.
    return df.selectExpr(
        *[f"CAST(`{f.name}` AS {f.dataType.simpleString()}) AS `{f.name}`" for f in schema.fields]
    )


def join(base: str, name: str) -> str:
    """Join a path or URI with a child name."""
    return f"{base.rstrip('/')}/{name}"


def _hadoop(spark, path: str):
    """The Hadoop file system of ``path`` and the path. Its checksums are turned off: the local
    file system otherwise writes a ``.<name>.crc`` beside every file (the output is read
    back by this job and by people, neither of which wants them). The file system object is
    Hadoop's cached one, which Spark's writers in this JVM share."""
    jvm = spark.sparkContext._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    fs = hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    fs.setWriteChecksum(False)
    return fs, hadoop_path


def remove_checksums(spark, output: str) -> None:
    """Delete the ``.crc`` files under ``output`` that writers outside this JVM (a cluster's
    executors writing to a local file system) left."""
    fs, root = _hadoop(spark, output)
    if not fs.exists(root):
        return
    found = fs.listFiles(root, True)
    crc = []
    while found.hasNext():
        path = found.next().getPath()
        name = path.getName()
        if name.startswith(".") and name.endswith(".crc"):
            crc.append(path)
    for path in crc:
        fs.delete(path, False)


def exists(spark, path: str) -> bool:
    fs, target = _hadoop(spark, path)
    return bool(fs.exists(target))


def delete(spark, path: str) -> None:
    fs, target = _hadoop(spark, path)
    if fs.exists(target):
        fs.delete(target, True)


def write_table(
    spark, df: DataFrame, output: str, name: str, dates: list[str] | None, n_dates: int = 1
) -> None:
    """Write table ``name`` under ``output``.

    ``dates`` None: replace the whole table. Otherwise (a date-partitioned table in an
    incremental run) replace only those ``date=`` partitions: each is deleted, then the
    frame's rows (which must all fall on those dates) are appended, so a date that now has no
    rows loses its old ones too. A date's rows go to one file; the rows of the large tables
    (``LARGE_TABLES``) are encoded by as many tasks as there are cores, the others by one.
    """
    path = join(output, name)
    frame = conform(df, name)
    tasks = min(n_dates, spark.sparkContext.defaultParallelism) if name in LARGE_TABLES else 1
    if name in DATED_TABLES and tasks > 1:
        writer = frame.repartition(tasks, "date").write.partitionBy("date")
    elif name in DATED_TABLES:
        writer = frame.coalesce(1).write.partitionBy("date")
    else:
        writer = frame.coalesce(1).write
    if dates is None:
        writer.mode("overwrite").parquet(path)
        return
    for day in dates:
        delete(spark, join(path, f"date={day}"))
    writer.mode("append").parquet(path)


def read_table(spark, output: str, name: str) -> DataFrame:
    """Read table ``name`` with its schema; a missing or empty table reads as no rows."""
    path = join(output, name)
    schema = SCHEMAS[name]
    if not exists(spark, path):
        return spark.createDataFrame([], schema)
    frame = spark.read.schema(schema).parquet(path)
    return frame.select(*schema.fieldNames())


def write_single_csv(spark, df: DataFrame, path: str) -> None:
    """Write ``df`` as one CSV file with a header at ``path`` (any Hadoop file system)."""
    staging = path + "._staging"
    df.coalesce(1).write.mode("overwrite").option("header", "true").csv(staging)
    fs, target = _hadoop(spark, path)
    _, staging_path = _hadoop(spark, staging)
    part = [
        s.getPath()
        for s in fs.listStatus(staging_path)
        if s.getPath().getName().startswith("part-")
    ]
    fs.delete(target, True)
    fs.rename(part[0], target)
    fs.delete(staging_path, True)


def write_text(spark, path: str, text: str) -> None:
    """Write a UTF-8 text file at ``path`` (any Hadoop file system), replacing it."""
    fs, target = _hadoop(spark, path)
    stream = fs.create(target, True)
    try:
        stream.write(bytearray(text.encode("utf-8")))
    finally:
        stream.close()


def read_text(spark, path: str) -> str | None:
    """The UTF-8 text of ``path``, or None when it does not exist."""
    fs, target = _hadoop(spark, path)
    if not fs.exists(target):
        return None
    stream = fs.open(target)
    try:
        jvm = spark.sparkContext._jvm
        data = jvm.org.apache.commons.io.IOUtils.toByteArray(stream)
    finally:
        stream.close()
    return bytes(data).decode("utf-8")
