"""What a fault run runs against: one redis-server with AOF and two nodes on it."""

from __future__ import annotations

from pathlib import Path

import psutil
import redis

from support.node import ServerProcess
from support.redis_server import RedisServer

AOF_ARGS = ["--appendonly", "yes", "--appendfsync", "everysec"]
# Short timeouts so a run sees redeliveries and lease takeovers within seconds.
NODE_SETTINGS = {
    "ack-timeout-millis": 2000,
    "lease-ttl-millis": 1500,
    "long-polling-safety-millis": 500,
    "redis-socket-timeout-millis": 2000,
    "log-level": "info",
    "push-allowed-networks": "127.0.0.0/8",   # the push scenario's receiver (faults/push.py)
}


class World:
    def __init__(self, directory: Path, nodes: int = 2, workers: int = 1,
                 settings: dict | None = None) -> None:
        self.directory = Path(directory)
        self.redis = RedisServer(self.directory / "redis", extra_args=AOF_ARGS)
        self.node_count = nodes
        self.workers = workers
        self.settings = {**NODE_SETTINGS, **(settings or {})}
        self.nodes: list[ServerProcess] = []

    def start(self) -> "World":
        self.redis.start()
        for i in range(self.node_count):
            (self.directory / f"node-{i}.log").touch()
            node = ServerProcess(self.redis.url, workers=self.workers, settings=self.settings,
                                 log_path=self.directory / f"node-{i}.log")
            self.nodes.append(node)
            node.start()
        return self

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
        self.redis.stop()

    def __enter__(self) -> "World":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def bases(self) -> list[str]:
        return [node.url for node in self.nodes]

    def client(self, socket_timeout: float = 5.0) -> redis.Redis:
        return redis.Redis.from_url(self.redis.url, decode_responses=True,
                                    socket_timeout=socket_timeout)

    def worker_pids(self) -> list[int]:
        pids = []
        for node in self.nodes:
            try:
                pids.extend(p.pid for p in node.workers())
            except psutil.Error:
                continue
        return pids

    def logs(self) -> str:
        return "\n".join((self.directory / f"node-{i}.log").read_text(errors="replace")
                         for i in range(len(self.nodes)))
