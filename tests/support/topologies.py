"""Replicated Redis topologies on loopback ports, from the ``redis-server`` binary.

``SentinelTopology``: 1 master + 2 replicas + 3 sentinels (``redis-server --sentinel``).
``ClusterTopology``: 3 masters + 3 replicas (``redis-cli --cluster create``).
Each gives ``url`` (the ``redis-url`` of a node), ``client()`` (a redis-py client built by
the product's own ``connect_redis``), ways to fail over, and ``stop()``. Tests share one of
each per session (conftest.py ``redis_sentinel`` / ``redis_cluster``): a node on one takes a
namespace of its own instead of a database (a Cluster has only database 0).

Timings are cut for tests: a sentinel calls a master down after 1 s unanswered, a cluster
node after 2 s (``cluster-node-timeout``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import uuid
from pathlib import Path
from typing import Iterator

import redis

from delayqueue.server.embedded import EmbeddedRedisError, find_redis_server
from delayqueue.settings.redis_connection import connect_redis

from support.ports import START_ATTEMPTS, PortTaken
from support.redis_server import RedisServer
from support.wait import wait_until

MASTER_NAME = "dqmaster"
SENTINEL_DOWN_AFTER_MS = 1000
CLUSTER_NODE_TIMEOUT_MS = 2000
READY_TIMEOUT_S = 30
# The Redis setups a node can run on (tests parametrized over them take a ``Backend``).
TOPOLOGIES = ("standalone", "sentinel", "cluster")
# Suites too long to run three times in ``make test`` run on the setups this names
# (comma-separated; ``make ha`` sets all three).
TOPOLOGIES_ENV = "DQ_TEST_TOPOLOGIES"
MAX_CLUSTER_PORT = 55535


def cluster_port() -> int:
    """A free port whose cluster bus port (port + 10000) is free too, both below 65536."""
    while True:
        with socket.socket() as low, socket.socket() as high:
            low.bind(("127.0.0.1", 0))
            port = low.getsockname()[1]
            if port > MAX_CLUSTER_PORT:
                continue
            try:
                high.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
            return port


def unique_namespace(prefix: str = "t") -> str:
    return f"{prefix}{uuid.uuid4().hex[:10]}"


def _direct(port: int) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=port, decode_responses=True, socket_timeout=2,
                       socket_connect_timeout=1, retry=None)


def _redis_cli() -> str:
    found = shutil.which("redis-cli")
    if found is None:
        raise RuntimeError("redis-cli is not on PATH (it creates the test cluster)")
    return found


class SentinelTopology:
    """A master, two replicas of it, and three sentinels watching it (quorum 2)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.executable = find_redis_server()
        self.data: list[RedisServer] = []
        self.sentinels: list[RedisServer] = []

    def start(self) -> "SentinelTopology":
        try:
            master = RedisServer(self.directory / "data0", executable=self.executable).start()
            self.data.append(master)
            for i in (1, 2):
                self.data.append(RedisServer(
                    self.directory / f"data{i}", executable=self.executable,
                    extra_args=["--replicaof", "127.0.0.1", str(master.port)]).start())
            for i in range(3):
                directory = self.directory / f"sentinel{i}"
                directory.mkdir(parents=True, exist_ok=True)
                conf = directory / "sentinel.conf"
                conf.write_text(
                    f"sentinel monitor {MASTER_NAME} 127.0.0.1 {master.port} 2\n"
                    f"sentinel down-after-milliseconds {MASTER_NAME} {SENTINEL_DOWN_AFTER_MS}\n"
                    f"sentinel failover-timeout {MASTER_NAME} 10000\n"
                    f"sentinel parallel-syncs {MASTER_NAME} 2\n")
                self.sentinels.append(RedisServer(directory, executable=self.executable,
                                                  config_file=conf,
                                                  extra_args=["--sentinel"]).start())
            self.wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis-sentinel://{hosts}/{MASTER_NAME}"

    def client(self):
        return connect_redis(self.url, socket_timeout_ms=2000, connect_timeout_ms=1000,
                             max_connections=16)

    def master_port(self) -> int:
        """The master as the first sentinel that answers sees it."""
        for sentinel in self.sentinels:
            try:
                return int(_direct(sentinel.port).sentinel_get_master_addr_by_name(
                    MASTER_NAME)[1])
            except (redis.RedisError, TypeError):
                continue
        raise RuntimeError("no sentinel answers")

    def server(self, port: int) -> RedisServer:
        return next(s for s in self.data if s.port == port)

    def wait_healthy(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Every sentinel agrees on a master that takes writes, sees the other sentinels and
        the two replicas, and both replicas are in sync with it."""

        def healthy() -> bool:
            try:
                views = {int(_direct(s.port).sentinel_get_master_addr_by_name(MASTER_NAME)[1])
                         for s in self.sentinels}
                if len(views) != 1:
                    return False
                port = views.pop()
                info = _direct(port).info("replication")
                if info["role"] != "master" or info["connected_slaves"] != 2:
                    return False
                # "online", as for the Cluster below: a replica waiting for its first sync
                # shows offset 0 = a new master's offset, and acknowledges no WAIT.
                replicas = [info[f"slave{i}"] for i in range(2)]
                if any(r["state"] != "online" or r["offset"] != info["master_repl_offset"]
                       for r in replicas):
                    return False
                for s in self.sentinels:
                    state = _direct(s.port).sentinel_master(MASTER_NAME)
                    if (state["num-other-sentinels"] != 2 or state["num-slaves"] < 2
                            or "s_down" in state["flags"] or "o_down" in state["flags"]):
                        return False
                return True
            except (redis.RedisError, TypeError, KeyError):
                return False

        wait_until(healthy, timeout_s, interval_s=0.1,
                   message="sentinel topology did not become healthy")

    def failover(self) -> tuple[int, int]:
        """``SENTINEL FAILOVER``: a replica is promoted (no write lost); returns the ports
        (old master, new master) once clients can reach the new one."""
        old = self.master_port()
        _direct(self.sentinels[0].port).execute_command("SENTINEL", "FAILOVER", MASTER_NAME)
        wait_until(lambda: self.master_port() != old, READY_TIMEOUT_S, interval_s=0.05,
                   message="sentinel did not promote a replica")
        return old, self.master_port()

    def kill_master(self) -> tuple[int, int]:
        """``kill -9`` of the master; the sentinels elect a replica. The old master is started
        again (empty, like a lost machine replaced) and rejoins as a replica."""
        old = self.master_port()
        self.server(old).stop()
        wait_until(lambda: self.master_port() != old, READY_TIMEOUT_S, interval_s=0.05,
                   message="sentinels did not replace the killed master")
        new = self.master_port()
        self.server(old).start()
        _direct(old).replicaof("127.0.0.1", new)
        return old, new

    def flush(self) -> None:
        _direct(self.master_port()).flushall()

    def stop(self) -> None:
        for server in [*self.sentinels, *self.data]:
            server.stop()


class ClusterTopology:
    """Three masters, one replica each, all 16384 slots covered."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.executable = find_redis_server()
        self.servers: list[RedisServer] = []

    def start(self) -> "ClusterTopology":
        try:
            for i in range(6):
                self.servers.append(self._start_node(self.directory / f"node{i}"))
            subprocess.run(
                [_redis_cli(), "--cluster", "create",
                 *(f"127.0.0.1:{s.port}" for s in self.servers),
                 "--cluster-replicas", "1", "--cluster-yes"],
                check=True, capture_output=True, timeout=60)
            self.wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_node(self, directory: Path) -> RedisServer:
        """A cluster-enabled server on a port <= 55535 whose bus port (+10000) is free."""
        for _ in range(START_ATTEMPTS):
            port = cluster_port()
            try:
                return RedisServer(
                    directory, port=port, executable=self.executable,
                    extra_args=["--cluster-enabled", "yes",
                                "--cluster-config-file", "nodes.conf",
                                "--cluster-node-timeout", str(CLUSTER_NODE_TIMEOUT_MS)]).start()
            except (PortTaken, EmbeddedRedisError):
                continue  # the port or its bus port was taken meanwhile
        raise RuntimeError("no free port pair for a cluster node")

    @property
    def url(self) -> str:
        return "redis-cluster://" + ",".join(f"127.0.0.1:{s.port}" for s in self.servers[:3])

    def client(self):
        return connect_redis(self.url, socket_timeout_ms=2000, connect_timeout_ms=1000,
                             max_connections=16)

    def server(self, port: int) -> RedisServer:
        return next(s for s in self.servers if s.port == port)

    def roles(self) -> dict[int, str]:
        """port -> "master" or "slave", as each live node sees itself."""
        roles = {}
        for s in self.servers:
            try:
                roles[s.port] = _direct(s.port).info("replication")["role"]
            except redis.RedisError:
                continue
        return roles

    def masters(self) -> list[int]:
        return sorted(p for p, role in self.roles().items() if role == "master")

    def replica_of(self, master_port: int) -> int:
        for s in self.servers:
            try:
                info = _direct(s.port).info("replication")
            except redis.RedisError:
                continue
            if info["role"] == "slave" and int(info["master_port"]) == master_port:
                return s.port
        raise RuntimeError(f"master {master_port} has no replica")

    def master_of_slot(self, slot: int) -> int:
        for start, end, master, *_ in _direct(self.masters()[0]).execute_command(
                "CLUSTER", "SLOTS"):
            if start <= slot <= end:
                return int(master[1])
        raise RuntimeError(f"slot {slot} is not covered")

    def wait_healthy(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Every node reports cluster_state ok, there are 3 masters each with a replica in
        sync, and every node agrees on the slot map."""

        def healthy() -> bool:
            try:
                for s in self.servers:
                    if _direct(s.port).cluster("info")["cluster_state"] != "ok":
                        return False
                masters = self.masters()
                if len(masters) != 3:
                    return False
                for port in masters:
                    info = _direct(port).info("replication")
                    # "online": a replica still waiting for its first sync (wait_bgsave)
                    # shows offset 0 = a new master's offset, and acknowledges no WAIT.
                    if info["connected_slaves"] != 1 or info["slave0"]["state"] != "online" \
                            or info["slave0"]["offset"] != info["master_repl_offset"]:
                        return False
                maps = {str(sorted(_direct(s.port).execute_command("CLUSTER", "SLOTS")))
                        for s in self.servers}
                return len(maps) == 1
            except (redis.RedisError, KeyError):
                return False

        wait_until(healthy, timeout_s, interval_s=0.1,
                   message="cluster did not become healthy")

    def failover(self, master_port: int | None = None) -> tuple[int, int]:
        """Graceful ``CLUSTER FAILOVER`` on a replica of ``master_port`` (default: the first
        master); returns (old master, new master) once the new one serves its slots."""
        old = master_port or self.masters()[0]
        new = self.replica_of(old)
        # A manual failover the master does not answer in time is dropped: ask again.
        for _ in range(3):
            _direct(new).execute_command("CLUSTER", "FAILOVER")
            try:
                wait_until(lambda: _direct(new).info("replication")["role"] == "master",
                           READY_TIMEOUT_S / 3, interval_s=0.02)
                return old, new
            except AssertionError:
                continue
        raise AssertionError(f"CLUSTER FAILOVER of {old} to {new} did not finish")

    def reshard(self, source: int, destination: int, slots: int) -> None:
        """Move ``slots`` slots from one master to another with ``redis-cli --cluster
        reshard`` (keys migrate one by one with MIGRATE: clients see ASK and MOVED)."""
        ids = {s.port: _direct(s.port).execute_command("CLUSTER", "MYID") for s in self.servers}
        subprocess.run(
            [_redis_cli(), "--cluster", "reshard", f"127.0.0.1:{source}",
             "--cluster-from", ids[source], "--cluster-to", ids[destination],
             "--cluster-slots", str(slots), "--cluster-yes",
             "--cluster-pipeline", "10"],
            check=True, capture_output=True, timeout=300)

    def flush(self) -> None:
        for port in self.masters():
            _direct(port).flushall()

    def stop(self) -> None:
        for server in self.servers:
            server.stop()


def wait_serving(client, timeout_s: float = READY_TIMEOUT_S) -> None:
    """Until a write through ``client`` succeeds (after a failover)."""

    def write() -> bool:
        try:
            return bool(client.set(f"probe:{uuid.uuid4().hex}", "1", px=1000))
        except redis.RedisError:
            return False

    wait_until(write, timeout_s, interval_s=0.05, message="writes did not resume")




class Backend:
    """Where a test node keeps its data: a leased database of the session's standalone
    redis-server, or a namespace of its own on the session's Sentinel or Cluster topology
    (which has one database). ``name`` is "standalone", "sentinel" or "cluster"."""

    def __init__(self, name: str, redis_server=None, topology=None) -> None:
        self.name = name
        self.redis_server = redis_server
        self.topology = topology

    def __repr__(self) -> str:
        return self.name

    @contextlib.contextmanager
    def place(self, own_namespace: bool = True) -> Iterator[tuple[str, dict]]:
        """(redis-url, extra settings) for a node. ``own_namespace=False`` keeps the default
        namespace (tests that name its keys); on a topology that first empties it all, so
        take it before the module's other nodes start."""
        if self.topology is None:
            with self.redis_server.leased_db_url() as url:
                yield url, {}
        elif own_namespace:
            yield self.topology.url, {"namespace": unique_namespace()}
        else:
            self.topology.flush()
            yield self.topology.url, {}

    def client(self, url: str):
        """A redis-py client of ``url`` (a RedisCluster on the Cluster)."""
        if self.topology is None:
            return redis.Redis.from_url(url, decode_responses=True)
        return self.topology.client()


def backend_named(request, name: str) -> Backend:
    """The Backend ``name``, starting its topology (conftest.py's session fixture
    ``redis_sentinel`` or ``redis_cluster``) on first use."""
    if name == "standalone":
        return Backend(name, redis_server=request.getfixturevalue("redis_server"))
    return Backend(name, topology=request.getfixturevalue(f"redis_{name}"))


def selected_topologies() -> list[str]:
    """The setups named by $DQ_TEST_TOPOLOGIES (default: standalone only)."""
    names = [n.strip() for n in os.environ.get(TOPOLOGIES_ENV, "standalone").split(",")
             if n.strip()]
    unknown = set(names) - set(TOPOLOGIES)
    if unknown:
        raise ValueError(f"{TOPOLOGIES_ENV}: unknown {sorted(unknown)}; use {TOPOLOGIES}")
    return names
