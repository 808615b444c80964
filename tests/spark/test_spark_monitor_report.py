"""The whole job: generator -> job -> Parquet, CSV and report.html, checked in headless Chromium."""

from __future__ import annotations

import argparse
import csv
import math
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from spark_jobs.monitor_report import main
from spark_jobs.progress import EXIT_EMPTY_INPUT, EXIT_NO_VALID_LINES

pytestmark = pytest.mark.spark

TABLES = (
    "topic_hour",
    "topic_day",
    "topic_total",
    "namespace_hour",
    "namespace_day",
    "namespace_total",
    "ready_growth_runs",
    "findings",
    "input_quality",
    "input_quality_daily",
)


class _Cells(HTMLParser):
    """Collect ``data-col`` / ``data-value`` cells per table id, and <body> attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[dict[str, str]]] = {}
        self.body: dict[str, str] = {}
        self.images = 0
        self._table: str | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self._table = attrs.get("id")
            self.tables[self._table] = []
        elif tag == "tr" and self._table:
            self.tables[self._table].append({})
        elif tag == "td" and self._table and "data-col" in attrs:
            self.tables[self._table][-1][attrs["data-col"]] = attrs["data-value"]
        elif tag == "body":
            self.body = attrs
        elif tag == "img" and "chart" in (attrs.get("class") or ""):
            self.images += 1
            assert attrs["src"].startswith("data:image/png;base64,")

    def handle_endtag(self, tag):
        if tag == "table":
            self._table = None


def _cells(text: str) -> _Cells:
    parser = _Cells()
    parser.feed(text)
    return parser


@pytest.fixture(scope="module")
def report(generated_report):
    """Two generated days with duplicates and bad lines, run through main() (conftest.py)."""
    return generated_report


def test_job_writes_every_table_the_csv_and_the_report(report, spark):
    from spark_jobs.tables import SCHEMAS

    assert report["code"] == 0
    out = report["out"]
    for name in TABLES:
        table = spark.read.parquet(str(out / name))
        assert table.count() > 0, name
        assert set(table.columns) == set(SCHEMAS[name].fieldNames()), name
    assert (out / "topic_day" / "date=2025-11-21").is_dir()
    assert (out / "topic_daily.csv").is_file()
    assert (out / "report.html").stat().st_size > 50_000


def test_bad_and_duplicate_lines_are_counted_in_report_and_table(report, spark, capsys):
    stats = report["stats"]
    quality = spark.read.parquet(str(report["out"] / "input_quality")).first()
    assert quality["malformed_lines"] == stats["malformed"] > 0
    assert quality["unsupported_lines"] == stats["unsupported"] > 0
    assert quality["duplicate_lines"] == stats["duplicates"] > 0
    assert quality["distinct_intervals"] == stats["lines"]
    shown = {
        c: v
        for row in _cells((report["out"] / "report.html").read_text()).tables["input-quality"]
        for c, v in row.items()
    }
    assert int(shown["malformed_lines"]) == stats["malformed"]
    assert int(shown["duplicate_lines"]) == stats["duplicates"]


def test_report_figures_match_the_tables_and_csv(report, spark):
    out = report["out"]
    cells = _cells((out / "report.html").read_text())
    totals = spark.read.parquet(str(out / "namespace_total")).first()
    shown = cells.tables["namespace-totals"][1]  # row 0 is the header
    for column in ("sent", "delivered", "acked", "timed_out", "ended", "delivery_lag_p99_ms"):
        assert int(shown[column]) == totals[column], column
    assert math.isclose(float(shown["sent_per_s"]), totals["sent_per_s"], rel_tol=1e-12)

    with (out / "topic_daily.csv").open() as handle:
        csv_rows = {(r["date"], r["topic"]): r for r in csv.DictReader(handle)}
    latest = [row for row in cells.tables["latest-topics"] if row]
    assert len(latest) == 12
    for row in latest:
        expected = csv_rows[("2025-11-21", row["topic"])]
        for column in (
            "sent",
            "delivered",
            "acked",
            "delivery_lag_p99_ms",
            "ready_size_last",
            "group_blocked_size_last",
            "purged",
            "backlog_refused",
            "paused_last",
        ):
            assert row[column] == expected[column], (row["topic"], column)
        if expected["ack_ratio"]:
            assert math.isclose(float(row["ack_ratio"]), float(expected["ack_ratio"]), rel_tol=1e-9)
        else:  # nothing delivered (the no-consumer topic): no ratio in either
            assert row["ack_ratio"] == "" and row["delivered"] == "0"

    # The generator's grouped topics (index % 10 == 1) have messages behind their group heads.
    blocked = spark.read.parquet(str(out / "topic_day")).filter("group_blocked_size_max > 0")
    assert {row["topic"] for row in blocked.select("topic").distinct().collect()} == {
        "topic-0001",
        "topic-0011",
    }

    # Paused (then purged): index % 10 == 6; refused sends at the backlog quota: == 8.
    days = spark.read.parquet(str(out / "topic_day"))

    def topics(condition):
        return {row["topic"] for row in days.filter(condition).select("topic").collect()}

    assert topics("paused_max > 0") == topics("purged > 0") == {"topic-0006"}
    assert topics("backlog_refused > 0") == {"topic-0008"}
    paused = days.filter("topic = 'topic-0006'").collect()
    assert {(row["paused_avg"], row["paused_last"]) for row in paused} == {(2 / 24, 0)}

    findings = spark.read.parquet(str(out / "findings"))
    kinds = {row["kind"] for row in findings.select("kind").distinct().collect()}
    assert kinds == {
        "ready_backlog_growing",
        "delivery_lag_p99_high",
        "messages_ended",
        "no_consumer",
        "backlog_refused",
    }
    assert {row["topic"] for row in findings.filter("kind = 'backlog_refused'").collect()} == {
        "topic-0008"
    }
    comparison = [row for row in cells.tables["day-over-day"] if row]
    namespace_day = {
        r["date"].isoformat(): r for r in spark.read.parquet(str(out / "namespace_day")).collect()
    }
    sent = next(r for r in comparison if r["metric"] == "Sent/s" and not r["topic"])
    assert float(sent["today"]) == namespace_day["2025-11-21"]["sent_per_s"]
    assert float(sent["previous_day"]) == namespace_day["2025-11-20"]["sent_per_s"]
    assert sent["week_before"] == ""  # no data a week before
    shown_findings = [row for row in cells.tables["findings"] if row]
    assert len(shown_findings) == findings.count()
    assert {(r["kind"], r["topic"]) for r in shown_findings} == {
        (row["kind"], row["topic"]) for row in findings.collect()
    }
    assert cells.images == 6  # namespace: throughput, lag, backlog; top topics: the same three


def test_report_opens_in_headless_chromium_with_charts_visible(report, tmp_path):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        pytest.skip(
            "headless check needs Debian's chromium (apt-get install -y chromium); not on PATH"
        )
    url = (report["out"] / "report.html").resolve().as_uri()
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    dom = subprocess.run(
        [*flags, "--virtual-time-budget=5000", "--dump-dom", url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    body = _cells(dom.stdout).body
    assert body.get("data-charts") == "ok", body
    assert body.get("data-chart-count") == "6"

    shot = tmp_path / "report.png"
    subprocess.run(
        [*flags, f"--screenshot={shot}", "--window-size=1280,4000", url],
        capture_output=True,
        timeout=120,
        check=True,
    )
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[0] == 4000 and pixels.shape[1] == 1280
    assert pixels[..., :3].std() > 0.05  # not a blank page
    # Chart lines are coloured; tables and text are greys. Coloured pixels mean charts rendered.
    rgb = pixels[..., :3]
    coloured = ((rgb.max(axis=-1) - rgb.min(axis=-1)) > 0.3).sum()
    assert coloured > 2000, coloured


def test_empty_input_fails_with_clear_message(spark, tmp_path, capsys):
    (tmp_path / "in").mkdir()
    assert (
        main(["--input", str(tmp_path / "in"), "--output", str(tmp_path / "out")])
        == EXIT_EMPTY_INPUT
    )
    assert "no snapshot lines" in capsys.readouterr().err


def test_missing_input_fails_with_clear_message(spark, tmp_path, capsys):
    assert (
        main(["--input", str(tmp_path / "absent"), "--output", str(tmp_path / "out")])
        == EXIT_EMPTY_INPUT
    )
    assert "cannot read snapshots" in capsys.readouterr().err


def test_input_of_only_bad_lines_fails_and_reports_counts(spark, tmp_path, capsys):
    day = tmp_path / "in" / "date=2025-11-20"
    day.mkdir(parents=True)
    (day / "default-00.jsonl").write_text('{"truncated\n{"schemaVersion":9,"topic":"x"}\n')
    assert (
        main(["--input", str(tmp_path / "in"), "--output", str(tmp_path / "out")])
        == EXIT_NO_VALID_LINES
    )
    err = capsys.readouterr().err
    assert "1 malformed, 1 unsupported" in err and "no valid snapshot lines" in err


def test_report_subcommand_forwards_options_to_the_job():
    from delayqueue.cli import report as command

    parser = argparse.ArgumentParser()
    command.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        [
            "report",
            "--input",
            "s3a://b/in",
            "--output",
            "/tmp/o",
            "--lag-threshold-ms",
            "250",
            "--since",
            "2025-11-20",
            "--full",
        ]
    )
    assert args.func is command.run
    assert command.job_argv(args) == [
        "--input",
        "s3a://b/in",
        "--output",
        "/tmp/o",
        "--lag-threshold-ms",
        "250",
        "--since",
        "2025-11-20",
        "--full",
    ]
