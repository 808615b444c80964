"""The output tables (spark_jobs/tables.py): read with their schema, whatever is on disk."""

from __future__ import annotations

import pytest

from spark_jobs.tables import SCHEMAS, read_table

pytestmark = pytest.mark.spark


def test_table_never_written_reads_as_no_rows_with_its_schema(spark, tmp_path):
    """An output where a table's folder was never written (a first incremental run reads the
    whole-input quality back before writing it) reads as an empty frame, never an error."""
    for name in ("findings", "input_quality"):
        assert not (tmp_path / name).exists()
        frame = read_table(spark, str(tmp_path), name)
        assert frame.schema == SCHEMAS[name] and frame.count() == 0, name
