"""An HTTP proxy in front of one node that can lose an answer on its way back.

``AnswerDroppingProxy(node.url, ports=2)`` listens on loopback ports the kernel picks (no
free-port race) and forwards every request to the node. After ``drop_next("sendMsg")`` the
next sendMsg reaches the node and is processed there, but its answer is thrown away and the
client's connection closed, as a network fault after the server did its work would. Every
request is recorded (``requests``) with the port it came in on, its form and whether its
answer was dropped.
"""

from __future__ import annotations

import http.client
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


@dataclass
class Forwarded:
    port: int
    endpoint: str
    form: dict[str, str]
    dropped: bool


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"   # keep-alive, as the SDK's pooled session expects
    server: "_Server"

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._forward()

    def do_POST(self) -> None:  # noqa: N802
        self._forward()

    def log_message(self, *args) -> None:  # quiet
        pass

    def _forward(self) -> None:
        proxy = self.server.proxy
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        path, _, query = self.path.partition("?")
        endpoint = path.rsplit("/", 1)[-1]
        form = {k: v[-1] for k, v in parse_qs((query + "&" + body.decode("latin-1")).strip("&"),
                                               keep_blank_values=True).items()}
        dropped = proxy._take_drop(endpoint)
        upstream = http.client.HTTPConnection(proxy.host, proxy.port, timeout=90)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            upstream.request(self.command, self.path, body=body, headers=headers)
            response = upstream.getresponse()
            data = response.read()
        finally:
            upstream.close()
        proxy._record(Forwarded(self.server.server_port, endpoint, form, dropped))
        if dropped:  # processed by the node; the answer is lost and the connection closed
            self.close_connection = True
            return
        self.send_response(response.status, response.reason)
        for key, value in response.getheaders():
            if key.lower() not in HOP_BY_HOP | {"date", "server"}:
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, proxy: "AnswerDroppingProxy") -> None:
        self.proxy = proxy
        super().__init__(("127.0.0.1", 0), _Handler)


class AnswerDroppingProxy:
    def __init__(self, target_url: str, ports: int = 1) -> None:
        target = urlsplit(target_url)
        self.host, self.port = target.hostname, target.port
        self.requests: list[Forwarded] = []
        self._drops: dict[str, int] = {}
        self._lock = threading.Lock()
        self._servers = [_Server(self) for _ in range(ports)]
        self._threads = [threading.Thread(target=s.serve_forever, daemon=True)
                         for s in self._servers]

    @property
    def urls(self) -> list[str]:
        return [f"http://127.0.0.1:{s.server_port}" for s in self._servers]

    def drop_next(self, endpoint: str, count: int = 1) -> None:
        """Lose the answers of the next ``count`` requests to ``endpoint`` (after the node ran
        them)."""
        with self._lock:
            self._drops[endpoint] = self._drops.get(endpoint, 0) + count

    def _take_drop(self, endpoint: str) -> bool:
        with self._lock:
            if self._drops.get(endpoint, 0) > 0:
                self._drops[endpoint] -= 1
                return True
            return False

    def _record(self, forwarded: Forwarded) -> None:
        with self._lock:
            self.requests.append(forwarded)

    def forwarded(self, endpoint: str) -> list[Forwarded]:
        with self._lock:
            return [r for r in self.requests if r.endpoint == endpoint]

    def __enter__(self) -> "AnswerDroppingProxy":
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()
        for thread in self._threads:
            thread.join(5)
