"""The fast reader: snapshot files parsed by Arrow's C++ JSON reader inside ``mapInArrow``.

Spark's JSON source costs about 10-12 µs of CPU per snapshot line, almost all of it per-object
and per-field work inside its Jackson parser; that was nearly the whole of the job at 10M lines.
This reader gives the same rows (``snapshot.snapshot_rows`` applied to them, as to the JSON
source's) at a fraction of the cost: each Spark task reads whole files and parses them with
``pyarrow.json.read_json`` and an explicit schema, in C++, and hands typed Arrow columns to the
JVM. No Python code runs per line.

Exactness. A file takes this path only when Arrow is certain to read every line exactly as
Spark's JSON source would; otherwise the task leaves the file out and names it in an
accumulator (``ArrowRead.left_to_spark``), and ``reader.read_groups`` reads it with Spark's
JSON source, so bad lines are classified, counted and shown exactly as before. A file is
accepted when all of these hold:

* it is UTF-8 (Arrow does not validate it; Jackson rejects what is not) and has no ``\\r``
  (Hadoop's line reader breaks lines there, JSON does not);
* every line starts with ``{`` and ends with ``}`` (no blank lines, no line continuing another)
  and Arrow parses exactly one row per line (no two objects on one line);
* Arrow's parse succeeds with ``unexpected_field_behavior="error"``: every field is one the
  schema names, of its type or null. Any other field (whose content Spark would skip, but
  under rules Arrow does not share), a wrong type, a duplicate key, an out-of-range number or
  anything that is not JSON fails the parse. ``waitingQueueInfo`` is read as a struct of its
  nine keys, so another key fails too (Spark reads it as a map of longs);
* no string is longer than ``MAX_STRING`` (Jackson refuses strings over 20M characters).

``node``, a string the snapshot generator writes, is the one field outside the contract the
schema names (and then drops). The server writes none.

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
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from spark_jobs.groups import GROUP_SCHEMA, classify, group_lines, identity_text
from spark_jobs.histogram import BUCKETS
from spark_jobs.snapshot import (
    COUNTERS,
    GAUGES,
    HISTOGRAM,
    KEY_FIELDS,
    LAGS,
    VALUE_COLUMNS,
    WAITING_DELAYS,
)

MAX_STRING = 1_000_000
"""Longest string (characters) a file may hold to be read here; far under Jackson's limit."""
MAX_FILE_BYTES = 1 << 30
"""Files are read whole; a larger one is left to Spark's JSON source."""
TASK_BYTES = 1 << 30
"""Input bytes per task at most, beyond one task per core. A Python task costs about 75 ms
of CPU on its own here (a no-op ``mapInArrow`` over 112 tasks took 5.6 s on two cores), so
the files are spread over as few tasks as keep the cores busy: a whole number of rounds over
the cores, their bytes balanced by ``assign``."""
EXTRA_STRING_FIELDS = ("node",)

_WAITING = StructType([StructField(field, LongType()) for field, _ in WAITING_DELAYS])

RECORD_FIELDS: list[tuple[str, DataType]] = [
    *[(field.name, field.dataType) for field in KEY_FIELDS],
    *[(field, LongType()) for field, _ in COUNTERS],
    *[(field, HISTOGRAM) for field, _ in LAGS],
    *[(field, LongType()) for field, _ in GAUGES],
    ("waitingQueueInfo", _WAITING),
]
"""The snapshot fields, as ``SNAPSHOT_SCHEMA`` names them (``waitingQueueInfo``: a struct)."""

OUTPUT_SCHEMA = StructType(
    [
        *KEY_FIELDS,
        *[StructField(f"{alias}_size", IntegerType()) for _, alias in LAGS],
        # Never null: the JVM reads them without null checks.
        *[StructField(name, LongType(), False) for name in VALUE_COLUMNS],
        StructField("source_file", StringType()),
        StructField("file_day", IntegerType()),
    ]
)
"""What the tasks return, flat and narrow (``snapshot.flat_snapshot_rows`` reads it): one row per
line, nulls of the value columns already zero, histogram counts one column per bucket."""


# ---- on the executors ----------------------------------------------------------------------


def _arrow_type(kind: DataType):
    import pyarrow as pa

    if isinstance(kind, IntegerType):
        return pa.int32()
    if isinstance(kind, LongType):
        return pa.int64()
    if isinstance(kind, StringType):
        return pa.string()
    if isinstance(kind, BooleanType):
        return pa.bool_()
    if isinstance(kind, ArrayType):
        return pa.list_(_arrow_type(kind.elementType))
    if isinstance(kind, StructType):
        return pa.struct([(f.name, _arrow_type(f.dataType)) for f in kind.fields])
    raise TypeError(kind)


def _parse_schema():
    import pyarrow as pa

    return pa.schema(
        [(name, _arrow_type(kind)) for name, kind in RECORD_FIELDS]
        + [(name, pa.string()) for name in EXTRA_STRING_FIELDS]
    )


def _output_schema():
    import pyarrow as pa

    return pa.schema(
        [pa.field(f.name, _arrow_type(f.dataType), f.nullable) for f in OUTPUT_SCHEMA.fields]
    )


def _line_count(data: bytes) -> int | None:
    """Lines of ``data`` when each starts with ``{`` and ends with ``}``, else None."""
    import numpy as np

    text = np.frombuffer(data, dtype=np.uint8)
    breaks = np.flatnonzero(text == ord("\n"))
    if len(breaks) and breaks[-1] == len(text) - 1:
        ends = breaks  # every line ends with a newline
    else:
        ends = np.append(breaks, len(text))  # the last line has none
    starts = np.concatenate(([0], ends[:-1] + 1))
    if len(starts) and (starts.max() >= len(text) or (ends <= starts).any()):
        return None  # an empty line
    if (text[starts] != ord("{")).any() or (text[ends - 1] != ord("}")).any():
        return None
    return len(starts)


def _longest_string(table) -> int:
    import pyarrow.compute as pc

    longest = 0
    for name in ("namespace", "topic", *EXTRA_STRING_FIELDS):
        if table.num_rows:
            value = pc.max(pc.binary_length(table.column(name))).as_py()
            longest = max(longest, value or 0)
    return longest


def parse_file(data: bytes):
    """The Arrow table of a file's lines (``RECORD_FIELDS`` columns), or None when the file
    must be left to Spark's JSON source (see the module docstring)."""
    import pyarrow as pa
    import pyarrow.json as pj

    if not data:
        return pa.table({name: [] for name, _ in RECORD_FIELDS}, schema=_table_schema())
    if b"\r" in data or len(data) > MAX_FILE_BYTES:
        return None
    if not data.isascii():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return None
    lines = _line_count(data)
    if lines is None:
        return None
    try:
        table = pj.read_json(
            pa.BufferReader(data),
            # One block for the whole file: one chunk per column, which numpy then reads
            # without copying (``line_arrays``).
            read_options=pj.ReadOptions(use_threads=False, block_size=max(1 << 22, len(data) + 1)),
            parse_options=pj.ParseOptions(
                explicit_schema=_parse_schema(), unexpected_field_behavior="error"
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if table.num_rows != lines or _longest_string(table) > MAX_STRING:
        return None
    return table.select([name for name, _ in RECORD_FIELDS])


def _table_schema():
    import pyarrow as pa

    return pa.schema([(name, _arrow_type(kind)) for name, kind in RECORD_FIELDS])


@dataclass
class LineArrays:
    """One parsed file's lines as numpy arrays (nulls zero, with validity where it matters)."""

    table: object  # the ``parse_file`` table
    source: str
    file_day: int | None
    version: object
    version_ok: object
    start: object
    start_ok: object
    end: object
    end_ok: object
    namespace: object  # dictionary codes, -1 for null
    namespace_values: object
    topic: object
    topic_values: object
    sizes: dict  # lag alias -> (counts length, validity)
    values: dict  # VALUE_COLUMNS -> int64, nulls zero
    status: object = None  # ``groups.classify``

    def example(self, i: int) -> str:
        """The identity text of line ``i`` (``snapshot.example_metrics`` shows it)."""
        row = {
            name: self.table.column(name)[i].as_py()
            for name in ("schemaVersion", "namespace", "topic", "intervalStart", "intervalEnd")
        }
        return identity_text(*row.values())


def _filled(array):
    """A nullable Arrow integer array -> (int64 numpy values with nulls zero, validity)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if not array.null_count:
        values = array.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
        return values, np.ones(len(array), dtype=bool)
    # A zero of the array's own type: ``fill_null`` with another type casts, slowly.
    values = pc.fill_null(array, pa.scalar(0, array.type)).to_numpy(zero_copy_only=False)
    return values.astype(np.int64, copy=False), array.is_valid().to_numpy(zero_copy_only=False)


def _codes(array):
    """A string array -> (dictionary codes, -1 for null; the dictionary)."""
    import numpy as np
    import pyarrow.compute as pc

    encoded = pc.dictionary_encode(array)
    codes = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False)
    return codes.astype(np.int64), encoded.dictionary


def line_arrays(table, source: str, day: int | None) -> LineArrays:
    """A ``parse_file`` table -> its ``LineArrays``, classified (vectorized: Arrow kernels and
    numpy over whole columns, nothing per line)."""
    import numpy as np
    import pyarrow.compute as pc

    def column(name):
        return table.column(name).combine_chunks()

    version, version_ok = _filled(column("schemaVersion"))
    start, start_ok = _filled(column("intervalStart"))
    end, end_ok = _filled(column("intervalEnd"))
    namespace, namespace_values = _codes(column("namespace"))
    topic, topic_values = _codes(column("topic"))
    values: dict = {}
    for field, alias in COUNTERS:
        values[alias] = _filled(column(field))[0]
    sizes = {}
    for field, alias in LAGS:
        count, total, largest, counts = column(field).flatten()
        values[f"{alias}_count"] = _filled(count)[0]
        values[f"{alias}_sum"] = _filled(total)[0]
        values[f"{alias}_max"] = _filled(largest)[0]
        size, present = _filled(pc.list_value_length(counts))
        sizes[alias] = (size, present)
        offsets = counts.offsets.to_numpy()
        items = _filled(counts.values)[0]
        if (size == BUCKETS).all() and (np.diff(offsets) == BUCKETS).all():
            # Every histogram has its 16 counts (every line the server writes): a view.
            base = offsets[0] if len(offsets) else 0
            buckets = items[base : base + BUCKETS * len(size)].reshape(len(size), BUCKETS)
        else:
            if not len(items):
                items = np.zeros(1, dtype=np.int64)
            index = offsets[:-1, None] + np.arange(BUCKETS)
            has = size[:, None] > np.arange(BUCKETS)
            buckets = np.where(has, items[np.where(has, index, 0)], 0)
        for i in range(BUCKETS):
            values[f"{alias}_b{i}"] = buckets[:, i]
    gauges = []
    for field, alias in GAUGES:
        value, valid = _filled(column(field))
        values[alias] = value
        gauges.append((value, valid))
    for (field, alias), array in zip(WAITING_DELAYS, column("waitingQueueInfo").flatten()):
        values[alias] = _filled(array)[0]
    lines = LineArrays(
        table,
        source,
        day,
        version,
        version_ok,
        start,
        start_ok,
        end,
        end_ok,
        namespace,
        namespace_values,
        topic,
        topic_values,
        sizes,
        values,
    )
    with np.errstate(over="ignore"):
        identity_ok = (namespace >= 0) & (topic >= 0) & start_ok & end_ok & (end > start)
    lines.status = classify(
        version, version_ok, {"start": start, "ok": identity_ok}, list(sizes.values()), gauges, day
    )
    return lines


def flatten(lines: LineArrays):
    """``LineArrays`` -> a record batch of ``OUTPUT_SCHEMA`` (one flat row per line, classified
    by Spark's expressions in ``snapshot.flat_snapshot_rows``)."""
    import pyarrow as pa

    table = lines.table
    n = table.num_rows
    columns = {
        name: table.column(name).combine_chunks()
        for name in ("schemaVersion", "namespace", "topic", "intervalStart", "intervalEnd")
    }
    for _, alias in LAGS:
        size, present = lines.sizes[alias]
        columns[f"{alias}_size"] = pa.array(size.astype("int32"), pa.int32(), mask=~present)
    for name in VALUE_COLUMNS:
        columns[name] = pa.array(lines.values[name], pa.int64())
    columns["source_file"] = pa.repeat(pa.scalar(lines.source, pa.string()), n)
    columns["file_day"] = pa.repeat(pa.scalar(lines.file_day, pa.int32()), n)
    schema = _output_schema()
    return pa.RecordBatch.from_arrays([columns[f.name] for f in schema], schema=schema)


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

    from spark_jobs import groups as group_module

    # The tasks' function travels by value: executors need pyarrow, not this package.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
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
    "OUTPUT_SCHEMA",
    "assign",
    "available",
    "file_days",
    "parse_file",
    "read_groups",
    "read_records",
    "source_names",
]
