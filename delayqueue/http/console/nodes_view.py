"""The Nodes page: the server processes of the fleet and the Redis they share.

Nodes come from the node registry (background/node_registry.py): each process's heartbeat,
grouped by node id (host:port), a node lost when none of its processes beat for three beats.
Redis is one ``INFO`` (server, memory, clients, replication); when it cannot be reached the
page says "unreachable" and why, instead of failing: the page an operator opens when
something is wrong must not be the thing that is wrong.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import redis

from delayqueue.background.node_registry import NodeStatus
from delayqueue.background.runtime import Runtime


@dataclass(frozen=True)
class Nodes:
    now_ms: int                           # the shared clock; this machine's when unreachable
    nodes: list[NodeStatus] = field(default_factory=list)
    error: str | None = None              # the registry could not be read


@dataclass(frozen=True)
class RedisStatus:
    ok: bool
    error: str | None = None
    version: str = ""
    role: str = ""
    uptime_s: int = 0
    used_memory: str = ""                 # used_memory_human
    maxmemory: str = ""                   # maxmemory_human; "no limit" for 0
    maxmemory_policy: str = ""
    connected_clients: int = 0

    @property
    def health(self) -> str:
        return "ok" if self.ok else "unreachable"


def read_nodes(rt: Runtime) -> Nodes:
    try:
        return Nodes(rt.clock.now_ms(), rt.nodes.nodes())
    except redis.RedisError as exc:
        return Nodes(int(time.time() * 1000),
                     error=f"the node registry could not be read: {exc}")


def _first_info(info: dict[str, Any]) -> dict[str, Any]:
    """A Cluster client answers INFO per node ({"host:port": {...}}): show the first."""
    if info and all(isinstance(v, dict) for v in info.values()):
        return next(iter(info.values()))
    return info


def read_redis(rt: Runtime) -> RedisStatus:
    try:
        info = _first_info(rt.client.info())
    except redis.RedisError as exc:
        return RedisStatus(False, str(exc) or type(exc).__name__)
    maxmemory = int(info.get("maxmemory", 0) or 0)
    return RedisStatus(
        True, None, str(info.get("redis_version", "")), str(info.get("role", "")),
        int(info.get("uptime_in_seconds", 0) or 0), str(info.get("used_memory_human", "")),
        str(info.get("maxmemory_human", "")) if maxmemory else "no limit",
        str(info.get("maxmemory_policy", "")), int(info.get("connected_clients", 0) or 0))
