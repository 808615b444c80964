"""A live node writes the monitoring snapshot files docs/design.md defines, once per interval."""

from __future__ import annotations

import json
import time
from pathlib import Path

from server_process import ServerProcess


def snapshot_lines(directory: Path) -> list[dict]:
    return [json.loads(line) for path in sorted(directory.glob("date=*/*.jsonl"))
            for line in path.read_text().splitlines()]


def test_live_node_writes_one_snapshot_line_per_topic_and_interval(redis_url, tmp_path):
    settings = {"snapshot-dir": str(tmp_path), "monitor-interval-seconds": 1}
    with ServerProcess(redis_url, workers=2, settings=settings) as node:
        sent = node.call("sendMsg", topic="snap", msg="x")["delayMsg"]
        pulled = node.call("pullMsg", topic="snap")["delayMsgList"]
        assert [m["msgId"] for m in pulled] == [sent["msgId"]]
        node.call("ackMsg", topic="snap", msgId=sent["msgId"])
        deadline = time.monotonic() + 15
        counted = {}
        while time.monotonic() < deadline:
            lines = [l for l in snapshot_lines(tmp_path) if l["topic"] == "snap"]
            counted = {k: sum(l[k] for l in lines) for k in ("sendMsg", "pullMsg", "ackMsg")}
            if counted == {"sendMsg": 1, "pullMsg": 1, "ackMsg": 1}:
                break
            time.sleep(0.3)
        assert counted == {"sendMsg": 1, "pullMsg": 1, "ackMsg": 1}, counted
    lines = snapshot_lines(tmp_path)
    intervals = [(l["topic"], l["intervalStart"]) for l in lines]
    assert len(intervals) == len(set(intervals)), "an interval was written twice"
    line = next(l for l in lines if l["topic"] == "snap" and l["sendMsg"])
    assert line["schemaVersion"] == 1 and line["namespace"] == "default"
    assert line["intervalEnd"] - line["intervalStart"] == 1000
    assert len(line["pullMsgTimeGap"]["counts"]) == 16
    day = time.strftime("%Y-%m-%d", time.gmtime(line["intervalStart"] / 1000))
    hour = time.strftime("%H", time.gmtime(line["intervalStart"] / 1000))
    assert (tmp_path / f"date={day}" / f"default-{hour}.jsonl").exists()
