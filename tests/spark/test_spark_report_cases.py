"""The whole job on the inputs an operator meets most and the awkward ones: a healthy day, one
interval, a topic of zeros, only duplicates, only bad lines but one, schemaVersion 2, and a
failure that must stay one line."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from spark_jobs.monitor_report import main
from spark_jobs.tables import SCHEMAS, read_table

from spark_support import BASE_MS, histogram, snapshot_line

pytestmark = pytest.mark.spark


def _write(root: Path, lines: list[str], name: str = "default-00.jsonl") -> Path:
    directory = root / "in" / "date=2025-11-20"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text("\n".join(lines) + "\n")
    return root / "in"


def _run(root: Path, capsys, *extra: str) -> tuple[int, str]:
    code = main(["--input", str(root / "in"), "--output", str(root / "out"), *extra])
    return code, capsys.readouterr().err


def _tables(spark, out: Path) -> dict:
    return {name: read_table(spark, str(out), name) for name in SCHEMAS}


def _healthy_day(minutes: int = 100) -> list[str]:
    """Three consumed topics, steady queues, lag far under the threshold, nothing ending."""
    lines = []
    for minute in range(minutes):
        for topic, rate in (("orders", 30), ("emails", 5), ("audit", 1)):
            lines.append(
                snapshot_line(
                    topic,
                    minute,
                    sendMsg=rate,
                    pullMsg=rate,
                    ackMsg=rate,
                    triggerMsgReady=rate,
                    pullMsgTimeGap=histogram({2: rate}, 4, 3 * rate),
                    readyQueueTimeGap=histogram({0: rate}, 1, rate),
                    waitingQueueSize=rate,
                    readyQueueSize=0,
                    ackQueueSize=1,
                )
            )
    return lines


def test_healthy_day_reports_no_findings_plainly_and_every_optional_table_reads_empty(
    spark, tmp_path, capsys
):
    _write(tmp_path, _healthy_day())
    code, err = _run(tmp_path, capsys)
    assert code == 0, err
    assert "Traceback" not in err and " WARN " not in err
    assert "no findings on 2025-11-20: a healthy day" in err
    found = _tables(spark, tmp_path / "out")
    for name in ("findings", "ready_growth_runs"):
        assert found[name].count() == 0, name
        assert found[name].schema == SCHEMAS[name], name
    assert not list((tmp_path / "out" / "findings").glob("date=*"))  # empty: no Parquet file at all
    total = {r["topic"]: r for r in found["topic_total"].collect()}
    assert (
        total["orders"]["sent"],
        total["emails"]["acked"],
        total["audit"]["snapshot_lines"],
    ) == (3000, 500, 100)
    assert found["input_quality"].first()["valid_lines"] == 300
    page = (tmp_path / "out" / "report.html").read_text()
    assert 'id="findings-none">No findings on 2025-11-20' in page


def test_hour_of_several_blocks_is_one_row_in_a_run_without_duplicates(spark, tmp_path, capsys):
    """30-second intervals fill two blocks of 64 slots in their hour: in a run with nothing
    to drop (so the job's first, unmerged hours are asked to merge by the pass summary), the
    hour is still one row holding every line; a one-minute topic's hours stay as they are."""
    fast = [
        snapshot_line(
            "fast",
            0,
            intervalStart=BASE_MS + k * 30_000,
            intervalEnd=BASE_MS + (k + 1) * 30_000,
            sendMsg=k,
            readyQueueSize=k % 4,
        )
        for k in range(100)
    ]
    steady = [snapshot_line("steady", minute, sendMsg=2) for minute in range(90)]
    _write(tmp_path, fast + steady)
    code, err = _run(tmp_path, capsys)
    assert code == 0, err
    assert "read 190 lines: 190 valid" in err and "duplicate intervals" not in err
    hours = read_table(spark, str(tmp_path / "out"), "topic_hour")
    rows = {(r["topic"], r["hour_start"].hour): r for r in hours.collect()}
    assert hours.count() == 3 and sorted(rows) == [("fast", 0), ("steady", 0), ("steady", 1)]
    first = rows[("fast", 0)]
    assert (first["snapshot_lines"], first["sent"], first["window_s"]) == (100, 4950, 3000.0)
    assert (first["ready_size_max"], first["ready_size_last"]) == (3, 99 % 4)
    assert [rows[("steady", h)]["snapshot_lines"] for h in (0, 1)] == [60, 30]


def _day(root: Path, day: int, lines: list[str], name: str = "default-00.jsonl") -> None:
    directory = root / "in" / f"date=2025-11-{20 + day}"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text("\n".join(lines) + "\n")


def test_awkward_days_one_interval_zero_topic_v2_dead_letters_bad_lines_and_duplicates(
    spark, tmp_path, capsys
):
    """One run over four awkward days (each check names its day):
    20: a single interval: a busy topic and a topic of only zero counters; a topic of
        30-second intervals (two blocks in its hour);
    21: schemaVersion 2 lines with dead letters beside version-1 lines;
    22: every line malformed or unsupported except one;
    23: every interval written twice (only duplicates)."""
    minute = 24 * 60
    _day(
        tmp_path,
        0,
        [
            snapshot_line("busy", 0, sendMsg=6, pullMsg=6, ackMsg=5, readyQueueSize=2),
            snapshot_line("idle", 0),
            *[
                snapshot_line(
                    "fast",
                    0,
                    intervalStart=BASE_MS + k * 30_000,
                    intervalEnd=BASE_MS + (k + 1) * 30_000,
                    sendMsg=k,
                    readyQueueSize=k % 4,
                )
                for k in range(100)
            ],
        ],
    )
    _day(
        tmp_path,
        1,
        [
            snapshot_line("v1-topic", minute, sendMsg=3, pullMsg=3, ackMsg=3),
            snapshot_line(
                "dlq",
                minute,
                schemaVersion=2,
                sendMsg=5,
                pullMsg=5,
                nackMsg=4,
                deadLettered=3,
                redriven=1,
            ),
            snapshot_line("dlq", minute + 1, schemaVersion=2, deadLettered=2),
        ],
    )
    bad = [
        '{"truncated',
        "not json",
        snapshot_line("t", 2 * minute + 1, sendMsg="many"),
        snapshot_line("t", 2 * minute + 2, schemaVersion=7),
    ]
    _day(tmp_path, 2, bad * 5 + [snapshot_line("t", 2 * minute + 3, sendMsg=9)])
    twice = [
        snapshot_line("dup", 3 * minute + m, sendMsg=m + 1, readyQueueSize=m % 3) for m in range(30)
    ]
    _day(tmp_path, 3, twice, "default-00.jsonl")
    _day(tmp_path, 3, twice, "copy-00.jsonl")
    code, err = _run(tmp_path, capsys)
    assert code == 0, err
    assert (
        "read 186 lines: 166 valid, 15 malformed, 5 unsupported" in err
        and "first bad line in" in err
    )
    assert "to drop duplicate intervals" in err
    found = _tables(spark, tmp_path / "out")
    days = {(r["date"].day, r["topic"]): r for r in found["topic_day"].collect()}
    quality = {r["date"].day: r for r in found["input_quality_daily"].collect()}

    # 20: one interval; the zero topic is there, with zeros and no ratios
    hours = {r["topic"]: r for r in found["topic_hour"].filter("date = '2025-11-20'").collect()}
    assert (hours["busy"]["sent"], hours["busy"]["window_s"], hours["busy"]["ready_size_last"]) == (
        6,
        60.0,
        2,
    )
    assert (hours["fast"]["snapshot_lines"], hours["fast"]["sent"]) == (100, sum(range(100)))
    assert (hours["fast"]["window_s"], hours["fast"]["ready_size_last"]) == (3000.0, 99 % 4)
    idle = days[(20, "idle")]
    assert (idle["sent"], idle["delivered"], idle["snapshot_lines"]) == (0, 0, 1)
    assert idle["ack_ratio"] is None and idle["delivery_lag_p99_ms"] is None
    assert {
        r["topics"] for r in found["namespace_day"].filter("date = '2025-11-20'").collect()
    } == {3}

    # 21: version 1 and 2 read alike; dead letters summed and found
    assert (
        days[(21, "dlq")]["dead_lettered"],
        days[(21, "dlq")]["redriven"],
        days[(21, "dlq")]["nacked"],
    ) == (5, 1, 4)
    assert days[(21, "v1-topic")]["dead_lettered"] == 0
    dead = found["findings"].filter("kind = 'dead_lettered'").collect()
    assert [(f["topic"], f["figure"], f["detail"]) for f in dead] == [
        ("dlq", 5.0, "topic dlq dead-lettered 5 message(s); 1 redriven in the day")
    ]

    # 22: only one valid line; the rest counted against that day
    assert days[(22, "t")]["sent"] == 9
    assert (
        quality[22]["malformed_lines"],
        quality[22]["unsupported_lines"],
        quality[22]["valid_lines"],
    ) == (15, 5, 1)

    # 23: every interval once
    assert (
        quality[23]["valid_lines"],
        quality[23]["duplicate_lines"],
        quality[23]["distinct_intervals"],
    ) == (60, 30, 30)
    assert days[(23, "dup")]["sent"] == sum(range(1, 31))

    page = (tmp_path / "out" / "report.html").read_text()
    assert (
        "20 input line(s) were skipped" in page and "topic dlq dead-lettered 5 message(s)" in page
    )


def test_findings_only_before_the_latest_day_are_counted_not_called_healthy(
    spark, tmp_path, capsys
):
    """Two days, the one finding on the first (a topic sent to and never consumed), the
    second day healthy: the summary counts that finding, none on the latest day."""
    _day(tmp_path, 0, [snapshot_line("orphan", 0, sendMsg=4)])
    _day(
        tmp_path,
        1,
        [snapshot_line("steady", 24 * 60 + m, sendMsg=2, pullMsg=2, ackMsg=2) for m in range(3)],
    )
    code, err = _run(tmp_path, capsys)
    assert code == 0, err
    assert "report.html: 1 finding(s), 0 on the latest day (2025-11-21)" in err
    assert "healthy" not in err
    kinds = [
        (r["kind"], r["date"].day)
        for r in read_table(spark, str(tmp_path / "out"), "findings").collect()
    ]
    assert kinds == [("no_consumer", 20)]


def _shown(page: str, table_id: str, key: str, column: str) -> str:
    """The data-value of ``column`` in the row of table ``table_id`` whose cells hold ``key``."""
    table = re.search(rf'<table id="{table_id}">(.*?)</table>', page, re.DOTALL).group(1)
    (row,) = [r for r in re.findall(r"<tr>(.*?)</tr>", table) if f'data-value="{key}"' in r]
    return re.search(rf'data-col="{column}" data-value="([^"]*)"', row).group(1)


def test_group_blocked_sizes_reach_tables_csv_and_page_and_older_lines_read_zero(
    spark, tmp_path, capsys
):
    """A day whose first lines predate groupBlockedSize (the server was upgraded at 00:02)."""
    sizes = [None, None, 5, 9, 4]
    lines = []
    for minute, blocked in enumerate(sizes):
        extra = {} if blocked is None else {"groupBlockedSize": blocked}
        lines.append(snapshot_line("ordered", minute, sendMsg=3, pullMsg=1, **extra))
        lines.append(snapshot_line("plain", minute, sendMsg=1, pullMsg=1, ackMsg=1))
    _write(tmp_path, lines)
    code, err = _run(tmp_path, capsys)
    assert code == 0, err
    out = tmp_path / "out"
    found = _tables(spark, out)
    day = {r["topic"]: r for r in found["topic_day"].collect()}
    ordered, plain = day["ordered"], day["plain"]
    assert (ordered["group_blocked_size_sum"], ordered["group_blocked_size_max"]) == (18, 9)
    assert (ordered["group_blocked_size_last"], ordered["group_blocked_size_avg"]) == (4, 3.6)
    assert (plain["group_blocked_size_max"], plain["group_blocked_size_last"]) == (0, 0)
    total = found["namespace_total"].first()
    assert (total["group_blocked_size_max"], total["group_blocked_size_last"]) == (9, 4)

    with (out / "topic_daily.csv").open() as handle:
        rows = {r["topic"]: r for r in csv.DictReader(handle)}
    assert [rows["ordered"][f"group_blocked_size_{s}"] for s in ("avg", "max", "last")] == [
        "3.6",
        "9",
        "4",
    ]
    page = (out / "report.html").read_text()
    assert "<th>Group-blocked</th>" in page
    assert _shown(page, "latest-topics", "ordered", "group_blocked_size_last") == "4"
    assert _shown(page, "latest-topics", "plain", "group_blocked_size_last") == "0"
    assert _shown(page, "namespace-totals", "default", "group_blocked_size_last") == "4"


def test_topic_controls_reach_tables_csv_page_and_a_backlog_finding_older_lines_read_zero(
    spark, tmp_path, capsys
):
    """A day whose first two minutes predate purged, backlogRefused and paused (the server was
    upgraded at 00:02): "capped" refuses sends at its backlog quota and is purged, "maint" is
    paused and resumed, "held" is paused at the day's last interval."""
    absent = None
    refused = [absent, absent, 0, 2, 3]
    purged = [absent, absent, 0, 0, 4]
    maint = [absent, absent, True, True, False]
    held = [absent, absent, False, True, True]
    lines = []
    for minute in range(5):

        def fields(**values):
            return {k: v for k, v in values.items() if v is not None}

        common = {"sendMsg": 1, "pullMsg": 1, "ackMsg": 1}
        lines += [
            snapshot_line(
                "capped",
                minute,
                **common,
                **fields(backlogRefused=refused[minute], purged=purged[minute]),
            ),
            snapshot_line("maint", minute, **common, **fields(paused=maint[minute])),
            snapshot_line("held", minute, **common, **fields(paused=held[minute])),
        ]
    _write(tmp_path, lines)
    code, err = _run(tmp_path, capsys)
    assert code == 0, err
    out = tmp_path / "out"
    found = _tables(spark, out)
    day = {r["topic"]: r for r in found["topic_day"].collect()}
    assert [
        (t, day[t]["purged"], day[t]["backlog_refused"]) for t in ("capped", "maint", "held")
    ] == [("capped", 4, 5), ("maint", 0, 0), ("held", 0, 0)]
    assert [
        (t, day[t]["paused_avg"], day[t]["paused_max"], day[t]["paused_last"])
        for t in ("capped", "maint", "held")
    ] == [("capped", 0.0, 0, 0), ("maint", 0.4, 1, 0), ("held", 0.4, 1, 1)]
    total = found["namespace_total"].first()
    assert (total["purged"], total["backlog_refused"]) == (4, 5)
    assert (total["paused_max"], total["paused_last"]) == (2, 1)  # topics; one paused at the end

    refusals = found["findings"].filter("kind = 'backlog_refused'").collect()
    assert [
        (f["topic"], f["figure"], f["unit"], f["time"].hour, f["detail"]) for f in refusals
    ] == [
        (
            "capped",
            5.0,
            "messages",
            0,
            "topic capped refused 5 send(s) at its backlog quota (maxBacklog); 4 purged in the day",
        )
    ]
    assert found["findings"].count() == 1

    with (out / "topic_daily.csv").open() as handle:
        rows = {r["topic"]: r for r in csv.DictReader(handle)}
    assert [rows["capped"][c] for c in ("purged", "backlog_refused")] == ["4", "5"]
    assert [rows["held"][f"paused_{s}"] for s in ("avg", "max", "last")] == ["0.4", "1", "1"]
    page = (out / "report.html").read_text()
    for label in ("Purged", "Refused (backlog)", "Paused"):
        assert f"<th>{label}</th>" in page, label
    assert _shown(page, "latest-topics", "held", "paused_last") == "1"
    assert _shown(page, "latest-topics", "maint", "paused_last") == "0"
    assert _shown(page, "latest-topics", "capped", "backlog_refused") == "5"
    assert _shown(page, "namespace-totals", "default", "purged") == "4"
    assert _shown(page, "namespace-totals", "default", "paused_last") == "1"
    assert "topic capped refused 5 send(s)" in page


DEBOUNCE_AND_SCHEDULE = {
    "replaced": "replaced",
    "deduplicated": "deduplicated",
    "scheduleSent": "schedule_sent",
    "scheduleMissed": "schedule_missed",
}
"""The debounce and schedule counters: snapshot field -> the tables' column."""


def _server_line(topic: str, minute: int, counts: dict, old: bool = False) -> str:
    """A line as the server's own writer makes it (``delayqueue.monitoring.snapshot``), with
    ``counts`` in its stats; ``old``: without the debounce and schedule fields, as a server
    before them wrote it."""
    from delayqueue.core.monitor_hash import empty_topic_stats
    from delayqueue.monitoring.snapshot import snapshot_line as server_line

    stats = {**empty_topic_stats(), **counts}
    start = BASE_MS + minute * 60_000
    line = server_line("default", topic, start, start + 60_000, stats, {"readyQueueSize": 1})
    if old:
        for field in DEBOUNCE_AND_SCHEDULE:
            del line[field]
    return json.dumps(line, separators=(",", ":"))


def test_debounce_and_schedule_counters_round_trip_into_every_table_and_old_lines_read_zero(
    spark, tmp_path, capsys
):
    """The server's own lines carry replaced, deduplicated, scheduleSent and scheduleMissed;
    the report counts them per topic and namespace, hour, day and total, with their rates, in
    the CSV and on the page. The first two minutes were written before the fields existed
    (the server was upgraded at 00:02) and read as 0, and their other counters still count."""
    lines = []
    for minute in range(5):
        old = minute < 2
        lines += [
            _server_line(
                "debounced",
                minute,
                {"sendMsg": 10, "replaced": 3 * minute, "deduplicated": minute},
                old=old,
            ),
            _server_line(
                "cron",
                minute,
                {"scheduleSent": minute, "scheduleMissed": 7 if minute == 3 else 0},
                old=old,
            ),
        ]
    assert all(field not in lines[0] for field in DEBOUNCE_AND_SCHEDULE)
    assert all(f'"{field}":' in lines[-1] for field in DEBOUNCE_AND_SCHEDULE)
    _write(tmp_path, lines)
    code, err = _run(tmp_path, capsys)
    assert code == 0, err
    out = tmp_path / "out"
    found = _tables(spark, out)
    # minutes 2, 3, 4 count; 0 and 1 are zeros (absent), not nulls and not a failure
    expected = {
        "debounced": {"replaced": 27, "deduplicated": 9, "schedule_sent": 0, "schedule_missed": 0},
        "cron": {"replaced": 0, "deduplicated": 0, "schedule_sent": 9, "schedule_missed": 7},
    }
    columns = list(DEBOUNCE_AND_SCHEDULE.values())
    for table in ("topic_hour", "topic_day", "topic_total"):
        rows = {r["topic"]: r for r in found[table].collect()}
        assert {t: {c: rows[t][c] for c in columns} for t in rows} == expected, table
        assert rows["debounced"]["sent"] == 50, table  # the old lines' sends count
        # five minutes of lines: 300 s
        assert rows["cron"]["schedule_sent_per_s"] == pytest.approx(9 / 300), table
        assert rows["debounced"]["replaced_per_s"] == pytest.approx(27 / 300), table
    for table in ("namespace_hour", "namespace_day", "namespace_total"):
        (row,) = found[table].collect()
        assert [row[c] for c in columns] == [27, 9, 9, 7], table
        assert row["schedule_missed_per_s"] == pytest.approx(7 / 300), table
    hours = {r["topic"]: r for r in found["topic_hour"].collect()}
    assert hours["cron"]["snapshot_lines"] == 5

    with (out / "topic_daily.csv").open() as handle:
        rows = {r["topic"]: r for r in csv.DictReader(handle)}
    assert {t: {c: int(rows[t][c]) for c in columns} for t in rows} == expected
    page = (out / "report.html").read_text()
    for label in ("Replaced", "Deduplicated", "Scheduled", "Missed fire times"):
        assert f"<th>{label}</th>" in page, label
    for column in columns:
        assert _shown(page, "latest-topics", "debounced", column) == str(
            expected["debounced"][column]
        ), column
        assert _shown(page, "latest-topics", "cron", column) == str(
            expected["cron"][column]
        ), column
    assert _shown(page, "namespace-totals", "default", "schedule_missed") == "7"
    assert _shown(page, "namespace-totals", "default", "replaced") == "27"


def test_the_throughput_charts_draw_schedule_occurrences_beside_the_sends(monkeypatch):
    from spark_jobs import chart
    from spark_jobs.report_html import SERIES_COLUMNS

    drawn = {}

    def record(title, series, *args, **kwargs):
        drawn[title] = series
        return ""

    monkeypatch.setattr(chart, "line_chart", record)
    row = {name: float(i) for i, name in enumerate(SERIES_COLUMNS)}
    row.update(namespace="default", topic="t", time=BASE_MS)
    chart.charts({"namespace_series": [row], "topic_series": []})
    (throughput,) = [s for title, s in drawn.items() if title.startswith("Throughput")]
    assert list(throughput) == ["sent", "scheduled", "delivered", "acked"]
    assert throughput["scheduled"] == ([BASE_MS], [row["schedule_sent_per_s"]])
    assert throughput["sent"] == ([BASE_MS], [row["sent_per_s"]])


def test_the_backlog_charts_draw_group_blocked_beside_the_other_queues(monkeypatch):
    from spark_jobs import chart
    from spark_jobs.report_html import SERIES_COLUMNS

    drawn = {}

    def record(title, series, *args, **kwargs):
        drawn[title] = series
        return ""

    monkeypatch.setattr(chart, "line_chart", record)
    row = {name: 1.0 for name in SERIES_COLUMNS}  # the columns the page collects for charts
    row.update(namespace="default", topic="t", time=BASE_MS)
    chart.charts({"namespace_series": [row], "topic_series": []})
    (backlog,) = [series for title, series in drawn.items() if title.startswith("Backlog")]
    assert list(backlog) == ["waiting", "ready", "consuming", "group blocked"]
    assert backlog["group blocked"] == ([BASE_MS], [1.0])


def test_unexpected_failure_is_one_line_without_traceback(spark, tmp_path, capsys):
    _write(tmp_path, [snapshot_line("t", 0, sendMsg=1)])
    (tmp_path / "out").write_text("a file where the output directory should be")
    code, err = _run(tmp_path, capsys)
    assert code == 1
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: the report failed: "), err
