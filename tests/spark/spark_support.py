"""Helpers shared by the Spark tests (imported by module name: tests/ has no __init__.py)."""

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


def parse_snapshots(lines):
    """Text lines (``value``, ``source_file``) -> one flat row per line with ``status``, as the
    job's readers make them (``from_json`` with ``SNAPSHOT_SCHEMA``, then ``snapshot_rows``;
    an empty line is malformed here, where Spark's JSON source skips it)."""
    from pyspark.sql import functions as F

    from spark_jobs.snapshot import CORRUPT_COLUMN, SNAPSHOT_SCHEMA, snapshot_rows

    s = F.from_json(F.col("value"), SNAPSHOT_SCHEMA, {"mode": "PERMISSIVE"})
    parsed = lines.select("value", "source_file", s.alias("s"))
    # A line that is not JSON at all gives a null struct (or, in PERMISSIVE mode, one whose
    # _corrupt_record is set): its null schemaVersion classifies it as malformed.
    flat = parsed.select("value", "source_file", "s.*")
    flat = flat.withColumn(
        CORRUPT_COLUMN,
        F.coalesce(F.col(CORRUPT_COLUMN), F.when(F.col("schemaVersion").isNull(), F.col("value"))),
    )
    return snapshot_rows(flat)


def status_name(code):
    """``STATUS_CODES`` value -> its name."""
    from pyspark.sql import functions as F

    from spark_jobs.snapshot import STATUS_CODES

    result = F.when(code.isNull(), F.lit(None).cast("string"))
    for name, value in STATUS_CODES.items():
        result = result.when(code == value, name)
    return result


def valid_snapshots(parsed):
    """Only the ``ok`` rows of ``parse_snapshots``, without the bookkeeping columns."""
    from pyspark.sql import functions as F

    from spark_jobs.snapshot import STATUS_CODES

    return parsed.filter(F.col("status") == STATUS_CODES["ok"]).drop(
        "status", "value", "source_file", "schema_version", "file_day"
    )


def aggregate_lines(frame, min_intervals: int = 10):
    """Text lines (``lines_frame``) -> (hourly table with derived columns, growth runs), by the
    job's own steps: the grouping pass, duplicate detection and re-grouping, hours (summing an
    hour's groups only when it has several), runs."""
    from spark_jobs.aggregate import (
        deduplicated_groups,
        duplicate_keys,
        line_groups,
        shared_hours,
        valid_groups,
    )
    from spark_jobs.growth import growth_runs
    from spark_jobs.rollup import hour_rows, with_derived

    rows = parse_snapshots(frame).localCheckpoint()
    groups = line_groups(rows).localCheckpoint()
    dirty = duplicate_keys(groups).localCheckpoint()
    final = deduplicated_groups(groups, dirty, rows) if dirty.take(1) else valid_groups(groups)
    final = final.localCheckpoint()
    merge = bool(dirty.take(1)) or bool(shared_hours(groups).take(1))  # as the job decides
    return with_derived(hour_rows(final, merge)), growth_runs(final, min_intervals)


# ---- a standalone cluster, run in the background (tests/spark/test_spark_cluster.py) ----------


class _Daemon:
    """One ``spark-class`` process in its own process group, logging to a file."""

    def __init__(self, home, log, env: dict, *args: str) -> None:
        import subprocess

        self.log = log
        handle = open(log, "wb")
        self.process = subprocess.Popen(
            [str(home / "bin" / "spark-class"), *args],
            env=env,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        handle.close()

    def wait_for(self, text: str, timeout_s: float) -> None:
        import time

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if text in self.log.read_text(errors="replace"):
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.3)
        raise AssertionError(
            f"{text!r} not in {self.log}:\n{self.log.read_text(errors='replace')[-3000:]}"
        )

    def stop(self) -> None:
        import os
        import signal
        import subprocess

        if self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class ClusterRun:
    """A standalone master and one worker (2 cores, 1 GB) started from the pyspark installation
    itself, on loopback and free ports, and the job submitted to them with spark-submit: all in
    a background thread, so that its JVMs start and run while other tests do."""

    def __init__(self, base, source, job_args: list[str]) -> None:
        import threading

        self.base, self.source, self.job_args = base, source, job_args
        self.output = base / "cluster"
        self.work = base / "work"
        self.result = None  # the finished spark-submit (subprocess.CompletedProcess)
        self.error: BaseException | None = None
        self._daemons: list[_Daemon] = []
        self._thread = threading.Thread(target=self._run, name="spark-cluster", daemon=True)
        self._thread.start()

    def wait(self, timeout_s: float = 600):
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            raise AssertionError(f"the cluster run did not finish in {timeout_s:.0f}s")
        if self.error is not None:
            raise self.error
        return self.result

    def stop(self) -> None:
        for daemon in reversed(self._daemons):
            daemon.stop()

    def _run(self) -> None:
        try:
            self.result = self._submit()
        except BaseException as error:  # noqa: BLE001 -- re-raised by wait() in the test
            self.error = error

    def _submit(self):
        import os
        import subprocess
        import sys
        from pathlib import Path

        import pyspark

        from spark_jobs.jvm_options import JVM_OPTIONS, LOG_CONFIG
        from spark_jobs.session import ensure_java

        ensure_java()
        home = Path(pyspark.__file__).resolve().parent
        env = dict(
            os.environ,
            SPARK_HOME=str(home),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_LOG_DIR=str(self.base),
            PYSPARK_PYTHON=sys.executable,
            SPARK_NO_DAEMONIZE="1",
        )
        master_port = _free_port()
        url = f"spark://127.0.0.1:{master_port}"
        master = _Daemon(
            home,
            self.base / "master.log",
            env,
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(master_port),
            "--webui-port",
            str(_free_port()),
        )
        self._daemons.append(master)
        master.wait_for("I have been elected leader", 90)
        worker = _Daemon(
            home,
            self.base / "worker.log",
            env,
            "org.apache.spark.deploy.worker.Worker",
            url,
            "--host",
            "127.0.0.1",
            "--port",
            str(_free_port()),
            "--webui-port",
            str(_free_port()),
            "--cores",
            "2",
            "--memory",
            "1g",
            "--work-dir",
            str(self.work),
        )
        self._daemons.append(worker)
        worker.wait_for("Successfully registered with master", 90)
        repo = Path(__file__).resolve().parents[2]
        command = [
            str(home / "bin" / "spark-submit"),
            "--master",
            url,
            "--driver-memory",
            "1g",
            "--executor-memory",
            "1g",
            "--total-executor-cores",
            "2",
            "--conf",
            "spark.driver.host=127.0.0.1",
            "--conf",
            "spark.driver.bindAddress=127.0.0.1",
            "--conf",
            "spark.ui.enabled=false",
            # As in the shared test session: tiny input, so interpreted expressions instead of
            # compiled ones (tests/spark/conftest.py).
            "--conf",
            "spark.sql.codegen.wholeStage=false",
            "--conf",
            "spark.sql.codegen.factoryMode=NO_CODEGEN",
            "--conf",
            "spark.sql.adaptive.enabled=false",
            "--conf",
            "spark.sql.shuffle.partitions=2",
            # The job's own JIT settings (spark_jobs/session.py) for the executor's JVM too.
            "--conf",
            f"spark.executor.extraJavaOptions={JVM_OPTIONS}",
            "--driver-java-options",
            f"{JVM_OPTIONS} -Dlog4j2.configurationFile={LOG_CONFIG.as_uri()}",
            str(repo / "spark_jobs" / "monitor_report.py"),
            "--input",
            str(self.source),
            "--output",
            str(self.output),
            *self.job_args,
        ]
        return subprocess.run(
            command,
            env=env,
            cwd=self.base,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=600,
        )
