"""One snapshot file as Arrow's C++ JSON reader parses it, and its lines as numpy arrays.

This runs inside the Arrow reader's tasks (``arrow_reader``). ``parse_file`` parses a file only
when Arrow is certain to read every line exactly as Spark's JSON source would, and returns
None otherwise (the reader then leaves the file to Spark's JSON source). A file is accepted
when all of these hold:

* it is UTF-8 (Arrow does not validate it; Jackson rejects what is not) and has no ``\\r``
  (Hadoop's line reader breaks lines there, JSON does not);
* every line starts with ``{`` and ends with ``}`` (no blank lines, no line continuing another)
  and Arrow parses exactly one row per line (no two objects on one line);
* Arrow's parse succeeds with ``unexpected_field_behavior="error"``: every field is one the
  schema names, of its type or null. Any other field (whose content Spark would skip, but
  under rules Arrow does not share), a wrong type, a duplicate key, an out-of-range number or
  anything that is not JSON fails the parse. ``waitingQueueInfo`` is read as a struct of its
  nine keys, so another key fails too (Spark reads it as a map of longs);
* no string is longer than ``MAX_STRING`` (Jackson refuses strings over 20M characters);
* no topic or subscription holds a tab (such a line is malformed: ``snapshot.topic_key``).

A named subscription's line gets its ``topic_key`` as its topic here, as Spark's rows do, and
the ``subscription`` column is dropped.

``node``, a string the snapshot generator writes, is the one field outside the contract the
schema names (and then drops). The server writes none.

``line_arrays`` then classifies the lines (``groups.classify``) and hands them to the grouping
(``groups.group_lines``) as numpy arrays, or ``flatten`` as one flat row per line.
"""

from __future__ import annotations

from dataclasses import dataclass

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

from spark_jobs.groups import classify, identity_text
from spark_jobs.histogram import BUCKETS
from spark_jobs.snapshot import (
    COUNTERS,
    DEFAULT_SUBSCRIPTION,
    FLAGS,
    GAUGES,
    HISTOGRAM,
    KEY_FIELDS,
    LAGS,
    SUBSCRIPTION_FIELD,
    SUBSCRIPTION_SEPARATOR,
    VALUE_COLUMNS,
    WAITING_DELAYS,
)

MAX_STRING = 1_000_000
"""Longest string (characters) a file may hold to be read here; far under Jackson's limit."""
MAX_FILE_BYTES = 1 << 30
"""Files are read whole; a larger one is left to Spark's JSON source."""
EXTRA_STRING_FIELDS = ("node",)

_WAITING = StructType([StructField(field, LongType()) for field, _ in WAITING_DELAYS])

RECORD_FIELDS: list[tuple[str, DataType]] = [
    *[(field.name, field.dataType) for field in KEY_FIELDS],
    (SUBSCRIPTION_FIELD.name, SUBSCRIPTION_FIELD.dataType),
    *[(field, LongType()) for field, _ in COUNTERS],
    *[(field, HISTOGRAM) for field, _ in LAGS],
    *[(field, LongType()) for field, _ in GAUGES],
    *[(field, BooleanType()) for field, _ in FLAGS],
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
    for name in ("namespace", "topic", SUBSCRIPTION_FIELD.name, *EXTRA_STRING_FIELDS):
        if table.num_rows:
            value = pc.max(pc.binary_length(table.column(name))).as_py()
            longest = max(longest, value or 0)
    return longest


def parse_file(data: bytes):
    """The Arrow table of a file's lines (``RECORD_FIELDS`` columns but ``subscription``, the
    topic keyed: ``_keyed``), or None when the file
    must be left to Spark's JSON source (see the module docstring)."""
    import pyarrow as pa
    import pyarrow.json as pj

    if not data:
        schema = _table_schema()
        return pa.table({name: [] for name in schema.names}, schema=schema)
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
    return _keyed(table.select([name for name, _ in RECORD_FIELDS]))


def _keyed(table):
    """The table with each line's ``topic_key`` as its topic, without ``subscription``; None
    when a topic or subscription holds a tab (left to Spark's JSON source: malformed)."""
    import pyarrow.compute as pc

    topic = table.column("topic")
    subscription = table.column(SUBSCRIPTION_FIELD.name)
    for column in (topic, subscription):
        if pc.any(pc.match_substring(column, SUBSCRIPTION_SEPARATOR)).as_py():
            return None
    index = table.schema.get_field_index(SUBSCRIPTION_FIELD.name)
    if subscription.null_count == len(subscription):
        return table.remove_column(index)
    named = pc.and_kleene(
        pc.is_valid(subscription),
        pc.invert(pc.is_in(subscription, value_set=_plain_names())),
    )
    joined = pc.binary_join_element_wise(topic, subscription, SUBSCRIPTION_SEPARATOR)
    key = pc.if_else(pc.fill_null(named, False), joined, topic)
    keyed = table.set_column(table.schema.get_field_index("topic"), "topic", key)
    return keyed.remove_column(index)


def _plain_names():
    import pyarrow as pa

    return pa.array(["", DEFAULT_SUBSCRIPTION])


def _table_schema():
    import pyarrow as pa

    return pa.schema(
        [
            (name, _arrow_type(kind))
            for name, kind in RECORD_FIELDS
            if name != SUBSCRIPTION_FIELD.name
        ]
    )


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


def _flag(array):
    """A nullable Arrow boolean array -> int64 numpy values, 1 for true, 0 for false or null
    (``snapshot.flag_value``)."""
    import numpy as np
    import pyarrow.compute as pc

    filled = pc.fill_null(array, False).to_numpy(zero_copy_only=False)
    return filled.astype(np.int64)


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
    for field, alias in FLAGS:
        values[alias] = _flag(column(field))
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
