"""Subscriptions in the report: the server's own lines for a topic and its named
subscriptions (schemaVersion 3 with ``subscription``) become rows per subscription in every
topic table, the growth runs, the findings, the CSV and the page; lines written before
subscriptions (no field) read as the default subscription; both readers agree."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from spark_jobs.monitor_report import main
from spark_jobs.tables import SCHEMAS, read_table

from spark_support import BASE_MS, histogram, snapshot_line

pytestmark = pytest.mark.spark


def _server_line(topic: str, minute: int, counts: dict, info: dict,
                 subscription: str | None = None) -> str:
    """A line as the server's writer makes it (``delayqueue.monitoring.snapshot``): the topic's,
    or a named subscription's."""
    from delayqueue.core.monitor_hash import empty_topic_stats
    from delayqueue.monitoring.snapshot import snapshot_line as topic_line
    from delayqueue.monitoring.snapshot import subscription_line

    stats = {**empty_topic_stats(), **counts}
    start = BASE_MS + minute * 60_000
    if subscription is None:
        line = topic_line("default", topic, start, start + 60_000, stats, info)
    else:
        line = subscription_line("default", topic, subscription, start, start + 60_000, stats,
                                 info)
    return json.dumps(line, separators=(",", ":"))


def _input(root: Path) -> None:
    """Twelve minutes: "orders" (its default and "billing" consumed, "billing"'s ready queue
    growing from minute 2 on, "idle" fed and never pulled), the first two minutes written
    before subscriptions (no named lines, old-style topic lines); "fanout", whose default
    holds nothing (defaultSubscription false) and whose "audit" consumes every message; and
    minute 5 of "orders"/"billing" written twice (a lease handover). From minute 2 on,
    "orders"' default and "billing" push: the default's 10 POSTs a minute answered 2xx
    within 10 ms, "billing"'s 6 2xx (20 ms) and one 5xx (1 s) a minute, and at minute 4 a
    timeout (10 s)."""
    lines = []
    for minute in range(12):
        old = minute < 2
        pushed = {"push2xx": 10, "pushMillis": histogram({3: 10}, 9, 60)}
        topic = json.loads(_server_line("orders", minute, {"sendMsg": 10, "pullMsg": 10,
                                                           "ackMsg": 10,
                                                           "triggerMsgReady": 10,
                                                           **(pushed if not old else {})},
                                        {"readyQueueSize": 1, "waitingQueueSize": 4}))
        if old:
            topic = json.loads(snapshot_line("orders", minute, sendMsg=10, pullMsg=10,
                                             ackMsg=10, triggerMsgReady=10, readyQueueSize=1,
                                             waitingQueueSize=4))
        lines.append(json.dumps(topic))
        lines.append(_server_line("fanout", minute, {"sendMsg": 3}, {}))
        if old:
            continue
        timeout = minute == 4
        billing_pushed = {"push2xx": 6, "push5xx": 1, "pushTimeout": int(timeout),
                          "pushMillis": histogram({4: 6, 9: 1, 13: int(timeout)},
                                                  10_000 if timeout else 900)}
        lines.append(_server_line("orders", minute, {"pullMsg": 7, "ackMsg": 6, "nackMsg": 1,
                                                     "deadLettered": 1 if minute == 4 else 0,
                                                     **billing_pushed},
                                  {"readyQueueSize": minute, "ackQueueSize": 2,
                                   "paused": minute == 11},
                                  subscription="billing"))
        lines.append(_server_line("orders", minute, {"triggerMsgReady": 10},
                                  {"readyQueueSize": 10 * minute}, subscription="idle"))
        lines.append(_server_line("fanout", minute, {"pullMsg": 3, "ackMsg": 3}, {},
                                  subscription="audit"))
    minute_5 = f'"intervalStart":{BASE_MS + 5 * 60_000}'
    lines.append(next(line for line in lines
                      if '"subscription":"billing"' in line and minute_5 in line))
    directory = root / "in" / "date=2025-11-20"
    directory.mkdir(parents=True)
    (directory / "default-00.jsonl").write_text("\n".join(lines) + "\n")


def _shown(page: str, table_id: str, keys: tuple[str, ...], column: str) -> str:
    table = re.search(rf'<table id="{table_id}">(.*?)</table>', page, re.DOTALL).group(1)
    (row,) = [r for r in re.findall(r"<tr>(.*?)</tr>", table)
              if all(f'data-value="{key}"' in r for key in keys)]
    return re.search(rf'data-col="{column}" data-value="([^"]*)"', row).group(1)


@pytest.mark.parametrize("reader", ["arrow", "spark"])
def test_every_subscription_is_a_row_of_its_own_and_old_lines_are_the_default(
    spark, tmp_path, capsys, reader
):
    _input(tmp_path)
    out = tmp_path / "out"
    code = main(["--input", str(tmp_path / "in"), "--output", str(out), "--reader", reader,
                 "--growth-min-intervals", "5"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "0 malformed, 0 unsupported" in err
    found = {name: read_table(spark, str(out), name) for name in SCHEMAS}
    quality = found["input_quality"].first()
    assert (quality["valid_lines"], quality["duplicate_lines"]) == (24 + 30 + 1, 1)

    for table in ("topic_hour", "topic_day", "topic_total"):
        rows = {(r["topic"], r["subscription"]): r for r in found[table].collect()}
        assert set(rows) == {("orders", "default"), ("orders", "billing"), ("orders", "idle"),
                             ("fanout", "default"), ("fanout", "audit")}, table
        own, billing = rows[("orders", "default")], rows[("orders", "billing")]
        # the old lines (minutes 0, 1) are the default's, and count
        assert (own["snapshot_lines"], own["sent"], own["delivered"]) == (12, 120, 120), table
        # the duplicate minute 5 counts once
        assert (billing["snapshot_lines"], billing["sent"], billing["delivered"]) == (
            10, 0, 70), table
        assert (billing["nacked"], billing["dead_lettered"]) == (10, 1), table
        assert (billing["ready_size_last"], billing["ready_size_max"]) == (11, 11), table
        assert (billing["consuming_size_last"], billing["paused_last"]) == (2, 1), table
        assert rows[("fanout", "audit")]["acked"] == 30, table
        # push delivery, the duplicate minute 5 once: 10 minutes of each
        assert [billing[c] for c in ("pushes", "push_2xx", "push_5xx", "push_timeout",
                                     "push_4xx", "push_refused")] == [71, 60, 10, 1, 0, 0], table
        assert billing["push_success_ratio"] == pytest.approx(60 / 71), table
        assert [billing[c] for c in ("push_latency_count", "push_latency_p50_ms",
                                     "push_latency_p99_ms", "push_latency_max")] == [
            71, 20, 30_000, 10_000], table
        assert [own[c] for c in ("pushes", "push_2xx", "push_success_ratio",
                                 "push_latency_p50_ms", "push_latency_p99_ms")] == [
            100, 100, 1.0, 10, 10], table
        idle = rows[("orders", "idle")]
        assert (idle["pushes"], idle["push_success_ratio"], idle["push_latency_p50_ms"]) == (
            0, None, None), table
    for table in ("namespace_hour", "namespace_day", "namespace_total"):
        (row,) = found[table].collect()
        # two topics; deliveries of every subscription; sends are the topics'
        assert (row["topics"], row["sent"], row["delivered"]) == (2, 156, 120 + 70 + 30), table
        assert (row["pushes"], row["push_2xx"], row["push_5xx"]) == (171, 160, 10), table

    runs = {(r["topic"], r["subscription"]) for r in found["ready_growth_runs"].collect()}
    assert runs == {("orders", "billing"), ("orders", "idle")}
    findings = {(r["kind"], r["topic"], r["subscription"]): r for r in found["findings"].collect()}
    assert ("dead_lettered", "orders", "billing") in findings
    assert "(subscription billing)" in findings[("dead_lettered", "orders", "billing")]["detail"]
    # "idle" gets messages and delivers none; "fanout"'s default holds nothing, its consumers
    # read "audit": no finding for it
    idle = findings[("no_consumer", "orders", "idle")]
    assert idle["figure"] == 100 and "subscription idle" in idle["detail"]
    assert not [key for key in findings if key[0] == "no_consumer" and key[1] == "fanout"]

    with (out / "topic_daily.csv").open() as handle:
        csv_rows = {(r["topic"], r["subscription"]): r for r in csv.DictReader(handle)}
    assert csv_rows[("orders", "billing")]["delivered"] == "70"
    assert csv_rows[("orders", "default")]["sent"] == "120"
    assert [csv_rows[("orders", "billing")][c] for c in ("pushes", "push_5xx", "push_timeout")
            ] == ["71", "10", "1"]
    page = (out / "report.html").read_text()
    assert _shown(page, "latest-subscriptions", ("orders", "billing"), "delivered") == "70"
    assert _shown(page, "latest-topics", ("orders",), "sent") == "120"
    latest = re.search(r'<table id="latest-topics">(.*?)</table>', page, re.DOTALL).group(1)
    assert 'data-value="billing"' not in latest
    assert "<th>Subscription</th>" in page
    assert _shown(page, "push-delivery", ("orders", "billing"), "push_5xx") == "10"
    assert _shown(page, "push-delivery", ("orders", "billing"), "push_latency_p99_ms") == "30000"
    # (the namespace is "default" too: the default subscription's row is the one of 100)
    assert _shown(page, "push-delivery", ("orders", "100"), "push_success_ratio") == "1.0"
    pushed = re.search(r'<table id="push-delivery">(.*?)</table>', page, re.DOTALL).group(1)
    assert len(re.findall(r"<tr>", pushed)) == 3 and 'data-value="idle"' not in pushed
