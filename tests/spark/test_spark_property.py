"""Property: for any valid set of snapshot lines (random topics, intervals, counters, queue
sizes, histograms, interval lengths and duplicate copies), the job's aggregation never fails,
each topic's totals equal the sums over its distinct intervals, and the fast path (blocks of
empty-ready-queue lines) finds the same hours and growth runs as one group per line."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings  # a dev dependency
from hypothesis import strategies as st

from spark_support import BASE_MS

pytestmark = pytest.mark.spark

COUNTERS = ("sendMsg", "pullMsg", "ackMsg", "nackMsg", "deadLettered")


@st.composite
def snapshot_sets(draw, namespace: str = "ns"):
    """Lines of up to 3 topics over 2 UTC days; each topic keeps one interval length per hour
    (the server's grid) or, sometimes, an off-grid one; some lines are written twice."""
    lines = []
    for topic in draw(
        st.lists(st.sampled_from(["a", "b", "c/with,comma"]), min_size=1, max_size=3, unique=True)
    ):
        length = draw(st.sampled_from([60_000, 300_000, 45_000]))  # 45 s is off the hourly grid
        starts = draw(
            st.lists(
                st.integers(0, 2 * 86_400_000 // length - 1), min_size=1, max_size=40, unique=True
            )
        )
        for slot in starts:
            start = BASE_MS + slot * length
            line = {
                "schemaVersion": draw(st.sampled_from([1, 2])),
                "namespace": namespace,
                "topic": topic,
                "intervalStart": start,
                "intervalEnd": start + length,
                "readyQueueSize": draw(st.sampled_from([0, 0, 0, 1, 5, 9])),
                "waitingQueueSize": draw(st.integers(0, 50)),
                "pullMsgTimeGap": {
                    "count": 0,
                    "sum": 0,
                    "max": 0,
                    "counts": draw(st.lists(st.integers(0, 3), min_size=16, max_size=16)),
                },
            }
            for counter in COUNTERS:
                line[counter] = draw(st.integers(0, 1000))
            text = json.dumps(line)
            lines.append(text)
            if draw(st.integers(0, 9)) == 0:
                lines.append(text)  # written twice
    return lines


def _expected(lines: list[str]) -> dict[tuple, dict]:
    distinct = {(d["namespace"], d["topic"], d["intervalStart"]): d for d in map(json.loads, lines)}
    totals: dict[tuple, dict] = {}
    for (namespace, topic, _), line in distinct.items():
        entry = totals.setdefault(
            (namespace, topic),
            {"snapshot_lines": 0, "buckets": [0] * 16, **{c: 0 for c in COUNTERS}},
        )
        entry["snapshot_lines"] += 1
        for counter in COUNTERS:
            entry[counter] += line[counter]
        entry["buckets"] = [
            x + y for x, y in zip(entry["buckets"], line["pullMsgTimeGap"]["counts"])
        ]
    return totals


# Each example is three independent snapshot sets, one per namespace, aggregated in one go
# (namespaces never share a group): the Spark queries of an example, not its lines, are the
# cost, so this checks three sets for the price of one.
SETS_PER_EXAMPLE = 3


@settings(
    max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(sets=st.tuples(*[snapshot_sets(f"ns{i}") for i in range(SETS_PER_EXAMPLE)]))
def test_topic_totals_equal_input_sums_and_fast_path_equals_line_by_line(spark, sets):
    from spark_jobs.aggregate import drop_duplicate_lines, line_groups
    from spark_jobs.growth import growth_runs
    from spark_jobs.rollup import hour_rows, rollups, with_derived

    from spark_support import aggregate_lines, parse_snapshots

    lines = [line for lines in sets for line in lines]
    frame = spark.createDataFrame(
        [(line, "file:///in/x.jsonl") for line in lines], "value string, source_file string"
    )
    hours, runs = aggregate_lines(frame, min_intervals=2)
    totals = {
        (r["namespace"], r["topic"]): r
        for r in rollups(hours, "topic_hour", ["topic_total"])["topic_total"].collect()
    }
    names = {
        "sendMsg": "sent",
        "pullMsg": "delivered",
        "ackMsg": "acked",
        "nackMsg": "nacked",
        "deadLettered": "dead_lettered",
    }
    for topic, expected in _expected(lines).items():
        row = totals[topic]
        assert row["snapshot_lines"] == expected["snapshot_lines"], topic
        for counter in COUNTERS:
            assert row[names[counter]] == expected[counter], (topic, counter)
        assert list(row["delivery_lag_counts"]) == expected["buckets"], topic

    # The reference: every distinct line in a group of its own (no blocks, no masks).
    rows = parse_snapshots(frame)
    single = line_groups(drop_duplicate_lines(rows.filter("status = 0")), one_per_line=True)
    key = ["namespace", "topic", "hour_start_ms"]
    fast = sorted(
        tuple(r)
        for r in hours.select(
            *key,
            "snapshot_lines",
            "sent",
            "ready_size_last",
            "waiting_size_max",
            "delivery_lag_p90_ms",
        ).collect()
    )
    reference = with_derived(hour_rows(single))
    slow = sorted(
        tuple(r)
        for r in reference.select(
            *key,
            "snapshot_lines",
            "sent",
            "ready_size_last",
            "waiting_size_max",
            "delivery_lag_p90_ms",
        ).collect()
    )
    assert fast == slow
    run_columns = [
        "namespace",
        "topic",
        "run_start",
        "run_end",
        "intervals",
        "from_size",
        "to_size",
    ]
    assert sorted(tuple(r) for r in runs.select(*run_columns).collect()) == sorted(
        tuple(r) for r in growth_runs(single, 2).select(*run_columns).collect()
    )
