"""The run's output: every table written side by side, the whole-input tables, the CSV and
report.html."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

from pyspark.sql import functions as F

from spark_jobs import tables
from spark_jobs.aggregate import drop_duplicate_lines, line_groups
from spark_jobs.incremental import Listing
from spark_jobs.progress import Progress
from spark_jobs.reader import read_snapshots
from spark_jobs.report_html import collect_report_data, render_report
from spark_jobs.rollup import derive_tables, hour_rows, rollups
from spark_jobs.snapshot import STATUS_CODES

WRITE_THREADS = int(os.environ.get("DELAYQUEUE_REPORT_WRITE_THREADS", "4"))
CSV_COLUMNS = (
    "date",
    "namespace",
    "topic",
    "subscription",
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
    "purged",
    "backlog_refused",
    "replaced",
    "deduplicated",
    "schedule_sent",
    "schedule_missed",
    "pushes",
    "push_2xx",
    "push_3xx",
    "push_4xx",
    "push_5xx",
    "push_timeout",
    "push_connection_error",
    "push_refused",
    "push_success_ratio",
    "push_latency_p50_ms",
    "push_latency_p99_ms",
    "push_latency_max",
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
    "group_blocked_size_avg",
    "group_blocked_size_max",
    "group_blocked_size_last",
    "paused_avg",
    "paused_max",
    "paused_last",
)


def data_dates(dated: dict) -> list:
    """The dates the date-partitioned tables hold."""
    return [row["date"] for row in dated["namespace_day"].select("date").distinct().collect()]


class Writes:
    """Tables and files written side by side, in threads: each write is a Spark job whose
    time is mostly planning, encoding and file commits, which overlap well with each other
    and with the driver's own work (the page's charts)."""

    def __init__(self, spark, output: str) -> None:
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


MINUTE_MS = 60_000


def minute_tables(spark, listing: Listing, dates: list) -> dict | None:
    """topic_hour and namespace_hour by minute (``hour_start`` is then the minute's start) for
    the charts of a short input (``report_html.chart_grain``); None when none of the dates'
    files is left. The tables keep hours: a minute's figures are only in the lines, so the
    lines of those dates are read again, by Spark's JSON source (a few hours of lines, a
    small read), de-duplicated and grouped one per line, and each group keyed by the minute
    its interval starts in, then rolled up and derived exactly as the hours are."""
    wanted = {str(day) for day in dates}
    files = [f.path for day, found in listing.by_date.items() if day in wanted for f in found]
    files += [f.path for f in listing.undated]
    if not files:
        return None
    lines = read_snapshots(spark, files).filter(F.col("status") == STATUS_CODES["ok"])
    groups = line_groups(drop_duplicate_lines(lines), one_per_line=True)
    minute = F.col("first_interval_start_ms") - F.pmod("first_interval_start_ms", F.lit(MINUTE_MS))
    minutes = hour_rows(groups.withColumn("hour_start_ms", minute)).localCheckpoint(eager=True)
    return derive_tables(
        {"topic_hour": minutes, **rollups(minutes, "topic_hour", ["namespace_hour"])}
    )


def whole_input(
    spark,
    args,
    progress: Progress,
    writes: Writes,
    dated: dict,
    totals: dict | None,
    examples: dict,
    pending: dict,
    n_dates: int,
    listing: Listing | None = None,
) -> None:
    """The whole-input tables, the CSV and report.html, from the date-partitioned tables
        (``dated``: this run's frames in a full run, the tables read back otherwise); a full run
        brings its ``totals`` along, and its date-partitioned tables still to write (``pending``,
        of ``n_dates`` dates); ``listing``: the input, read again by minute for the charts of a
    short one (``minute_tables``). ``examples``: the first bad line this run met (empty when it read
        nothing: the last run's then stands). The page's figures are collected first, then drawn
        while every table is written: the collects are small queries that would otherwise queue
        behind the writes."""
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
        tables.read_table(spark, args.output, "input_quality").first() if not examples else None
    )
    for key in ("example_bad_file", "example_bad_line"):
        quality[key] = examples.get(key) or (previous[key] if previous else None)
    if not (quality["malformed_lines"] + quality["unsupported_lines"] + quality["misplaced_lines"]):
        quality["example_bad_file"] = quality["example_bad_line"] = None
    data = collect_report_data(
        {**dated, **totals},
        quality,
        top_topics=args.top_topics,
        max_findings=args.max_findings,
        minute_tables=(lambda: minute_tables(spark, listing, data_dates(dated)))
        if listing is not None
        else None,
    )
    for name, frame in pending.items():
        writes.table(name, frame, None, n_dates)
    for name, frame in totals.items():
        writes.table(name, frame)
    writes.table("input_quality", spark.createDataFrame([quality], tables.SCHEMAS["input_quality"]))
    writes.csv(
        dated["topic_day"]
        .select(*CSV_COLUMNS)
        .orderBy("date", "namespace", "topic", "subscription"),
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
