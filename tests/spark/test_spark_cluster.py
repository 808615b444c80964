"""The job on a real Spark standalone cluster (a master and a worker started from the pyspark
installation itself, on loopback), submitted with spark-submit: its tables equal the
local-mode run's.

The cluster starts and the job runs in the background from the start of the Spark tests
(``cluster_run`` in conftest.py, ``spark_support.ClusterRun``); this test waits for it."""

from __future__ import annotations

import math

import pytest

from spark_jobs.tables import SCHEMAS, read_table

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _rows(spark, out, name: str) -> list[tuple]:
    rows = [tuple(r) for r in read_table(spark, str(out), name).collect()]
    return sorted(rows, key=lambda r: tuple("" if v is None else str(v) for v in r))


def test_job_on_a_standalone_cluster_equals_local_mode(spark, cluster_run, generated_report):
    # The local-mode run (Arrow reader) is the shared one of conftest.py, on the same input
    # (duplicates and bad lines); on the cluster the job reads with Spark's JSON source (the
    # default off local mode), so this also checks that the two readers give the same tables.
    assert cluster_run is not None
    submitted = cluster_run.wait()
    output = submitted.stdout  # spark-submit passes the Python driver's stderr to its stdout
    print(output)  # the job's progress lines, shown with -s
    assert submitted.returncode == 0, output[-4000:]
    assert "Traceback" not in output
    assert "report: written to" in output and "re-read" in output
    assert "(Spark's JSON source)" in output
    # The executors ran on the worker, not in the driver.
    assert list(cluster_run.work.glob("app-*/0/stderr")), "no executor ran on the worker"

    assert generated_report["code"] == 0
    local, remote = generated_report["out"], cluster_run.output
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
