"""Parsing snapshot lines with the explicit schema: bad lines are classified, never fatal."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F

from spark_jobs.snapshot import SNAPSHOT_SCHEMA

from spark_support import parse_snapshots, status_name, valid_snapshots

pytestmark = pytest.mark.spark


def test_lines_are_classified_ok_malformed_or_unsupported(lines_frame, line):
    good = line("a", 0, sendMsg=5)
    extra = json.loads(line("b", 0, sendMsg=1))
    extra["someFutureField"] = {"nested": [1, 2]}
    no_topic = json.loads(line("c", 0))
    del no_topic["topic"]
    short_hist = json.loads(line("d", 0))
    short_hist["pullMsgTimeGap"]["counts"] = [1, 2, 3]
    backwards = json.loads(line("e", 0))
    backwards["intervalEnd"] = backwards["intervalStart"]
    lines = [
        good,
        json.dumps(extra),
        good[: len(good) // 2],
        "not json at all",
        "",
        json.dumps(no_topic),
        line("f", 0, sendMsg="many"),
        json.dumps(short_hist),
        json.dumps(backwards),
        line("g", 0, schemaVersion=4),
        line("h", 0, schemaVersion=2, deadLettered=4, redriven=1),
        line("i", 0, readyQueueSize=-1),
        line("j", 0, waitingQueueSize=1 << 41),
    ]
    parsed = parse_snapshots(lines_frame(lines)).select(status_name(F.col("status")).alias("s"))
    statuses = [row["s"] for row in parsed.collect()]
    assert statuses == [
        "ok",
        "ok",
        "malformed",
        "malformed",
        "malformed",
        "malformed",
        "malformed",
        "malformed",
        "malformed",
        "unsupported",
        "ok",
        "malformed",
        "malformed",
    ]


def test_versions_1_and_2_read_alike_and_absent_failure_counters_are_zero(lines_frame, line):
    lines = [
        line("v1", 0, sendMsg=2, nackMsg=1),
        line("v2", 0, schemaVersion=2, sendMsg=3, nackMsg=2, deadLettered=4, redriven=1),
    ]
    rows = {r["topic"]: r for r in valid_snapshots(parse_snapshots(lines_frame(lines))).collect()}
    assert (
        rows["v1"]["sent"],
        rows["v1"]["nacked"],
        rows["v1"]["dead_lettered"],
        rows["v1"]["redriven"],
    ) == (2, 1, 0, 0)
    assert (
        rows["v2"]["sent"],
        rows["v2"]["nacked"],
        rows["v2"]["dead_lettered"],
        rows["v2"]["redriven"],
    ) == (3, 2, 4, 1)


def test_missing_counters_and_queue_sizes_read_as_zero(lines_frame):
    minimal = (
        '{"schemaVersion":1,"namespace":"n","topic":"t","intervalStart":60000,"intervalEnd":120000}'
    )
    row = valid_snapshots(parse_snapshots(lines_frame([minimal]))).first()
    assert (row["sent"], row["delivered"], row["ready_size"], row["delivery_lag_b3"]) == (
        0,
        0,
        0,
        0,
    )
    assert row["group_blocked_size"] == 0


def test_group_blocked_size_is_read_checked_like_every_queue_size_and_absent_reads_zero(
    lines_frame, line
):
    lines = [
        line("before-groups", 0, readyQueueSize=2),  # written before the field existed
        line("grouped", 0, readyQueueSize=1, groupBlockedSize=7),
        line("negative", 0, groupBlockedSize=-1),
        line("huge", 0, groupBlockedSize=1 << 41),
    ]
    parsed = parse_snapshots(lines_frame(lines))
    named = parsed.select("topic", status_name(F.col("status")).alias("s")).collect()
    assert {r["topic"]: r["s"] for r in named} == {
        "before-groups": "ok",
        "grouped": "ok",
        "negative": "malformed",
        "huge": "malformed",
    }
    rows = {r["topic"]: r for r in valid_snapshots(parsed).collect()}
    old, new = rows["before-groups"], rows["grouped"]
    assert (old["group_blocked_size"], old["ready_size"]) == (0, 2)
    assert (new["group_blocked_size"], new["ready_size"]) == (7, 1)


def test_the_topic_controls_read_as_counters_and_a_paused_gauge_absent_reads_zero(
    lines_frame, line
):
    """purged and backlogRefused are counters; paused, a JSON boolean, is the gauge 1 / 0, and
    a paused of another type makes its line malformed like any wrong type."""
    lines = [
        line("before-controls", 0, sendMsg=2),  # written before the fields existed
        line("paused", 0, paused=True, purged=5, backlogRefused=3),
        line("running", 0, paused=False),
        line("null", 0, paused=None),
        line("number", 0, paused=1),
        line("string", 0, paused="true"),
    ]
    parsed = parse_snapshots(lines_frame(lines))
    named = parsed.select("topic", status_name(F.col("status")).alias("s")).collect()
    assert {r["topic"]: r["s"] for r in named} == {
        "before-controls": "ok",
        "paused": "ok",
        "running": "ok",
        "null": "ok",
        "number": "malformed",
        "string": "malformed",
    }
    rows = {
        r["topic"]: (r["purged"], r["backlog_refused"], r["paused"])
        for r in valid_snapshots(parsed).collect()
    }
    assert rows == {
        "before-controls": (0, 0, 0),
        "paused": (5, 3, 1),
        "running": (0, 0, 0),
        "null": (0, 0, 0),
    }


def test_debounce_and_schedule_counters_read_as_counters_and_absent_or_null_read_zero(
    lines_frame, line
):
    """replaced, deduplicated, scheduleSent and scheduleMissed through Spark's JSON source:
    their values where present, 0 where null or absent (a line of a server before them)."""
    lines = [
        line("before", 0, sendMsg=2),
        line("counted", 0, replaced=3, deduplicated=2, scheduleSent=5, scheduleMissed=4),
        line("nulls", 0, replaced=None, deduplicated=None, scheduleSent=None, scheduleMissed=None),
        line("string", 0, scheduleSent="5"),
    ]
    parsed = parse_snapshots(lines_frame(lines))
    named = parsed.select("topic", status_name(F.col("status")).alias("s")).collect()
    assert {r["topic"]: r["s"] for r in named} == {
        "before": "ok",
        "counted": "ok",
        "nulls": "ok",
        "string": "malformed",
    }
    rows = {
        r["topic"]: (r["sent"], r["replaced"], r["deduplicated"], r["schedule_sent"],
                     r["schedule_missed"])
        for r in valid_snapshots(parsed).collect()
    }
    assert rows == {"before": (2, 0, 0, 0, 0), "counted": (0, 3, 2, 5, 4), "nulls": (0, 0, 0, 0, 0)}


def test_every_counter_the_server_writes_is_a_column_of_the_report():
    """The server's COUNTERS (every one a field of its snapshot lines) are each read by the
    report's schema under one column: a counter added to the server without the report fails
    here."""
    from delayqueue.core.monitor_hash import COUNTERS as SERVER_COUNTERS
    from delayqueue.core.monitor_hash import PUSH_COUNTERS
    from spark_jobs.snapshot import COUNTERS

    assert sorted(field for field, _ in COUNTERS) == sorted(SERVER_COUNTERS + PUSH_COUNTERS)
    assert len({column for _, column in COUNTERS}) == len(COUNTERS)


def test_schema_is_explicit_and_names_every_contract_field():
    names = set(SNAPSHOT_SCHEMA.fieldNames())
    for field in (
        "schemaVersion",
        "intervalStart",
        "pullMsgTimeGap",
        "readyQueueTimeGap",
        "waitingQueueInfo",
        "triggerMsgTimeout",
        "ackQueueSize",
        "groupBlockedSize",
        "deadLettered",
        "redriven",
        "purged",
        "backlogRefused",
        "paused",
        "replaced",
        "deduplicated",
        "scheduleSent",
        "scheduleMissed",
    ):
        assert field in names


def test_job_reader_classifies_file_lines_like_parse_snapshots_and_skips_blank_lines(
    spark, tmp_path, line
):
    from spark_jobs.reader import read_snapshots

    no_topic = json.loads(line("c", 0))
    del no_topic["topic"]
    day = tmp_path / "date=2025-11-20"
    day.mkdir()
    lines = [
        line("a", 0, sendMsg=5),
        "not json at all",
        "",
        line("f", 0, sendMsg="many"),
        json.dumps(no_topic),
        line("g", 0, schemaVersion=4),
        line("next-day", 1440),
    ]  # fmt: skip  -- 2025-11-21 in the 2025-11-20 directory
    (day / "default-00.jsonl").write_text("\n".join(lines) + "\n")
    (day / "ignored.txt").write_text("not a snapshot file\n")
    rows = (
        read_snapshots(spark, [str(tmp_path)])
        .select("*", status_name(F.col("status")).alias("s"))
        .collect()
    )
    assert sorted(row["s"] for row in rows) == [
        "malformed",
        "malformed",
        "malformed",
        "misplaced",
        "ok",
        "unsupported",
    ]
    assert {row["value"] for row in rows if row["s"] == "malformed"} >= {"not json at all"}
    assert all(row["source_file"].endswith("default-00.jsonl") for row in rows)
    assert {row["file_day"] for row in rows} == {20412}  # days from 1970-01-01 to 2025-11-20


def test_a_named_subscription_s_line_is_keyed_apart_and_the_default_s_by_any_name(
    lines_frame, line
):
    """Version 3 carries ``subscription``: a named one's line is keyed ``<topic>\\t<name>``
    (the tables split it), one without it or with "default" or "" is its topic's; a tab in a
    topic or subscription would break the key: malformed."""
    lines = [
        line("t", 0, schemaVersion=3, subscription="billing", pullMsg=4),
        line("t", 0, schemaVersion=3, subscription="default"),
        line("t", 1, subscription=""),
        line("t", 2),
        line("t", 3, schemaVersion=3, subscription="a\tb"),
        line("a\tb", 3),
    ]
    parsed = parse_snapshots(lines_frame(lines)).select(
        "topic", "delivered", status_name(F.col("status")).alias("s")
    )
    rows = [(r["topic"], r["delivered"], r["s"]) for r in parsed.collect()]
    assert rows[:4] == [("t\tbilling", 4, "ok"), ("t", 0, "ok"), ("t", 0, "ok"), ("t", 0, "ok")]
    assert [r[2] for r in rows[4:]] == ["malformed", "malformed"]
