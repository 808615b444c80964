"""Test support shared by every test module: free ports and throwaway redis-servers.

An ordinary module, not conftest.py: tests/spark has a conftest.py of its own, and with two
conftest modules only one can be importable by that name. The servers are started by the
product's own launcher (delayqueue.embedded), with the same binary lookup as ``serve``.
"""

from __future__ import annotations

import socket
from pathlib import Path

import redis

from delayqueue.embedded import find_redis_server, launch_redis_server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    """A throwaway redis-server on a loopback port; ``stop()`` and ``start()`` again give a
    fresh, empty server on the same port (no scripts loaded: the NOSCRIPT path)."""

    def __init__(self, directory: Path, port: int | None = None,
                 executable: str | None = None) -> None:
        self.port = port or free_port()
        self.directory = Path(directory)
        self.executable = executable or find_redis_server()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process = None

    def start(self) -> "RedisServer":
        self.directory.mkdir(parents=True, exist_ok=True)
        probe = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1,
                            socket_connect_timeout=1, retry=None)
        try:
            self.process = launch_redis_server(
                self.executable,
                ["--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", str(self.directory.resolve()),
                 "--maxmemory-policy", "noeviction", "--daemonize", "no"],
                self.directory / f"redis-{self.port}.log", probe, 20.0, f"port {self.port}")
        finally:
            probe.close()
        return self

    def stop(self) -> None:
        """Kill it outright, as an outage would."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
