"""How one script call reaches Redis: the single place that knows Cluster and WAIT.

``Scripts`` hands every call here. Three ways:

- the default: redis-py's ``Script`` (EVALSHA, SCRIPT LOAD and again on NOSCRIPT: after a
  restart or a failover, whose new master never saw our SCRIPT LOAD). On a Cluster client
  that also follows MOVED and ASK, and reloads on the node that answered NOSCRIPT.
- queued in a Cluster pipeline (the scheduler's batches): EVAL with the source. redis-py
  refuses EVALSHA in a Cluster pipeline, and a pipeline cannot be replayed after a NOSCRIPT;
  Redis caches an EVAL'd script by its SHA, so the cost is the bytes sent.
- a write of ``WAITED`` when ``wait_replicas`` > 0: the script and ``WAIT n timeout`` in one
  non-transactional pipeline on one connection (WAIT counts the writes of its own
  connection), on the master that owns the keys' slot. Fewer replicas than ``n`` in time
  raises ``ReplicaWaitTimeout`` (code 500): the write is done on the master but not known to
  be replicated; a retry with the same msgId is safe.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import redis
from redis.cluster import ClusterPipeline, RedisCluster
from redis.commands.core import Script
from redis.exceptions import (
    AskError,
    MovedError,
    NoScriptError,
    RedisClusterException,
    TryAgainError,
)

from .errors import Unavailable

# The transitions whose answer promises a durable write to the client.
WAITED = ("send", "ack", "nack")
# Attempts of a waited call through NOSCRIPT, MOVED and ASK (a resharding moves a slot in
# steps; each answer says where to go next).
WAIT_ATTEMPTS = 5
TRYAGAIN_PAUSE_S = 0.05


class ReplicaWaitTimeout(Unavailable):
    """WAIT saw fewer replicas than redis-wait-replicas acknowledge the write in time."""


class ScriptRunner:
    def __init__(self, client, wait_replicas: int = 0, wait_timeout_ms: int = 1000) -> None:
        self.client = client
        self.wait_replicas = wait_replicas
        self.wait_timeout_ms = wait_timeout_ms
        self.cluster = isinstance(client, RedisCluster)

    def run(self, name: str, script: Script, keys: Sequence[str], args: Sequence[Any],
            client=None) -> Any:
        if isinstance(client, ClusterPipeline):
            return client.execute_command("EVAL", script.script, len(keys), *keys, *args)
        if client is None and self.wait_replicas > 0 and name in WAITED:
            return self._run_and_wait(name, script, keys, args)
        return script(keys=list(keys), args=list(args), client=client)

    # -- script + WAIT on one connection -------------------------------------------------
    def _run_and_wait(self, name: str, script: Script, keys: Sequence[str],
                      args: Sequence[Any]) -> Any:
        asking = None
        for _ in range(WAIT_ATTEMPTS):
            target = self._target(keys[0], asking)
            pipe = target.pipeline(transaction=False)
            if asking is not None:
                pipe.execute_command("ASKING")
            pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
            pipe.execute_command("WAIT", self.wait_replicas, self.wait_timeout_ms)
            try:
                *_, result, acked = pipe.execute(raise_on_error=False)
            except (redis.ConnectionError, redis.TimeoutError):
                # Not retried here (a nack that ran must not run twice): answer 500, and let
                # the next call find the slot's new master (a dead node: a failover).
                if self.cluster:
                    self._refresh()
                raise
            asking = None
            if isinstance(result, NoScriptError):
                target.script_load(script.script)   # nothing ran: load it there, run again
                continue
            if isinstance(result, MovedError):
                self.client.nodes_manager.move_slot(result)
                continue
            if isinstance(result, AskError):
                asking = (result.host, result.port)
                continue
            if isinstance(result, TryAgainError):
                time.sleep(TRYAGAIN_PAUSE_S)  # the slot's keys are mid-migration
                continue
            if isinstance(result, Exception):
                raise result
            if isinstance(acked, Exception):
                raise acked
            if int(acked) < self.wait_replicas:
                raise self.wait_timeout(name, acked)
            return result
        raise Unavailable(f"{name}: the keys' slot kept moving ({WAIT_ATTEMPTS} redirections)")

    def wait_timeout(self, name: str, acked: Any) -> ReplicaWaitTimeout:
        """The error of a write WAIT could not confirm (``acked``: replicas, or WAIT's error)."""
        return ReplicaWaitTimeout(
            f"redis-wait-replicas: {name} is written on the master but only {acked} of "
            f"{self.wait_replicas} replicas confirmed it within {self.wait_timeout_ms} ms "
            f"(redis-wait-timeout-millis); a retry with the same msgId is safe")

    def _refresh(self) -> None:
        try:
            self.client.nodes_manager.initialize()
        except (redis.RedisError, RedisClusterException):
            pass  # the cluster client refreshes again on its own next failure

    def _target(self, key: str, asking: tuple[str, int] | None) -> redis.Redis:
        """A client whose pipeline runs on one connection to the keys' master."""
        if not self.cluster:
            return self.client
        manager = self.client.nodes_manager
        if asking is not None:
            node = manager.get_node(host=asking[0], port=asking[1])
            if node is None:
                manager.initialize()
                node = manager.get_node(host=asking[0], port=asking[1])
        else:
            node = self.client.get_node_from_key(key)
        if node is None or node.redis_connection is None:
            manager.initialize()
            node = self.client.get_node_from_key(key)
        return node.redis_connection
