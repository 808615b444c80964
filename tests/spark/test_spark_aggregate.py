"""Hourly, daily and namespace aggregates, backlog-growth runs and findings on small inputs."""

from __future__ import annotations

import datetime as dt

import pytest

from spark_jobs.finding import findings
from spark_jobs.rollup import rollups, with_derived

from spark_support import aggregate_lines

pytestmark = pytest.mark.spark

DAY = dt.date(2025, 11, 20)


def _hourly(lines_frame, lines):
    return aggregate_lines(lines_frame(lines))[0]


def _runs(lines_frame, lines, min_intervals):
    return aggregate_lines(lines_frame(lines), min_intervals)[1]


def _rows(df, *columns):
    return [tuple(row) for row in df.select(*columns).orderBy(*columns).collect()]


def test_counters_sum_per_topic_and_hour_with_rates_and_ratios(lines_frame, line):
    lines = [
        line(
            "a",
            0,
            sendMsg=30,
            pullMsg=20,
            ackMsg=15,
            nackMsg=1,
            triggerMsgTimeout=4,
            triggerMsgReady=25,
        ),
        line("a", 1, sendMsg=30, pullMsg=20, ackMsg=17, deleteMsg=2, getMsg=3, triggerMsgEndLife=1),
        line("a", 60, sendMsg=6),
        line("b", 0, sendMsg=1),
    ]
    hourly = _hourly(lines_frame, lines)
    assert _rows(
        hourly,
        "topic",
        "hour_start",
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
    ) == [
        ("a", dt.datetime(2025, 11, 20, 0, 0), 2, 60, 40, 32, 1, 2, 3, 25, 1, 4),
        ("a", dt.datetime(2025, 11, 20, 1, 0), 1, 6, 0, 0, 0, 0, 0, 0, 0, 0),
        ("b", dt.datetime(2025, 11, 20, 0, 0), 1, 1, 0, 0, 0, 0, 0, 0, 0, 0),
    ]
    first = (
        hourly.filter("topic = 'a' AND hour_start_ms % 3600000 = 0").orderBy("hour_start").first()
    )
    assert first["window_s"] == 120.0
    assert first["sent_per_s"] == pytest.approx(60 / 120)
    assert first["ack_ratio"] == pytest.approx(32 / 40)
    assert first["redelivery_ratio"] == pytest.approx(4 / 40)


def test_interval_written_twice_counts_once(lines_frame, line, hist):
    once = line("a", 5, sendMsg=7, pullMsg=3, pullMsgTimeGap=hist({4: 3}, 20), readyQueueSize=9)
    hourly = _hourly(lines_frame, [once, line("a", 6, sendMsg=1), once])
    row = hourly.first()
    assert (row["snapshot_lines"], row["sent"], row["delivered"], row["delivery_lag_count"]) == (
        2,
        8,
        3,
        3,
    )
    assert row["delivery_lag_counts"][4] == 3
    assert row["ready_size_sum"] == 9


def test_queue_sizes_give_average_max_and_last_of_the_hour(lines_frame, line):
    lines = [
        line("a", 0, waitingQueueSize=10, readyQueueSize=4, ackQueueSize=1),
        line("a", 2, waitingQueueSize=30, readyQueueSize=2, ackQueueSize=0),
        line(
            "a",
            1,
            waitingQueueSize=50,
            readyQueueSize=6,
            ackQueueSize=2,
            waitingQueueInfo={"sizeOf0To1min": 40, "sizeOf1hourTo6hour": 10},
        ),
    ]
    row = _hourly(lines_frame, lines).first()
    assert (row["waiting_size_avg"], row["waiting_size_max"], row["waiting_size_last"]) == (
        30.0,
        50,
        30,
    )
    assert (row["ready_size_avg"], row["ready_size_max"], row["ready_size_last"]) == (4.0, 6, 2)
    assert (row["consuming_size_max"], row["consuming_size_last"]) == (2, 0)
    assert (row["waiting_0_1min"], row["waiting_1_6h"]) == (
        0,
        0,
    )  # the last snapshot's distribution


def test_group_blocked_size_gives_average_max_and_last_and_older_lines_count_zero(
    lines_frame, line
):
    lines = [
        line("a", 0, readyQueueSize=1),  # before the server wrote groupBlockedSize
        line("a", 1, readyQueueSize=1, groupBlockedSize=6),
        line("a", 2, readyQueueSize=1, groupBlockedSize=2),
        line("b", 0, groupBlockedSize=5),
        line("b", 1, groupBlockedSize=1),
    ]
    hourly = _hourly(lines_frame, lines)
    rows = {r["topic"]: r for r in hourly.collect()}
    a, b = rows["a"], rows["b"]
    assert (a["group_blocked_size_sum"], a["group_blocked_size_max"]) == (8, 6)
    assert (a["group_blocked_size_last"], a["group_blocked_size_avg"]) == (2, 8 / 3)
    assert (a["ready_size_last"], b["group_blocked_size_last"]) == (1, 1)
    spaces = rollups(hourly, "topic_hour", ["namespace_hour", "topic_day"])
    namespace = with_derived(spaces["namespace_hour"]).first()
    assert (namespace["group_blocked_size_max"], namespace["group_blocked_size_last"]) == (11, 3)
    day = {r["topic"]: r for r in with_derived(spaces["topic_day"]).collect()}
    assert (day["a"]["group_blocked_size_max"], day["a"]["group_blocked_size_last"]) == (6, 2)


def test_hour_without_snapshots_has_no_row_and_day_rollup_skips_it(lines_frame, line):
    lines = [
        line("a", 10, sendMsg=5),
        line("a", 130, sendMsg=7),
    ]  # 00:10 and 02:10, nothing at 01:xx
    hourly = _hourly(lines_frame, lines)
    assert _rows(hourly, "hour_start", "sent") == [
        (dt.datetime(2025, 11, 20, 0, 0), 5),
        (dt.datetime(2025, 11, 20, 2, 0), 7),
    ]
    day = with_derived(rollups(hourly, "topic_hour", ["topic_day"])["topic_day"]).first()
    assert (day["date"], day["sent"], day["snapshot_lines"]) == (DAY, 12, 2)
    assert day["window_s"] == (131 - 10) * 60


def test_topic_appearing_mid_day_is_rated_over_its_own_window(lines_frame, line):
    early = [line("a", m, sendMsg=60) for m in range(0, 720, 60)]
    late = [line("late", 720, sendMsg=60), line("late", 721, sendMsg=60)]
    hourly = _hourly(lines_frame, early + late)
    days = with_derived(rollups(hourly, "topic_hour", ["topic_day"])["topic_day"])
    late_day = days.filter("topic = 'late'").first()
    assert (late_day["first_interval_start_ms"] - 1_763_596_800_000) == 720 * 60_000
    assert late_day["sent_per_s"] == pytest.approx(120 / 120)
    namespace = with_derived(rollups(hourly, "topic_hour", ["namespace_day"])["namespace_day"])
    row = namespace.first()
    assert (row["topics"], row["sent"]) == (2, 12 * 60 + 120)
    assert row["window_s"] == 722 * 60


def test_namespace_gauges_sum_topic_figures(lines_frame, line):
    lines = [
        line("a", 0, readyQueueSize=4),
        line("a", 1, readyQueueSize=8),
        line("b", 0, readyQueueSize=1),
        line("b", 1, readyQueueSize=3),
    ]
    row = with_derived(
        rollups(_hourly(lines_frame, lines), "topic_hour", ["namespace_hour"])["namespace_hour"]
    ).first()
    assert (row["ready_size_avg"], row["ready_size_max"], row["ready_size_last"]) == (8.0, 11, 11)


def test_ready_growth_run_spans_consecutive_growing_snapshots(lines_frame, line):
    sizes = [
        5,
        3,
        4,
        6,
        9,
        12,
        12,
        13,
        20,
        25,
        30,
        28,
    ]  # grows 3->12 (4 steps), then 12->30 (4 steps)
    lines = [line("a", 55 + i, readyQueueSize=s) for i, s in enumerate(sizes)]  # crosses 01:00
    runs = _runs(lines_frame, lines, min_intervals=4)
    assert _rows(runs, "topic", "run_start", "run_end", "intervals", "from_size", "to_size") == [
        ("a", dt.datetime(2025, 11, 20, 0, 56), dt.datetime(2025, 11, 20, 1, 0), 4, 3, 12),
        ("a", dt.datetime(2025, 11, 20, 1, 1), dt.datetime(2025, 11, 20, 1, 5), 4, 12, 30),
    ]
    assert _runs(lines_frame, lines, min_intervals=5).count() == 0


def test_growth_run_skips_missing_minutes_counts_copies_once_and_restarts_each_day(
    lines_frame, line
):
    lines = [
        # 00:00..00:04 without 00:02: the gap is skipped, not a break; 00:01 is written twice.
        line("a", 0, readyQueueSize=1),
        line("a", 1, readyQueueSize=2),
        line("a", 1, readyQueueSize=2),
        line("a", 3, readyQueueSize=3),
        line("a", 4, readyQueueSize=4),
        line("a", 5, readyQueueSize=4),
        # 23:57..23:59 grows twice; the next day starts a new sequence (00:00 cannot grow).
        line("b", 1437, readyQueueSize=1),
        line("b", 1438, readyQueueSize=2),
        line("b", 1439, readyQueueSize=3),
        line("b", 1440, readyQueueSize=4),
        line("b", 1441, readyQueueSize=5),
    ]
    hourly, runs = aggregate_lines(lines_frame(lines), min_intervals=2)
    assert _rows(
        runs, "topic", "date", "run_start", "run_end", "intervals", "from_size", "to_size"
    ) == [
        ("a", DAY, dt.datetime(2025, 11, 20, 0, 0), dt.datetime(2025, 11, 20, 0, 4), 3, 1, 4),
        ("b", DAY, dt.datetime(2025, 11, 20, 23, 57), dt.datetime(2025, 11, 20, 23, 59), 2, 1, 3),
    ]
    # The copy of 00:01 counts once in the hour's figures too.
    assert _rows(
        hourly,
        "topic",
        "hour_start",
        "snapshot_lines",
        "ready_size_sum",
        "ready_size_max",
        "ready_size_last",
    ) == [
        ("a", dt.datetime(2025, 11, 20, 0, 0), 5, 14, 4, 4),
        ("b", dt.datetime(2025, 11, 20, 23, 0), 3, 6, 3, 3),
        ("b", dt.datetime(2025, 11, 21, 0, 0), 2, 9, 5, 5),
    ]


def test_growth_run_reaching_threshold_is_reported_once_with_its_full_length(lines_frame, line):
    sizes = [0, 1, 2, 3, 4, 5, 6, 2]  # 7 steps from 00:58 to 01:05, across the hour
    lines = [line("a", 58 + i, readyQueueSize=s) for i, s in enumerate(sizes)]
    runs = _runs(lines_frame, lines, min_intervals=3)
    assert _rows(runs, "run_start", "run_end", "intervals", "from_size", "to_size") == [
        (dt.datetime(2025, 11, 20, 0, 58), dt.datetime(2025, 11, 20, 1, 4), 6, 0, 6),
    ]


def test_findings_name_topic_time_and_figure(lines_frame, line, hist):
    lines = [
        # slow: p99 delivery lag 2000 ms at 03:00
        line("slow", 180, pullMsg=100, pullMsgTimeGap=hist({3: 98, 10: 2}, 1800)),
        line("slow", 240, pullMsg=100, pullMsgTimeGap=hist({3: 100}, 9)),
        # expiring: ended by expiry / retries at 05:00
        line("expiring", 300, sendMsg=5, pullMsg=5, triggerMsgEndLife=3),
        # orphan: sent, never delivered, from 02:00
        line("orphan", 100, sendMsg=0),
        line("orphan", 120, sendMsg=7, readyQueueSize=7),
        # growing: ready queue grows at 3 consecutive snapshots from 06:00
        *[line("growing", 360 + i, sendMsg=1, pullMsg=1, readyQueueSize=10 * i) for i in range(4)],
    ]
    hourly, runs = aggregate_lines(lines_frame(lines), min_intervals=3)
    result = findings(hourly, runs, lag_threshold_ms=1000)
    assert _rows(result, "kind", "topic", "time", "figure", "unit") == [
        ("delivery_lag_p99_high", "slow", dt.datetime(2025, 11, 20, 3, 0), 2000.0, "ms"),
        ("messages_ended", "expiring", dt.datetime(2025, 11, 20, 5, 0), 3.0, "messages"),
        ("no_consumer", "orphan", dt.datetime(2025, 11, 20, 2, 0), 7.0, "messages"),
        ("ready_backlog_growing", "growing", dt.datetime(2025, 11, 20, 6, 0), 30.0, "messages"),
    ]
    assert result.filter("kind = 'delivery_lag_p99_high'").first()["detail"] == (
        "p99 delivery lag above 1000 ms in 1 hour(s); worst 2000 ms"
    )
    assert (
        findings(hourly, runs, lag_threshold_ms=2000)
        .filter("kind = 'delivery_lag_p99_high'")
        .count()
        == 0
    )
