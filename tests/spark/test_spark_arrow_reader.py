"""The Arrow reader (spark_jobs/arrow_reader.py) gives exactly the rows of Spark's JSON source,
and leaves to it every file it could read differently."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_jobs import arrow_reader
from spark_jobs.arrow_lines import parse_file

from spark_support import BASE_MS, snapshot_line

pytestmark = pytest.mark.spark


def _good(topic: str = "a", minute: int = 0, **fields) -> str:
    return snapshot_line(topic, minute, **fields)


# file content -> whether Arrow may read it (else: Spark's JSON source reads it)
AWKWARD = {
    "clean": (
        "\n".join([_good("a"), _good("b", readyQueueSize=3), _good("c", groupBlockedSize=4)])
        + "\n",
        True,
    ),
    "no final newline": (_good("a") + "\n" + _good("b"), True),
    "bad lines that parse": (  # classified by the same Spark expressions either way
        "\n".join(
            [
                _good("v9", schemaVersion=9),
                json.dumps({k: v for k, v in json.loads(_good("nt")).items() if k != "topic"}),
                _good("neg", readyQueueSize=-1),
                _good("neg-blocked", groupBlockedSize=-1),
                _good("short", pullMsgTimeGap={"count": 1, "sum": 1, "max": 1, "counts": [1]}),
                _good("nulls", sendMsg=None, pullMsgTimeGap=None),
                _good("next-day", 1440),  # misplaced in a date=2025-11-20 directory
                "{}",
            ]
        )
        + "\n",
        True,
    ),
    "topic controls": (  # counters, and paused true, false, null and absent
        "\n".join(
            [
                _good("p", paused=True, purged=4, backlogRefused=2),
                _good("r", paused=False),
                _good("n", paused=None),
                _good("old"),
            ]
        )
        + "\n",
        True,
    ),
    "debounce and schedule counters": (  # present, null and absent (an older server's line)
        "\n".join(
            [
                _good("d", replaced=3, deduplicated=2, scheduleSent=5, scheduleMissed=4),
                _good("n", replaced=None, scheduleMissed=None),
                _good("old"),
            ]
        )
        + "\n",
        True,
    ),
    "subscriptions": (  # a named one's line, and the default's by name, empty or null
        "\n".join(
            [
                _good("s", schemaVersion=3, subscription="billing", pullMsg=4),
                _good("s", schemaVersion=3, subscription="default", pullMsg=1),
                _good("s", subscription="", minute=1),
                _good("s", subscription=None, minute=2),
            ]
        )
        + "\n",
        True,
    ),
    "tab in a subscription": (_good("a", schemaVersion=3, subscription="x\ty") + "\n", False),
    "tab in a topic": (_good("a\tb") + "\n", False),
    "number as paused": (_good("a", paused=1) + "\n", False),
    "truncated line": (_good("a") + "\n" + _good("b")[:40] + "\n", False),
    "blank line": (_good("a") + "\n\n" + _good("b") + "\n", False),
    "crlf": (_good("a") + "\r\n" + _good("b") + "\r\n", False),
    "field outside the schema": (
        json.dumps({**json.loads(_good("a")), "future": [1, {"x": None}]}) + "\n",
        False,
    ),
    "other waitingQueueInfo key": (
        json.dumps({**json.loads(_good("a")), "waitingQueueInfo": {"sizeOf0To1min": 1, "x": "y"}})
        + "\n",
        False,
    ),
    "duplicate key": (_good("a")[:-1] + ',"sendMsg":5}\n', False),
    "number as string": (_good("a", sendMsg="5") + "\n", False),
    "string as number": (_good("a", namespace=5) + "\n", False),
    "float counter": (_good("a", sendMsg=1.5) + "\n", False),
    "int32 overflow": (_good("a", schemaVersion=3_000_000_000) + "\n", False),
    "two objects on a line": (_good("a") + _good("b") + "\n", False),
    "top-level array": ("[" + _good("a") + "]\n", False),
    "null line": ("null\n" + _good("a") + "\n", False),
    "single quotes": ("{'schemaVersion':1,'namespace':'n','topic':'q'}\n", False),
    "invalid utf-8": (_good("a").replace('"a"', '"\udcff"') + "\n", False),
    "non-ascii topic": (_good("订单") + "\n", True),
}


def _write(path: Path, text: str) -> None:
    path.write_bytes(text.encode("utf-8", "surrogateescape"))


def test_parse_file_accepts_only_what_it_reads_exactly_as_spark():
    for name, (text, accepted) in AWKWARD.items():
        table = parse_file(text.encode("utf-8", "surrogateescape"))
        assert (table is not None) == accepted, name
    assert parse_file(b"").num_rows == 0


def test_arrow_rows_equal_the_json_source_rows_and_the_rest_falls_back(spark, tmp_path):

    from spark_jobs.reader import read_snapshots
    from spark_jobs.snapshot import flat_snapshot_rows

    day = tmp_path / "in" / "date=2025-11-20"
    day.mkdir(parents=True)
    files = {}
    for i, (name, (text, _)) in enumerate(AWKWARD.items()):
        path = day / f"f{i:02d} {name}.jsonl"  # spaces: source_file is a URI, %20-escaped
        _write(path, text)
        files[name] = path
    (day / "empty.jsonl").write_text("")
    paths = sorted(day.iterdir())
    read = arrow_reader.read_records(spark, [(str(p), p.stat().st_size) for p in paths])
    fast = flat_snapshot_rows(read.frame).localCheckpoint()
    left = {str(files[n]) for n, (_, ok) in AWKWARD.items() if not ok}
    assert read.left_to_spark() == sorted(left)

    columns = [c for c in read_snapshots(spark, [str(tmp_path / "in")]).columns]

    def rows(frame):
        return sorted(
            (tuple(r) for r in frame.select(*columns).collect()),
            key=lambda r: tuple("" if v is None else str(v) for v in r),
        )

    accepted = [str(files[n]) for n, (_, ok) in AWKWARD.items() if ok]
    expected = rows(read_snapshots(spark, accepted))
    assert rows(fast) == expected
    assert len(expected) == 25
    statuses = {r[0] for r in expected}
    assert statuses == {0, 1, 2, 3}  # ok, malformed, unsupported and misplaced lines alike


def test_file_days_are_spark_file_day_of_each_name(spark):
    from pyspark.sql import functions as F

    from spark_jobs.snapshot import file_day

    names = [
        "file:///in/date=2025-11-20/a.jsonl",
        "file:///in/date=2025-02-30/a.jsonl",  # not a date
        "file:///in/date=2025-1-5/a.jsonl",  # Spark reads this one
        "file:///in/date=2025-11-20x/a.jsonl",
        "file:///in/date=20251120/a.jsonl",
        "file:///in/other/a.jsonl",
        "a.jsonl",
    ]
    frame = spark.createDataFrame([(n,) for n in names], "source_file string")
    expected = [r["d"] for r in frame.select(file_day(F.col("source_file")).alias("d")).collect()]
    assert arrow_reader.file_days(spark, names) == expected
    assert expected[0] == 20412 and expected[1] is None


def test_assign_balances_bytes_over_tasks():
    files = [(f"f{i}", size) for i, size in enumerate([90, 10, 40, 40, 30, 10, 10])]
    bins = arrow_reader.assign(files, 3)
    sizes = dict(files)
    loads = sorted(sum(sizes[name] for (name,) in task) for task in bins)
    assert loads == [70, 70, 90] and sorted(n for task in bins for (n,) in task) == sorted(sizes)


def test_reader_choice(spark, tmp_path):
    from spark_jobs.incremental import InputFile
    from spark_jobs.progress import InputError
    from spark_jobs.reader import use_arrow

    local = [InputFile(str(tmp_path / "a.jsonl"), "a.jsonl", 1, 1, None)]
    remote = [InputFile("hdfs://nn/in/a.jsonl", "a.jsonl", 1, 1, None)]
    assert use_arrow(spark, "auto", local)  # the test session is local[2]
    assert not use_arrow(spark, "auto", remote) and not use_arrow(spark, "spark", local)
    with pytest.raises(InputError, match="local files only"):
        use_arrow(spark, "arrow", remote)


def _merged(groups):
    """Groups of one key from several files summed into one (what every consumer of the
    groups does with them)."""
    from pyspark.sql import functions as F

    from spark_jobs.groups import GROUP_KEYS, GROUP_VALUES

    ops = {"count": F.sum, "sum": F.sum, "max": F.max, "min": F.min, "bit_or": F.bit_or}
    return groups.groupBy(*GROUP_KEYS).agg(
        *[ops[op](name).alias(name) for name, op, _ in GROUP_VALUES]
    )


def _sorted_rows(frame, columns):
    return sorted(
        (tuple(r) for r in frame.select(*columns).collect()),
        key=lambda r: tuple("" if v is None else str(v) for v in r),
    )


def test_both_readers_give_the_same_groups_and_the_arrow_reader_leaves_what_it_must(
    spark, tmp_path
):
    """``reader.read_groups`` by the Arrow reader (the per-file aggregate in numpy,
    ``groups.group_lines``, beside Spark's ``line_groups`` of the files it left to Spark's
    JSON source) and by Spark's JSON source alone give the same groups, summed per key (but
    for events): every awkward file, off-grid lines and a generated day with duplicates and
    growing ready queues. The first bad line met is the same too."""
    from pyspark.sql import functions as F

    from spark_jobs.generate_snapshots import Plan, generate
    from spark_jobs.groups import EXAMPLE_COLUMNS, GROUP_SCHEMA, KIND_EVENT
    from spark_jobs.incremental import list_input
    from spark_jobs.reader import read_groups

    generate(Plan(output=tmp_path / "in", topics=11, days=1, duplicate_rate=0.02))
    day = tmp_path / "in" / "date=2025-11-20"
    left = []
    for i, (name, (text, ok)) in enumerate(AWKWARD.items()):
        _write(day / f"awkward {i:02d}.jsonl", text)
        if not ok:
            left.append(str(day / f"awkward {i:02d}.jsonl"))
    off_grid = [  # 70-second intervals (off the hour's grid), one of them written twice
        _good("off", 0, intervalStart=BASE_MS + k * 70_000, intervalEnd=BASE_MS + (k + 1) * 70_000)
        for k in (0, 1, 1, 2)
    ] + [_good("ten", 0, intervalEnd=BASE_MS + 600_000, readyQueueSize=4)]
    _write(day / "off-grid.jsonl", "\n".join(off_grid) + "\n")
    listing = list_input(spark, str(tmp_path / "in"))
    fast = read_groups(spark, listing.files, "arrow")
    slow = read_groups(spark, listing.files, "spark", [listing.root])
    assert (fast.arrow, slow.arrow) == (True, False)
    assert fast.left_to_spark == sorted(left) and fast.groups.schema == GROUP_SCHEMA
    keys = [f.name for f in GROUP_SCHEMA.fields if f.name not in EXAMPLE_COLUMNS]
    not_events = F.col("kind") != KIND_EVENT  # the tasks leave some out: see the next test
    fast_rows = _sorted_rows(_merged(fast.groups.filter(not_events)), keys)
    assert fast_rows == _sorted_rows(_merged(slow.groups.filter(not_events)), keys)
    kinds = {r[4] for r in fast_rows}
    assert {0, 1, 9} <= kinds, kinds  # blocks, off-grid lines, bad lines
    assert fast.groups.filter(~not_events).take(1)
    in_groups = fast.groups.agg(*[F.min(c).alias(c) for c in EXAMPLE_COLUMNS]).first()
    first_bad = {
        "example_bad_file": min(in_groups["example_file"], fast.examples["example_bad_file"]),
        "example_bad_line": min(in_groups["example_line"], fast.examples["example_bad_line"]),
    }
    assert first_bad == slow.examples and None not in first_bad.values()


def test_events_left_out_inside_growth_runs_give_the_same_runs(spark, tmp_path):
    """The tasks keep a block's events only at the ends of its growth runs, the next kept
    event carrying the steps of those left out (``groups._events``): every run, of any
    length, is the one Spark's JSON source gives with an event per line."""
    from pyspark.sql import functions as F

    from spark_jobs.aggregate import line_groups, valid_groups
    from spark_jobs.generate_snapshots import Plan, generate
    from spark_jobs.groups import KIND_EVENT
    from spark_jobs.growth import growth_runs
    from spark_jobs.reader import read_snapshots

    generate(Plan(output=tmp_path / "in", topics=11, days=2, interval_s=30))
    day = tmp_path / "in" / "date=2025-11-20"
    shapes = {  # ready queue per minute, from minute 0; hours are blocks of their own
        "saw": [0, 1, 2, 3, 2, 5, 6, 7, 0, 4, 4, 5],
        "across-hours": [0] * 55 + list(range(1, 12)) + [3, 3, 2],
        "gaps": [5, None, 6, 7, None, None, 8, 1, 2],
        "flat": [4, 4, 4, 4],
    }
    lines = [
        _good(topic, minute, readyQueueSize=size)
        for topic, sizes in shapes.items()
        for minute, size in enumerate(sizes)
        if size is not None
    ]
    _write(day / "shapes.jsonl", "\n".join(lines) + "\n")
    paths = sorted(p for p in tmp_path.glob("in/date=*/*.jsonl"))
    fast = arrow_reader.read_groups(spark, [(str(p), p.stat().st_size) for p in paths]).frame
    fast = fast.localCheckpoint()
    slow = line_groups(read_snapshots(spark, [str(tmp_path / "in")])).localCheckpoint()
    columns = ["namespace", "topic", "run_start", "run_end", "intervals", "from_size", "to_size"]
    expected = _sorted_rows(growth_runs(valid_groups(slow), 1), columns)
    assert _sorted_rows(growth_runs(valid_groups(fast), 1), columns) == expected
    assert {r[1] for r in expected} >= {"saw", "across-hours", "gaps", "topic-0003"}
    assert max(r[4] for r in expected) > 100  # a generated backlog grows for hours

    def events(groups):
        return groups.filter(F.col("kind") == KIND_EVENT).count()

    assert events(fast) * 5 < events(slow)


def test_identity_text_is_what_spark_to_json_writes(spark):
    from pyspark.sql import functions as F

    from spark_jobs.groups import identity_text

    cases = [
        (1, "default", "orders", 1, 2),
        (None, 'quote " and \\ back', "tab\tnew\nline\x01\x1f\x7f", None, 5),
        (99, "订单", "é\u2028", -3, None),
        (None, None, None, None, None),
    ]
    frame = spark.createDataFrame(cases, "v int, namespace string, topic string, s long, e long")
    written = [
        r[0]
        for r in frame.select(
            F.to_json(
                F.struct(
                    F.col("v").alias("schemaVersion"),
                    "namespace",
                    "topic",
                    F.col("s").alias("intervalStart"),
                    F.col("e").alias("intervalEnd"),
                )
            )
        ).collect()
    ]
    assert [identity_text(*case) for case in cases] == written
