"""report.html on a first day, looked at in a real headless Chromium (Debian's chromium and
chromium-driver, selenium, as the console's browser tests): every chart draws inside its plot
area over exactly the data's span, by minute; a single interval is still a visible point;
the tables fit the page. And the figures under it: each ended message is counted once
(``ended`` + ``dead_lettered``), counts show without decimals, no Hadoop ``.crc`` file.

Screenshots are kept in <artefacts>/report/ (first-day.png, one-interval.png), where
<artefacts> is $CONSOLE_TEST_ARTIFACTS or build/test-artifacts in the repository.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from support.browser import chromium

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = (
    Path(os.environ.get("CONSOLE_TEST_ARTIFACTS", REPO / "build" / "test-artifacts")) / "report"
)
MINUTES = 40

# For each chart image: its colored pixels (a data line or marker: no grey, black or white)
# inside its plot area, drawn on a canvas at the image's own size.
CHART_PIXELS = """
return Array.from(document.querySelectorAll('img.chart')).map(function (img) {
  var c = document.createElement('canvas');
  c.width = img.naturalWidth; c.height = img.naturalHeight;
  var g = c.getContext('2d'); g.drawImage(img, 0, 0);
  var b = img.dataset.box.split(',').map(Number);
  var d = g.getImageData(b[0] + 2, b[1] + 2, b[2] - b[0] - 4, b[3] - b[1] - 4).data, n = 0;
  for (var i = 0; i < d.length; i += 4) {
    var hi = Math.max(d[i], d[i + 1], d[i + 2]), lo = Math.min(d[i], d[i + 1], d[i + 2]);
    if (hi - lo > 60) { n++; }
  }
  return {title: img.alt, colored: n, from: img.dataset.xFrom, to: img.dataset.xTo,
          first: img.dataset.first, last: img.dataset.last, points: Number(img.dataset.points)};
});
"""


@pytest.fixture(scope="module")
def browser():
    with chromium() as driver:
        yield driver


def _report(root: Path, write_input) -> Path:
    from spark_jobs.monitor_report import main

    write_input(root / "in")
    code = main(["--input", str(root / "in"), "--output", str(root / "out"), "--quiet"])
    assert code == 0
    return root / "out"


@pytest.fixture(scope="module")
def first_day(spark, tmp_path_factory):
    """40 minutes of a first day (8 topics, dead letters among the ended messages)."""
    from spark_jobs.generate_snapshots import Plan, generate

    root = tmp_path_factory.mktemp("first-day")
    return _report(
        root,
        lambda path: generate(Plan(output=path, topics=8, minutes=MINUTES, schema_version=2)),
    )


@pytest.fixture(scope="module")
def one_interval(spark, tmp_path_factory):
    """A server that wrote one interval: every series is one point."""
    from spark_support import snapshot_line

    def write(path: Path) -> None:
        day = path / "date=2025-11-20"
        day.mkdir(parents=True)
        (day / "default-00.jsonl").write_text(
            snapshot_line("t", 0, sendMsg=5, pullMsg=4, ackMsg=3, readyQueueSize=2) + "\n"
        )

    return _report(tmp_path_factory.mktemp("one-interval"), write)


def _look(browser, out: Path, name: str) -> list[dict]:
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get((out / "report.html").as_uri())
    WebDriverWait(browser, 30).until(
        lambda d: d.find_element("tag name", "body").get_attribute("data-charts") != "pending"
    )
    assert browser.find_element("tag name", "body").get_attribute("data-charts") == "ok"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.get_screenshot_as_file(str(ARTIFACTS / f"{name}.png"))
    # the tables scroll inside the page: nothing is wider than the window
    overflow = browser.execute_script(
        "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow <= 0, f"the page is {overflow}px wider than the window"
    return browser.execute_script(CHART_PIXELS)


def test_first_day_charts_draw_by_minute_over_the_data_span(browser, first_day):
    charts = _look(browser, first_day, "first-day")
    assert len(charts) == 6
    first = datetime(2025, 11, 20, 0, 0)
    last = first + timedelta(minutes=MINUTES - 1)
    for chart in charts:
        # minute points, and the x axis is exactly their span (not years around one point)
        assert (chart["first"], chart["last"]) == (first.isoformat(), last.isoformat()), chart
        assert (chart["from"], chart["to"]) == (chart["first"], chart["last"]), chart
        assert chart["points"] >= MINUTES, chart
        assert chart["colored"] > 500, f"{chart['title']}: blank plot area ({chart})"
    assert "charts by minute" in (first_day / "report.html").read_text()


def test_a_single_interval_is_a_visible_point_a_minute_wide(browser, one_interval):
    charts = _look(browser, one_interval, "one-interval")
    assert len(charts) == 6
    point = datetime(2025, 11, 20, 0, 0)
    for chart in charts:
        if chart["points"] == 0:  # a lag with no sample: nothing to draw
            continue
        assert (chart["first"], chart["last"]) == (point.isoformat(), point.isoformat())
        assert (chart["from"], chart["to"]) == (
            (point - timedelta(seconds=30)).isoformat(),
            (point + timedelta(seconds=30)).isoformat(),
        ), chart
        assert chart["colored"] > 20, f"{chart['title']}: the point is not drawn ({chart})"
    assert sum(chart["points"] > 0 for chart in charts) >= 4


def test_each_ended_message_is_counted_once(spark, first_day):
    from spark_jobs.tables import read_table

    ended = dead = 0
    for path in (first_day.parent / "in").rglob("*.jsonl"):
        for text in path.read_text().splitlines():
            line = json.loads(text)
            ended += line["triggerMsgEndLife"]
            dead += line["deadLettered"]
    assert dead > 0 and ended > dead  # the input has both kinds
    for name in ("topic_day", "namespace_total"):
        sums = (
            read_table(spark, str(first_day), name)
            .agg({"ended": "sum", "dead_lettered": "sum"})
            .first()
        )
        # ended: messages ended and dropped; dead_lettered: ended into a dead-letter queue
        assert (sums["sum(ended)"], sums["sum(dead_lettered)"]) == (ended - dead, dead)
    findings = read_table(spark, str(first_day), "findings").collect()
    figures = {f["kind"]: 0.0 for f in findings}
    for f in findings:
        figures[f["kind"]] += f["figure"]
    assert (figures["messages_ended"], figures["dead_lettered"]) == (ended - dead, dead)


def test_counts_show_as_integers_and_no_checksum_files(first_day):
    from spark_jobs.report_html import _format

    assert (_format(1.0), _format(15.0), _format(1234.0)) == ("1", "15", "1,234")
    assert (_format(0.125), _format(12.25)) == ("0.125", "12.2")
    page = (first_day / "report.html").read_text()
    assert "15.0<" not in page and ">1.000<" not in page
    assert not list(first_day.rglob("*.crc"))


def test_the_server_writes_the_version_the_docs_say_carries_the_dead_letters():
    """The server writes version 1, which carries deadLettered and redriven (added in place);
    the report reads it, and docs/report.md says so (not that version 2 carries them)."""
    from delayqueue.monitoring.snapshot import SCHEMA_VERSION, snapshot_line
    from spark_jobs.snapshot import SUPPORTED_SCHEMA_VERSIONS

    line = snapshot_line("default", "t", 0, 60_000, _zero_stats(), {})
    assert SCHEMA_VERSION == line["schemaVersion"] == 1 and 1 in SUPPORTED_SCHEMA_VERSIONS
    assert {"deadLettered", "redriven"} <= set(line)
    docs = (REPO / "docs" / "report.md").read_text()
    assert "The server writes version 1, and version 1\n  carries the failure-handling" in docs
    assert "version-2 lines" not in docs


def _zero_stats() -> dict:
    from delayqueue.core.monitor_hash import empty_topic_stats

    return empty_topic_stats()
