"""Percentiles read from summed fixed-bound histograms (exact bucket arithmetic)."""

from __future__ import annotations

import pytest

from spark_jobs.rollup import rollups, with_derived

from spark_support import aggregate_lines

pytestmark = pytest.mark.spark


def _hourly(lines_frame, lines):
    return aggregate_lines(lines_frame(lines))[0]


def test_p99_reads_upper_bound_of_bucket_from_summed_histograms(lines_frame, line, hist):
    # Two topics, two intervals each. Summed over all four: bucket 2 (<=5 ms) 50,
    # bucket 5 (<=50 ms) 40, bucket 8 (<=500 ms) 9, bucket 10 (<=2000 ms) 1 -> total 100.
    lines = [
        line("a", 0, pullMsgTimeGap=hist({2: 20, 5: 10}, 40)),
        line("a", 1, pullMsgTimeGap=hist({2: 5, 5: 20, 8: 4}, 300)),
        line("b", 0, pullMsgTimeGap=hist({2: 25, 8: 5}, 450)),
        line("b", 1, pullMsgTimeGap=hist({5: 10, 10: 1}, 1500)),
    ]
    namespace = with_derived(
        rollups(_hourly(lines_frame, lines), "topic_hour", ["namespace_hour"])["namespace_hour"]
    )
    row = namespace.first()
    assert row["delivery_lag_counts"] == [0, 0, 50, 0, 0, 40, 0, 0, 9, 0, 1, 0, 0, 0, 0, 0]
    # p50: ceil(50) = 50 reached in bucket 2 -> 5 ms; p90: 90 reached in bucket 5 -> 50 ms;
    # p99: 99 reached in bucket 8 -> 500 ms; the single 1500 ms sample only sets the max.
    assert (row["delivery_lag_p50_ms"], row["delivery_lag_p90_ms"], row["delivery_lag_p99_ms"]) == (
        5,
        50,
        500,
    )
    assert row["delivery_lag_max"] == 1500
    assert row["delivery_lag_count"] == 100


def test_percentile_target_is_ceiling_of_p_times_total(lines_frame, line, hist):
    # 10 samples: 9 in bucket 0 (<=1 ms), 1 in bucket 3 (<=10 ms). p90 -> ceil(9.0) = 9 -> 1 ms;
    # p99 -> ceil(9.9) = 10 -> the 10th sample's bucket -> 10 ms.
    row = _hourly(lines_frame, [line("a", 0, pullMsgTimeGap=hist({0: 9, 3: 1}, 7))]).first()
    assert (row["delivery_lag_p90_ms"], row["delivery_lag_p99_ms"]) == (1, 10)


def test_percentile_in_unbounded_bucket_reports_observed_max(lines_frame, line, hist):
    row = _hourly(lines_frame, [line("a", 0, pullMsgTimeGap=hist({3: 1, 15: 99}, 95000))]).first()
    assert (row["delivery_lag_p50_ms"], row["delivery_lag_p99_ms"]) == (95000, 95000)


def test_percentiles_and_mean_of_empty_histogram_are_null(lines_frame, line):
    row = _hourly(lines_frame, [line("a", 0, sendMsg=3)]).first()
    assert row["delivery_lag_p50_ms"] is None and row["delivery_lag_p99_ms"] is None
    assert row["delivery_lag_mean_ms"] is None and row["ack_ratio"] is None


def test_weighted_mean_is_summed_gap_over_summed_count(lines_frame, line, hist):
    lines = [
        line("a", 0, pullMsgTimeGap=hist({3: 3}, 10, sum_ms=30)),
        line("a", 1, pullMsgTimeGap=hist({5: 1}, 50, sum_ms=50)),
    ]
    row = _hourly(lines_frame, lines).first()
    assert row["delivery_lag_mean_ms"] == pytest.approx(80 / 4)


def test_the_jobs_bounds_are_the_servers_finite_ones():
    """The job reads the server's histograms and imports nothing from it: its 15 finite
    bounds and 16 buckets are the server's 16 bounds, the last of them +inf."""
    import math

    from delayqueue.core.histogram import BOUNDS_MS
    from spark_jobs.histogram import BUCKETS, FINITE_BOUNDS_MS

    assert (*FINITE_BOUNDS_MS, math.inf) == BOUNDS_MS
    assert BUCKETS == len(BOUNDS_MS) == 16
