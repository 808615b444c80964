"""background/push_client.py: one POST, never redirected nor retried, its answer classified,
at most 64 KiB read, and the address guard at every new connection."""

from __future__ import annotations

import socket
import threading
import time
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from delayqueue.background.push_client import (
    MAX_ANSWER_BYTES,
    PushClient,
    retry_after_ms,
)
from delayqueue.settings.push_networks import AllowedNetworks

LOCAL = AllowedNetworks.parse("127.0.0.0/8")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list[str] = []

    def do_POST(self):  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers["Content-Length"]))
        self.seen.append(self.path)
        path = self.path.strip("/")
        status, body, headers = 200, b"", {}
        if path.isdigit():
            status = int(path)
        if path == "302":
            headers["Location"] = "/elsewhere"
        if path == "429":
            headers["Retry-After"] = "7"
        if path == "big":
            body = b"x" * (MAX_ANSWER_BYTES * 3)
        if path == "slow":
            time.sleep(1.0)
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver():
    Handler.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_status_classes_and_retry_after(receiver):
    client = PushClient(LOCAL)
    answers = {p: client.post(f"{receiver}/{p}", b"{}", {}, 5000)
               for p in ("204", "302", "404", "429", "500", "503")}
    assert {p: a.outcome for p, a in answers.items()} == {
        "204": "2xx", "302": "3xx", "404": "4xx", "429": "4xx", "500": "5xx", "503": "5xx"}
    assert answers["204"].error == "" and answers["500"].error.startswith("HTTP 500")
    assert answers["429"].retry_after_ms == 7000 and answers["503"].retry_after_ms is None
    assert "/elsewhere" not in Handler.seen             # the redirect was not followed
    assert Handler.seen.count("/302") == 1              # nor retried


def test_a_huge_answer_is_read_no_further_than_the_bound(receiver):
    client = PushClient(LOCAL)
    answer = client.post(f"{receiver}/big", b"{}", {}, 5000)
    assert answer.outcome == "2xx"
    assert client.post(f"{receiver}/204", b"{}", {}, 5000).outcome == "2xx"  # pool still fine


def test_timeouts_refused_connections_and_refused_addresses(receiver):
    client = PushClient(LOCAL)
    slow = client.post(f"{receiver}/slow", b"{}", {}, 200)
    assert (slow.outcome, slow.status) == ("timeout", None)
    with socket.socket() as spare:             # a port nobody listens on
        spare.bind(("127.0.0.1", 0))
        closed = spare.getsockname()[1]
    assert client.post(f"http://127.0.0.1:{closed}/", b"{}", {}, 500).outcome == "connection"
    public_only = PushClient(AllowedNetworks.parse("public"))
    refused = public_only.post(f"{receiver}/204", b"{}", {}, 500)
    assert refused.outcome == "refused" and "outside push-allowed-networks" in refused.error
    assert Handler.seen == ["/slow"]


def test_a_name_is_resolved_again_at_each_new_connection(receiver):
    port = receiver.rsplit(":", 1)[1]
    answers = {"hooks.test": ["127.0.0.1"]}
    client = PushClient(LOCAL, resolver=lambda host, _: answers[host])
    assert client.post(f"http://hooks.test:{port}/204", b"{}", {}, 500).outcome == "2xx"
    answers["hooks.test"] = ["10.0.0.1"]       # the name now points somewhere refused
    client.pools.clear()                       # (a kept-alive connection would be reused)
    refused = client.post(f"http://hooks.test:{port}/204", b"{}", {}, 500)
    assert refused.outcome == "refused" and "10.0.0.1" in refused.error
    assert Handler.seen == ["/204"]


def test_retry_after_reads_seconds_and_http_dates():
    assert retry_after_ms("12") == 12_000
    assert retry_after_ms(formatdate(1_000_030, usegmt=True), now_s=1_000_000) == 30_000
    assert retry_after_ms(formatdate(999_000, usegmt=True), now_s=1_000_000) == 0
    assert retry_after_ms("soon") is None and retry_after_ms(None) is None


def test_a_receiver_trickling_its_answer_is_ended_at_the_push_timeout():
    """urllib3 bounds each read; the reaper bounds the whole POST."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def trickle():
        conn, _ = listener.accept()
        conn.recv(65536)
        try:
            for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n":
                conn.sendall(bytes([byte]))
                time.sleep(0.1)          # each read well inside the timeout
        except OSError:
            pass
        conn.close()

    threading.Thread(target=trickle, daemon=True).start()
    client = PushClient(LOCAL)
    started = time.monotonic()
    answer = client.post(f"http://127.0.0.1:{listener.getsockname()[1]}/", b"{}", {}, 500)
    took = time.monotonic() - started
    assert answer.outcome == "timeout", answer
    assert took < 2.0     # the trickle alone would take ~3.8 s
    listener.close()
