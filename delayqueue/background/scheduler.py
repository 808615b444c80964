"""The scheduler: promotion, ack timeouts and expiry of every due topic, and registry upkeep.

A topic's due time (the namespace due index, ``keys.due_of(topic)``: one key on one Redis,
split into ``keys.shards`` on a Cluster, core/bookkeeping.py) is the earliest moment it needs
the scheduler: the head of its waiting queue, its ack deadlines or its expiry index, or the
end of an ended message's retention (plus a slack, so purges come in bulk). A tick
visits only topics whose due time has come, so idle topics cost nothing per tick, and
returns how long to sleep until the next one. The ticks have no threads in them: ``Loop``
(loop.py) drives them in each worker, and tests call them directly.

Sends and pulls lower a topic's due time themselves (``DelayQueue.bookkeep``, ``ZADD LT``).
A tick claims the topics it visits (``lua/due_claim.lua``: their scores become
``CLAIMED_MS``, beyond any real time) and writes back each one's next due time with a
compare-and-set against the claim (``lua/due_set.lua``): a due time a request lowered
meanwhile is below the claim, so it is kept, never overwritten by the visit's answer
computed before it; and a claimed topic is due for no other tick.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

import redis

from delayqueue.core.bookkeeping import (
    RecycleCursor,
    claimed,
    registered_topics,
    stale_page,
    used_since,
)
from delayqueue.core.clock import Clock
from delayqueue.core.keys import NamespaceKeys
from delayqueue.core.monitor import Monitor
from delayqueue.core.outcome import Outcome
from delayqueue.core.queue import SCRIPT_LIMIT
from delayqueue.core.scripts import Scripts
from delayqueue.core.subscriptions import finish_drops

from .lease import once_per

logger = logging.getLogger(__name__)

TOPICS_PER_TICK = 200         # most due topics one scheduler tick visits
ROUNDS_PER_TOPIC = 10         # most script rounds for one busy topic per tick
REGISTRY_CHUNK = 500          # topics per pipelined round trip in the registry sweeps
# A Cluster's repair sweep looks back this far before the last sweep's start: the registry
# touch's rate limit (REGISTRY_TOUCH_S) and a second of slack.
REPAIR_MARGIN_MS = 2000
CLAIMED_MS = 2**53 - 1        # a claimed topic's due score: after every real time, an exact double


class Scheduler:
    """Moves messages whose time has come; one instance per process, leased by ``Loop``.

    Args:
        end_life_ms: retention of ended messages (``end-life-msg-expire-millis``).
        defaults: the server's topic settings (``topic_config.server_defaults``).
        max_sleep_ms: the longest sleep between ticks (``msg-schedule-millis``): a safety scan.
        min_gap_ms: the shortest time between tick starts (``schedule-min-gap-millis``).
        defer_ms: how much later to visit a topic whose consumers promote it
            (``schedule-defer-millis``; see ``visit``).
        repair_interval_ms, recycle_interval_ms: how often the fleet runs each registry sweep.
        topic_inactive_ms: a topic unused this long, with empty queues, is recycled.
        on_recycle: told each recycled topic (the queue forgets it registered it).
    """

    def __init__(self, client: redis.Redis, scripts: Scripts, clock: Clock, monitor: Monitor,
                 keys: NamespaceKeys, *, end_life_ms: int, max_sleep_ms: int,
                 defaults: list[str],
                 min_gap_ms: int = 0, defer_ms: int = 0, repair_interval_ms: int = 60_000,
                 recycle_interval_ms: int = 60_000, topic_inactive_ms: int = 1_800_000,
                 on_recycle: Callable[[str], None] = lambda topic: None) -> None:
        self.client = client
        self.scripts = scripts
        self.clock = clock
        self.monitor = monitor
        self.keys = keys
        self.end_life_ms = end_life_ms
        self.defaults = defaults
        self.max_sleep_ms = max_sleep_ms
        self.min_gap_ms = min_gap_ms
        self.defer_ms = defer_ms
        self.repair_interval_ms = repair_interval_ms
        self.recycle_interval_ms = recycle_interval_ms
        self.topic_inactive_ms = topic_inactive_ms
        self.on_recycle = on_recycle

    # -- the schedule loop ------------------------------------------------------------------
    def tick(self) -> float:
        """Visit every due topic; returns the seconds to sleep before the next tick."""
        started = time.monotonic()
        next_due = self.run_due()
        delay = self.max_sleep_ms / 1000.0
        if next_due is not None:
            # Wake 1 ms after the due time: the clock is a lower bound, never early.
            delay = min(delay, self.clock.seconds_until(next_due + 1))
        # Under load every millisecond has a due message somewhere: gather them, one tick per
        # gap, instead of a tick (three round trips) per due millisecond.
        return max(delay, self.min_gap_ms / 1000.0 - (time.monotonic() - started))

    def run_due(self) -> int | None:
        """Visit every topic whose due time has come; returns the next due time, if any.

        One round trip when none is due; else three (four with shards), however many topics
        are due: the claims, the scripts, the write-backs with the new heads.
        """
        claimed, head = self._claim(self.clock.now_ms())
        if not claimed:
            return head
        try:
            return self._write_back(self.visit(claimed))
        except Exception:
            self._release(claimed)
            raise

    def _claim(self, now: int) -> tuple[list[str], int | None]:
        """Claim up to TOPICS_PER_TICK due topics; with none due, the earliest due time.

        One shard: its claim answers its head when none is due. Several: the heads of every
        shard first, one plain read each in one pipelined round trip (cheaper than a script
        per shard on every idle tick), then a claim for each shard whose head has come, in
        one more round trip, each taking its part of TOPICS_PER_TICK: a shard with more due
        leaves them to the next tick, which then comes at once.
        """
        if self.keys.shards == 1:
            claim = self.scripts.due_claim(self.keys, now, TOPICS_PER_TICK, CLAIMED_MS)
            return claim.topics, claim.head if claim.head >= 0 else None
        pipe = self.client.pipeline(transaction=False)
        for key in self.keys.due_indexes:
            pipe.zrangebyscore(key, "-inf", f"({CLAIMED_MS}", start=0, num=1,
                               withscores=True)
        heads = {shard: int(head[0][1]) for shard, head in enumerate(pipe.execute()) if head}
        due = [shard for shard, head in heads.items() if head <= now]
        later = [head for head in heads.values() if head > now]
        if not due:
            return [], min(later, default=None)
        trip = self.scripts.round_trip()
        for shard in due:
            self.scripts.due_claim(self.keys, now, -(-TOPICS_PER_TICK // len(due)),
                                   CLAIMED_MS, shard, trip=trip)
        claims = trip.execute(raise_on_error=True)
        claimed = [topic for claim in claims for topic in claim.topics]
        later += [claim.head for claim in claims if claim.head >= 0]
        return claimed, None if claimed else min(later, default=None)

    def _write_back(self, next_due: dict[str, int]) -> int | None:
        """Each claimed topic's next due time (compared with the claim); the new head."""
        trip = self.scripts.round_trip()
        for topic, due in next_due.items():
            self.scripts.due_set(self.keys, topic, CLAIMED_MS, due, trip=trip)
        # The head among real due times: topics another tick claims are its own to write back.
        for key in self.keys.due_indexes:
            trip.command("ZRANGEBYSCORE", key, "-inf", f"({CLAIMED_MS}", "LIMIT", 0, 1,
                         "WITHSCORES", withscores=True)
        heads = trip.execute(raise_on_error=True)[len(next_due):]
        times = [int(head[0][1]) for head in heads if head]
        return min(times) if times else None

    def _release(self, topics: list[str]) -> None:
        """A tick that failed after its claim makes its topics due now, so the next tick
        visits them, instead of leaving them claimed until the repair sweep (which is left
        to do it when Redis cannot be reached for this either)."""
        now = self.clock.now_ms()
        try:
            self._write_back({topic: now for topic in topics})
        except Exception as exc:  # noqa: BLE001 - best effort: the tick's own error follows
            logger.warning("could not release %d claimed topics: %s", len(topics), exc)

    def visit(self, topics: list[str]) -> dict[str, int]:
        """Promote, time out and expire these topics; returns each one's next due time (-1:
        nothing live).

        Every round runs the three scripts of every topic still busy in one pipelined round
        trip; a topic stays busy while a script moved its full limit.

        A topic whose visit found nothing to do although its time had come was served by its
        consumers (a pull promotes its own topic): its next visit is deferred by
        ``defer_ms``, so a busy consumed topic costs the scheduler a visit per deferral
        instead of one per due message. Consumers still get every message on time; only
        promotion with nobody polling, ack timeouts and expiry may wait that much longer,
        and the first visit that finds work makes the topic's visits exact again.
        """
        channel = self.keys.hint_channel
        next_due: dict[str, int] = {}
        busy = topics = list(topics)
        for _ in range(ROUNDS_PER_TOPIC):
            if not busy:
                return next_due
            now = self.clock.now_ms()
            trip = self.scripts.round_trip()
            for topic in busy:
                tk = self.keys.topic(topic)
                self.scripts.promote(tk, now, SCRIPT_LIMIT, channel, trip=trip)
                self.scripts.timeout(tk, now, SCRIPT_LIMIT, self.end_life_ms, channel,
                                     self.defaults, trip=trip)
                self.scripts.expire(tk, now, SCRIPT_LIMIT, self.end_life_ms, self.defaults,
                                    trip=trip, channel=channel)
            replies = trip.execute(raise_on_error=True)
            still_busy = []
            first_round = busy is topics
            for i, topic in enumerate(busy):
                promoted, timed_out, expired = replies[3 * i:3 * i + 3]
                self.monitor.record_promotions(topic, promoted.moved, promoted.gaps)
                self.monitor.incr(topic, "deadLettered", timed_out.dead + expired.dead)
                given_back = timed_out.requeued + timed_out.ended
                if given_back:
                    self.monitor.incr(topic, "triggerMsgTimeout", given_back)
                ended = timed_out.ended + expired.expired + expired.exhausted
                if ended:
                    self.monitor.incr(topic, "triggerMsgEndLife", ended)
                if SCRIPT_LIMIT in (promoted.moved, given_back, expired.scanned, expired.purged):
                    still_busy.append(topic)
                elif first_round and expired.due >= 0 and self.defer_ms and \
                        not (promoted.moved or given_back or ended or expired.purged):
                    next_due[topic] = expired.due + self.defer_ms
                else:
                    next_due[topic] = expired.due
            busy = still_busy
        now = self.clock.now_ms()
        next_due.update({topic: now for topic in busy})  # still busy: back on the next tick
        return next_due

    # -- registry upkeep: each runs once per interval across the fleet --------------------------
    def repair_tick(self) -> None:
        if once_per(self.client, self.keys.lease("repair-gate"), self.repair_interval_ms):
            self.repair_due_index()
            finish_drops(self.client, self.scripts, self.keys, self.clock)

    def recycle_tick(self) -> None:
        if once_per(self.client, self.keys.lease("recycle-gate"), self.recycle_interval_ms):
            self.recycle_topics()

    def topics(self) -> list[str]:
        return registered_topics(self.client, self.keys)

    def repair_due_index(self) -> int:
        """Re-derive topics' due times from their queue heads; returns topics repaired.

        It covers a due-index write lost outside the script. On one Redis the scripts lower
        the index themselves, so only the topics a tick claimed and never wrote back (its
        process killed mid-tick) can be left too late: the sweep visits those alone. On a
        Cluster the index is in another slot than the topic, and a process killed (or a
        master failing) between a script and its bookkeeping loses the write: the sweep
        visits the claimed topics, every topic used since the last sweep started (its mark,
        less ``REPAIR_MARGIN_MS``: a request touches the registry at most once a second per
        process, in the round trip that lowers the index), and ``REGISTRY_CHUNK`` of the
        others, walking them with a cursor (a write lost with the registry touch of a topic
        unused for a while: found within topics / REGISTRY_CHUNK sweeps). So idle topics
        cost a constant slice per sweep, not a visit each. Cost: six O(log n) reads per
        visited topic, pipelined in chunks. The head of ``ended`` is taken as is (the
        scripts add a purge slack to it): a visit that comes early only writes back the
        exact due time.
        """
        topics = set(claimed(self.client, self.keys, CLAIMED_MS))
        if not self.scripts.lowers_due_index:
            topics.update(self._cluster_repair_topics())
        topics = sorted(topics)
        repaired = 0
        for start in range(0, len(topics), REGISTRY_CHUNK):
            part = topics[start:start + REGISTRY_CHUNK]
            pipe = self.client.pipeline(transaction=False)
            for topic in part:
                tk = self.keys.topic(topic)
                for key in (tk.waiting, tk.ack, tk.expire, tk.ended, tk.fanout, tk.sexpire):
                    pipe.zrange(key, 0, 0, withscores=True)
            heads = pipe.execute()
            fix = self.client.pipeline(transaction=False)
            for i, topic in enumerate(part):
                scores = [h[0][1] for h in heads[6 * i:6 * i + 6] if h]
                if scores:
                    fix.zadd(self.keys.due_of(topic), {topic: min(scores)}, lt=True)
                    repaired += 1
            fix.execute()
        return repaired

    def _cluster_repair_topics(self) -> list[str]:
        """A Cluster's repair sweep: the topics used since the last sweep's mark, and a page
        of the others from the walk's cursor (every registered topic when no mark is known
        yet); the mark and cursor move on for the next sweep."""
        started = self.clock.now_ms()
        read = self.client.pipeline(transaction=False)   # both in {ns}: one round trip
        read.get(self.keys.repair_mark)
        read.get(self.keys.repair_cursor)
        mark, raw_cursor = read.execute()
        if mark is None:
            topics = registered_topics(self.client, self.keys)
            after = RecycleCursor()
        else:
            since = int(mark) - REPAIR_MARGIN_MS
            cursor = RecycleCursor.load(raw_cursor, self.keys.shards)
            page, after = stale_page(self.client, self.keys, cursor, since, REGISTRY_CHUNK)
            topics = used_since(self.client, self.keys, since) + [t for _, t, _ in page]
        write = self.client.pipeline(transaction=False)
        write.set(self.keys.repair_mark, started)
        write.set(self.keys.repair_cursor, after.dump())
        try:
            write.execute()
        except redis.exceptions.OutOfMemoryError:
            pass  # over maxmemory: the next sweep looks back from the old mark, a wider window
        return topics

    def recycle_topics(self) -> list[str]:
        """Forget topics unused for ``topic_inactive_ms`` that hold nothing: every topic key
        (``TopicKeys.holdings``) is gone, so no message, live or retained, is left behind; a
        topic with retained records waits until the scheduler has purged them. Its
        acceptance sequence is dropped with it (atomically, only while it still holds
        nothing), so a recycled topic leaves no key behind.

        Each run looks at up to REGISTRY_CHUNK stale topics, from where the last run stopped
        (``NamespaceKeys.recycle_cursor``, fleet-wide): stale topics that still hold
        messages are passed over, so every stale topic is reached within
        stale / REGISTRY_CHUNK runs, however many idle ones sort before it."""
        cutoff = self.clock.now_ms() - self.topic_inactive_ms
        cursor = RecycleCursor.load(self.client.get(self.keys.recycle_cursor),
                                    self.keys.shards)
        stale, after = stale_page(self.client, self.keys, cursor, cutoff, REGISTRY_CHUNK)
        pipe = self.client.pipeline(transaction=False)
        for _, topic, _ in stale:
            pipe.exists(*self.keys.topic(topic).holdings)
        live = pipe.execute() if stale else []
        recycled = []
        for (_, topic, seen), count in zip(stale, live):
            if count == 0 and self.scripts.recycle(self.keys, topic, seen) == Outcome.OK:
                self.scripts.drop_sequence(self.keys.topic(topic))
                self.on_recycle(topic)
                recycled.append(topic)
        if after != cursor:
            try:
                self.client.set(self.keys.recycle_cursor, after.dump())
            except redis.exceptions.OutOfMemoryError:
                pass  # over maxmemory: the next run walks these again, recycling what it can
        if recycled:
            logger.info("recycled %d inactive topics", len(recycled))
        return recycled
