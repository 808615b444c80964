"""The groups of the pass: what the one aggregate over snapshot lines keeps of them.

Every line falls in one group (``kind``), and an on-grid line whose ready queue is not empty
also in a second one, its *event*:

* ``KIND_BLOCK`` -- a valid line whose interval lies on its own length's grid within the hour
  (``intervalStart % length == 0`` and ``3600000 % length == 0``: every line the server
  writes) joins its topic-hour's block of 64 grid slots, keyed by (namespace, topic, hour,
  grid, slot // 64); the block keeps the sums and maxima of its lines, ``slot_mask`` (the
  slots seen) and ``zero_mask`` (the slots whose ready queue was empty);
* ``KIND_LINE`` -- any other valid line (off the grid) is a group of its own, keyed by its
  intervalStart (``position``);
* ``KIND_EVENT`` -- an on-grid valid line with readyQueueSize > 0, once more, keyed by its
  intervalStart: the points the backlog-growth rule follows one by one
  (``growth.growth_runs``); every other consumer skips events;
* ``KIND_BAD`` -- lines that are not ``ok``, per status and file date (``bad_file_day``).

Two implementations give the same rows: ``aggregate.line_groups`` (Spark expressions over
``snapshot_rows``, for Spark's JSON source) and ``group_lines`` here (numpy over one file's
lines, inside the Arrow reader's tasks: a file of 12,000 lines leaves its task as about 260
rows). Every value is a sum, minimum, maximum or bit-or, so groups of disjoint sets of lines
(two files, two readers) merge exactly wherever their keys meet; each consumer aggregates
what it reads, and no step needs the groups merged first.
``tests/spark/test_spark_arrow_reader.py`` compares the two implementations row for row.

``example_file`` and ``example_line`` (bad groups read by the Arrow reader only: Spark's JSON
source reports them through an observation, ``snapshot.example_metrics``) are the least
file name and the least identity text of the group's lines.
"""

from __future__ import annotations

from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from spark_jobs.snapshot import (
    DAY_MS,
    GAUGE_NAMES,
    HOUR_MS,
    LAG_NAMES,
    MAX_QUEUE_SIZE,
    STATUS_CODES,
    SUPPORTED_SCHEMA_VERSIONS,
    VALUE_COLUMNS,
    WAITING_NAMES,
)

KIND_BLOCK = 0
KIND_LINE = 1
KIND_EVENT = 2
KIND_BAD = 9
SLOTS = 64
VALUE_BITS = 41
"""Queue sizes are < 2^41 (``snapshot.MAX_QUEUE_SIZE``) and offsets in the hour < 2^22 ms:
``offset << 41 | value`` orders by offset, so its maximum is the hour's latest value."""
VALUE_MASK = MAX_QUEUE_SIZE - 1
LAST_COLUMNS = GAUGE_NAMES + WAITING_NAMES
"""Value columns whose hourly figure is the latest interval's (kept packed with its offset)."""
LAG_MAXIMA = frozenset(f"{lag}_max" for lag in LAG_NAMES)

GROUP_KEYS = [
    "status",
    "namespace",
    "topic",
    "hour_start_ms",
    "kind",
    "grid_ms",
    "position",
    "bad_file_day",
]

# (column, aggregate, per-line input): the inputs are ``snapshot_rows`` columns or one of
#   _bit       1 << (slot % 64) for a valid on-grid line, else 0
#   _zero_bit  _bit of a line whose ready queue is empty, else 0
#   _length    intervalEnd - intervalStart
#   _packed_X  (offset of intervalStart in its hour) << 41 | X
#   _steps     the growth steps an event stands for (events only; see ``_events``)
GROUP_VALUES: list[tuple[str, str, str]] = [
    ("lines", "count", ""),
    ("slot_mask", "bit_or", "_bit"),
    ("zero_mask", "bit_or", "_zero_bit"),
    ("length_min", "min", "_length"),
    ("length_max", "max", "_length"),
    ("first_interval_start_ms", "min", "interval_start"),
    ("last_interval_end_ms", "max", "interval_end"),
    *[
        (name, "max" if name in LAG_MAXIMA else "sum", name)
        for name in VALUE_COLUMNS
        if name not in LAST_COLUMNS
    ],
    *[(f"{name}_{op}", op, name) for name in GAUGE_NAMES for op in ("sum", "max")],
    *[(f"{name}_packed", "max", f"_packed_{name}") for name in LAST_COLUMNS],
    ("steps", "sum", "_steps"),
]
EXAMPLE_COLUMNS = ["example_file", "example_line"]

_INT_KEYS = {"status", "kind", "bad_file_day"}
GROUP_SCHEMA = StructType(
    [
        *[
            StructField(
                name,
                StringType()
                if name in ("namespace", "topic")
                else IntegerType()
                if name in _INT_KEYS
                else LongType(),
            )
            for name in GROUP_KEYS
        ],
        *[StructField(name, LongType()) for name, _, _ in GROUP_VALUES],
        *[StructField(name, StringType()) for name in EXAMPLE_COLUMNS],
    ]
)
"""The columns of every group row, in order (both implementations conform to it)."""

OK = STATUS_CODES["ok"]
EXAMPLE_CHARS = 200


# ---- numpy, inside the Arrow reader's tasks -------------------------------------------------


def classify(version, version_ok, identity, histogram_sizes, gauges, file_day):
    """``snapshot._status`` in numpy: the status code of each line.

    ``version`` (int array) and ``version_ok`` (its validity); ``identity`` (bool: namespace,
    topic, intervalStart and intervalEnd present and end > start); ``histogram_sizes``: per
    histogram (counts length, validity); ``gauges``: per queue size (values, validity);
    ``file_day``: the file's date or None; the caller passes ``identity`` with
    ``interval_start`` under the key ``start``.
    """
    import numpy as np

    start = identity["start"]
    n = len(start)
    histograms_ok = np.ones(n, dtype=bool)
    for size, present in histogram_sizes:
        histograms_ok &= ~present | (size == 16)
    sizes_ok = np.ones(n, dtype=bool)
    for value, present in gauges:
        sizes_ok &= ~present | ((value >= 0) & (value < MAX_QUEUE_SIZE))
    status = np.full(n, OK, dtype=np.int32)
    checks_ok = identity["ok"] & histograms_ok & sizes_ok
    if file_day is not None:
        with np.errstate(invalid="ignore"):
            day = np.floor(start / DAY_MS).astype(np.int64).astype(np.int32)
        status[checks_ok & (day != file_day)] = STATUS_CODES["misplaced"]
    status[~checks_ok] = STATUS_CODES["malformed"]
    supported = np.isin(version, SUPPORTED_SCHEMA_VERSIONS)
    status[version_ok & ~supported] = STATUS_CODES["unsupported"]
    status[~version_ok] = STATUS_CODES["malformed"]
    return status


def group_lines(lines) -> list:
    """One file's lines -> its groups, as ``pyarrow.RecordBatch`` es of ``GROUP_SCHEMA``.

    ``lines`` (``arrow_reader.LineArrays``): ``status``; ``namespace``/``topic`` as dictionary
    codes (-1 when null) and their dictionaries; ``start``/``end`` with validity; ``values``
    (``VALUE_COLUMNS``, int64, nulls zero); ``file_day``; ``source``; ``example(i)`` (the
    identity text of line i, asked only for bad lines). Vectorized: one sort of the lines by
    their group key, then one ``reduceat`` per kind of aggregate over every column at once.
    """
    import numpy as np

    status = lines.status
    ok = status == OK
    start, end = lines.start, lines.end
    with np.errstate(over="ignore"):
        length = end - start
    offset = np.mod(start, HOUR_MS)
    hour = start - offset
    grid_length = np.where(length > 0, length, 1)
    on_grid = ok & (length > 0) & (HOUR_MS % grid_length == 0) & (np.mod(start, grid_length) == 0)
    slot = np.where(on_grid, offset // grid_length, 0)
    bit = np.where(on_grid, np.left_shift(np.int64(1), slot % SLOTS), 0).astype(np.int64)
    ready = lines.values["ready_size"]

    kind = np.where(on_grid, KIND_BLOCK, np.where(ok, KIND_LINE, KIND_BAD))
    keys = {
        "status": status,
        "namespace": np.where(ok, lines.namespace, -1),
        "topic": np.where(ok, lines.topic, -1),
        "hour_start_ms": np.where(ok, hour, 0),
        "kind": kind.astype(np.int32),
        "grid_ms": np.where(kind == KIND_BLOCK, length, 0),
        "position": np.where(kind == KIND_BLOCK, slot // SLOTS, np.where(ok, start, 0)),
    }
    with np.errstate(over="ignore"):
        shifted = np.left_shift(offset, VALUE_BITS)
        inputs = {
            "_bit": bit,
            "_zero_bit": np.where(ready == 0, bit, 0),
            "_length": length,
            "interval_start": start,
            "interval_end": end,
            **lines.values,
            **{f"_packed_{name}": shifted + lines.values[name] for name in LAST_COLUMNS},
        }
    validity = {
        "_length": lines.start_ok & lines.end_ok,
        "interval_start": lines.start_ok,
        "interval_end": lines.end_ok,
        **{f"_packed_{name}": lines.start_ok for name in LAST_COLUMNS},
    }
    batches = [_aggregate(lines, keys, np.arange(len(status)), inputs, validity, hour)]
    events, steps = _events(keys, on_grid, slot, ready)
    if len(events):
        # Events carry what the growth rule reads: the ready queue and the growth steps.
        inputs["_steps"] = steps
        event_keys = {
            **{name: keys[name][events] for name in ("status", "namespace", "topic")},
            "hour_start_ms": hour[events],
            "kind": np.full(len(events), KIND_EVENT, dtype=np.int32),
            "grid_ms": np.zeros(len(events), dtype=np.int64),
            "position": start[events],
        }
        packed = "_packed_ready_size"
        batches.append(
            _aggregate(
                lines,
                event_keys,
                events,
                {packed: inputs[packed], "_steps": steps},
                {packed: validity[packed]},
                hour,
            )
        )
    return batches


def _events(keys, on_grid, slot, ready):
    """The events of a file's on-grid lines (``ready > 0``), a run of growth inside a block
    kept only at its ends: an event that grew from the line before it and that the next line
    of its block grew from again lies inside a growth run, starts none and ends none, so it is
    left out and the next line kept carries its step (``steps``, the growth steps from the
    line kept before it). ``growth.growth_runs`` adds steps up, so runs, their ends and
    their sizes are those of every line. Returns (line numbers, steps per line)."""
    import numpy as np

    steps = np.zeros(len(ready), dtype=np.int64)
    grid_lines = np.flatnonzero(on_grid)
    if not len(grid_lines):
        return grid_lines, steps
    block = ("namespace", "topic", "hour_start_ms", "grid_ms", "position")
    order = np.lexsort([slot[grid_lines]] + [keys[k][grid_lines] for k in reversed(block)])
    lines = grid_lines[order]
    same = np.zeros(len(lines), dtype=bool)  # the line before is of the same block
    same[1:] = True
    for k in block:
        values = keys[k][lines]
        same[1:] &= values[1:] == values[:-1]
    size = ready[lines]
    grew = np.zeros(len(lines), dtype=bool)
    grew[1:] = same[1:] & (size[1:] > size[:-1])
    next_grew = np.append(grew[1:], False)
    inside = (size > 0) & grew & next_grew
    kept = (size > 0) & ~inside
    # A line kept stands for its own step and those of the inside lines just before it (a
    # block's last line is never inside, so they are of its block).
    anchors = np.flatnonzero(~inside)
    weight = np.zeros(len(lines), dtype=np.int64)
    weight[anchors] = np.diff(anchors, prepend=-1)
    steps[lines[kept]] = weight[kept]
    return lines[kept], steps


_FILL = {"sum": 0, "bit_or": 0, "min": (1 << 63) - 1, "max": -(1 << 63)}
"""The identity of each aggregate, standing in for null inputs."""


def _aggregate(lines, keys, rows, inputs, validity, hour):
    """The groups of ``rows`` (line numbers, ``keys`` indexed like them; ``inputs`` and
    ``validity`` like the lines) -> a record batch; aggregates without an input in ``inputs``
    are null."""
    import numpy as np
    import pyarrow as pa

    reduce = {"sum": np.add, "bit_or": np.bitwise_or, "min": np.minimum, "max": np.maximum}
    order = np.lexsort([keys[name] for name in reversed(GROUP_KEYS) if name in keys])
    change = np.zeros(len(order), dtype=bool)
    change[0] = True
    sorted_keys = {}
    for name, values in keys.items():
        sorted_keys[name] = values[order]
        change[1:] |= sorted_keys[name][1:] != sorted_keys[name][:-1]
    starts = np.flatnonzero(change)
    lines_of = rows[order]  # the line of each sorted row
    counts = np.diff(np.append(starts, len(order)))

    by_op: dict[str, list[str]] = {}
    for name, op, source in GROUP_VALUES:
        if op != "count" and source in inputs:
            by_op.setdefault(op, [])
            if source not in by_op[op]:
                by_op[op].append(source)
    results: dict[tuple, np.ndarray] = {}
    for op, sources in by_op.items():
        matrix = np.stack(
            [
                np.where(validity[s], inputs[s], _FILL[op]) if s in validity else inputs[s]
                for s in sources
            ],
            axis=1,
        )[lines_of]
        with np.errstate(over="ignore"):
            reduced = reduce[op].reduceat(matrix, starts, axis=0)
        for j, source in enumerate(sources):
            results[(op, source)] = reduced[:, j]
    present = {
        source: np.add.reduceat(validity[source][lines_of].astype(np.int64), starts) > 0
        for source in validity
    }

    first = lines_of[starts]
    group_status = sorted_keys["status"][starts]
    group_ok = group_status == OK
    group_kind = sorted_keys["kind"][starts]
    n = len(starts)
    columns: dict[str, pa.Array] = {
        "status": pa.array(group_status, pa.int32()),
        "namespace": _strings(lines.namespace_values, lines.namespace[first], group_ok),
        "topic": _strings(lines.topic_values, lines.topic[first], group_ok),
        "hour_start_ms": pa.array(hour[first], pa.int64(), mask=~group_ok),
        "kind": pa.array(group_kind, pa.int32()),
        "grid_ms": pa.array(
            sorted_keys["grid_ms"][starts], pa.int64(), mask=group_kind != KIND_BLOCK
        ),
        "position": pa.array(sorted_keys["position"][starts], pa.int64(), mask=~group_ok),
        "bad_file_day": pa.array(
            np.full(n, lines.file_day or 0, dtype=np.int32),
            pa.int32(),
            mask=group_ok | (lines.file_day is None),
        ),
    }
    for name, op, source in GROUP_VALUES:
        if op == "count":
            columns[name] = pa.array(counts, pa.int64())
        elif (op, source) in results:
            mask = ~present[source] if source in validity else None
            columns[name] = pa.array(results[(op, source)], pa.int64(), mask=mask)
        else:
            columns[name] = pa.nulls(n, pa.int64())
    columns["example_file"], columns["example_line"] = _examples(lines, lines_of, starts, group_ok)
    schema = arrow_schema()
    return pa.RecordBatch.from_arrays([columns[f.name] for f in schema], schema=schema)


def _strings(dictionary, codes, present):
    import numpy as np
    import pyarrow as pa

    indices = pa.array(np.where(present, codes, 0), pa.int32(), mask=~present)
    if len(dictionary) == 0:
        return pa.nulls(len(codes), pa.string())
    return dictionary.take(indices)


def _examples(lines, lines_of, starts, group_ok):
    """Per group: the file name and the least identity text (first 200 characters) of its bad
    lines, as ``snapshot.example_metrics`` takes them; null for valid groups."""
    import pyarrow as pa

    files: list[str | None] = [None] * len(starts)
    texts: list[str | None] = [None] * len(starts)
    if group_ok.all():
        return pa.array(files, pa.string()), pa.array(texts, pa.string())
    ends = list(starts[1:]) + [len(lines_of)]
    for g, (begin, stop) in enumerate(zip(starts, ends)):
        if group_ok[g]:
            continue
        files[g] = lines.source
        texts[g] = min(lines.example(int(i))[:EXAMPLE_CHARS] for i in lines_of[begin:stop])
    return pa.array(files, pa.string()), pa.array(texts, pa.string())


def arrow_schema():
    import pyarrow as pa

    kinds = {IntegerType(): pa.int32(), LongType(): pa.int64(), StringType(): pa.string()}
    return pa.schema([pa.field(f.name, kinds[f.dataType]) for f in GROUP_SCHEMA.fields])


def identity_text(version, namespace, topic, start, end) -> str:
    """``to_json(struct(schemaVersion, namespace, topic, intervalStart, intervalEnd))`` as
    Spark writes it (null fields left out, Jackson's escapes)."""
    parts = []
    for name, value in (
        ("schemaVersion", version),
        ("namespace", namespace),
        ("topic", topic),
        ("intervalStart", start),
        ("intervalEnd", end),
    ):
        if value is None:
            continue
        text = _json_string(value) if isinstance(value, str) else str(int(value))
        parts.append(f'"{name}":{text}')
    return "{" + ",".join(parts) + "}"


_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r"}
_SHORT_ESCAPES["\t"] = "\\t"


def _json_string(value: str) -> str:
    out = []
    for char in value:
        escaped = _SHORT_ESCAPES.get(char)
        if escaped is not None:
            out.append(escaped)
        elif char < " ":
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


__all__ = [
    "GROUP_KEYS",
    "GROUP_SCHEMA",
    "GROUP_VALUES",
    "KIND_BAD",
    "KIND_BLOCK",
    "KIND_EVENT",
    "KIND_LINE",
    "LAST_COLUMNS",
    "SLOTS",
    "arrow_schema",
    "VALUE_BITS",
    "VALUE_MASK",
    "classify",
    "group_lines",
    "identity_text",
]
