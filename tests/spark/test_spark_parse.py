"""Parsing snapshot lines with the explicit schema: bad lines are classified, never fatal."""

from __future__ import annotations

import json

import pytest

from spark_jobs.snapshot import SNAPSHOT_SCHEMA, parse_snapshots, valid_snapshots

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
        line("g", 0, schemaVersion=2),
    ]
    statuses = [row["status"] for row in parse_snapshots(lines_frame(lines)).collect()]
    assert statuses == [
        "ok", "ok", "malformed", "malformed", "malformed", "malformed",
        "malformed", "malformed", "malformed", "unsupported",
    ]  # fmt: skip


def test_missing_counters_and_queue_sizes_read_as_zero(lines_frame):
    minimal = '{"schemaVersion":1,"namespace":"n","topic":"t","intervalStart":60000,"intervalEnd":120000}'
    row = valid_snapshots(parse_snapshots(lines_frame([minimal]))).first()
    assert (row["sent"], row["delivered"], row["ready_size"], row["delivery_lag_b3"]) == (0, 0, 0, 0)


def test_schema_is_explicit_and_names_every_contract_field():
    names = set(SNAPSHOT_SCHEMA.fieldNames())
    for field in ("schemaVersion", "intervalStart", "pullMsgTimeGap", "readyQueueTimeGap",
                  "waitingQueueInfo", "triggerMsgTimeout", "ackQueueSize"):  # fmt: skip
        assert field in names


def test_job_reader_classifies_file_lines_like_parse_snapshots_and_skips_blank_lines(spark, tmp_path, line):
    from spark_jobs.monitor_report import read_snapshots

    no_topic = json.loads(line("c", 0))
    del no_topic["topic"]
    day = tmp_path / "date=2025-11-20"
    day.mkdir()
    lines = [line("a", 0, sendMsg=5), "not json at all", "", line("f", 0, sendMsg="many"),
             json.dumps(no_topic), line("g", 0, schemaVersion=2)]  # fmt: skip
    (day / "default-00.jsonl").write_text("\n".join(lines) + "\n")
    (day / "ignored.txt").write_text("not a snapshot file\n")
    rows = read_snapshots(spark, str(tmp_path)).orderBy("status").collect()
    assert sorted(row["status"] for row in rows) == ["malformed", "malformed", "malformed", "ok", "unsupported"]
    assert {row["value"] for row in rows if row["status"] == "malformed"} >= {"not json at all"}
    assert all(row["source_file"].endswith("default-00.jsonl") for row in rows)
