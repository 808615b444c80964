"""Spark job: monitoring snapshots -> aggregate tables, findings and an HTML report.

Input: a directory (local, HDFS, S3-style URI) holding snapshot files, read recursively:
``<dir>/date=YYYY-MM-DD/<namespace>-<HH>.jsonl``, one JSON line per topic per interval
(shared/DESIGN.md, "Monitoring and the snapshot contract"). Lines are parsed by Spark's JSON
source with the explicit ``SNAPSHOT_SCHEMA``; malformed lines and unsupported schema versions
are counted and reported (blank lines are skipped), duplicate intervals (namespace, topic,
intervalStart) count once.

Execution: the input is read once. ``aggregate.hour_parts`` is the only pass over raw rows
(one shuffle by namespace and topic, one sort, windows for de-duplication and backlog-growth
runs, one hash aggregate); its small result is persisted, and every table, the findings and
the report derive from it. Backlog growth follows the rule in
``aggregate.growth_intervals``. Throughput: docs/benchmarks-spark.md.

Output under ``--output``:
  topic_hour/ topic_day/ namespace_hour/ namespace_day/             Parquet, partitioned by date
  ready_growth_runs/ findings/                                      Parquet, partitioned by date
  topic_total/ namespace_total/ input_quality/                       Parquet (whole input)
  topic_daily.csv                                                   per-topic daily summary
  report.html                                                       self-contained report

Percentiles are read from the summed fixed-bound histograms: the p-th percentile is the upper
bound of the first bucket whose cumulative count is >= ceil(p * total), or the observed max
when that is the +inf bucket (see ``spark_jobs.histogram``).

Run: ``delayqueue report --input DIR --output DIR``, ``python -m spark_jobs.monitor_report``,
or ``spark-submit spark_jobs/monitor_report.py --input URI --output URI`` on any master.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path
from typing import Sequence

if __package__ in (None, ""):  # run as a file by spark-submit: make `spark_jobs` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spark_jobs.aggregate import (  # noqa: E402
    hour_parts,
    namespace_rollup,
    ready_growth_runs,
    topic_hour,
    topic_rollup,
    with_derived,
)
from spark_jobs.finding import findings  # noqa: E402
from spark_jobs.snapshot import (  # noqa: E402
    CORRUPT_COLUMN,
    SNAPSHOT_SCHEMA,
    quality_metrics,
    snapshot_rows,
    valid_snapshots,
)

logger = logging.getLogger(__name__)

__all__ = ["SNAPSHOT_SCHEMA", "build_tables", "main", "parse_args", "run"]

LOCAL_SHUFFLE_PARTITIONS = 8
EXIT_EMPTY_INPUT = 2
EXIT_NO_VALID_LINES = 3

CSV_COLUMNS = (
    "date", "namespace", "topic", "snapshot_lines", "sent", "delivered", "acked", "nacked",
    "deleted", "got", "promoted", "ended", "timed_out", "sent_per_s", "delivered_per_s",
    "acked_per_s", "ack_ratio", "redelivery_ratio", "delivery_lag_count", "delivery_lag_mean_ms",
    "delivery_lag_p50_ms", "delivery_lag_p90_ms", "delivery_lag_p99_ms", "delivery_lag_max",
    "scheduling_lag_count", "scheduling_lag_mean_ms", "scheduling_lag_p50_ms",
    "scheduling_lag_p90_ms", "scheduling_lag_p99_ms", "scheduling_lag_max", "waiting_size_avg",
    "waiting_size_max", "waiting_size_last", "ready_size_avg", "ready_size_max", "ready_size_last",
    "consuming_size_avg", "consuming_size_max", "consuming_size_last",
)  # fmt: skip


QUALITY_FIELDS = (
    "input_lines", "valid_lines", "malformed_lines", "unsupported_lines", "example_bad_file",
    "example_bad_line", "distinct_intervals", "duplicate_lines",
)  # fmt: skip
QUALITY_SCHEMA = (
    "input_lines long, valid_lines long, malformed_lines long, unsupported_lines long, "
    "example_bad_file string, example_bad_line string, distinct_intervals long, duplicate_lines long"
)


class InputError(Exception):
    """The input cannot produce a report; carries the exit code."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def join(base: str, name: str) -> str:
    """Join a path or URI with a child name."""
    return f"{base.rstrip('/')}/{name}"


# ---- read / write (thin) ------------------------------------------------------------------


def read_snapshots(spark, input_path: str):
    """Every line of every ``*.jsonl`` file under ``input_path`` (recursively), parsed with
    ``SNAPSHOT_SCHEMA`` by Spark's JSON source -> ``snapshot_rows`` (one row per line)."""
    from pyspark.sql import functions as F
    from pyspark.sql.utils import AnalysisException

    try:
        records = (
            spark.read.schema(SNAPSHOT_SCHEMA)
            .option("mode", "PERMISSIVE")
            .option("columnNameOfCorruptRecord", CORRUPT_COLUMN)
            .option("recursiveFileLookup", "true")
            .option("pathGlobFilter", "*.jsonl")
            .json(input_path)
        )
    except AnalysisException as error:
        raise InputError(f"cannot read snapshots under {input_path}: {error}", EXIT_EMPTY_INPUT) from error
    records = records.select(
        "*", F.col(CORRUPT_COLUMN).alias("value"), F.input_file_name().alias("source_file")
    )
    return snapshot_rows(records)


def write_table(df, path: str, partition_by_date: bool) -> None:
    """Overwrite a Parquet table; date-partitioned tables get one file per date."""
    if partition_by_date:
        df.repartition("date").write.mode("overwrite").partitionBy("date").parquet(path)
    else:
        df.coalesce(1).write.mode("overwrite").parquet(path)


def _hadoop_fs(spark, path: str):
    jvm = spark.sparkContext._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    return hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), hadoop_path


def write_single_csv(df, spark, path: str) -> None:
    """Write ``df`` as one CSV file with a header at ``path`` (any Hadoop file system)."""
    staging = path + "._staging"
    df.coalesce(1).write.mode("overwrite").option("header", "true").csv(staging)
    fs, target = _hadoop_fs(spark, path)
    _, staging_path = _hadoop_fs(spark, staging)
    part = [s.getPath() for s in fs.listStatus(staging_path) if s.getPath().getName().startswith("part-")]
    fs.delete(target, True)
    fs.rename(part[0], target)
    fs.delete(staging_path, True)


def write_text(spark, path: str, text: str) -> None:
    """Write a UTF-8 text file at ``path`` (any Hadoop file system)."""
    fs, target = _hadoop_fs(spark, path)
    stream = fs.create(target, True)
    try:
        stream.write(bytearray(text.encode("utf-8")))
    finally:
        stream.close()


# ---- the job ------------------------------------------------------------------------------


def build_tables(topic_hours):
    """The hourly per-topic table (with derived columns) -> every other aggregate table."""
    topic_day = topic_rollup(topic_hours, ["namespace", "topic", "date"])
    topic_total = topic_rollup(topic_day, ["namespace", "topic"])
    hour_keys = ["date", "hour_start_ms", "hour_start"]
    return {
        "topic_day": with_derived(topic_day),
        "topic_total": with_derived(topic_total),
        "namespace_hour": with_derived(namespace_rollup(topic_hours, hour_keys)),
        "namespace_day": with_derived(namespace_rollup(topic_day, ["date"])),
        "namespace_total": with_derived(namespace_rollup(topic_total, [])),
    }


def _quality_summary(metrics: dict, topic_hours) -> dict:
    from pyspark.sql import functions as F

    intervals = 0 if topic_hours is None else topic_hours.agg(F.sum("snapshot_lines")).first()[0] or 0
    quality = {key: metrics.get(key) for key in (
        "input_lines", "valid_lines", "malformed_lines", "unsupported_lines",
        "example_bad_file", "example_bad_line")}  # fmt: skip
    for key in ("input_lines", "valid_lines", "malformed_lines", "unsupported_lines"):
        quality[key] = int(quality[key] or 0)
    quality["distinct_intervals"] = int(intervals)
    quality["duplicate_lines"] = quality["valid_lines"] - int(intervals)
    return quality


def run(spark, args: argparse.Namespace) -> int:
    """Run the job in ``spark``; return the exit code."""
    from pyspark import StorageLevel
    from pyspark.sql import Observation

    started = time.monotonic()
    snapshots = read_snapshots(spark, args.input)
    if snapshots.isEmpty():
        raise InputError(f"no snapshot lines (*.jsonl) found under {args.input}", EXIT_EMPTY_INPUT)
    observation = Observation("input_quality")
    parsed = snapshots.observe(observation, *quality_metrics())
    # The one pass over the input; everything else derives from this small cached table.
    parts = hour_parts(valid_snapshots(parsed), args.growth_min_intervals).persist(StorageLevel.MEMORY_AND_DISK)
    topic_hours = with_derived(topic_hour(parts)).persist(StorageLevel.MEMORY_AND_DISK)
    write_table(topic_hours, join(args.output, "topic_hour"), partition_by_date=True)
    logger.info("wrote topic_hour (the pass over the input) in %.1fs", time.monotonic() - started)
    metrics = observation.get
    if not metrics.get("valid_lines"):
        # Nothing valid: adaptive execution prunes the empty plan and the observation with it,
        # so count the bad lines directly (a second read, on this failure path only).
        metrics = snapshots.agg(*quality_metrics()).first().asDict()
        _print_quality(_quality_summary(metrics, None))
        raise InputError(f"no valid snapshot lines under {args.input}", EXIT_NO_VALID_LINES)
    try:
        _write_outputs(spark, args, started, metrics, parts, topic_hours)
    finally:
        topic_hours.unpersist()
        parts.unpersist()
    return 0


def _write_outputs(spark, args: argparse.Namespace, started: float, metrics: dict, parts, topic_hours) -> None:
    """Every table after topic_hour, the CSV and report.html, from the cached hourly tables."""
    quality = _quality_summary(metrics, topic_hours)
    _print_quality(quality)

    tables = build_tables(topic_hours)
    tables["ready_growth_runs"] = ready_growth_runs(parts)
    tables["findings"] = findings(topic_hours, tables["ready_growth_runs"], args.lag_threshold_ms)
    for name, table in tables.items():
        step = time.monotonic()
        write_table(table, join(args.output, name), partition_by_date="date" in table.columns)
        logger.info("wrote %s in %.1fs", name, time.monotonic() - step)
    spark.createDataFrame([tuple(quality[k] for k in QUALITY_FIELDS)], QUALITY_SCHEMA).coalesce(1).write.mode(
        "overwrite"
    ).parquet(join(args.output, "input_quality"))
    written = {name: spark.read.parquet(join(args.output, name)) for name in tables}
    write_single_csv(
        written["topic_day"].select(*CSV_COLUMNS).orderBy("date", "namespace", "topic"),
        spark,
        join(args.output, "topic_daily.csv"),
    )

    from spark_jobs.report_html import collect_report_data, render_report

    data = collect_report_data(
        topic_hours, written, quality, top_topics=args.top_topics, max_findings=args.max_findings
    )
    data["settings"] = {
        "input": args.input,
        "lag_threshold_ms": args.lag_threshold_ms,
        "growth_min_intervals": args.growth_min_intervals,
    }
    write_text(spark, join(args.output, "report.html"), render_report(data))
    print(
        f"report written to {join(args.output, 'report.html')} "
        f"({quality['input_lines']} lines in {time.monotonic() - started:.1f}s)",
        file=sys.stderr,
    )


def _print_quality(quality: dict) -> None:
    print(
        f"input: {quality['input_lines']} lines, {quality['valid_lines']} valid, "
        f"{quality['malformed_lines']} malformed, {quality['unsupported_lines']} unsupported "
        f"schemaVersion, {quality['duplicate_lines']} duplicate intervals dropped",
        file=sys.stderr,
    )
    if quality["example_bad_file"]:
        print(f"  first bad line in {quality['example_bad_file']}: {quality['example_bad_line']!r}", file=sys.stderr)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="monitor_report", description="Monitoring snapshots -> report.")
    add_arguments(parser)
    return parser.parse_args(argv)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The job's options; shared with the ``delayqueue report`` subcommand."""
    parser.add_argument("--input", required=True, help="snapshot directory or URI (read recursively)")
    parser.add_argument("--output", required=True, help="output directory or URI (overwritten)")
    parser.add_argument("--master", default=None, help="Spark master (default: local[*], or spark-submit's)")
    parser.add_argument("--lag-threshold-ms", type=int, default=1000, help="p99 delivery lag finding threshold")
    parser.add_argument(
        "--growth-min-intervals", type=int, default=10,
        help="consecutive intervals of ready-queue growth that make a finding",
    )  # fmt: skip
    parser.add_argument("--top-topics", type=int, default=5, help="topics charted individually")
    parser.add_argument("--max-findings", type=int, default=200, help="findings listed in report.html")
    parser.add_argument("--driver-memory", default="4g", help="driver memory when Spark starts here")
    parser.add_argument(
        "--shuffle-partitions", type=int, default=None,
        help="spark.sql.shuffle.partitions (default: 8 in local mode, the cluster's otherwise)",
    )  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: parse options, start (or join) Spark, run; the exit code is returned."""
    from spark_jobs.session import JavaNotFoundError, build_session, running_under_spark_submit

    args = parse_args(argv)
    from pyspark.sql import SparkSession

    owns_session = SparkSession.getActiveSession() is None
    try:
        conf = {"spark.driver.memory": args.driver_memory}
        local = (args.master or "local").startswith("local") and not running_under_spark_submit()
        if args.shuffle_partitions or local:
            conf["spark.sql.shuffle.partitions"] = str(args.shuffle_partitions or LOCAL_SHUFFLE_PARTITIONS)
        spark = build_session("delayqueue-monitor-report", args.master, conf)
    except JavaNotFoundError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    try:
        return run(spark, args)
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.exit_code
    finally:
        if owns_session:
            spark.stop()


if __name__ == "__main__":
    sys.exit(main())
