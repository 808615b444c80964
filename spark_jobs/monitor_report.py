"""Spark job: monitoring snapshots -> aggregate tables, findings and an HTML report.

Input: a directory (local, HDFS, S3-style URI) holding snapshot files, read recursively:
``<dir>/date=YYYY-MM-DD/<namespace>-<HH>.jsonl``, one JSON line per topic per interval
(docs/design.md, "Monitoring and the snapshot contract"; schemaVersion 1 and 2). Local files
in local mode are parsed by Arrow's JSON reader in ``mapInArrow`` (``arrow_reader``; a file it
could read differently from Spark goes to Spark's JSON source), any other input by Spark's
JSON source, both with the explicit schema and the same rows; malformed lines,
unsupported schema versions and lines in another day's directory are counted and reported
(blank lines are skipped), duplicate intervals (namespace, topic, intervalStart) count once.

Runs are incremental by default: only the dates that are new or whose files changed since
the last run are read, and their partitions of the date-partitioned tables replaced
(``spark_jobs.incremental``); ``--full`` rebuilds everything, ``--since DATE`` reprocesses
from DATE on. Running twice, or re-running a day, gives the same tables.

Execution: the files read are parsed once, into groups (``reader.read_groups``); everything
else derives from that small result. Only topic-days holding duplicate intervals are read a
second time. See docs/report.md.

Output under ``--output``:
  topic_hour/ topic_day/ namespace_hour/ namespace_day/             Parquet, partitioned by date
  ready_growth_runs/ findings/ input_quality_daily/                 Parquet, partitioned by date
  topic_total/ namespace_total/ input_quality/                       Parquet (whole input)
  topic_daily.csv                                                   per-topic daily summary
  report.html                                                       self-contained report
  _state/manifest.json                                              what has been reported

Every table has an explicit schema (``spark_jobs.tables.SCHEMAS``) and is read with it.

Run: ``delayqueue report --input DIR --output DIR``, ``python -m spark_jobs.monitor_report``,
or ``spark-submit spark_jobs/monitor_report.py --input URI --output URI`` on any master.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from pathlib import Path
from typing import Sequence

if __package__ in (None, ""):  # run as a file by spark-submit: make `spark_jobs` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spark_jobs import incremental, tables  # noqa: E402
from spark_jobs.progress import (  # noqa: E402
    EXIT_EMPTY_INPUT,
    EXIT_FAILED,
    EXIT_NO_VALID_LINES,
    InputError,
    Progress,
    dates_text,
    size_text,
)
from spark_jobs.snapshot import SNAPSHOT_SCHEMA, STATUS_CODES  # noqa: E402

__all__ = ["SNAPSHOT_SCHEMA", "main", "parse_args", "run", "InputError"]

LOCAL_SHUFFLE_PARTITIONS = 8
WRITE_THREADS = int(os.environ.get("DELAYQUEUE_REPORT_WRITE_THREADS", "4"))
ROLLUPS = ["topic_day", "namespace_hour", "namespace_day", "topic_total", "namespace_total"]
"""The tables rolled up from topic_hour (``rollup.rollups``)."""
CSV_COLUMNS = (
    "date",
    "namespace",
    "topic",
    "snapshot_lines",
    "sent",
    "delivered",
    "acked",
    "nacked",
    "deleted",
    "got",
    "promoted",
    "ended",
    "timed_out",
    "dead_lettered",
    "redriven",
    "sent_per_s",
    "delivered_per_s",
    "acked_per_s",
    "ack_ratio",
    "redelivery_ratio",
    "delivery_lag_count",
    "delivery_lag_mean_ms",
    "delivery_lag_p50_ms",
    "delivery_lag_p90_ms",
    "delivery_lag_p99_ms",
    "delivery_lag_max",
    "scheduling_lag_count",
    "scheduling_lag_mean_ms",
    "scheduling_lag_p50_ms",
    "scheduling_lag_p90_ms",
    "scheduling_lag_p99_ms",
    "scheduling_lag_max",
    "waiting_size_avg",
    "waiting_size_max",
    "waiting_size_last",
    "ready_size_avg",
    "ready_size_max",
    "ready_size_last",
    "consuming_size_avg",
    "consuming_size_max",
    "consuming_size_last",
)


# ---- reading --------------------------------------------------------------------------------


def _least_example(first: dict, second: dict) -> dict:
    """Two first bad lines (``snapshot.example_metrics``'s keys) -> the least of them."""
    merged = {}
    for key in ("example_bad_file", "example_bad_line"):
        values = [v for v in (first.get(key), second.get(key)) if v is not None]
        merged[key] = min(values) if values else None
    return merged


def _day_iso(day: int | None) -> str | None:
    return None if day is None else (dt.date(1970, 1, 1) + dt.timedelta(days=int(day))).isoformat()


DIRTY_DAY = -1
"""A pass summary row's status: its day holds duplicate intervals."""
SHARED_HOUR = -2
"""A pass summary row's status: some hour holds several groups."""


def _pass_summary(groups, dirty) -> tuple[dict[str | None, dict], list[str], dict, bool]:
    """One small query: lines per date and status (valid lines by their own date, bad ones
    by their file's), the dates holding duplicate intervals, the first bad line the Arrow
    reader met (``example_metrics``'s keys), and whether some hour holds several groups
    (``aggregate.shared_hours``)."""
    from pyspark.sql import functions as F

    from spark_jobs.aggregate import shared_hours
    from spark_jobs.groups import KIND_EVENT

    status = F.col("status")
    day = F.when(
        status == STATUS_CODES["ok"],
        F.floor(F.col("hour_start_ms") / 86_400_000).cast("int"),
    ).otherwise(F.col("bad_file_day"))
    counted = (
        groups.filter(F.col("kind") != KIND_EVENT)
        .groupBy(day.alias("day"), "status")
        .agg(
            F.sum("lines").alias("lines"),
            F.min("example_file").alias("example_file"),
            F.min("example_line").alias("example_line"),
        )
    )

    def marker(frame, status: int):
        # Rows of the summary that only say something is there (``status``), beside the counts.
        return frame.select(
            "day",
            F.lit(status).alias("status"),
            F.lit(0).cast("long").alias("lines"),
            F.lit(None).cast("string").alias("example_file"),
            F.lit(None).cast("string").alias("example_line"),
        )

    flagged = marker(dirty, DIRTY_DAY).distinct()
    shared = marker(
        shared_hours(groups).limit(1).select(F.lit(None).cast("int").alias("day")), SHARED_HOUR
    )
    names = {code: name for name, code in STATUS_CODES.items()}
    label = {
        "ok": "valid_lines",
        "malformed": "malformed_lines",
        "unsupported": "unsupported_lines",
        "misplaced": "misplaced_lines",
    }
    result: dict[str | None, dict] = {}
    dirty_days = []
    examples: dict = {}
    merge = False
    for row in counted.unionByName(flagged).unionByName(shared).collect():
        if row["status"] == DIRTY_DAY:
            dirty_days.append(_day_iso(row["day"]))
            continue
        if row["status"] == SHARED_HOUR:
            merge = True
            continue
        examples = _least_example(
            examples,
            {"example_bad_file": row["example_file"], "example_bad_line": row["example_line"]},
        )
        entry = result.setdefault(_day_iso(row["day"]), {name: 0 for name in tables.QUALITY_COUNTS})
        entry[label[names[row["status"]]]] += int(row["lines"])
        entry["input_lines"] += int(row["lines"])
    return result, sorted(dirty_days), examples, merge


# ---- the job --------------------------------------------------------------------------------


def run(spark, args: argparse.Namespace) -> int:
    """Run the job in ``spark``; return the exit code (raises ``InputError``)."""
    progress = Progress(args.quiet)
    listing = incremental.list_input(spark, args.input)
    if listing.missing:
        raise InputError(
            f"cannot read snapshots under {args.input}: no such directory", EXIT_EMPTY_INPUT
        )
    if not listing.files:
        raise InputError(f"no snapshot lines (*.jsonl) found under {args.input}", EXIT_EMPTY_INPUT)
    state_text = tables.read_text(spark, tables.join(args.output, incremental.STATE_PATH))
    state = json.loads(state_text) if state_text else None
    plan = incremental.plan_run(listing, state, args)
    kind = "full run" if plan.full else "incremental run"
    read_bytes = sum(f.size for f in plan.files)
    progress.say(
        f"{kind} ({plan.reason}): {len(plan.files)} of {len(listing.files)} files, "
        f"{size_text(read_bytes)}, "
        f"{dates_text(plan.dates)}"
    )
    metrics: dict = {}
    dated: dict | None = None
    totals: dict | None = None
    with Writes(spark, args.output) as writes:
        if plan.files:
            metrics, dated, totals = _process(spark, args, listing, plan, progress)
        else:
            progress.say("nothing new to read: the tables are up to date")
        if plan.full:
            # Every date is in this run's frames: their writes start with the whole-input
            # tables', once the page's figures are collected (_whole_input).
            pending = dated
        else:
            # The whole-input tables and the page cover every date reported so far: read the
            # date-partitioned tables back once this run's dates are in them.
            for name, frame in (dated or {}).items():
                writes.table(name, frame, plan.dates, len(plan.dates))
            writes.wait()
            dated = {
                name: tables.read_table(spark, args.output, name) for name in tables.DATED_TABLES
            }
            pending = {}
        _whole_input(spark, args, metrics, progress, dated, totals, writes, pending, plan)
        writes.wait()
        progress.say(
            f"wrote {writes.count} tables and topic_daily.csv"
            + (f" ({len(plan.dates)} date(s) replaced)" if plan.files and not plan.full else "")
        )
    tables.write_text(
        spark,
        tables.join(args.output, incremental.STATE_PATH),
        json.dumps(incremental.new_state(listing, plan, state, args), indent=1) + "\n",
    )
    progress.note(
        f"report: written to {tables.join(args.output, 'report.html')} "
        f"({progress.total():.1f}s in all)"
    )
    return 0


def _process(spark, args, listing, plan, progress) -> tuple:
    """Read the plan's files into the date-partitioned tables of its dates; return the first
    bad line met (``example_metrics``'s keys), the tables' frames and, in a full run, the
    whole-input tables' frames (topic and namespace totals; the input quality as a dict)."""
    from concurrent.futures import ThreadPoolExecutor

    from spark_jobs.aggregate import deduplicated_groups, duplicate_keys, valid_groups
    from spark_jobs.reader import read_groups

    read = read_groups(spark, plan.files, args.reader, plan.roots)
    groups = read.groups
    with ThreadPoolExecutor(max_workers=2) as pool:
        # Most runs hold no duplicate interval and no hour of several groups: the tables of
        # the groups as they are start beside the summary that says so (a run that has some
        # computes them again).
        valid = valid_groups(groups)
        hours = pool.submit(_hour_tables, valid, False, plan.full)
        runs = pool.submit(_growth_runs, valid, args.growth_min_intervals)
        dirty = duplicate_keys(groups)
        quality, dirty_days, examples, merge = _pass_summary(groups, dirty)
        metrics = _least_example(read.examples, examples)
        counts = {k: sum(entry[k] for entry in quality.values()) for k in tables.QUALITY_COUNTS}
        progress.say(
            f"read {counts['input_lines']:,} lines: {counts['valid_lines']:,} valid, "
            f"{counts['malformed_lines']:,} malformed, "
            f"{counts['unsupported_lines']:,} unsupported schemaVersion, "
            f"{counts['misplaced_lines']:,} in another day's directory"
            + (
                f" (Arrow reader; {len(read.left_to_spark)} file(s) by Spark's JSON source)"
                if read.arrow
                else " (Spark's JSON source)"
            )
        )
        if metrics.get("example_bad_file"):
            progress.note(
                f"  first bad line in {metrics['example_bad_file']}: "
                f"{metrics['example_bad_line']!r}"
            )
        if plan.full and not counts["input_lines"]:
            raise InputError(
                f"no snapshot lines (*.jsonl) found under {args.input}", EXIT_EMPTY_INPUT
            )
        if plan.full and not counts["valid_lines"]:
            raise InputError(f"no valid snapshot lines under {args.input}", EXIT_NO_VALID_LINES)

        if dirty_days:
            # Re-read only the dates holding duplicates; their flagged topic-days are rebuilt.
            # The tables begun on the groups as they were are let finish first: they would
            # only compete for the cores.
            hours.result(), runs.result()
            files = [f for day in dirty_days for f in listing.by_date.get(day, [])]
            files += listing.undated
            final = deduplicated_groups(
                groups, dirty.localCheckpoint(eager=True), read.rows(spark, files)
            ).localCheckpoint(eager=True)
            progress.say(
                f"re-read {len(files)} file(s) of {dates_text(dirty_days)} to drop "
                "duplicate intervals"
            )
            hours = pool.submit(_hour_tables, final, True, plan.full)
            runs = pool.submit(_growth_runs, final, args.growth_min_intervals)
        elif merge:
            # Some hour has several groups: its row is their sum (the runs stay as they are).
            hours.result()
            hours = pool.submit(_hour_tables, valid, True, plan.full)
        outputs, totals = _tables(
            spark, args, progress, quality, hours.result(), runs, bool(dirty_days)
        )
    return metrics, outputs, totals


def _growth_runs(groups, min_intervals: int):
    """The growth runs of the groups (``growth.growth_runs``), in a local checkpoint."""
    from spark_jobs.growth import growth_runs

    return growth_runs(groups, min_intervals).localCheckpoint(eager=True)


def _hour_tables(groups, merge: bool, full: bool) -> dict:
    """The hours of the groups (``rollup.hour_rows``; ``merge``: some hour holds several
    groups) and the tables rolled up from them, with their derived columns
    (``derive_tables``); in a full run, the whole-input tables too."""
    from spark_jobs.rollup import derive_tables, hour_rows, rollups

    hours = hour_rows(groups, merge).localCheckpoint(eager=True)
    wanted = [name for name in ROLLUPS if full or name in tables.DATED_TABLES]
    return derive_tables({"topic_hour": hours, **rollups(hours, "topic_hour", wanted)})


def _tables(
    spark, args, progress, quality, derived, soon_runs, duplicates: bool
) -> tuple[dict, dict | None]:
    """The date-partitioned tables (and, in a full run, the whole-input ones) from the
    derived tables (``_hour_tables``) and the growth runs (``soon_runs``, a future);
    ``duplicates``: some were dropped."""
    from pyspark.sql import functions as F

    from spark_jobs.finding import findings

    if duplicates:
        distinct = {
            r["date"].isoformat(): int(r["n"])
            for r in derived["topic_day"]
            .groupBy("date")
            .agg(F.sum("snapshot_lines").alias("n"))
            .collect()
        }
    else:  # every valid line is an interval of its own
        distinct = {day: entry["valid_lines"] for day, entry in quality.items() if day}
    for day, entry in quality.items():
        entry["distinct_intervals"] = distinct.get(day, 0) if day else 0
        entry["duplicate_lines"] = entry["valid_lines"] - entry["distinct_intervals"]
    duplicates = sum(entry["duplicate_lines"] for entry in quality.values())
    progress.say(
        f"aggregated {sum(distinct.values()):,} distinct topic-intervals "
        f"({duplicates:,} duplicate lines dropped)"
    )

    quality_frame = spark.createDataFrame(
        [
            {"date": dt.date.fromisoformat(day) if day else None, **entry}
            for day, entry in quality.items()
        ],
        tables.SCHEMAS["input_quality_daily"],
    )
    runs = soon_runs.result()
    outputs = {
        **{name: derived[name] for name in tables.DATED_TABLES if name in derived},
        "ready_growth_runs": runs,
        "findings": findings(derived["topic_hour"], runs, args.lag_threshold_ms).localCheckpoint(
            eager=True
        ),
        "input_quality_daily": quality_frame,
    }
    totals = None
    if "topic_total" in derived:  # a full run
        totals = {name: derived[name] for name in ("topic_total", "namespace_total")}
        totals["input_quality"] = _quality_total(quality)
    return outputs, totals


class Writes:
    """Tables and files written side by side, in threads: each write is a Spark job whose
    time is mostly planning, encoding and file commits, which overlap well with each other
    and with the driver's own work (the page's charts)."""

    def __init__(self, spark, output: str) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.spark, self.output = spark, output
        self.pool = ThreadPoolExecutor(max_workers=WRITE_THREADS)
        self.futures: list = []
        self.count = 0

    def table(self, name: str, frame, dates: list[str] | None = None, n_dates: int = 1) -> None:
        self.count += 1
        self.futures.append(
            self.pool.submit(
                tables.write_table, self.spark, frame, self.output, name, dates, n_dates
            )
        )

    def csv(self, frame, name: str) -> None:
        path = tables.join(self.output, name)
        self.futures.append(self.pool.submit(tables.write_single_csv, self.spark, frame, path))

    def wait(self) -> None:
        """Wait for every write so far; the first failure is raised."""
        futures, self.futures = self.futures, []
        for future in futures:
            future.result()

    def __enter__(self) -> "Writes":
        return self

    def __exit__(self, *exc) -> None:
        try:
            if exc[0] is None:
                self.wait()
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)


def _quality_total(quality: dict[str | None, dict]) -> dict:
    """Per-date quality counts -> the whole input's."""
    return {c: sum(entry[c] for entry in quality.values()) for c in tables.QUALITY_COUNTS}


def _whole_input(
    spark,
    args,
    metrics: dict,
    progress,
    dated: dict,
    totals: dict | None,
    writes: Writes,
    pending: dict,
    plan,
) -> None:
    """The whole-input tables, the CSV and report.html, from the date-partitioned tables
    (``dated``: this run's frames in a full run, the tables read back otherwise); a full run
    brings its ``totals`` along, and its date-partitioned tables still to write
    (``pending``). The page's figures are collected first, then drawn while every table is
    written: the collects are small queries that would otherwise queue behind the writes."""
    from pyspark.sql import functions as F

    from spark_jobs.report_html import collect_report_data, render_report
    from spark_jobs.rollup import derive_tables, rollups

    if totals is None:
        totals = derive_tables(
            rollups(dated["topic_day"], "topic_day", ["topic_total", "namespace_total"])
        )
        sums = (
            dated["input_quality_daily"]
            .agg(*[F.sum(c).alias(c) for c in tables.QUALITY_COUNTS])
            .first()
        )
        totals["input_quality"] = {c: int(sums[c] or 0) for c in tables.QUALITY_COUNTS}
    quality = dict(totals.pop("input_quality"))
    previous = (
        tables.read_table(spark, args.output, "input_quality").first() if not metrics else None
    )
    for key in ("example_bad_file", "example_bad_line"):
        quality[key] = metrics.get(key) or (previous[key] if previous else None)
    if not (quality["malformed_lines"] + quality["unsupported_lines"] + quality["misplaced_lines"]):
        quality["example_bad_file"] = quality["example_bad_line"] = None
    data = collect_report_data(
        {**dated, **totals}, quality, top_topics=args.top_topics, max_findings=args.max_findings
    )
    for name, frame in pending.items():
        writes.table(name, frame, None, len(plan.dates))
    for name, frame in totals.items():
        writes.table(name, frame)
    writes.table("input_quality", spark.createDataFrame([quality], tables.SCHEMAS["input_quality"]))
    writes.csv(
        dated["topic_day"].select(*CSV_COLUMNS).orderBy("date", "namespace", "topic"),
        "topic_daily.csv",
    )
    data["settings"] = {
        "input": args.input,
        "lag_threshold_ms": args.lag_threshold_ms,
        "growth_min_intervals": args.growth_min_intervals,
    }
    page = render_report(data)
    writes.wait()
    tables.write_text(spark, tables.join(args.output, "report.html"), page)
    progress.say(f"report.html: {data['summary']}")


# ---- command line ---------------------------------------------------------------------------


def _date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {text!r}") from None


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="monitor_report", description="Monitoring snapshots -> report."
    )
    add_arguments(parser)
    return parser.parse_args(argv)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The job's options; shared with the ``delayqueue report`` subcommand."""
    parser.add_argument(
        "--input", required=True, help="snapshot directory or URI (read recursively)"
    )
    parser.add_argument(
        "--output", required=True, help="output directory or URI (tables are merged into it)"
    )
    parser.add_argument(
        "--master", default=None, help="Spark master (default: local[*], or spark-submit's)"
    )
    parser.add_argument(
        "--lag-threshold-ms", type=int, default=1000, help="p99 delivery lag finding threshold"
    )
    parser.add_argument(
        "--growth-min-intervals",
        type=int,
        default=10,
        help="consecutive intervals of ready-queue growth that make a finding",
    )
    parser.add_argument("--top-topics", type=int, default=5, help="topics charted individually")
    parser.add_argument(
        "--max-findings", type=int, default=200, help="findings listed in report.html"
    )
    parser.add_argument(
        "--full", action="store_true", help="rebuild every table from the whole input"
    )
    parser.add_argument(
        "--since",
        type=_date,
        default=None,
        help="reprocess the input dates from DATE (YYYY-MM-DD) on",
    )
    parser.add_argument(
        "--reader",
        choices=("auto", "arrow", "spark"),
        default="auto",
        help="how snapshot files are parsed: auto (Arrow for local files in local mode, "
        "else Spark's JSON source), arrow, spark",
    )
    parser.add_argument(
        "--driver-memory", default="4g", help="driver memory when Spark starts here"
    )
    parser.add_argument(
        "--shuffle-partitions",
        type=int,
        default=None,
        help="spark.sql.shuffle.partitions (default: 8 in local mode, the cluster's otherwise)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines (errors only)")
    parser.add_argument(
        "--traceback", action="store_true", help="show the Python traceback of an unexpected error"
    )


def _error_text(error: BaseException) -> str:
    """One line describing an unexpected error (Spark's included)."""
    java = getattr(error, "java_exception", None)
    if java is not None:
        text = str(java.toString())
    else:
        text = str(error) or type(error).__name__
    first = text.strip().splitlines()[0] if text.strip() else type(error).__name__
    return first[:500]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: parse options, start (or join) Spark, run; the exit code is returned.

    Every failure is one line on stderr and an exit code: 2 no input, 3 no valid line, 1
    anything else (``--traceback`` shows where).
    """
    args = parse_args(argv)
    if args.growth_min_intervals < 1 or args.top_topics < 0 or args.max_findings < 0:
        print(
            "error: --growth-min-intervals must be >= 1, --top-topics and --max-findings >= 0",
            file=sys.stderr,
        )
        return 2
    from spark_jobs.session import JavaNotFoundError, build_session, running_under_spark_submit

    try:
        from pyspark.sql import SparkSession
    except ImportError as error:
        print(
            f"error: the report needs pyspark (pip install 'delayqueue[report]'): {error}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    owns_session = SparkSession.getActiveSession() is None
    spark = None
    try:
        conf = {"spark.driver.memory": args.driver_memory}
        local = (args.master or "local").startswith("local") and not running_under_spark_submit()
        if args.shuffle_partitions or local:
            conf["spark.sql.shuffle.partitions"] = str(
                args.shuffle_partitions or LOCAL_SHUFFLE_PARTITIONS
            )
        spark = build_session("delayqueue-monitor-report", args.master, conf)
        return run(spark, args)
    except JavaNotFoundError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_FAILED
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # noqa: BLE001 -- one line, never a traceback (unless asked)
        if args.traceback or os.environ.get("DELAYQUEUE_REPORT_TRACEBACK"):
            import traceback

            traceback.print_exc()
        print(f"error: the report failed: {_error_text(error)}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        if owns_session and spark is not None:
            spark.stop()


if __name__ == "__main__":
    sys.exit(main())
