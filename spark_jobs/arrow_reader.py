"""The fast reader: snapshot files parsed by Arrow's C++ JSON reader inside ``mapInArrow``.

Spark's JSON source costs about 10-12 µs of CPU per snapshot line, almost all of it per-object
and per-field work inside its Jackson parser; that was nearly the whole of the job at 10M lines.
This reader gives the same groups (``aggregate.line_groups`` applied to the JSON source's
rows) at a fraction of the cost: each Spark task reads whole files, parses them with
``pyarrow.json.read_json`` and an explicit schema, in C++ (``arrow_lines``), groups their lines
with numpy (``groups.group_lines``) and hands the groups to the JVM. No Python code runs per
line.

Exactness. A file takes this path only when Arrow is certain to read every line exactly as
Spark's JSON source would (``arrow_lines.parse_file`` says which); otherwise the task leaves
the file out and names it in an accumulator (``ArrowRead.left_to_spark``), and
``reader.read_groups`` reads it with Spark's JSON source, so bad lines are classified, counted
and shown exactly as before.

Only local files (``file:`` URIs or plain paths) are read this way; the job keeps Spark's
JSON source for any other file system (``reader.use_arrow``), where executors may not see the
same paths.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from typing import Iterator, Sequence

from pyspark.accumulators import AccumulatorParam
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_jobs.arrow_lines import OUTPUT_SCHEMA, flatten, line_arrays, parse_file
from spark_jobs.groups import GROUP_SCHEMA, group_lines

TASK_BYTES = 1 << 30
"""Input bytes per task at most, beyond one task per core. A Python task costs about 75 ms
of CPU on its own here (a no-op ``mapInArrow`` over 112 tasks took 5.6 s on two cores), so
the files are spread over as few tasks as keep the cores busy: a whole number of rounds over
the cores, their bytes balanced by ``assign``."""


def _local_path(uri: str) -> str:
    from urllib.parse import unquote, urlparse

    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri


class _Names(AccumulatorParam):
    """An accumulator of a set of names (a task run twice adds the same names again)."""

    def zero(self, value: set) -> set:
        return set()

    def addInPlace(self, first: set, second: set) -> set:  # noqa: N802 -- pyspark's name
        return first | second


def _read_files(
    assignments: Sequence[Sequence[tuple[str, str, int | None]]],
    strict: bool,
    groups: bool,
    left,
):
    """The ``mapInArrow`` function: each input row is a task number; read its files into their
    groups (``groups.group_lines``) or, with ``groups`` false, one flat row per line. A file
    Arrow could read differently from Spark's JSON source is added to ``left`` (an accumulator
    of names) instead, or fails the task when ``strict``."""

    def batches(iterator: Iterator) -> Iterator:
        for batch in iterator:
            for task in batch.column(0).to_pylist():
                for path, source, day in assignments[task]:
                    with open(path, "rb") as handle:
                        data = handle.read()
                    table = parse_file(data)
                    if table is None:
                        if strict:
                            raise RuntimeError(
                                f"{source}: the fast reader accepted this file earlier in the "
                                "run and not now (was it changed during the run?)"
                            )
                        left.add({source})
                        continue
                    if not table.num_rows:
                        continue
                    lines = line_arrays(table, source, day)
                    if groups:
                        yield from group_lines(lines)
                    else:
                        yield flatten(lines)

    return batches


# ---- on the driver -------------------------------------------------------------------------


def assign(files: Sequence[tuple], tasks: int) -> list[list[tuple]]:
    """Files (tuples whose last item is the size) -> ``tasks`` lists of the files without
    their size: the largest first, each to the task with the fewest bytes so far."""
    loads = [0] * tasks
    bins: list[list[tuple]] = [[] for _ in range(tasks)]
    for entry in sorted(files, key=lambda f: (-f[-1], f[:-1])):
        task = min(range(tasks), key=lambda t: (loads[t], t))
        loads[task] += entry[-1]
        bins[task].append(tuple(entry[:-1]))
    return bins


_DATE_TEXT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def file_days(spark, sources: Sequence[str]) -> list[int | None]:
    """``snapshot.file_day`` of each ``source_file``, computed once per file: in Python for the
    names the server writes (``.../date=YYYY-MM-DD/...``), by Spark itself for any other."""
    import datetime as dt

    from spark_jobs.snapshot import file_day

    result: dict[str, int | None] = {}
    odd = []
    for source in sources:
        parts = source.split("/")
        parent = parts[-2] if len(parts) >= 2 else parts[0]
        if not parent.startswith("date="):
            result[source] = None
            continue
        text = parent[5:15]
        if _DATE_TEXT.fullmatch(text):
            try:
                day = dt.date.fromisoformat(text)
            except ValueError:
                result[source] = None
            else:
                result[source] = (day - dt.date(1970, 1, 1)).days
            continue
        odd.append(source)
    if odd:
        frame = spark.createDataFrame([(name,) for name in odd], "source_file string")
        for row in frame.select("source_file", file_day(F.col("source_file")).alias("d")).collect():
            result[row["source_file"]] = row["d"]
    return [result[source] for source in sources]


def source_names(spark, paths: Sequence[str]) -> list[str]:
    """What ``input_file_name()`` gives for each local path: the qualified Hadoop path's URI
    (``file:///dir/a%20b.jsonl``). Computed by Hadoop itself for names with characters a URI
    may escape."""
    import re

    safe = re.compile(r"[A-Za-z0-9._\-/=,+]*")
    result = []
    jvm = fs = None
    for path in paths:
        local = _local_path(path)
        if local.startswith("/") and safe.fullmatch(local) and "//" not in local:
            result.append("file://" + local)
            continue
        if jvm is None:
            jvm = spark.sparkContext._jvm
            root = jvm.org.apache.hadoop.fs.Path("file:///")
            fs = root.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        qualified = fs.makeQualified(jvm.org.apache.hadoop.fs.Path(path))
        result.append(str(qualified.toUri().toString()))
    return result


def available() -> bool:
    """True when this Python can run the reader (``mapInArrow`` needs pyarrow and pandas)."""
    try:
        import pandas  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass
class ArrowRead:
    """What the Arrow reader's tasks make of some files, and which files they left out."""

    frame: DataFrame
    paths: dict[str, str]  # the path of each ``source_file`` name
    left: object  # the accumulator of the names of the files left to Spark's JSON source

    def left_to_spark(self) -> list[str]:
        """The paths of the files left to Spark's JSON source: known once ``frame`` has been
        computed (the tasks report them as they finish)."""
        return sorted(self.paths[name] for name in self.left.value)


def _read(spark, files: Sequence[tuple[str, int]], strict: bool, groups: bool) -> ArrowRead:
    from pyspark import cloudpickle

    from spark_jobs import arrow_lines
    from spark_jobs import groups as group_module

    # The tasks' function travels by value: executors need pyarrow, not this package.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    cloudpickle.register_pickle_by_value(arrow_lines)
    cloudpickle.register_pickle_by_value(group_module)
    names = source_names(spark, [path for path, _ in files])
    days = file_days(spark, names)
    entries = [
        (_local_path(path), name, day, size) for (path, size), name, day in zip(files, names, days)
    ]
    total = sum(entry[-1] for entry in entries)
    parallelism = spark.sparkContext.defaultParallelism
    # A whole number of rounds over the cores: with 7 tasks on 2 cores the last one ran alone.
    rounds = max(1, math.ceil(total / TASK_BYTES / parallelism))
    tasks = max(1, min(len(entries), parallelism * rounds))
    bins = assign(entries, tasks)
    schema = GROUP_SCHEMA if groups else OUTPUT_SCHEMA
    left = spark.sparkContext.accumulator(set(), _Names())
    read = _read_files(bins, strict, groups, left)
    frame = spark.range(0, tasks, 1, tasks).mapInArrow(read, schema)
    return ArrowRead(frame, {name: path for (path, _), name in zip(files, names)}, left)


def read_groups(spark, files: Sequence[tuple[str, int]]) -> ArrowRead:
    """(path or ``file:`` URI, size) of local snapshot files -> their groups (``GROUP_SCHEMA``,
    what ``aggregate.line_groups`` makes of Spark's JSON source rows), each file's computed in
    its task, but for the files left to Spark's JSON source."""
    return _read(spark, files, strict=False, groups=True)


def read_records(spark, files: Sequence[tuple[str, int]], strict: bool = False) -> ArrowRead:
    """(path or ``file:`` URI, size) of local snapshot files -> their records: the columns of
    ``OUTPUT_SCHEMA`` plus ``value`` (null: Arrow only accepts files that parse), ready for
    ``snapshot.flat_snapshot_rows``, but for the files left to Spark's JSON source; with
    ``strict`` such a file fails the job instead."""
    read = _read(spark, files, strict, groups=False)
    read.frame = read.frame.select("*", F.lit(None).cast("string").alias("value"))
    return read


__all__ = [
    "ArrowRead",
    "assign",
    "available",
    "file_days",
    "read_groups",
    "read_records",
    "source_names",
]
