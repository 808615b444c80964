"""SnapshotWriter: one JSON line per topic per completed interval, in docs/design.md's format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis

from delayqueue.background.runtime import Runtime
from delayqueue.core.clock import ManualClock
from delayqueue.core.errors import BacklogExceeded
from delayqueue.core.keys import NamespaceKeys
from delayqueue.core.monitor import Monitor
from delayqueue.core.requests import SendRequest
from delayqueue.core.scripts import Scripts
from delayqueue.monitoring.snapshot import SnapshotWriter
from delayqueue.settings.config import load_settings

INTERVAL_S = 60
INTERVAL_MS = INTERVAL_S * 1000
START_MS = 1_763_596_800_000  # 2025-11-20T00:00:00Z
GRACE_MS = 2000

ZERO_HIST = {"count": 0, "sum": 0, "max": 0, "counts": [0] * 16}
WAITING_INFO_KEYS = ("sizeOf0To1min", "sizeOf1minTo10min", "sizeOf10minTo30min",
                     "sizeOf30minTo1hour", "sizeOf1hourTo6hour", "sizeOf6hourTo1day",
                     "sizeOf1dayTo7day", "sizeOf7dayTo30day", "sizeOf30dayToInfinite")


def topic_info(topic: str) -> dict:
    waiting = {key: 0 for key in WAITING_INFO_KEYS}
    waiting["sizeOf0To1min"] = 451 if topic == "t1" else 0
    return {"topic": topic, "waitingQueueSize": waiting["sizeOf0To1min"],
            "waitingQueueInfo": waiting, "readyQueueSize": 3 if topic == "t1" else 0,
            "ackQueueSize": 1 if topic == "t1" else 0,
            "groupBlockedSize": 2 if topic == "t1" else 0, "paused": topic == "t1"}


class StaticSizes:
    """The writer's sizes in these tests: the fleet's topics, each with ``topic_infos``'
    figures (topic_info's unless a test sets its own) and, for a topic with named
    subscriptions in Redis, ``subscription_infos``' entries (the writer's reads through
    Redis are test_size_cache.py's)."""

    def __init__(self, fleet: "Fleet") -> None:
        self.fleet = fleet
        self.topic_infos = lambda topics: [topic_info(t) for t in topics]
        self.subscription_infos = None

    def refresh(self) -> None:
        pass

    def topics(self) -> list[str]:
        return list(self.fleet.topics)

    def infos(self, topics: list[str]) -> list[dict]:
        infos = self.topic_infos(topics)
        if self.subscription_infos is not None:
            for info in infos:
                if self.fleet.client.hlen(self.fleet.keys.topic(info["topic"]).subs):
                    info["subscriptions"] = self.subscription_infos(info["topic"])
        return infos


class Fleet:
    """A monitor, a writer, and a clock starting 5 s into the interval at START_MS."""

    def __init__(self, client: redis.Redis, directory: str, topics: list[str]) -> None:
        self.client = client
        self.keys = NamespaceKeys("dq", "default")
        self.clock = ManualClock(START_MS + 5_000)
        self.topics = topics
        self.monitor = Monitor(client, self.keys, self.clock, INTERVAL_S, Scripts(client))
        self.sizes = StaticSizes(self)
        self.writer = SnapshotWriter(
            self.monitor, client, self.keys, self.clock, directory, "default", INTERVAL_S,
            self.sizes, grace_ms=GRACE_MS, max_catch_up=3)

    def mark(self) -> int | None:
        value = self.client.get(self.keys.snapshot_mark)
        return None if value is None else int(value)


def read_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def fleet(redis_client, tmp_path):
    return Fleet(redis_client, str(tmp_path / "snap"), ["t1"])


def test_line_matches_design_format_field_for_field(fleet, tmp_path):
    # No mark yet: writes the previous interval (23:59 the day before) and marks it.
    assert fleet.writer.tick() == 1
    (previous,) = read_lines(tmp_path / "snap" / "date=2025-11-19" / "default-23.jsonl")
    assert previous["intervalStart"] == START_MS - INTERVAL_MS
    fleet.monitor.incr("t1", "sendMsg", 35)
    fleet.monitor.incr("t1", "pullMsg", 12)
    fleet.monitor.incr("t1", "ackMsg", 12)
    fleet.monitor.incr("t1", "nackMsg", 1)
    fleet.monitor.incr("t1", "triggerMsgReady", 24)
    for n, counter in enumerate(("replaced", "deduplicated", "scheduleSent", "scheduleMissed")):
        fleet.monitor.incr("t1", counter, n + 2)
    fleet.monitor.observe("t1", "pullMsgTimeGap", [3, 4, 84])
    fleet.monitor.incr("t9", "getMsg")  # active but not in topics(): still gets a line
    fleet.monitor.flush()
    fleet.clock.advance(INTERVAL_MS - 5_000 + GRACE_MS)

    assert fleet.writer.tick() == 2
    path = tmp_path / "snap" / "date=2025-11-20" / "default-00.jsonl"
    lines = read_lines(path)
    assert [line["intervalStart"] for line in lines] == [START_MS, START_MS]
    expected = {
        "schemaVersion": 1, "namespace": "default", "topic": "t1",
        "intervalStart": START_MS, "intervalEnd": START_MS + INTERVAL_MS,
        "sendMsg": 35, "pullMsg": 12, "ackMsg": 12, "nackMsg": 1, "getMsg": 0, "deleteMsg": 0,
        "triggerMsgReady": 24, "triggerMsgEndLife": 0, "triggerMsgTimeout": 0,
        "deadLettered": 0, "redriven": 0, "purged": 0, "backlogRefused": 0,
        "replaced": 2, "deduplicated": 3, "scheduleSent": 4, "scheduleMissed": 5,
        "pullMsgTimeGap": {"count": 3, "sum": 91, "max": 84,
                           "counts": [0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]},
        "readyQueueTimeGap": ZERO_HIST,
        "waitingQueueSize": 451, "readyQueueSize": 3, "ackQueueSize": 1, "groupBlockedSize": 2,
        "paused": True,
        "waitingQueueInfo": {"sizeOf0To1min": 451, "sizeOf1minTo10min": 0,
                             "sizeOf10minTo30min": 0, "sizeOf30minTo1hour": 0,
                             "sizeOf1hourTo6hour": 0, "sizeOf6hourTo1day": 0,
                             "sizeOf1dayTo7day": 0, "sizeOf7dayTo30day": 0,
                             "sizeOf30dayToInfinite": 0},
    }
    assert lines[0] == expected and list(lines[0]) == list(expected)   # the documented order
    assert lines[1]["topic"] == "t9" and lines[1]["getMsg"] == 1
    assert lines[1]["waitingQueueSize"] == 0 and lines[1]["groupBlockedSize"] == 0
    assert lines[1]["paused"] is False
    # Compact separators, one object per line.
    raw = path.read_text().splitlines()[0]
    assert ", " not in raw and ": " not in raw


def test_nothing_is_written_before_the_grace_passes(fleet, tmp_path):
    fleet.client.set(fleet.keys.snapshot_mark, START_MS - INTERVAL_MS)
    fleet.monitor.incr("t1", "sendMsg")
    fleet.monitor.flush()
    fleet.clock.advance(INTERVAL_MS - 5_000 + GRACE_MS - 1)  # 1 ms short of end + grace
    assert fleet.writer.tick() == 0
    assert not (tmp_path / "snap").exists()
    assert fleet.mark() == START_MS - INTERVAL_MS
    fleet.clock.advance(1)
    assert fleet.writer.tick() == 1
    assert fleet.mark() == START_MS


def test_a_second_tick_writes_nothing_new(fleet, tmp_path):
    fleet.client.set(fleet.keys.snapshot_mark, START_MS - INTERVAL_MS)
    fleet.clock.advance(INTERVAL_MS + GRACE_MS)
    assert fleet.writer.tick() == 1
    assert fleet.writer.tick() == 0
    assert len(read_lines(tmp_path / "snap" / "date=2025-11-20" / "default-00.jsonl")) == 1


def test_first_tick_without_a_mark_does_not_backfill(fleet, tmp_path):
    fleet.clock.advance(10 * INTERVAL_MS)
    assert fleet.writer.tick() == 1
    (line,) = read_lines(tmp_path / "snap" / "date=2025-11-20" / "default-00.jsonl")
    assert line["intervalStart"] == START_MS + 9 * INTERVAL_MS
    assert fleet.mark() == START_MS + 9 * INTERVAL_MS


def test_catch_up_is_bounded_per_tick_and_crosses_hour_files(redis_client, tmp_path):
    fleet = Fleet(redis_client, str(tmp_path / "snap"), ["a", "b"])
    hour_ms = 3_600_000
    # Intervals 23:57 .. 00:01 the next day; the mark says 23:56 was the last written.
    base = START_MS + 23 * hour_ms + 57 * INTERVAL_MS
    fleet.client.set(fleet.keys.snapshot_mark, base - INTERVAL_MS)
    for i in range(5):
        fleet.clock = fleet.monitor.clock = fleet.writer.clock = ManualClock(base + i * INTERVAL_MS)
        fleet.monitor.incr("a", "deleteMsg", i + 1)
    fleet.monitor.flush()
    fleet.writer.clock.advance(INTERVAL_MS + GRACE_MS)  # 00:01 is complete

    assert fleet.writer.tick() == 6  # max_catch_up=3 intervals x 2 topics
    assert fleet.mark() == base + 2 * INTERVAL_MS
    assert fleet.writer.tick() == 4
    assert fleet.mark() == base + 4 * INTERVAL_MS
    assert fleet.writer.tick() == 0

    late = read_lines(tmp_path / "snap" / "date=2025-11-20" / "default-23.jsonl")
    early = read_lines(tmp_path / "snap" / "date=2025-11-21" / "default-00.jsonl")
    assert [(line["topic"], line["deleteMsg"]) for line in late] == [
        ("a", 1), ("b", 0), ("a", 2), ("b", 0), ("a", 3), ("b", 0)]
    assert [(line["topic"], line["deleteMsg"]) for line in early] == [
        ("a", 4), ("b", 0), ("a", 5), ("b", 0)]


def test_a_mark_older_than_redis_retention_skips_ahead(fleet):
    fleet.client.set(fleet.keys.snapshot_mark, START_MS - 100 * 3_600_000)
    fleet.clock.advance(INTERVAL_MS + GRACE_MS)
    fleet.writer.max_catch_up = 5000
    written = fleet.writer.tick()
    assert written == fleet.monitor.retention_ms // INTERVAL_MS
    assert fleet.mark() == START_MS


def test_empty_directory_disables_the_writer(redis_client):
    fleet = Fleet(redis_client, "", ["t1"])
    fleet.clock.advance(5 * INTERVAL_MS)
    assert fleet.writer.tick() == 0
    assert fleet.mark() is None


def test_a_line_counts_messages_behind_their_group_head_as_the_topic_info_does(
        redis_url, tmp_path):
    """The server's own writer and sizes: a due message behind its group's head is in
    groupBlockedSize, one not yet due is waiting (and in its delay bucket)."""
    clock = ManualClock(START_MS + 5_000)
    settings = load_settings(overrides={"redis_url": redis_url, "snapshot_dir": str(tmp_path),
                                        "monitor_interval_seconds": INTERVAL_S})
    rt = Runtime(settings, client=redis.Redis.from_url(redis_url, decode_responses=True),
                 clock=clock)
    rt.queue.send("t", "b", msg_id="g1", group_id="g")
    rt.queue.send("t", "b", msg_id="g2", group_id="g")
    rt.queue.send("t", "b", msg_id="g3", group_id="g", delay_ms=1_800_000)
    assert [m.msg_id for m in rt.queue.pull("t", count=10).messages] == ["g1"]
    rt.monitor.flush()
    clock.advance(INTERVAL_MS - 5_000 + GRACE_MS)
    assert rt.snapshots.tick() == 1
    (line,) = read_lines(tmp_path / "date=2025-11-20" / "default-00.jsonl")
    assert line["intervalStart"] == START_MS and line["topic"] == "t"
    assert (line["waitingQueueSize"], line["readyQueueSize"], line["ackQueueSize"],
            line["groupBlockedSize"]) == (1, 0, 1, 1)
    assert line["waitingQueueInfo"]["sizeOf10minTo30min"] == 1    # g3: due in 29 min 3 s
    assert line["sendMsg"] == 3 and line["pullMsg"] == 1


def test_a_line_carries_the_topic_controls_purged_backlog_refusals_and_paused(
        redis_url, tmp_path):
    """The server's own writer: a topic paused when the line is written says so, and the
    interval's purged messages and sends refused for the backlog are counted in it."""
    clock = ManualClock(START_MS + 5_000)
    settings = load_settings(overrides={"redis_url": redis_url, "snapshot_dir": str(tmp_path),
                                        "monitor_interval_seconds": INTERVAL_S})
    rt = Runtime(settings, client=redis.Redis.from_url(redis_url, decode_responses=True),
                 clock=clock)
    rt.admin.set_config("capped", {"maxBacklog": "1"})
    rt.queue.send("capped", "b", msg_id="a")
    assert isinstance(rt.queue.send_batch("capped", [SendRequest("b")])[0], BacklogExceeded)
    assert rt.controls.purge("capped").count == 1
    rt.queue.send("stopped", "b", msg_id="s")
    rt.controls.pause("stopped")
    rt.monitor.flush()
    clock.advance(INTERVAL_MS - 5_000 + GRACE_MS)
    assert rt.snapshots.tick() == 2
    lines = {line["topic"]: line
             for line in read_lines(tmp_path / "date=2025-11-20" / "default-00.jsonl")}
    assert [(t, lines[t]["purged"], lines[t]["backlogRefused"], lines[t]["paused"],
             lines[t]["readyQueueSize"]) for t in sorted(lines)] == [
        ("capped", 1, 1, False, 0), ("stopped", 0, 0, True, 1)]
