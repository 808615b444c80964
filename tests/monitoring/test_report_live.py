"""End to end from a live node: a real server under a short, bounded load writes snapshots
every second; ``delayqueue report`` (a fresh process, as an operator runs it) reads them, and
its totals equal the sends, deliveries and acks this test made, and the topic controls it
used (a send refused at the backlog quota, a purge, a pause) reach the report too."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from support import wait_until
from support.node import ServerProcess

pytestmark = [pytest.mark.slow, pytest.mark.spark]

TOPICS = {"live-orders": 30, "live-mail": 12}  # messages sent to each
CAPPED = "live-capped"


def _snapshot_totals(directory: Path) -> dict[str, dict[str, int]]:
    totals: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    seen = set()
    for path in sorted(directory.glob("date=*/*.jsonl")):
        for text in path.read_text().splitlines():
            line = json.loads(text)
            if (line["topic"], line["intervalStart"]) in seen:
                continue
            seen.add((line["topic"], line["intervalStart"]))
            for key in ("sendMsg", "pullMsg", "ackMsg", "purged", "backlogRefused"):
                totals[line["topic"]][key] += line[key]
            totals[line["topic"]]["paused"] = int(line["paused"])  # the latest line's, sorted
    return totals


def test_report_totals_equal_what_a_live_node_was_sent(redis_url, tmp_path):
    snapshots = tmp_path / "snapshots"
    settings = {"snapshot-dir": str(snapshots), "monitor-interval-seconds": 1}
    acked: dict[str, int] = defaultdict(int)
    with ServerProcess(redis_url, workers=2, settings=settings) as node:
        for topic, count in TOPICS.items():
            for i in range(count):
                assert node.call("sendMsg", topic=topic, msg=f"m{i}")["code"] == 200

        def consumed(topic: str, count: int) -> bool:
            for message in node.call("pullMsg", topic=topic, batch=10)["delayMsgList"]:
                assert node.call("ackMsg", topic=topic, msgId=message["msgId"])["code"] == 200
                acked[topic] += 1
            return acked[topic] >= count

        for topic, count in TOPICS.items():
            wait_until(lambda: consumed(topic, count), 20, message=topic)
            assert acked[topic] == count, topic
        # The controls: "live-capped" holds 2 at most (the third send is refused), then is
        # purged; "live-mail", consumed, stays paused to the end.
        assert node.call("setTopicConfig", topic=CAPPED, maxBacklog=2)["code"] == 200
        assert [node.call("sendMsg", topic=CAPPED, msg=f"c{i}")["code"]
                for i in range(3)] == [200, 200, 429]
        assert node.call("purgeTopic", topic=CAPPED) == {"code": 200, "msg": "success",
                                                         "count": 2, "remaining": 0}
        assert node.call("pauseTopic", topic="live-mail")["paused"] is True

        def written() -> bool:
            totals = _snapshot_totals(snapshots)
            return (all(totals[t]["ackMsg"] == n for t, n in TOPICS.items())
                    and (totals[CAPPED]["purged"], totals[CAPPED]["backlogRefused"]) == (2, 1)
                    and totals["live-mail"]["paused"] == 1)
        # Let the node write the intervals holding those counts (1 s intervals + 2 s grace).
        wait_until(written, 20, interval_s=0.5,
                   message=lambda: f"snapshot totals {dict(_snapshot_totals(snapshots))}")

    out = tmp_path / "report"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "delayqueue.cli",
            "report",
            "--input",
            str(snapshots),
            "--output",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and " WARN " not in done.stderr, done.stderr
    assert "report: written to" in done.stderr
    reported: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    paused: dict[str, str] = {}
    with (out / "topic_daily.csv").open() as handle:
        for row in csv.DictReader(handle):
            for key in ("sent", "delivered", "acked", "purged", "backlog_refused"):
                reported[row["topic"]][key] += int(row[key])
            paused[row["topic"]] = row["paused_last"]
    for topic, count in TOPICS.items():
        assert dict(reported[topic]) == {
            "sent": count,
            "delivered": count,
            "acked": acked[topic],
            "purged": 0,
            "backlog_refused": 0,
        }, topic
    assert dict(reported[CAPPED]) == {"sent": 2, "delivered": 0, "acked": 0, "purged": 2,
                                      "backlog_refused": 1}
    assert paused == {"live-orders": "0", "live-mail": "1", CAPPED: "0"}
    assert (out / "report.html").stat().st_size > 10_000
