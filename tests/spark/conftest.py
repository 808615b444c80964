"""One SparkSession for every Spark test (local[2], few shuffle partitions, no UI)."""

from __future__ import annotations

import pytest

from spark_support import BASE_MS, MINUTE_MS, histogram, snapshot_line  # noqa: F401 -- fixtures below


@pytest.fixture(scope="session")
def spark():
    try:
        from pyspark.sql import SparkSession
    except ImportError as error:  # the report extra is part of the test environment
        pytest.fail(f"pyspark is not installed (pip install 'delayqueue[report]'): {error}")
    from spark_jobs.monitor_report import KEEP_CONF
    from spark_jobs.session import JIT_OPTIONS, QUIET_LOG_OPTIONS, JavaNotFoundError, ensure_java

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
        .config("spark.driver.extraJavaOptions", f"{JIT_OPTIONS} {QUIET_LOG_OPTIONS}")
        # Test inputs are tiny: interpreted expressions beat compiling the wide ones, and the
        # job is told to keep these settings (it otherwise switches codegen on for its pass).
        .config("spark.sql.codegen.wholeStage", "false")
        .config("spark.sql.codegen.factoryMode", "NO_CODEGEN")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config(KEEP_CONF, "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def lines_frame(spark):
    """Build the job's input frame (value, source_file) from snapshot lines."""

    def build(lines: list[str], source: str = "file:///in/default-00.jsonl"):
        return spark.createDataFrame(
            [(line, source) for line in lines], "value string, source_file string"
        )

    return build


@pytest.fixture
def line():
    """``line(topic, minute, **fields)`` -> a snapshot JSON line (see ``snapshot_line``)."""
    return snapshot_line


@pytest.fixture
def hist():
    """``hist({bucket: n}, max_ms, sum_ms)`` -> a histogram object for a snapshot line."""
    return histogram
