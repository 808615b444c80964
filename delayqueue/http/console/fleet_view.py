"""What the console shows: topics by backlog, with recent rates and lag; one topic's last hour.

Reads only, and only what a page needs. The fleet page sorts every registered topic by
backlog (``backlog_of``: waiting + ready + consuming + blocked behind a group's head, the sum
of ``DelayQueue.queue_sizes``: three ZCARDs and two ZCOUNTs per topic, one pipelined round
trip), then reads the sizes (``DelayQueue.topic_infos``) and the monitor counters of the page's
topics alone: HMGET of their fields in the last ``RECENT_INTERVALS`` complete intervals'
hashes. So a page costs the same with 10 topics or 10,000, apart from the sizes.

Backlog history is not stored: the topic page walks back from the current backlog through
each interval's counters (sends in, acks / deletes / ends out, redrives in). It is an estimate,
labelled as one; the other series are the fleet's exact counters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from delayqueue.core.histogram import BOUNDS_MS, percentile
from delayqueue.core.monitor import FIELD_SEPARATOR, Monitor
from delayqueue.core.queue import DelayQueue

RECENT_INTERVALS = 5          # the fleet page's rates and lag: the last five complete intervals
HOUR_MS = 3_600_000
PAGE_SIZES = (25, 50, 100, 200)
COUNTER_FIELDS = ("sendMsg", "pullMsg", "ackMsg", "nackMsg", "deleteMsg", "triggerMsgEndLife",
                  "redriven")
GAP = "pullMsgTimeGap"
GAP_FIELDS = (f"{GAP}:count", f"{GAP}:max", *(f"{GAP}:b{i}" for i in range(len(BOUNDS_MS))))
FIELDS = (*COUNTER_FIELDS, *GAP_FIELDS)


@dataclass(frozen=True)
class IntervalStats:
    """One topic's counters and pull-lag histogram over one or more intervals."""

    counters: dict[str, int]
    gap_counts: list[int]
    gap_max: float

    @property
    def lag_p50(self) -> float:
        return percentile(self.gap_counts, 0.5, self.gap_max)

    @property
    def lag_p99(self) -> float:
        return percentile(self.gap_counts, 0.99, self.gap_max)

    @property
    def deliveries(self) -> int:
        return sum(self.gap_counts)


def _int(value: Any) -> int:
    return int(float(value)) if value is not None else 0


def parse_fields(values: list[Any]) -> IntervalStats:
    """HMGET's answer for ``FIELDS`` of one topic -> its stats."""
    named = dict(zip(FIELDS, values))
    counters = {name: _int(named[name]) for name in COUNTER_FIELDS}
    counts = [_int(named[f"{GAP}:b{i}"]) for i in range(len(BOUNDS_MS))]
    gap_max = float(named[f"{GAP}:max"]) if named[f"{GAP}:max"] is not None else 0.0
    return IntervalStats(counters, counts, gap_max)


def merge(stats: list[IntervalStats]) -> IntervalStats:
    counters = {name: sum(s.counters[name] for s in stats) for name in COUNTER_FIELDS}
    counts = [sum(column) for column in zip(*(s.gap_counts for s in stats))] or \
        [0] * len(BOUNDS_MS)
    return IntervalStats(counters, counts, max((s.gap_max for s in stats), default=0.0))


def backlog_of(info: dict[str, Any]) -> int:
    """A topic's live messages from getTopicInfo's data: waiting, ready, consuming and due ones
    blocked behind their group's head (the sum of its ``queue_sizes``, which the fleet page
    sorts by; dead letters are apart)."""
    return (info["waitingQueueSize"] + info["readyQueueSize"] + info["ackQueueSize"]
            + info["groupBlockedSize"])


@dataclass(frozen=True)
class TopicRow:
    info: dict[str, Any]            # getTopicInfo's data
    recent: IntervalStats           # the last RECENT_INTERVALS complete intervals, summed
    seconds: float                  # how long those intervals last

    @property
    def topic(self) -> str:
        return self.info["topic"]

    @property
    def backlog(self) -> int:
        return backlog_of(self.info)

    @property
    def send_rate(self) -> float:
        return self.recent.counters["sendMsg"] / self.seconds

    @property
    def delivery_rate(self) -> float:
        return self.recent.counters["pullMsg"] / self.seconds


@dataclass(frozen=True)
class FleetPage:
    rows: list[TopicRow]
    total_topics: int
    page: int
    pages: int
    size: int
    interval_s: int


@dataclass(frozen=True)
class TopicHistory:
    starts: list[int]               # interval starts, oldest first (the current one last)
    stats: list[IntervalStats]
    backlog: list[int]              # estimated backlog at the end of each interval


class FleetView:
    def __init__(self, queue: DelayQueue, monitor: Monitor) -> None:
        self.queue = queue
        self.monitor = monitor

    def _stats(self, topics: list[str], starts: list[int]) -> dict[tuple[str, int], IntervalStats]:
        """(topic, interval start) -> stats, one pipelined round trip."""
        pipe = self.monitor.client.pipeline(transaction=False)
        pairs = [(topic, start) for topic in topics for start in starts]
        for topic, start in pairs:
            pipe.hmget(self.monitor.keys.monitor(start),
                       [f"{topic}{FIELD_SEPARATOR}{name}" for name in FIELDS])
        return {pair: parse_fields(values) for pair, values in zip(pairs, pipe.execute())}

    def fleet_page(self, page: int = 1, size: int = 50) -> FleetPage:
        """A page of topics, largest backlog first (then by name)."""
        sizes = self.queue.queue_sizes(health=False)
        order = sorted(sizes, key=lambda topic: (-sizes[topic].backlog, topic))
        pages = max(1, -(-len(order) // size))
        page = min(max(1, page), pages)
        topics = order[(page - 1) * size:page * size]
        interval_ms = self.monitor.interval_ms
        last = self.monitor.interval_start(self.queue.clock.now_ms()) - interval_ms
        starts = [last - i * interval_ms for i in range(RECENT_INTERVALS)]
        stats = self._stats(topics, starts) if topics else {}
        infos = self.queue.topic_infos(topics) if topics else []
        seconds = RECENT_INTERVALS * interval_ms / 1000
        rows = [TopicRow(info, merge([stats[(info["topic"], s)] for s in starts]), seconds)
                for info in infos]
        return FleetPage(rows, len(order), page, pages, size, interval_ms // 1000)

    def topic_history(self, topic: str, backlog_now: int) -> TopicHistory:
        """The last hour of a topic, interval by interval, the current interval included."""
        interval_ms = self.monitor.interval_ms
        current = self.monitor.interval_start(self.queue.clock.now_ms())
        count = max(2, min(HOUR_MS // interval_ms, 720))
        starts = [current - i * interval_ms for i in range(count - 1, -1, -1)]
        by_start = self._stats([topic], starts)
        stats = [by_start[(topic, start)] for start in starts]
        backlog = [0] * len(stats)
        level = backlog_now
        for i in range(len(stats) - 1, -1, -1):
            backlog[i] = max(0, level)
            c = stats[i].counters
            level -= c["sendMsg"] + c["redriven"] - c["ackMsg"] - c["deleteMsg"] \
                - c["triggerMsgEndLife"]
        return TopicHistory(starts, stats, backlog)
