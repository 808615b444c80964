"""The job on a real Spark standalone cluster (a master and a worker started from the pyspark
installation itself, on loopback), submitted with spark-submit: its tables equal the
local-mode run's."""

from __future__ import annotations

import math
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spark_jobs.generate_snapshots import Plan, generate
from spark_jobs.monitor_report import KEEP_CONF, main
from spark_jobs.session import LOG_CONFIG, ensure_java
from spark_jobs.tables import SCHEMAS, read_table

pytestmark = [pytest.mark.spark, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


class _Daemon:
    """One ``spark-class`` process in its own process group, logging to a file."""

    def __init__(self, home: Path, log: Path, env: dict, *args: str) -> None:
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
        if self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


@pytest.fixture
def cluster(tmp_path):
    """A standalone master and one worker (2 cores, 1 GB), loopback only."""
    ensure_java()
    home = _spark_home()
    env = dict(
        os.environ,
        SPARK_HOME=str(home),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOG_DIR=str(tmp_path),
        PYSPARK_PYTHON=sys.executable,
        SPARK_NO_DAEMONIZE="1",
    )
    master_port = _free_port()
    url = f"spark://127.0.0.1:{master_port}"
    daemons = []
    try:
        master = _Daemon(
            home,
            tmp_path / "master.log",
            env,
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(master_port),
            "--webui-port",
            str(_free_port()),
        )
        daemons.append(master)
        master.wait_for("I have been elected leader", 90)
        worker = _Daemon(
            home,
            tmp_path / "worker.log",
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
            str(tmp_path / "work"),
        )
        daemons.append(worker)
        worker.wait_for("Successfully registered with master", 90)
        yield {"url": url, "home": home, "env": env}
    finally:
        for daemon in reversed(daemons):
            daemon.stop()


def _rows(spark, out: Path, name: str) -> list[tuple]:
    rows = [tuple(r) for r in read_table(spark, str(out), name).collect()]
    return sorted(rows, key=lambda r: tuple("" if v is None else str(v) for v in r))


def test_job_on_a_standalone_cluster_equals_local_mode(spark, cluster, tmp_path, capsys):
    source = tmp_path / "in"
    generate(
        Plan(
            output=source,
            topics=4,
            days=2,
            interval_s=900,
            duplicate_rate=0.02,
            malformed_rate=0.01,
            seed=5,
        )
    )
    local = tmp_path / "local"
    assert main(["--input", str(source), "--output", str(local), "--top-topics", "3"]) == 0
    capsys.readouterr()

    remote = tmp_path / "cluster"
    command = [
        str(cluster["home"] / "bin" / "spark-submit"),
        "--master",
        cluster["url"],
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
        # compiled ones, and the job keeps these settings (tests/spark/conftest.py).
        "--conf",
        "spark.sql.codegen.wholeStage=false",
        "--conf",
        "spark.sql.codegen.factoryMode=NO_CODEGEN",
        "--conf",
        "spark.sql.adaptive.enabled=false",
        "--conf",
        "spark.sql.shuffle.partitions=2",
        "--conf",
        f"{KEEP_CONF}=true",
        "--driver-java-options",
        f"-Dlog4j2.configurationFile={LOG_CONFIG.as_uri()}",
        str(REPO / "spark_jobs" / "monitor_report.py"),
        "--input",
        str(source),
        "--output",
        str(remote),
        "--top-topics",
        "3",
    ]
    submitted = subprocess.run(
        command,
        env=cluster["env"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
    )
    output = submitted.stdout  # spark-submit passes the Python driver's stderr to its stdout
    print(output)  # the job's progress lines, shown with -s
    assert submitted.returncode == 0, output[-4000:]
    assert "Traceback" not in output
    assert "report: written to" in output and "re-read" in output
    # The executors ran on the worker, not in the driver.
    assert list((tmp_path / "work").glob("app-*/0/stderr")), "no executor ran on the worker"

    for name in SCHEMAS:
        left, right = _rows(spark, local, name), _rows(spark, remote, name)
        assert len(left) == len(right), name
        for a, b in zip(left, right):
            for x, y in zip(a, b):
                if isinstance(x, float) and isinstance(y, float):
                    assert math.isclose(x, y, rel_tol=1e-12), (name, a, b)
                else:
                    assert x == y, (name, a, b)
    assert (local / "topic_daily.csv").read_text() == (remote / "topic_daily.csv").read_text()
