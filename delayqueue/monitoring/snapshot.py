"""The snapshot writer: one JSON line per topic per completed monitoring interval.

Runs in the one worker holding the "snapshot" lease (the caller's loop handles the lease;
``tick()`` has no threading). Each line follows the snapshot contract of docs/design.md
(schemaVersion 1) and goes to ``<directory>/date=YYYY-MM-DD/<namespace>-<HH>.jsonl`` (UTC
date and hour of the interval's start), appended, never rewritten.

A topic's line is its default subscription's, with the counters of the topic as a whole
(sends, gets, deletes...): no ``subscription`` field, schemaVersion 1, as before subscriptions.
Each named subscription gets a line of its own (``subscription_line``): schemaVersion 3 and a
``subscription`` field, its counters and sizes (its ``listSubscriptions`` entry, read only for
the topics that have named subscriptions: one pipelined HLEN for all topics first).
A reader that predates subscriptions counts those lines as unsupported rather than taking
them for the topic's.

Push delivery: the line of a (topic, subscription) that pushed in the interval carries the
push counters (``push2xx`` ... ``pushRefused``) and the ``pushMillis`` histogram; other lines
do not. Optional fields, added in place: the schema versions stay.

Ordering: the interval's lines are written, flushed and fsynced, THEN the mark
(``keys.snapshot_mark``) advances. A crash (or a lease handover) between the two writes the
interval again: readers must de-duplicate by (namespace, topic, subscription, intervalStart)
— the Spark report does.
"""

from __future__ import annotations

import json
import logging
import os
from datetime import UTC, datetime

import redis

from delayqueue.core.clock import Clock
from delayqueue.core.keys import NamespaceKeys
from delayqueue.core.monitor import Monitor
from delayqueue.core.monitor_hash import (
    COUNTERS,
    DEFAULT_SUBSCRIPTION,
    HISTOGRAMS,
    PUSH_COUNTERS,
    PUSH_HISTOGRAMS,
    empty_topic_stats,
    pushes,
)
from delayqueue.monitoring.cooperative import cooperative
from delayqueue.monitoring.size_cache import SnapshotSizes

logger = logging.getLogger(__name__)

# deadLettered, redriven, groupBlockedSize, purged, backlogRefused, paused, then replaced,
# deduplicated, scheduleSent and scheduleMissed, then the push fields (present only on the line
# of a subscription that pushed in the interval) were added in place: readers ignore new
# fields and read a missing one as 0 (paused: false)
SCHEMA_VERSION = 1
# A named subscription's line: version 1 readers would take it for its topic's line.
SUBSCRIPTION_SCHEMA_VERSION = 3
WAITING_QUEUE_INFO_KEYS = (
    "sizeOf0To1min", "sizeOf1minTo10min", "sizeOf10minTo30min", "sizeOf30minTo1hour",
    "sizeOf1hourTo6hour", "sizeOf6hourTo1day", "sizeOf1dayTo7day", "sizeOf7dayTo30day",
    "sizeOf30dayToInfinite",
)


def snapshot_path(directory: str, namespace: str, interval_start_ms: int) -> str:
    """The file an interval's lines go to, partitioned by the UTC date of its start."""
    moment = datetime.fromtimestamp(interval_start_ms / 1000, tz=UTC)
    return os.path.join(directory, f"date={moment:%Y-%m-%d}", f"{namespace}-{moment:%H}.jsonl")


def snapshot_line(namespace: str, topic: str, interval_start_ms: int, interval_end_ms: int,
                  stats: dict, info: dict) -> dict:
    """One snapshot record, field for field as docs/design.md fixes it."""
    line: dict = {
        "schemaVersion": SCHEMA_VERSION,
        "namespace": namespace,
        "topic": topic,
        "intervalStart": interval_start_ms,
        "intervalEnd": interval_end_ms,
    }
    for name in COUNTERS:
        line[name] = stats[name]
    histograms = HISTOGRAMS
    if pushes(stats):
        # push delivery, on the lines of the subscriptions that pushed in the interval only
        line.update({name: stats[name] for name in PUSH_COUNTERS})
        histograms += PUSH_HISTOGRAMS
    for name in histograms:
        hist = stats[name]
        line[name] = {"count": hist["count"], "sum": hist["sum"], "max": hist["max"],
                      "counts": list(hist["counts"])}
    waiting_info = info.get("waitingQueueInfo") or {}
    line["waitingQueueSize"] = int(info.get("waitingQueueSize", 0))
    line["readyQueueSize"] = int(info.get("readyQueueSize", 0))
    line["ackQueueSize"] = int(info.get("ackQueueSize", 0))
    line["groupBlockedSize"] = int(info.get("groupBlockedSize", 0))
    line["paused"] = bool(info.get("paused", False))
    line["waitingQueueInfo"] = {key: int(waiting_info.get(key, 0))
                                for key in WAITING_QUEUE_INFO_KEYS}
    return line


def subscription_line(namespace: str, topic: str, subscription: str, interval_start_ms: int,
                      interval_end_ms: int, stats: dict, info: dict) -> dict:
    """A named subscription's record: the topic's fields with ``subscription`` after
    ``topic``, its counters and histograms, and the sizes of its ``listSubscriptions`` entry
    (``info``; no ``waitingQueueInfo``: the delay distribution is the topic's)."""
    line = snapshot_line(namespace, topic, interval_start_ms, interval_end_ms, stats, info)
    del line["waitingQueueInfo"]
    head = {"schemaVersion": SUBSCRIPTION_SCHEMA_VERSION, "namespace": namespace,
            "topic": topic, "subscription": subscription}
    return {**head, **{key: value for key, value in line.items() if key not in head}}


class SnapshotWriter:
    """Writes every completed interval not yet written; see the module docstring."""

    def __init__(self, monitor: Monitor, client: redis.Redis, keys: NamespaceKeys, clock: Clock,
                 directory: str, namespace: str, interval_s: int, sizes: SnapshotSizes,
                 grace_ms: int = 2000, max_catch_up: int = 60) -> None:
        """``sizes``: the registered topics and each one's ``topic_infos`` entry (with its
        named subscriptions' ``listSubscriptions`` entries), through its cache: only the
        topics that changed are read again (``SnapshotSizes``: ``refresh``, ``topics``,
        ``infos``)."""
        self.monitor = monitor
        self.client = client
        self.keys = keys
        self.clock = clock
        self.directory = directory
        self.namespace = namespace
        self.interval_ms = interval_s * 1000
        self.sizes = sizes
        self.grace_ms = grace_ms
        self.max_catch_up = max(1, max_catch_up)

    def tick(self) -> int:
        """Write the completed intervals after the mark (at most max_catch_up); lines written.

        An interval [start, end) is complete once now >= end + grace_ms, which gives every
        process time to flush its share.
        """
        if not self.directory:
            return 0
        now = self.clock.now_ms()
        latest = self._floor(now - self.grace_ms) - self.interval_ms
        raw_mark = self.client.get(self.keys.snapshot_mark)
        if raw_mark is None:
            first = latest  # a fresh namespace starts now; no backfill
        else:
            first = int(raw_mark) + self.interval_ms
            oldest_kept = latest - self.monitor.retention_ms + self.interval_ms
            if first < oldest_kept:
                logger.warning("snapshot writer %d interval(s) behind; skipping to %d whose "
                               "counters Redis still holds",
                               (oldest_kept - first) // self.interval_ms, oldest_kept)
                first = oldest_kept
        written = 0
        info_cache: dict[str, dict] = {}
        start = first
        if start <= latest:
            self.sizes.refresh()
        for _ in range(self.max_catch_up):
            if start > latest:
                break
            written += self._write_interval(start, info_cache)
            self.client.set(self.keys.snapshot_mark, start)
            start += self.interval_ms
        return written

    def _floor(self, ms: int) -> int:
        return ms - ms % self.interval_ms

    def _write_interval(self, start: int, info_cache: dict[str, dict]) -> int:
        stats, named_stats = self.monitor.read_interval_subscriptions(start)
        topics = sorted(set(self.sizes.topics()) | set(stats)
                        | {topic for topic, _ in named_stats})
        # Queue sizes are as of writing time: one read per tick, of the topics that changed
        # only (the cache holds the others').
        missing = [topic for topic in topics if topic not in info_cache]
        if missing:
            info_cache.update(zip(missing, self.sizes.infos(missing)))
        end = start + self.interval_ms
        lines = []
        for topic in cooperative(topics):
            info = info_cache[topic]
            records = [snapshot_line(self.namespace, topic, start, end,
                                     stats.get(topic) or empty_topic_stats(), info)]
            named = {entry["subscription"]: entry for entry in info.get("subscriptions") or ()
                     if entry.get("subscription") != DEFAULT_SUBSCRIPTION}
            # a subscription deleted in the interval still reports what it did in it
            for name in sorted(set(named) | {sub for t, sub in named_stats if t == topic}):
                records.append(subscription_line(
                    self.namespace, topic, name, start, end,
                    named_stats.get((topic, name)) or empty_topic_stats(), named.get(name, {})))
            lines += [json.dumps(record, separators=(",", ":")) + "\n" for record in records]
        if not lines:
            return 0
        path = snapshot_path(self.directory, self.namespace, start)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "a", encoding="utf-8") as out:
            out.write("".join(lines))
            out.flush()
            os.fsync(out.fileno())
        logger.debug("snapshot of %d wrote %d line(s) to %s", start, len(lines), path)
        return len(lines)
