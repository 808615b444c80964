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

Execution: the files read are parsed once, into groups (``reader.read_groups``); the tables
of their dates derive from that small result (``passes``), and the whole-input tables, the CSV
and the page from those (``output``). Only topic-days holding duplicate intervals are read a
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
from spark_jobs.output import Writes, whole_input  # noqa: E402
from spark_jobs.passes import dated_tables  # noqa: E402
from spark_jobs.progress import (  # noqa: E402
    EXIT_EMPTY_INPUT,
    EXIT_FAILED,
    InputError,
    Progress,
    dates_text,
    size_text,
)
from spark_jobs.reader import READERS  # noqa: E402
from spark_jobs.snapshot import SNAPSHOT_SCHEMA  # noqa: E402

__all__ = ["SNAPSHOT_SCHEMA", "main", "parse_args", "run", "InputError"]

LOCAL_SHUFFLE_PARTITIONS = 8


# ---- the job --------------------------------------------------------------------------------


def run(spark, args: argparse.Namespace) -> int:
    """Run the job in ``spark``; return the exit code (raises ``InputError``): list the input,
    plan the run, read the plan's files into their dates' tables (``passes``), then write them,
    the whole-input tables, the CSV and the page (``output``), and the run's state."""
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
    examples: dict = {}
    dated: dict | None = None
    totals: dict | None = None
    with Writes(spark, args.output) as writes:
        if plan.files:
            examples, dated, totals = dated_tables(spark, args, listing, plan, progress)
        else:
            progress.say("nothing new to read: the tables are up to date")
        if plan.full:
            # Every date is in this run's frames: their writes start with the whole-input
            # tables', once the page's figures are collected (whole_input).
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
        whole_input(
            spark,
            args,
            progress,
            writes,
            dated,
            totals,
            examples,
            pending,
            len(plan.dates),
            listing,
        )
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
    tables.remove_checksums(spark, args.output)
    progress.note(
        f"report: written to {tables.join(args.output, 'report.html')} "
        f"({progress.total():.1f}s in all)"
    )
    return 0


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
        choices=READERS,
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
