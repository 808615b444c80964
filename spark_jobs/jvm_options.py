"""The options of the report's JVMs, and where their class archive lives.

A leaf: it imports nothing from ``spark_jobs``, so that ``session`` (which starts the JVM with
these options) and ``jvm_archive`` (which builds the archive by running the job) both read it
without importing each other.

The JVM compiles with C1 only: a job runs for seconds to minutes, most of its per-line work is
in the Python tasks, and C2 spent more CPU compiling Spark (and the job's generated code) than
its faster code saved (docs/report.md). Huge generated methods are compiled too, not left to
the interpreter, and the code cache has room for them: C1 alone reserves 48 MB, which a
10M-line run filled, after which the JVM stopped compiling altogether. The parallel collector,
a batch job's: G1's concurrent work and barriers cost a 1.1M-line run 2-3 s of CPU and a
10M-line run about 14 s (docs/report.md).

The class archive (``jvm_archive``) is named after what it depends on: the pyspark
installation, its jars and the Java runtime (paths, sizes and times: the JVM ignores an archive
whose jars changed). It lives in ``$DELAYQUEUE_SPARK_ARCHIVE_DIR``; else, run from a checkout,
in the checkout's ``build/jvm-archive/`` (next to the venv whose pyspark it archives, and
removed with it by ``make clean``); else, installed from the wheel, in
``$XDG_CACHE_HOME/delayqueue`` or ``~/.cache/delayqueue``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

JVM_OPTIONS = (
    "-XX:TieredStopAtLevel=1 -XX:-DontCompileHugeMethods -XX:ReservedCodeCacheSize=256m"
    " -XX:+UseParallelGC"
)
ARROW_OPTIONS = "-Darrow.enable_unsafe_memory_access=true -Darrow.enable_null_check_for_get=false"
"""The Arrow reader's batches are read by the JVM without bounds or null checks per value
(Arrow validates each batch as it arrives; Spark checks nulls itself)."""
LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
QUIET_LOG_OPTIONS = f"-Dlog4j2.configurationFile={LOG_CONFIG.as_uri()}"

DIR_ENV = "DELAYQUEUE_SPARK_ARCHIVE_DIR"
ARCHIVE_QUIET = "-Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off"
"""Use the archive when it fits this JVM, and say nothing either way."""
AGENT_ENV = ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS")
"""Where agents and profilers are put into every JVM. OpenJDK 17.0.15 crashed mapping the
archive's classes while such an agent watched class loading (JFR, seen here), so no archive
is used while either is set."""


def java_path() -> Path | None:
    """The ``java`` Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return (Path(home) / "bin" / "java").resolve()
    found = shutil.which("java")
    return Path(found).resolve() if found else None


def spark_home() -> Path:
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
    java = java_path()
    if java is None:
        return None
    home = spark_home()
    # The JVM checks that the runtime and every jar on the class path are the ones archived
    # (size and time), and ignores the archive otherwise: the name changes with any of them.
    files = [java, *sorted((home / "jars").glob("*.jar"))]
    identity = "\n".join(
        [pyspark.__version__, str(home)]
        + [f"{f}\t{f.stat().st_size}\t{f.stat().st_mtime_ns}" for f in files]
    )
    digest = hashlib.sha1(identity.encode()).hexdigest()[:12]
    return archive_dir() / f"{archive_prefix(home)}{digest}.jsa"


def archive_dir(package: Path = Path(__file__).resolve().parent) -> Path:
    """The archive's folder: ``$DELAYQUEUE_SPARK_ARCHIVE_DIR``, else the checkout's
    ``build/jvm-archive`` when ``package`` (this package's folder) is a checkout's, else the
    user's cache folder."""
    explicit = os.environ.get(DIR_ENV)
    if explicit:
        return Path(explicit)
    checkout = package.parent
    if (checkout / "pyproject.toml").is_file() and (checkout / "lua").is_dir():
        return checkout / "build" / "jvm-archive"
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(cache) / "delayqueue"


def archive_prefix(home: Path) -> str:
    """The start of the names of every archive built for this pyspark installation."""
    import pyspark

    return f"spark-{pyspark.__version__}-{hashlib.sha1(str(home).encode()).hexdigest()[:8]}-"


def archive_options() -> str:
    """JVM options that use the archive, or "" when none is built for this runtime (or an
    agent may be loaded, ``AGENT_ENV``)."""
    if any(os.environ.get(name) for name in AGENT_ENV):
        return ""
    path = archive_path()
    if path is None or not path.is_file():
        return ""
    return f"-XX:SharedArchiveFile={path} {ARCHIVE_QUIET}"


def driver_options(archive: str | None = None) -> str:
    """The driver JVM's options: ``archive`` (default: ``archive_options()``) is the driver's
    only; the executors' are ``JVM_OPTIONS`` and ``ARROW_OPTIONS``."""
    return f"{JVM_OPTIONS} {ARROW_OPTIONS} {QUIET_LOG_OPTIONS} " + (
        archive_options() if archive is None else archive
    )
