"""Incremental runs: only new or changed dates are read, merged into the tables, idempotently;
``--full`` and ``--since`` override; the report compares the latest day with the day before
and the same day a week before."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from spark_jobs.generate_snapshots import Plan, generate
from spark_jobs.monitor_report import main
from spark_jobs.tables import SCHEMAS, read_table

pytestmark = pytest.mark.spark


def _snapshot(spark, out: Path) -> dict[str, list[tuple]]:
    """Every table's rows, sorted, for comparison (doubles compared with a tolerance)."""
    result = {}
    for name in SCHEMAS:
        rows = [tuple(r) for r in read_table(spark, str(out), name).collect()]
        result[name] = sorted(rows, key=lambda r: tuple("" if v is None else str(v) for v in r))
    return result


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert len(a[name]) == len(b[name]), name
        for left, right in zip(a[name], b[name]):
            for x, y in zip(left, right):
                if isinstance(x, float) and isinstance(y, float):
                    assert math.isclose(x, y, rel_tol=1e-12) or (math.isnan(x) and math.isnan(y)), (
                        name,
                        left,
                        right,
                    )
                elif name == "input_quality" and isinstance(x, str):
                    continue  # example of a bad line: the first one read by that run
                else:
                    assert x == y, (name, left, right)


def _run(input_dir: Path, out: Path, capsys, *extra: str) -> str:
    assert (
        main(
            ["--input", str(input_dir), "--output", str(out), "--growth-min-intervals", "3", *extra]
        )
        == 0
    )
    return capsys.readouterr().err


def test_incremental_runs_merge_new_and_changed_days_like_a_full_run(spark, tmp_path, capsys):
    source = tmp_path / "in"
    generate(Plan(output=source, topics=4, days=8, interval_s=600, seed=11))  # 24 files a day
    last_day = tmp_path / "held-back"
    shutil.move(source / "date=2025-11-27", last_day)
    out = tmp_path / "out"
    err = _run(source, out, capsys)
    assert "full run (first run" in err and "7 dates" in err

    shutil.move(last_day, source / "date=2025-11-27")  # a new day arrives
    err = _run(source, out, capsys)
    assert (
        "incremental run (new or changed dates only): 24 of 192 files" in err
        and "2025-11-27" in err
    )
    state = json.loads((out / "_state" / "manifest.json").read_text())
    assert sorted(state["dates"]) == [f"2025-11-{d}" for d in range(20, 28)]
    merged = _snapshot(spark, out)

    err = _run(source, out, capsys)  # nothing changed: nothing read, nothing different
    assert "0 of 192 files" in err and "nothing new to read" in err
    _same(merged, _snapshot(spark, out))
    assert _run(source, out, capsys, "--quiet") == ""  # not one line, the last one included
    # A day's file changes (one snapshot rewritten, one written twice): only that date is read.
    changed = source / "date=2025-11-22" / "default-05.jsonl"
    lines = changed.read_text().splitlines()
    lines[0] = lines[0].replace('"sendMsg":', '"sendMsg":1000', 1)
    changed.write_text("\n".join(lines + [lines[1]]) + "\n")
    err = _run(source, out, capsys)
    assert "(new or changed dates only): 24 of 192 files" in err and "B, 2025-11-22 [" in err
    incremental = _snapshot(spark, out)
    assert incremental["topic_day"] != merged["topic_day"]

    full_out = tmp_path / "full"
    err = _run(source, full_out, capsys, "--full")
    assert "full run (--full): 192 of 192 files" in err
    _same(incremental, _snapshot(spark, full_out))
    assert (out / "topic_daily.csv").read_text() == (full_out / "topic_daily.csv").read_text()

    # The page compares the latest day with the day before and the same day a week before.
    days = {
        r["date"].isoformat(): r
        for r in read_table(spark, str(full_out), "namespace_day").collect()
    }
    page = (full_out / "report.html").read_text()
    table = page[page.index('<table id="day-over-day">') :]
    table = table[: table.index("</table>")]
    p99_row = next(row for row in table.split("<tr>") if 'data-value="Lag p99 ms"' in row)
    for column, day in (
        ("today", "2025-11-27"),
        ("previous_day", "2025-11-26"),
        ("week_before", "2025-11-20"),
    ):
        assert f'data-col="{column}" data-value="{days[day]["delivery_lag_p99_ms"]}"' in p99_row, (
            column
        )


def _listing(tmp_path: Path, dated: dict[str, int], undated: int = 0):
    from spark_jobs.incremental import InputFile, Listing

    files = [
        InputFile(f"{tmp_path}/date={day}/f.jsonl", f"date={day}/f.jsonl", size, 1, day)
        for day, size in dated.items()
    ]
    files += [
        InputFile(f"{tmp_path}/x{i}.jsonl", f"x{i}.jsonl", 1, 1, None) for i in range(undated)
    ]
    return Listing(str(tmp_path), files)


def _args(**changes):
    import argparse

    values = {"full": False, "since": None, "lag_threshold_ms": 1000, "growth_min_intervals": 10}
    values.update(changes)
    return argparse.Namespace(**values)


def test_plan_decides_full_or_incremental_runs(tmp_path):
    import datetime as dt

    from spark_jobs.incremental import new_state, plan_run

    listing = _listing(tmp_path, {"2025-11-20": 10, "2025-11-21": 20})
    first = plan_run(listing, None, _args())
    assert (first.full, first.dates) == (True, ["2025-11-20", "2025-11-21"])
    state = new_state(listing, first, None, _args())
    assert plan_run(listing, state, _args()).dates == []
    grown = _listing(tmp_path, {"2025-11-20": 10, "2025-11-21": 25, "2025-11-22": 5})
    plan = plan_run(grown, state, _args())
    assert (plan.full, plan.dates) == (False, ["2025-11-21", "2025-11-22"])
    assert plan_run(grown, state, _args(since=dt.date(2025, 11, 20))).dates == [
        "2025-11-20",
        "2025-11-21",
        "2025-11-22",
    ]
    assert plan_run(grown, state, _args(full=True)).reason == "--full"
    assert plan_run(grown, state, _args(lag_threshold_ms=5)).reason.startswith("settings changed")
    assert (
        "outside date="
        in plan_run(_listing(tmp_path, {"2025-11-20": 10}, undated=1), state, _args()).reason
    )
    moved = _listing(tmp_path / "elsewhere", {"2025-11-20": 10})
    assert plan_run(moved, state, _args()).reason.startswith(
        "the output was made from another input"
    )
    # A date whose files have gone keeps its rows (and its state entry).
    kept = new_state(grown, plan_run(grown, state, _args()), state, _args())
    shrunk = _listing(tmp_path, {"2025-11-22": 5})
    assert plan_run(shrunk, kept, _args()).dates == []
    assert sorted(new_state(shrunk, plan_run(shrunk, kept, _args()), kept, _args())["dates"]) == [
        "2025-11-20",
        "2025-11-21",
        "2025-11-22",
    ]
