"""A push receiver for tests: a real HTTP server on 127.0.0.1 that records every POST a node
pushes to it and answers what the test says, and a node that may push to it.

    with PushReceiver() as receiver:
        client.create_subscription(topic, "hooks", push_url=receiver.url("/hooks"))
        receiver.answer = 503            # or a callable (Push) -> int
        [push] = receiver.wait_for(1)

Nodes refuse push URLs outside ``push-allowed-networks`` (public addresses only by default):
``push_node`` starts one that allows 127.0.0.0/8, on a Redis database leased to the module.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

import pytest

from support.node import ServerProcess
from support.sdk import FAST_STOP
from support.wait import wait_until

PUSH_NODE_SETTINGS = {**FAST_STOP, "push-allowed-networks": "127.0.0.0/8"}


@dataclass(frozen=True)
class Push:
    """One POST received: its path, headers (as sent, names in their case) and raw body."""

    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def msg_id(self) -> str:
        return self.json["delayMsg"]["msgId"]


class PushReceiver:
    """Records every POST; answers ``answer`` (a status, or a callable of the Push)."""

    def __init__(self) -> None:
        self.pushes: list[Push] = []
        self.answer: int | Callable[[Push], int] = 204
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length") or 0)
                push = Push(self.path, dict(self.headers.items()), self.rfile.read(length))
                with receiver._lock:
                    receiver.pushes.append(push)
                    answer = receiver.answer
                status = answer(push) if callable(answer) else answer
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True,
                                        name="push-receiver")

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def received(self) -> list[Push]:
        with self._lock:
            return list(self.pushes)

    def wait_for(self, count: int, timeout_s: float = 20) -> list[Push]:
        """At least ``count`` POSTs received (all of them, in order of arrival)."""
        return wait_until(lambda: len(self.received()) >= count and self.received(),
                          timeout_s, message=lambda: f"{len(self.received())} of {count} "
                                                     "pushes received")

    def __enter__(self) -> "PushReceiver":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def push_node(redis_server):
    """A live node that may push to 127.0.0.1, shared by the module (its own Redis db)."""
    with redis_server.leased_db_url() as url, \
            ServerProcess(url, settings=PUSH_NODE_SETTINGS) as started:
        yield started


@pytest.fixture
def receiver():
    with PushReceiver() as started:
        yield started
