"""End to end from a live node: a real server under a short, bounded load writes snapshots
every second; ``delayqueue report`` (a fresh process, as an operator runs it) reads them, and
its totals equal the sends, deliveries and acks this test made, and the topic controls it
used (a send refused at the backlog quota, a purge, a pause) reach the report too. Two push
subscriptions POST to a local receiver, one answered 200 and one 500: /metrics, the snapshot
lines and the report count each POST the receiver answered, by outcome."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
import threading
from collections import Counter, defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from support import wait_until
from support.node import ServerProcess

pytestmark = [pytest.mark.slow, pytest.mark.spark]

TOPICS = {"live-orders": 30, "live-mail": 12}  # messages sent to each
CAPPED = "live-capped"
PUSHED = "live-push"
PUSH_SENDS = 6
# subscription -> (the receiver's status for it, the outcome counted)
HOOKS = {"hook-ok": (200, "2xx"), "hook-fail": (500, "5xx")}


class Receiver(ThreadingHTTPServer):
    """A push endpoint on 127.0.0.1: POST /<subscription> answered with its HOOKS status;
    ``posts`` counts what it answered per subscription."""

    daemon_threads = True

    def __init__(self) -> None:
        self.posts: Counter[str] = Counter()
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 -- http.server's name
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                name = self.path.strip("/")
                with receiver.lock:
                    receiver.posts[name] += 1
                self.send_response(HOOKS[name][0])
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/{name}"


def _push_metrics(url: str) -> dict[tuple[str, str], dict[str, float]]:
    """(subscription, outcome or "count") -> value of live-push's push series on /metrics."""
    found: dict[tuple[str, str], float] = {}
    text = requests.get(f"{url}/metrics", timeout=15).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.labels.get("topic") != PUSHED:
                continue
            if sample.name == "delayqueue_push_total":
                found[(sample.labels["subscription"], sample.labels["outcome"])] = sample.value
            elif sample.name == "delayqueue_push_duration_seconds_count":
                found[(sample.labels["subscription"], "count")] = sample.value
    return found


def _line_key(line: dict) -> str:
    """A line's topic, or "<topic>/<subscription>" for a named subscription's."""
    return line["topic"] + (f"/{line['subscription']}" if "subscription" in line else "")


def _snapshot_totals(directory: Path) -> dict[str, dict[str, int]]:
    totals: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    seen = set()
    for path in sorted(directory.glob("date=*/*.jsonl")):
        for text in path.read_text().splitlines():
            line = json.loads(text)
            key = _line_key(line)
            if (key, line["intervalStart"]) in seen:
                continue
            seen.add((key, line["intervalStart"]))
            for name in ("sendMsg", "pullMsg", "ackMsg", "purged", "backlogRefused", "push2xx",
                         "push5xx", "pushTimeout", "pushConnectionError"):
                totals[key][name] += line.get(name, 0)
            totals[key]["pushMillisCount"] += line.get("pushMillis", {}).get("count", 0)
            totals[key]["paused"] = int(line["paused"])  # the latest line's, sorted
    return totals


def test_report_totals_equal_what_a_live_node_was_sent(redis_url, tmp_path):
    snapshots = tmp_path / "snapshots"
    settings = {"snapshot-dir": str(snapshots), "monitor-interval-seconds": 1,
                "push-allowed-networks": "127.0.0.0/8"}
    acked: dict[str, int] = defaultdict(int)
    receiver = Receiver()
    with ServerProcess(redis_url, workers=2, settings=settings) as node:
        # Push: each message once to each hook (maxRetry 0: a 500 ends it, no retry).
        for name in HOOKS:
            assert node.call("createSubscription", topic=PUSHED, subscription=name,
                             pushUrl=receiver.url(name), maxRetry=0)["code"] == 200
        for i in range(PUSH_SENDS):
            assert node.call("sendMsg", topic=PUSHED, msg=f"p{i}", maxRetry=0)["code"] == 200
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

        wait_until(lambda: all(receiver.posts[name] >= PUSH_SENDS for name in HOOKS), 30,
                   message=lambda: f"pushes received {dict(receiver.posts)}")
        expected = {(name, outcome): PUSH_SENDS for name, (_, outcome) in HOOKS.items()}
        expected |= {(name, "count"): PUSH_SENDS for name in HOOKS}

        def scraped() -> dict:
            return {key: value for key, value in _push_metrics(node.url).items() if value}
        wait_until(lambda: scraped() == expected, 20, interval_s=0.5,
                   message=lambda: f"/metrics push series {scraped()}")
        families = _push_metrics(node.url)
        assert {outcome for _, outcome in families} == {
            "2xx", "3xx", "4xx", "5xx", "timeout", "connection", "refused", "count"}

        def written() -> bool:
            totals = _snapshot_totals(snapshots)
            pushed = all(totals[f"{PUSHED}/{name}"][counter] == PUSH_SENDS
                         for name, (_, outcome) in HOOKS.items()
                         for counter in (f"push{outcome}", "pushMillisCount"))
            return (pushed and all(totals[t]["ackMsg"] == n for t, n in TOPICS.items())
                    and (totals[CAPPED]["purged"], totals[CAPPED]["backlogRefused"]) == (2, 1)
                    and totals["live-mail"]["paused"] == 1)
        # Let the node write the intervals holding those counts (1 s intervals + 2 s grace).
        wait_until(written, 20, interval_s=0.5,
                   message=lambda: f"snapshot totals {dict(_snapshot_totals(snapshots))}")

    # No POST twice (answered, acked or ended), nothing lost: the receiver's count is the truth.
    receiver.shutdown()
    assert receiver.posts == {name: PUSH_SENDS for name in HOOKS}
    totals = _snapshot_totals(snapshots)
    assert {name: {k: v for k, v in totals[f"{PUSHED}/{name}"].items() if k.startswith("push")}
            for name in HOOKS} == {
        "hook-ok": {"push2xx": PUSH_SENDS, "push5xx": 0, "pushTimeout": 0,
                    "pushConnectionError": 0, "pushMillisCount": PUSH_SENDS},
        "hook-fail": {"push2xx": 0, "push5xx": PUSH_SENDS, "pushTimeout": 0,
                      "pushConnectionError": 0, "pushMillisCount": PUSH_SENDS}}

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
    push_rows: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    with (out / "topic_daily.csv").open() as handle:
        for row in csv.DictReader(handle):
            for key in ("sent", "delivered", "acked", "purged", "backlog_refused"):
                reported[row["topic"]][key] += int(row[key])
            if row["subscription"] == "default":
                paused[row["topic"]] = row["paused_last"]
            if row["topic"] == PUSHED and row["subscription"] in HOOKS:
                for key in ("pushes", "push_2xx", "push_5xx", "push_timeout"):
                    push_rows[row["subscription"]][key] += int(row[key])
    assert {name: dict(counts) for name, counts in push_rows.items()} == {
        "hook-ok": {"pushes": PUSH_SENDS, "push_2xx": PUSH_SENDS, "push_5xx": 0,
                    "push_timeout": 0},
        "hook-fail": {"pushes": PUSH_SENDS, "push_2xx": 0, "push_5xx": PUSH_SENDS,
                      "push_timeout": 0}}
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
    assert paused == {"live-orders": "0", "live-mail": "1", CAPPED: "0", PUSHED: "0"}
    page = (out / "report.html").read_text()
    assert len(page) > 10_000
    table = re.search(r'<table id="push-delivery">(.*?)</table>', page, re.DOTALL).group(1)
    rows = {re.search(r'data-col="subscription" data-value="([^"]*)"', row).group(1):
            re.search(r'data-col="push_success_ratio" data-value="([^"]*)"', row).group(1)
            for row in re.findall(r"<tr>(.*?)</tr>", table) if "<td" in row}
    assert rows == {"hook-ok": "1.0", "hook-fail": "0.0"}
