"""Throwaway redis-servers, and the databases tests lease from the session's server.

The servers are started by the product's own launcher (delayqueue.server.embedded), with the same
binary lookup as ``serve``.

Databases of the session's server (conftest.py's ``redis_server``):
    0        the function-scoped fixtures ``redis_client`` / ``redis_url`` (FLUSHDB each test)
    1        the SDK, consumer and CLI modules' shared node (support/sdk.py)
    2..15    leased (``RedisServer.lease_db``) by a node that needs Redis to itself: flushed
             when leased, never handed to two holders at once
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator, Sequence

import redis

from delayqueue.server.embedded import EmbeddedRedisError, find_redis_server, launch_redis_server

from support.ports import PORT_TAKEN, PortTaken, free_port, start_on_a_free_port

FIXTURE_DB = 0
SHARED_NODE_DB = 1
LEASED_DBS = range(2, 16)


class RedisServer:
    """A throwaway redis-server on a loopback port; ``stop()`` and ``start()`` again give a
    fresh, empty server on the same port (no scripts loaded: the NOSCRIPT path).

    Without ``port`` it picks a free one, and if another process takes it first (the server
    fails to bind, or a server that is not ours answers) it starts again on another; once
    started, it keeps its port. ``extra_args`` come after the defaults and win over them
    (``["--appendonly", "yes"]``: a restart on the same directory reloads the data).
    """

    def __init__(self, directory: Path, port: int | None = None,
                 executable: str | None = None, *, extra_args: Sequence[str] = (),
                 config_file: Path | None = None) -> None:
        """``extra_args`` are appended to the command line (a replica's ``--replicaof``,
        ``--cluster-enabled yes``, ``--sentinel``); ``config_file`` comes first (a sentinel
        needs a file of its own that it may rewrite)."""
        self.extra_args = list(extra_args)
        self.config_file = config_file
        self.fixed_port = port is not None
        self.port = port or free_port()
        self.directory = Path(directory)
        self.executable = executable or find_redis_server()
        self.extra_args = list(extra_args)
        self.process = None
        self._leased: set[int] = set()

    @property
    def url(self) -> str:
        return self.db_url(0)

    def db_url(self, db: int) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self) -> "RedisServer":
        self.directory.mkdir(parents=True, exist_ok=True)
        start_on_a_free_port(self, self._start_once)
        return self

    def _start_once(self) -> None:
        log_path = self.directory / f"redis-{self.port}.log"
        offset = log_path.stat().st_size if log_path.exists() else 0
        probe = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1,
                            socket_connect_timeout=1, retry=None)
        try:
            try:
                self.process = launch_redis_server(
                    self.executable,
                    [*([str(self.config_file)] if self.config_file else []),
                     "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                     "--appendonly", "no", "--dir", str(self.directory.resolve()),
                     "--maxmemory-policy", "noeviction", "--daemonize", "no",
                     *self.extra_args],
                    log_path, probe, 20.0, f"port {self.port}")
            except EmbeddedRedisError as exc:
                if any(text in _read_from(log_path, offset) for text in PORT_TAKEN):
                    raise PortTaken(f"port {self.port} is taken") from exc
                raise
            # The PING may have reached another server that holds the port: ours must answer.
            if int(probe.info("server")["process_id"]) != self.process.pid:
                self.stop()
                raise PortTaken(f"port {self.port} is answered by another redis-server")
        finally:
            probe.close()

    def stop(self) -> None:
        """Kill it outright, as an outage would."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    # -- databases -------------------------------------------------------------------------
    def lease_db(self) -> int:
        """A database of this server no one else holds, flushed; give it back with release_db."""
        free = [db for db in LEASED_DBS if db not in self._leased]
        if not free:
            raise RuntimeError(f"all {len(LEASED_DBS)} leased Redis databases are in use")
        db = free[0]
        self._leased.add(db)
        flush_db(self.db_url(db))
        return db

    def release_db(self, db: int) -> None:
        self._leased.discard(db)

    @contextlib.contextmanager
    def leased_db_url(self) -> Iterator[str]:
        """The URL of a leased, flushed database for the duration of the block."""
        db = self.lease_db()
        try:
            yield self.db_url(db)
        finally:
            self.release_db(db)


def flush_db(url: str) -> None:
    """FLUSHDB the database of ``url`` (never FLUSHALL: other databases have other owners)."""
    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
    finally:
        client.close()


def _read_from(path: Path, offset: int) -> str:
    try:
        with open(path, "rb") as log:
            log.seek(offset)
            return log.read().decode(errors="replace")
    except OSError:
        return ""
