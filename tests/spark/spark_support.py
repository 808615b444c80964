"""Helpers shared by the Spark tests (imported by module name, like tests/server_process.py)."""

from __future__ import annotations

import json

BASE_MS = 1_763_596_800_000  # 2025-11-20T00:00:00Z
MINUTE_MS = 60_000


def snapshot_line(topic: str = "t1", minute: int = 0, namespace: str = "default", **fields) -> str:
    """One snapshot line for the interval starting ``minute`` minutes after BASE_MS."""
    start = BASE_MS + minute * MINUTE_MS
    line = {
        "schemaVersion": 1,
        "namespace": namespace,
        "topic": topic,
        "intervalStart": start,
        "intervalEnd": start + MINUTE_MS,
        "sendMsg": 0,
        "pullMsg": 0,
        "ackMsg": 0,
        "nackMsg": 0,
        "getMsg": 0,
        "deleteMsg": 0,
        "triggerMsgReady": 0,
        "triggerMsgEndLife": 0,
        "triggerMsgTimeout": 0,
        "pullMsgTimeGap": {"count": 0, "sum": 0, "max": 0, "counts": [0] * 16},
        "readyQueueTimeGap": {"count": 0, "sum": 0, "max": 0, "counts": [0] * 16},
        "waitingQueueSize": 0,
        "readyQueueSize": 0,
        "ackQueueSize": 0,
        "waitingQueueInfo": {"sizeOf0To1min": 0, "sizeOf1minTo10min": 0},
    }
    line.update(fields)
    return json.dumps(line)


def histogram(counts: dict[int, int], max_ms: int, sum_ms: int = 0) -> dict:
    """A pullMsgTimeGap-style histogram with ``counts[bucket] = n``."""
    array = [0] * 16
    for bucket, n in counts.items():
        array[bucket] = n
    return {"count": sum(array), "sum": sum_ms, "max": max_ms, "counts": array}


def aggregate_lines(frame, min_intervals: int = 10):
    """Text lines (``lines_frame``) -> (hourly table with derived columns, growth runs), by the
    job's own steps: the grouping pass, duplicate detection and re-grouping, hours, runs."""
    from spark_jobs.aggregate import (
        deduplicated_groups,
        duplicate_keys,
        growth_runs,
        hour_rows,
        line_groups,
        valid_groups,
        with_derived,
    )
    from spark_jobs.snapshot import parse_snapshots

    rows = parse_snapshots(frame).localCheckpoint()
    groups = line_groups(rows).localCheckpoint()
    dirty = duplicate_keys(groups).localCheckpoint()
    final = deduplicated_groups(groups, dirty, rows) if dirty.take(1) else valid_groups(groups)
    final = final.localCheckpoint()
    return with_derived(hour_rows(final)), growth_runs(final, min_intervals)
