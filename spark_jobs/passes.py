"""After the pass: the groups of the files read -> the date-partitioned tables of their dates.

The pass summary (one small query) says what the groups hold: the input quality per date,
the dates holding duplicate intervals, whether some hour holds several groups. Beside it, in
threads of the driver, start the hours' tables and the growth runs of the groups as they are,
which most runs keep: each is a few small Spark jobs whose time is mostly planning and calls
into the JVM, and two cores overlap them. A run whose summary finds duplicates rebuilds the
topic-days holding them and computes both again; one that finds an hour of several groups
computes the hours again, summed. The findings come last, from the hours and the runs.
"""

from __future__ import annotations

import datetime as dt
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from pyspark.sql import functions as F

from spark_jobs import tables
from spark_jobs.aggregate import (
    deduplicated_groups,
    duplicate_keys,
    shared_hours,
    valid_groups,
)
from spark_jobs.finding import findings
from spark_jobs.groups import KIND_EVENT
from spark_jobs.growth import growth_runs
from spark_jobs.incremental import Listing, Plan
from spark_jobs.progress import (
    EXIT_EMPTY_INPUT,
    EXIT_NO_VALID_LINES,
    InputError,
    Progress,
    dates_text,
)
from spark_jobs.reader import read_groups
from spark_jobs.rollup import derive_tables, hour_rows, rollups
from spark_jobs.snapshot import DAY_MS, STATUS_CODES

ROLLUPS = ["topic_day", "namespace_hour", "namespace_day", "topic_total", "namespace_total"]
"""The tables rolled up from topic_hour (``rollup.rollups``)."""


def dated_tables(spark, args, listing: Listing, plan: Plan, progress: Progress) -> tuple:
    """Read the plan's files into the date-partitioned tables of its dates; return the first
    bad line met (``example_metrics``'s keys), the tables' frames and, in a full run, the
    whole-input tables' frames (topic and namespace totals; the input quality as a dict)."""
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
        summary = pass_summary(groups, dirty)
        examples = least_example(read.examples, summary.examples)
        counts = quality_total(summary.quality)
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
        if examples["example_bad_file"]:
            progress.note(
                f"  first bad line in {examples['example_bad_file']}: "
                f"{examples['example_bad_line']!r}"
            )
        if plan.full and not counts["input_lines"]:
            raise InputError(
                f"no snapshot lines (*.jsonl) found under {args.input}", EXIT_EMPTY_INPUT
            )
        if plan.full and not counts["valid_lines"]:
            raise InputError(f"no valid snapshot lines under {args.input}", EXIT_NO_VALID_LINES)

        if summary.dirty_days:
            # Re-read only the dates holding duplicates; their flagged topic-days are rebuilt.
            # The tables begun on the groups as they were are let finish first: they would
            # only compete for the cores.
            hours.result(), runs.result()
            files = [f for day in summary.dirty_days for f in listing.by_date.get(day, [])]
            files += listing.undated
            final = deduplicated_groups(
                groups, dirty.localCheckpoint(eager=True), read.rows(spark, files)
            ).localCheckpoint(eager=True)
            progress.say(
                f"re-read {len(files)} file(s) of {dates_text(summary.dirty_days)} to drop "
                "duplicate intervals"
            )
            hours = pool.submit(_hour_tables, final, True, plan.full)
            runs = pool.submit(_growth_runs, final, args.growth_min_intervals)
        elif summary.merge:
            # Some hour has several groups: its row is their sum (the runs stay as they are).
            hours.result()
            hours = pool.submit(_hour_tables, valid, True, plan.full)
        outputs, totals = _tables(
            spark, args, progress, summary.quality, hours.result(), runs, bool(summary.dirty_days)
        )
    return examples, outputs, totals


def _growth_runs(groups, min_intervals: int):
    """The growth runs of the groups (``growth.growth_runs``), in a local checkpoint."""
    return growth_runs(groups, min_intervals).localCheckpoint(eager=True)


def _hour_tables(groups, merge: bool, full: bool) -> dict:
    """The hours of the groups (``rollup.hour_rows``; ``merge``: some hour holds several
    groups) and the tables rolled up from them, with their derived columns
    (``derive_tables``); in a full run, the whole-input tables too."""
    hours = hour_rows(groups, merge).localCheckpoint(eager=True)
    wanted = [name for name in ROLLUPS if full or name in tables.DATED_TABLES]
    return derive_tables({"topic_hour": hours, **rollups(hours, "topic_hour", wanted)})


def _tables(
    spark, args, progress, quality, derived, soon_runs, duplicates: bool
) -> tuple[dict, dict | None]:
    """The date-partitioned tables (and, in a full run, the whole-input ones) from the
    derived tables (``_hour_tables``) and the growth runs (``soon_runs``, a future);
    ``duplicates``: some were dropped."""
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
        totals["input_quality"] = quality_total(quality)
    return outputs, totals


def quality_total(quality: dict[str | None, dict]) -> dict:
    """Per-date quality counts -> the whole input's."""
    return {c: sum(entry[c] for entry in quality.values()) for c in tables.QUALITY_COUNTS}


def least_example(first: dict, second: dict) -> dict:
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


@dataclass
class Summary:
    """What the pass summary says of the groups."""

    quality: dict[str | None, dict]  # date (None: files outside date=) -> QUALITY_COUNTS
    dirty_days: list[str]  # the dates holding duplicate intervals
    examples: dict  # the first bad line the Arrow reader met (example_metrics's keys)
    merge: bool  # some hour holds several groups (aggregate.shared_hours)


def pass_summary(groups, dirty) -> Summary:
    """One small query: lines per date and status (valid lines by their own date, bad ones
    by their file's), the dates holding duplicate intervals (``dirty``,
    ``aggregate.duplicate_keys``), the first bad line the Arrow reader met, and whether some
    hour holds several groups."""
    status = F.col("status")
    day = F.when(
        status == STATUS_CODES["ok"],
        F.floor(F.col("hour_start_ms") / DAY_MS).cast("int"),
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
        examples = least_example(
            examples,
            {"example_bad_file": row["example_file"], "example_bad_line": row["example_line"]},
        )
        entry = result.setdefault(_day_iso(row["day"]), {name: 0 for name in tables.QUALITY_COUNTS})
        entry[label[names[row["status"]]]] += int(row["lines"])
        entry["input_lines"] += int(row["lines"])
    return Summary(result, sorted(dirty_days), examples, merge)
