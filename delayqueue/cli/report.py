"""``delayqueue report``: run the Spark monitoring report over a snapshot directory.

The job lives in ``spark_jobs.monitor_report`` and needs the ``report`` extra (pyspark,
matplotlib); it is imported only when the command runs, so the CLI works without it.
Runs are incremental (only new or changed dates are read); see docs/report.md.
"""

from __future__ import annotations

import argparse

from . import failure

# (flag, type, help) forwarded unchanged to spark_jobs.monitor_report.main
_OPTIONS = (
    ("--master", str, "Spark master (default: local[*])"),
    ("--lag-threshold-ms", int, "p99 delivery-lag finding threshold in ms (default 1000)"),
    (
        "--growth-min-intervals",
        int,
        "consecutive growing snapshots that make a backlog finding (default 10)",
    ),
    ("--top-topics", int, "topics charted individually (default 5)"),
    ("--max-findings", int, "findings listed in report.html (default 200)"),
    ("--driver-memory", str, "Spark driver memory when Spark starts here (default 4g)"),
    ("--shuffle-partitions", int, "spark.sql.shuffle.partitions (default 8 in local mode)"),
    ("--since", str, "reprocess the input dates from DATE (YYYY-MM-DD) on"),
    (
        "--reader",
        str,
        "how snapshot files are parsed: auto (Arrow for local files in local mode), arrow, spark",
    ),
)
# (flag, help) switches forwarded when given
_SWITCHES = (
    ("--full", "rebuild every table from the whole input (default: only new or changed dates)"),
    ("--quiet", "no progress lines, errors only"),
    ("--traceback", "show the Python traceback of an unexpected error"),
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report",
        help="build the monitoring report (Parquet tables, CSV, report.html) from snapshots",
        description="Aggregate monitoring snapshot files with Spark (local mode by default).",
    )
    parser.add_argument(
        "--input", required=True, help="snapshot directory or URI, read recursively"
    )
    parser.add_argument(
        "--output", required=True, help="output directory or URI (tables are merged into it)"
    )
    for flag, kind, text in _OPTIONS:
        parser.add_argument(flag, type=kind, default=None, help=text)
    for flag, text in _SWITCHES:
        parser.add_argument(flag, action="store_true", help=text)
    parser.set_defaults(func=run)


def job_argv(args: argparse.Namespace) -> list[str]:
    """The job's argv for the parsed command options (unset options keep the job's default)."""
    argv = ["--input", args.input, "--output", args.output]
    for flag, _, _ in _OPTIONS:
        value = getattr(args, flag.lstrip("-").replace("-", "_"), None)
        if value is not None:
            argv += [flag, str(value)]
    for flag, _ in _SWITCHES:
        if getattr(args, flag.lstrip("-"), False):
            argv.append(flag)
    return argv


def run(args: argparse.Namespace) -> int:
    try:
        from spark_jobs import monitor_report
    except ModuleNotFoundError as missing:
        return failure.missing_extra("the report", "report", missing)
    return monitor_report.main(job_argv(args))
