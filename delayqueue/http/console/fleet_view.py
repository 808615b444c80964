"""What the console shows: topics by backlog (or any column), with recent rates and lag; one
topic's history over a span.

Reads only, and only what a page needs. The fleet page filters the registered topics by
name (``q``: a substring), sorts them (``sort``, ``order``) and pages them. Sorting by a size
reads the sizes of every matching topic (``DelayQueue.queue_sizes``: three ZCARDs and two
ZCOUNTs per topic, one pipelined round trip; ``dead`` asks for its health reads too, the
dead-letter ZCARD in the same round trip), by a rate or a lag the recent intervals' monitor
hashes whole (one HGETALL each).
Then it reads the sizes (``DelayQueue.topic_infos``) and, for the default sorts, the monitor
counters of the page's topics alone: HMGET of their fields in the ``RECENT_INTERVALS`` last
complete intervals' hashes and the current one's. So a page costs about the same with 10
topics or 10,000, apart from the sizes.

Rates include the current interval so far (``Window``): a burst shows within a flush (about a
second), not an interval later.

Backlog history is not stored: the topic page walks back from the current backlog through
each interval's counters (``arrivals``: sends but replaces, redrives and schedule occurrences
in; ``departures``: acks, deletes, ends and purges out). It is an estimate, labelled as one;
the other series are the fleet's exact counters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from delayqueue.core.histogram import BOUNDS_MS, percentile
from delayqueue.core.monitor import Monitor
from delayqueue.core.monitor_hash import FIELD_SEPARATOR, parse_monitor_hash
from delayqueue.core.queue import DelayQueue
from delayqueue.core.requests import TopicSizes

RECENT_INTERVALS = 5          # the fleet page's rates and lag: the last five complete intervals
PAGE_SIZES = (25, 50, 100, 200)
# The topic page's chart spans (its ``span`` parameter) in ms; the first hour is the default.
SPANS = {"5m": 300_000, "1h": 3_600_000, "6h": 21_600_000, "24h": 86_400_000}
SPAN_LABELS = {"5m": "5 minutes", "1h": "hour", "6h": "6 hours", "24h": "24 hours"}
DEFAULT_SPAN = "1h"
MAX_POINTS = 240              # points a chart draws: longer spans sum intervals into one
MAX_INTERVALS = 1440          # intervals a history reads at most (24 h at 60 s intervals)
COUNTER_FIELDS = ("sendMsg", "pullMsg", "ackMsg", "nackMsg", "deleteMsg", "triggerMsgEndLife",
                  "redriven", "triggerMsgTimeout", "deadLettered", "purged", "replaced",
                  "deduplicated", "scheduleSent", "scheduleMissed")
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


def arrivals(c: dict[str, int]) -> int:
    """Messages an interval's counters add to the backlog: sends (a replace takes its
    namesake's place: counted in sendMsg, it adds none), redriven dead letters, and the
    occurrences recurring schedules wrote (not in sendMsg)."""
    return c["sendMsg"] - c["replaced"] + c["redriven"] + c["scheduleSent"]


def departures(c: dict[str, int]) -> int:
    """Messages an interval's counters take from the backlog: acked, deleted, ended (expired,
    out of retries: dead letters are among them) and purged."""
    return c["ackMsg"] + c["deleteMsg"] + c["triggerMsgEndLife"] + c["purged"]


EMPTY = IntervalStats(dict.fromkeys(COUNTER_FIELDS, 0), [0] * len(BOUNDS_MS), 0.0)


def stats_of(entry: dict[str, Any]) -> IntervalStats:
    """One topic's entry of ``parse_monitor_hash`` -> its stats."""
    gap = entry[GAP]
    return IntervalStats({name: int(entry[name]) for name in COUNTER_FIELDS},
                         [int(c) for c in gap["counts"]], float(gap["max"]))


@dataclass(frozen=True)
class Window:
    """What the fleet page's rates and lag cover: the last ``RECENT_INTERVALS`` complete
    intervals and the current one so far (its samples flushed by now: all but the last
    second's)."""

    starts: list[int]          # the current interval's start first, then the complete ones
    seconds: float             # the complete intervals plus the current one's elapsed part
    current_s: float           # how far into the current interval

    @classmethod
    def at(cls, monitor: Monitor, now_ms: int) -> Window:
        current = monitor.interval_start(now_ms)
        starts = [current - i * monitor.interval_ms for i in range(RECENT_INTERVALS + 1)]
        current_s = (now_ms - current) / 1000
        return cls(starts, RECENT_INTERVALS * monitor.interval_ms / 1000 + current_s, current_s)


@dataclass(frozen=True)
class TopicRow:
    info: dict[str, Any]            # getTopicInfo's data
    recent: IntervalStats           # the window's intervals, summed
    seconds: float                  # how long the window lasts

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


# The fleet page's ``sort`` values: a column, and what it sorts by.
SIZE_SORTS = {
    "backlog": lambda s: s.backlog, "waiting": lambda s: s.waiting,
    "ready": lambda s: s.ready, "consuming": lambda s: s.consuming,
    "blocked": lambda s: s.group_blocked, "dead": lambda s: s.dead,
}
RATE_SORTS = {
    "sendRate": lambda r, seconds: r.counters["sendMsg"] / seconds,
    "deliveryRate": lambda r, seconds: r.counters["pullMsg"] / seconds,
    "lagP50": lambda r, seconds: r.lag_p50, "lagP99": lambda r, seconds: r.lag_p99,
}
SORTS = ("topic", *SIZE_SORTS, *RATE_SORTS)
DEFAULT_SORT = "backlog"
ORDERS = ("asc", "desc")


def default_order(sort: str) -> str:
    """Names A to Z; every number largest first."""
    return "asc" if sort == "topic" else "desc"


@dataclass(frozen=True)
class FleetPage:
    rows: list[TopicRow]
    total_topics: int               # every registered topic
    matching: int                   # those whose name holds ``q``
    page: int
    pages: int
    size: int
    interval_s: int
    sort: str
    order: str
    q: str
    window: Window


@dataclass(frozen=True)
class TopicHistory:
    starts: list[int]               # point starts, oldest first (the current interval's last)
    stats: list[IntervalStats]      # each point's intervals, summed
    backlog: list[int]              # estimated backlog at the end of each point
    seconds: list[float]            # how long each point lasts (the last: so far)
    point_ms: int                   # intervals summed into a point, in ms
    span_ms: int                    # what the points cover (the span asked, or what Redis keeps)


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

    def _recent_all(self, starts: list[int]) -> dict[str, IntervalStats]:
        """Every topic's stats over ``starts``, from the whole hashes (one HGETALL each)."""
        pipe = self.monitor.client.pipeline(transaction=False)
        for start in starts:
            pipe.hgetall(self.monitor.keys.monitor(start))
        per_topic: dict[str, list[IntervalStats]] = {}
        for raw in pipe.execute():
            topics, _ = parse_monitor_hash(raw)
            for topic, entry in topics.items():
                per_topic.setdefault(topic, []).append(stats_of(entry))
        return {topic: merge(stats) for topic, stats in per_topic.items()}

    def _ordered(self, sizes: dict[str, TopicSizes], names: list[str], sort: str, order: str,
                 window: Window) -> tuple[list[str], dict[str, IntervalStats] | None]:
        """``names`` in the page's order (ties by name), and every topic's recent stats when
        the sort needed them."""
        names = sorted(names)
        descending = order == "desc"
        if sort == "topic":
            return (names[::-1] if descending else names), None
        recent = None
        if sort in SIZE_SORTS:
            size_of = SIZE_SORTS[sort]
            values: dict[str, float] = {t: size_of(sizes[t]) for t in names}
        else:
            recent = self._recent_all(window.starts)
            rate_of = RATE_SORTS[sort]
            values = {t: rate_of(recent.get(t, EMPTY), window.seconds) for t in names}
        # Ties stay by name either way (sorted is stable, reverse too).
        return sorted(names, key=values.__getitem__, reverse=descending), recent

    def fleet_page(self, page: int = 1, size: int = 50, sort: str = DEFAULT_SORT,
                   order: str | None = None, q: str = "") -> FleetPage:
        """A page of the topics whose name holds ``q``, sorted by ``sort`` (one of SORTS)."""
        order = order or default_order(sort)
        # Only the dead sort needs the health reads (dead letters, and the ready head's age).
        sizes = self.queue.queue_sizes(health=sort == "dead")
        names = [t for t in sizes if q in t] if q else list(sizes)
        window = Window.at(self.monitor, self.queue.clock.now_ms())
        ordered, recent = self._ordered(sizes, names, sort, order, window)
        pages = max(1, -(-len(ordered) // size))
        page = min(max(1, page), pages)
        topics = ordered[(page - 1) * size:page * size]
        if recent is None:
            stats = self._stats(topics, window.starts) if topics else {}
            recent = {t: merge([stats[(t, s)] for s in window.starts]) for t in topics}
        infos = self.queue.topic_infos(topics) if topics else []
        rows = [TopicRow(info, recent.get(info["topic"], EMPTY), window.seconds)
                for info in infos]
        return FleetPage(rows, len(sizes), len(ordered), page, pages, size,
                         self.monitor.interval_ms // 1000, sort, order, q, window)

    def topic_history(self, topic: str, backlog_now: int,
                      span_ms: int = SPANS[DEFAULT_SPAN]) -> TopicHistory:
        """The topic over ``span_ms`` up to now, the current interval included: at most
        MAX_POINTS points, each summing as many intervals as it takes. Reads at most
        MAX_INTERVALS intervals and none older than Redis keeps (``Monitor.retention_ms``)."""
        interval_ms = self.monitor.interval_ms
        now = self.queue.clock.now_ms()
        current = self.monitor.interval_start(now)
        wanted = -(-span_ms // interval_ms)
        count = max(2, min(wanted, MAX_INTERVALS, self.monitor.retention_ms // interval_ms))
        per = -(-count // MAX_POINTS)
        points = -(-count // per)
        count = points * per
        starts = [current - i * interval_ms for i in range(count - 1, -1, -1)]
        by_start = self._stats([topic], starts)
        stats = [by_start[(topic, start)] for start in starts]
        backlog = [0] * count
        level = backlog_now
        for i in range(count - 1, -1, -1):
            backlog[i] = max(0, level)
            c = stats[i].counters
            level -= arrivals(c) - departures(c)
        groups = [range(p * per, (p + 1) * per) for p in range(points)]
        seconds = [per * interval_ms / 1000] * points
        seconds[-1] = ((per - 1) * interval_ms + max(now - current, 1)) / 1000
        return TopicHistory([starts[g[0]] for g in groups],
                            [merge([stats[i] for i in g]) for g in groups],
                            [backlog[g[-1]] for g in groups], seconds, per * interval_ms,
                            count * interval_ms)
