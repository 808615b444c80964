"""A local HTTP receiver for push delivery tests: the endpoint a pushUrl points at.

Self-contained (standard library only) so that any test may copy it. A threaded HTTP/1.1
server (keep-alive, Nagle off: an answer is never held back 40 ms behind its headers) on
127.0.0.1 and a free port, scripted per path::

    with Receiver() as receiver:
        receiver.script("/orders", Answer(500), Answer(429, {"Retry-After": "2"}))
        url = receiver.url("/orders")        # the 1st POST gets 500, the 2nd 429, then 200
        ...
        [first, second, third] = receiver.wait_for(3, "/orders", timeout_s=10)

Each POST (any method, in fact) takes the next scripted ``Answer`` of its path, or the path's
``then`` once they are used up (200 by default): a status with headers and a body, after
``sleep_s``, or held until an ``Event`` is set (``hold``), or no answer at all and the
connection closed (``close``). ``script(path, function)`` answers each request with
``function(request)`` instead. ``down()`` closes the listening socket and every open
connection (connecting is refused) until ``up()`` listens again on the same port.

Every request is recorded (``Request``: arrival time on the wall clock in ms, path, headers,
raw body, parsed JSON, the client's address, when its answer began to be written); ``max_in_flight``
is the most requests seen at once between arrival and answer, over all paths or per path.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

HOLD_MAX_S = 120.0     # a held request is answered after this at the latest (no stuck thread)


@dataclass
class Answer:
    """What the receiver does with one request."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b"ok"
    sleep_s: float = 0.0
    hold: threading.Event | None = None    # answer once this is set (or at stop/HOLD_MAX_S)
    close: bool = False                    # answer nothing: close the connection


@dataclass
class Request:
    path: str
    method: str
    headers: dict[str, str]
    body: bytes
    json: Any                    # the body parsed, or None when it is not JSON
    client: tuple[str, int]      # the sender's (address, port)
    at_ms: float                 # arrival (time.time() in ms), after the headers and body
    answered_ms: float | None = None   # when its answer began to be written (None: never)
    status: int | None = None          # the status answered (None: closed unanswered)

    def header(self, name: str) -> str | None:
        """A header's value, the name matched without regard to case."""
        for key, value in self.headers.items():
            if key.lower() == name.lower():
                return value
        return None


Script = Callable[[Request], Answer]


class Receiver:
    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host, self.port = host, port
        self._lock = threading.Lock()
        self._scripts: dict[str, deque[Answer] | Script] = {}
        self._then: dict[str, Answer] = {}
        self._requests: list[Request] = []
        self._arrived = threading.Condition(self._lock)
        self._in_flight: dict[str | None, int] = defaultdict(int)
        self._max_in_flight: dict[str | None, int] = defaultdict(int)
        self._connections: set[socket.socket] = set()
        self._closing = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- life ----------------------------------------------------------------------------------
    def start(self) -> "Receiver":
        self._closing.clear()
        self.up()
        return self

    def up(self) -> None:
        """Listen (again, on the same port once it had one)."""
        if self._server is not None:
            return
        server = ThreadingHTTPServer((self.host, self.port), self._handler_class())
        server.daemon_threads = True
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True, name=f"receiver-{self.port}")
        self._thread.start()

    def down(self) -> None:
        """Close the listening socket and every open connection: connecting is refused."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def stop(self) -> None:
        self._closing.set()     # held requests are let go
        self.down()

    def __enter__(self) -> "Receiver":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def url(self, path: str = "/push") -> str:
        return f"http://{self.host}:{self.port}{path}"

    # -- the script ----------------------------------------------------------------------------
    def script(self, path: str, *answers: Answer | Script, then: Answer | None = None) -> None:
        """The answers of ``path``'s next requests, in order, then ``then`` (200) for every
        later one; or one function answering each request."""
        with self._lock:
            if len(answers) == 1 and callable(answers[0]) and not isinstance(answers[0], Answer):
                self._scripts[path] = answers[0]
            else:
                self._scripts[path] = deque(answers)   # type: ignore[arg-type]
            self._then[path] = then or Answer()

    def _answer_for(self, request: Request) -> Answer:
        with self._lock:
            script = self._scripts.get(request.path)
            then = self._then.get(request.path, Answer())
            if callable(script):
                pass
            elif script:
                return script.popleft()
            else:
                return then
        return script(request)

    # -- what was received ---------------------------------------------------------------------
    def requests(self, path: str | None = None) -> list[Request]:
        with self._lock:
            return [r for r in self._requests if path is None or r.path == path]

    def wait_for(self, count: int, path: str | None = None, timeout_s: float = 10.0
                 ) -> list[Request]:
        """Wait until at least ``count`` requests (of ``path``) arrived; all of them.

        Raises:
            AssertionError: fewer after ``timeout_s``.
        """
        deadline = time.monotonic() + timeout_s
        with self._arrived:
            while True:
                seen = [r for r in self._requests if path is None or r.path == path]
                left = deadline - time.monotonic()
                if len(seen) >= count or left <= 0:
                    break
                self._arrived.wait(left)
        assert len(seen) >= count, (f"{len(seen)} of {count} requests to {path or 'any path'} "
                                    f"arrived within {timeout_s:g} s")
        return seen

    def max_in_flight(self, path: str | None = None) -> int:
        with self._lock:
            return self._max_in_flight[path]

    def in_flight(self, path: str | None = None) -> int:
        with self._lock:
            return self._in_flight[path]

    def clear(self) -> None:
        with self._lock:
            self._requests.clear()
            self._max_in_flight.clear()

    # -- the handler ---------------------------------------------------------------------------
    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"     # keep-alive
            disable_nagle_algorithm = True    # headers and body are two writes

            def setup(self) -> None:
                super().setup()
                with receiver._lock:
                    receiver._connections.add(self.connection)

            def finish(self) -> None:
                with receiver._lock:
                    receiver._connections.discard(self.connection)
                try:
                    super().finish()
                except OSError:
                    pass

            def log_message(self, *args) -> None:   # quiet
                pass

            def do_POST(self) -> None:
                receiver._handle(self)

            do_GET = do_PUT = do_DELETE = do_POST

        return Handler

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        request = Request(handler.path, handler.command, dict(handler.headers.items()), body,
                          parsed, handler.client_address, time.time() * 1000)
        with self._arrived:
            self._requests.append(request)
            for key in (None, request.path):
                self._in_flight[key] += 1
                self._max_in_flight[key] = max(self._max_in_flight[key], self._in_flight[key])
            self._arrived.notify_all()
        left = False

        def leave() -> None:
            # Before the answer goes out: the sender cannot act on it (ack, take the next
            # delivery) before this, so a new arrival never finds this one still counted.
            nonlocal left
            if not left:
                left = True
                with self._lock:
                    for key in (None, request.path):
                        self._in_flight[key] -= 1

        try:
            answer = self._answer_for(request)
            if answer.sleep_s:
                self._closing.wait(answer.sleep_s)
            if answer.hold is not None:
                deadline = time.monotonic() + HOLD_MAX_S
                while not (answer.hold.is_set() or self._closing.is_set()) \
                        and time.monotonic() < deadline:
                    answer.hold.wait(0.05)
            leave()
            if answer.close:
                handler.close_connection = True
                try:
                    handler.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
            request.answered_ms, request.status = time.time() * 1000, answer.status
            try:
                handler.send_response(answer.status)
                for name, value in answer.headers.items():
                    handler.send_header(name, value)
                handler.send_header("Content-Length", str(len(answer.body)))
                handler.end_headers()
                handler.wfile.write(answer.body)
                handler.wfile.flush()
            except OSError:   # the sender went away (timed out, killed)
                handler.close_connection = True
                return
        finally:
            leave()
