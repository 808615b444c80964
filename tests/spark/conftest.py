"""One SparkSession for every Spark test (local[2], few shuffle partitions, no UI)."""

from __future__ import annotations

import os
import sys

import pytest

from spark_support import BASE_MS, MINUTE_MS, histogram, snapshot_line  # noqa: F401 -- fixtures below


@pytest.fixture(scope="session")
def spark():
    try:
        from pyspark.sql import SparkSession
    except ImportError as error:  # the report extra is part of the test environment
        pytest.fail(f"pyspark is not installed (pip install 'delayqueue[report]'): {error}")
    from spark_jobs.jvm_options import JVM_OPTIONS, QUIET_LOG_OPTIONS, archive_options
    from spark_jobs.session import JavaNotFoundError, ensure_java

    try:
        ensure_java()
    except JavaNotFoundError as error:
        pytest.fail(str(error))
    # The Arrow reader's tasks run in Python workers: this interpreter, which has pyarrow.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("delayqueue-spark-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config(
            "spark.driver.extraJavaOptions",
            f"{JVM_OPTIONS} {QUIET_LOG_OPTIONS} {archive_options()}",
        )
        # Test inputs are tiny: interpreted expressions beat compiling the wide ones (the job
        # leaves a session's own settings alone).
        .config("spark.sql.codegen.wholeStage", "false")
        .config("spark.sql.codegen.factoryMode", "NO_CODEGEN")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
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


REPORT_ARGS = ["--top-topics", "3"]


@pytest.fixture(scope="session")
def generated_input(tmp_path_factory):
    """Two generated days with duplicates and bad lines (about 35,000 lines, 12 topics)."""
    from spark_jobs.generate_snapshots import Plan, generate

    root = tmp_path_factory.mktemp("report")
    stats = generate(
        Plan(
            output=root / "in", topics=12, days=2, duplicate_rate=0.01, malformed_rate=0.002, seed=3
        )
    )
    return {"in": root / "in", "root": root, "stats": stats}


@pytest.fixture(scope="session", autouse=True)
def cluster_run(request, tmp_path_factory):
    """When the cluster test is among the tests run: a standalone cluster started, and the job
    submitted to it on ``generated_input``, in the background from the first Spark test on
    (``spark_support.ClusterRun``); else None."""
    if not any("test_spark_cluster.py" in item.nodeid for item in request.session.items):
        yield None
        return
    from spark_support import ClusterRun

    source = request.getfixturevalue("generated_input")["in"]
    run = ClusterRun(tmp_path_factory.mktemp("cluster"), source, REPORT_ARGS)
    yield run
    try:
        run.wait(timeout_s=600)  # never leave its JVMs behind
    finally:
        run.stop()


@pytest.fixture(scope="session")
def generated_report(spark, generated_input):
    """``generated_input`` run through main() in local mode (the Arrow reader); shared by the
    report checks and the cluster test, which compares its own run with this one."""
    from spark_jobs.monitor_report import main

    out = generated_input["root"] / "out"
    code = main(["--input", str(generated_input["in"]), "--output", str(out), *REPORT_ARGS])
    return {**generated_input, "code": code, "out": out}


def pytest_collection_modifyitems(session, config, items):
    """The cluster test runs last of the Spark tests: its cluster and job run in the background
    meanwhile (``cluster_run``), so waiting for them costs little."""
    cluster = [item for item in items if "test_spark_cluster.py" in item.nodeid]
    if not cluster:
        return
    rest = [item for item in items if item not in cluster]
    spark = [i for i, item in enumerate(rest) if item.nodeid.startswith("tests/spark/")]
    at = spark[-1] + 1 if spark else len(rest)
    items[:] = rest[:at] + cluster + rest[at:]
