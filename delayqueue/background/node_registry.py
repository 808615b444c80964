"""The node registry: every server process says "I am here" in Redis every few seconds.

Each process (each gunicorn worker) writes one field of the namespace HASH ``keys.nodes``,
``"<node id>/<pid>"`` -> a small JSON record, every ``HEARTBEAT_S``: one HSET, one round
trip. The node id is ``Runtime.node_id`` (host:port), so the workers of one node group under
it. The record holds what the console's Nodes page shows: the version, when the process
started, when it last beat and the long polls it holds (``Hub.held``); whether a
node was taken offline (``keys.offline``) is read with the records. Times are on the shared
clock (Redis time), so "last seen" compares across machines.

A process that stops cleanly removes its field. One that dies leaves it: a reader shows a
process whose last beat is older than ``LOST_AFTER_MS`` (three beats) as lost, and a beating
process drops fields older than ``DROP_AFTER_MS`` once every ``PRUNE_EVERY`` beats (an
HGETALL of a hash with one field per process of the fleet, then one HDEL).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis

from delayqueue import __version__
from delayqueue.core.clock import Clock
from delayqueue.core.keys import NamespaceKeys

logger = logging.getLogger(__name__)

HEARTBEAT_S = 5.0
LOST_AFTER_MS = 15_000          # three missed beats: shown as lost
DROP_AFTER_MS = 300_000         # five minutes without a beat: removed from the registry
PRUNE_EVERY = 12                # beats between two prunes (about a minute)


@dataclass(frozen=True)
class ProcessBeat:
    """One process's last heartbeat."""

    node: str
    pid: int
    version: str
    started_ms: int
    seen_ms: int
    held_long_polls: int

    @property
    def field(self) -> str:
        return f"{self.node}/{self.pid}"

    def to_json(self) -> str:
        return json.dumps({"node": self.node, "pid": self.pid, "version": self.version,
                           "startedMs": self.started_ms, "seenMs": self.seen_ms,
                           "heldLongPolls": self.held_long_polls},
                          separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> ProcessBeat | None:
        """The record, or None when it is not one (a newer or broken writer): skipped."""
        try:
            d: dict[str, Any] = json.loads(text)
            return cls(str(d["node"]), int(d["pid"]), str(d["version"]), int(d["startedMs"]),
                       int(d["seenMs"]), int(d["heldLongPolls"]))
        except (ValueError, KeyError, TypeError):
            return None


@dataclass(frozen=True)
class NodeStatus:
    """A node (host:port) as its processes' beats describe it."""

    node: str
    processes: list[ProcessBeat]
    now_ms: int
    online: bool                # not taken offline (/camellia/health/offline)

    @property
    def live(self) -> list[ProcessBeat]:
        return [p for p in self.processes if self.now_ms - p.seen_ms <= LOST_AFTER_MS]

    @property
    def lost(self) -> bool:
        """No process of the node beat within the last three beats."""
        return not self.live

    @property
    def versions(self) -> str:
        return ", ".join(sorted({p.version for p in self.processes}))

    @property
    def started_ms(self) -> int:
        """The start of its oldest live process (of any, when lost)."""
        return min(p.started_ms for p in (self.live or self.processes))

    @property
    def seen_ms(self) -> int:
        return max(p.seen_ms for p in self.processes)

    @property
    def held_long_polls(self) -> int:
        return sum(p.held_long_polls for p in self.live)


class NodeRegistry:
    """Writes this process's heartbeat (``tick``) and reads everyone's (``nodes``)."""

    def __init__(self, client: redis.Redis, keys: NamespaceKeys, clock: Clock, node_id: str,
                 held_long_polls: Callable[[], int], pid: int | None = None) -> None:
        self.client = client
        self.keys = keys
        self.key = keys.nodes
        self.clock = clock
        self.node_id = node_id
        self.pid = os.getpid() if pid is None else pid
        self.held_long_polls = held_long_polls
        self.started_ms: int | None = None
        self.beats = 0

    @property
    def field(self) -> str:
        return f"{self.node_id}/{self.pid}"

    def beat(self) -> ProcessBeat:
        now = self.clock.now_ms()
        if self.started_ms is None:
            self.started_ms = now
        return ProcessBeat(self.node_id, self.pid, __version__, self.started_ms, now,
                           self.held_long_polls())

    def tick(self) -> None:
        """One heartbeat: HSET of this process's record; now and then, drop dead ones."""
        self.client.hset(self.key, self.field, self.beat().to_json())
        self.beats += 1
        if self.beats % PRUNE_EVERY == 0:
            self.prune()

    def prune(self) -> int:
        """Drop the records of processes silent for DROP_AFTER_MS; how many."""
        now = self.clock.now_ms()
        stale = [name for name, text in self.client.hgetall(self.key).items()
                 if (beat := ProcessBeat.from_json(text)) is None
                 or now - beat.seen_ms > DROP_AFTER_MS]
        if stale:
            self.client.hdel(self.key, *stale)
        return len(stale)

    def leave(self) -> None:
        """A clean stop: remove this process's record (never raises)."""
        try:
            self.client.hdel(self.key, self.field)
        except redis.RedisError as exc:
            logger.warning("could not remove this process from the node registry: %s", exc)

    def _by_node(self, now: int) -> dict[str, list[ProcessBeat]]:
        """The records younger than DROP_AFTER_MS, by node id: one HGETALL."""
        by_node: dict[str, list[ProcessBeat]] = {}
        for text in self.client.hgetall(self.key).values():   # the ACL has HGETALL
            beat = ProcessBeat.from_json(text)
            if beat is not None and now - beat.seen_ms <= DROP_AFTER_MS:
                by_node.setdefault(beat.node, []).append(beat)
        return by_node

    def nodes(self) -> list[NodeStatus]:
        """Every node with a record younger than DROP_AFTER_MS, by node id, and whether it
        was taken offline: two round trips."""
        now = self.clock.now_ms()
        by_node = self._by_node(now)
        names = sorted(by_node)
        pipe = self.client.pipeline(transaction=False)
        for node in names:
            pipe.exists(self.keys.offline(node))
        offline = pipe.execute() if names else []
        return [NodeStatus(node, sorted(by_node[node], key=lambda b: b.pid), now, not gone)
                for node, gone in zip(names, offline)]

    def long_polls(self) -> dict[str, int]:
        """Node -> the long polls its live processes hold, for the nodes not lost (what
        /metrics exports): one round trip, as it needs no offline flags."""
        now = self.clock.now_ms()
        statuses = (NodeStatus(node, beats, now, online=True)   # (offline flags not read)
                    for node, beats in self._by_node(now).items())
        return {n.node: n.held_long_polls for n in statuses if not n.lost}
