"""The pass over the input, behind one entry: snapshot files -> their groups (``read_groups``).

Two readers make the same groups (``spark_jobs.groups``; docs/report.md, "How the files are
parsed"):

* the Arrow reader (``arrow_reader``), for local files in local mode: each task parses whole
  files with Arrow's JSON reader and groups their lines with numpy (``groups.group_lines``);
  it leaves to Spark's JSON source any file it could read differently;
* Spark's JSON source (``read_snapshots``, grouped by ``aggregate.line_groups``), for any
  other file system or master, and for the files the Arrow reader left.

Every value of a group is a sum, minimum, maximum or bit-or, so the groups of the two readers
are simply put side by side: each consumer aggregates what it reads.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Sequence

from pyspark.sql import DataFrame

from spark_jobs import arrow_reader
from spark_jobs.aggregate import line_groups
from spark_jobs.incremental import InputFile, is_local
from spark_jobs.progress import EXIT_FAILED, InputError
from spark_jobs.snapshot import (
    CORRUPT_COLUMN,
    SNAPSHOT_SCHEMA,
    example_metrics,
    flat_snapshot_rows,
    snapshot_rows,
)

READERS = ("auto", "arrow", "spark")


@dataclass
class Pass:
    """The groups of the files read (in a local checkpoint), and how they were read."""

    groups: DataFrame
    arrow: bool  # read by the Arrow reader
    left_to_spark: list[str] = field(default_factory=list)  # files it left to the JSON source
    examples: dict = field(default_factory=dict)
    """The first bad line Spark's JSON source met (``snapshot.example_metrics``'s keys); the
    Arrow reader's are in the groups (``example_file``, ``example_line``)."""

    def rows(self, spark, files: Sequence[InputFile]) -> DataFrame:
        """``snapshot_rows`` of every line of ``files`` (to rebuild the dates holding
        duplicates), each file by the reader that read it in the pass."""
        if not self.arrow:
            return read_snapshots(spark, [f.path for f in files])
        parts = []
        fast = [(f.path, f.size) for f in files if f.path not in self.left_to_spark]
        slow = [f.path for f in files if f.path in self.left_to_spark]
        if fast:
            records = arrow_reader.read_records(spark, fast, strict=True).frame
            parts.append(flat_snapshot_rows(records))
        if slow:
            parts.append(read_snapshots(spark, slow))
        result = parts[0]
        for part in parts[1:]:
            result = result.unionByName(part)
        return result


def read_groups(
    spark,
    files: Sequence[InputFile],
    reader: str = "auto",
    roots: Sequence[str] | None = None,
) -> Pass:
    """The groups of every line of ``files``, by the reader ``reader`` chooses (``use_arrow``).

    ``roots``: directories holding exactly ``files`` (``incremental.Plan.roots``), which
    Spark's JSON source then lists instead of the files one by one: it lists more than 32
    paths in a Spark job of its own (about 4 s more for 840 files)."""
    if not use_arrow(spark, reader, files):
        groups, examples = _json_groups(spark, list(roots or [f.path for f in files]))
        return Pass(groups, False, examples=examples)
    read = arrow_reader.read_groups(spark, [(f.path, f.size) for f in files])
    # A local checkpoint keeps the small result and cuts the plan, so the queries after it
    # are planned on a short lineage.
    groups = read.frame.localCheckpoint(eager=True)
    left = read.left_to_spark()
    if not left:
        return Pass(groups, True)
    both, examples = _json_groups(spark, left, groups)
    return Pass(both, True, left, examples)


def _json_groups(spark, paths: list[str], beside: DataFrame | None = None):
    """The groups of the lines Spark's JSON source reads from ``paths`` (put beside the groups
    ``beside``), in a local checkpoint, and the first bad line it met."""
    from pyspark.sql import Observation

    observation = Observation("spark-json-source")
    groups = line_groups(read_snapshots(spark, paths).observe(observation, *example_metrics()))
    if beside is not None:
        groups = beside.unionByName(groups)
    return groups.localCheckpoint(eager=True), _observed(observation)


def read_snapshots(spark, paths: list[str]) -> DataFrame:
    """Every line of the given ``*.jsonl`` files or directories (recursively), parsed with
    ``SNAPSHOT_SCHEMA`` by Spark's JSON source -> ``snapshot_rows`` (one row per line)."""
    from pyspark.sql import functions as F

    records = (
        spark.read.schema(SNAPSHOT_SCHEMA)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT_COLUMN)
        .option("recursiveFileLookup", "true")
        .option("pathGlobFilter", "*.jsonl")
        .json(paths)
    )
    records = records.select(
        "*", F.col(CORRUPT_COLUMN).alias("value"), F.input_file_name().alias("source_file")
    )
    return snapshot_rows(records)


def use_arrow(spark, reader: str, files: Sequence[InputFile]) -> bool:
    """Whether the files are read by the Arrow reader or Spark's JSON source.

    ``auto``: Arrow for local files in local mode (where this Python, with pyarrow, runs the
    tasks); Spark's JSON source for any other file system or master (executors may lack
    pyarrow, or not see the paths). ``arrow`` forces it for local files on any master (its
    executors then need Python with pyarrow and the same paths); ``spark`` never uses it."""
    if reader == "spark" or not files:
        return False
    local = all(is_local(f.path) for f in files)
    if reader == "arrow":
        if not local:
            raise InputError("--reader arrow reads local files only (file: or a path)", EXIT_FAILED)
        if not arrow_reader.available():
            raise InputError(
                "--reader arrow needs pyarrow and pandas (the report extra)", EXIT_FAILED
            )
        return True
    return local and spark.sparkContext.master.startswith("local") and arrow_reader.available()


def _observed(observation, timeout_s: float = 30.0) -> dict:
    """The observation's metrics, or {} if they never come (Spark drops the observation of a
    plan it proved empty, and ``Observation.get`` would then wait forever)."""
    result: dict = {}

    def fetch() -> None:
        result.update(observation.get)

    thread = threading.Thread(target=fetch, daemon=True)
    thread.start()
    thread.join(timeout_s)
    return dict(result)
