"""One SparkSession for every Spark test (local[2], few shuffle partitions, no UI)."""

from __future__ import annotations

import json

import pytest

BASE_MS = 1_763_596_800_000  # 2025-11-20T00:00:00Z
MINUTE_MS = 60_000


@pytest.fixture(scope="session")
def spark():
    try:
        from pyspark.sql import SparkSession
    except ImportError as error:  # the report extra is part of the test environment
        pytest.fail(f"pyspark is not installed (pip install 'delayqueue[report]'): {error}")
    from spark_jobs.session import JIT_OPTIONS, JavaNotFoundError, ensure_java

    try:
        ensure_java()
    except JavaNotFoundError as error:
        pytest.fail(str(error))
    session = (
        SparkSession.builder.master("local[2]")
        .appName("delayqueue-spark-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", JIT_OPTIONS)
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def snapshot_line(topic: str = "t1", minute: int = 0, namespace: str = "default", **fields) -> str:
    """One snapshot line for the interval starting ``minute`` minutes after BASE_MS."""
    start = BASE_MS + minute * MINUTE_MS
    line = {
        "schemaVersion": 1,
        "namespace": namespace,
        "topic": topic,
        "intervalStart": start,
        "intervalEnd": start + MINUTE_MS,
        "sendMsg": 0, "pullMsg": 0, "ackMsg": 0, "nackMsg": 0, "getMsg": 0, "deleteMsg": 0,
        "triggerMsgReady": 0, "triggerMsgEndLife": 0, "triggerMsgTimeout": 0,
        "pullMsgTimeGap": {"count": 0, "sum": 0, "max": 0, "counts": [0] * 16},
        "readyQueueTimeGap": {"count": 0, "sum": 0, "max": 0, "counts": [0] * 16},
        "waitingQueueSize": 0, "readyQueueSize": 0, "ackQueueSize": 0,
        "waitingQueueInfo": {"sizeOf0To1min": 0, "sizeOf1minTo10min": 0},
    }  # fmt: skip
    line.update(fields)
    return json.dumps(line)


def histogram(counts: dict[int, int], max_ms: int, sum_ms: int = 0) -> dict:
    """A pullMsgTimeGap-style histogram with ``counts[bucket] = n``."""
    array = [0] * 16
    for bucket, n in counts.items():
        array[bucket] = n
    return {"count": sum(array), "sum": sum_ms, "max": max_ms, "counts": array}


@pytest.fixture
def lines_frame(spark):
    """Build the job's input frame (value, source_file) from snapshot lines."""

    def build(lines: list[str], source: str = "file:///in/date=2025-11-20/default-00.jsonl"):
        return spark.createDataFrame([(line, source) for line in lines], "value string, source_file string")

    return build


@pytest.fixture
def line():
    """``line(topic, minute, **fields)`` -> a snapshot JSON line (see ``snapshot_line``)."""
    return snapshot_line


@pytest.fixture
def hist():
    """``hist({bucket: n}, max_ms, sum_ms)`` -> a histogram object for a snapshot line."""
    return histogram
