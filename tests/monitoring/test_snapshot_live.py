"""A live node writes the monitoring snapshot files docs/design.md defines, once per interval."""

from __future__ import annotations

import json
import time
from pathlib import Path

from support import wait_until
from support.node import ServerProcess


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

        def counted() -> dict:
            lines = [ln for ln in snapshot_lines(tmp_path) if ln["topic"] == "snap"]
            return {k: sum(ln[k] for ln in lines) for k in ("sendMsg", "pullMsg", "ackMsg")}

        wait_until(lambda: counted() == {"sendMsg": 1, "pullMsg": 1, "ackMsg": 1}, 15,
                   interval_s=0.3, message=lambda: f"snapshot counts {counted()}")
    lines = snapshot_lines(tmp_path)
    intervals = [(ln["topic"], ln["intervalStart"]) for ln in lines]
    assert len(intervals) == len(set(intervals)), "an interval was written twice"
    line = next(ln for ln in lines if ln["topic"] == "snap" and ln["sendMsg"])
    assert line["schemaVersion"] == 1 and line["namespace"] == "default"
    assert line["intervalEnd"] - line["intervalStart"] == 1000
    assert len(line["pullMsgTimeGap"]["counts"]) == 16
    day = time.strftime("%Y-%m-%d", time.gmtime(line["intervalStart"] / 1000))
    hour = time.strftime("%H", time.gmtime(line["intervalStart"] / 1000))
    assert (tmp_path / f"date={day}" / f"default-{hour}.jsonl").exists()
