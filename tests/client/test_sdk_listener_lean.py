"""The lean SDK listener (issue 29): the handler on the pull thread with one consume thread,
a heartbeat thread woken only when a beat is due, and the transport (urllib3's pools, no
framing of ours) against answers a server may give: chunked, gzip, Connection: close, a
keep-alive connection the server closed while idle."""

from __future__ import annotations

import gzip
import socket
import threading
import time
from types import SimpleNamespace

import pytest

from delayqueue.client import DelayQueueClient
from delayqueue.client.errors import UnavailableError
from delayqueue.client.heartbeat import Heartbeats
from delayqueue.client.plan import Request
from delayqueue.client.transport import proxy_for

from support import wait_until
from support.sdk import node, topic  # noqa: F401 - fixtures


# ---- the handler's thread -------------------------------------------------------------
@pytest.mark.parametrize("consume_threads, prefix", [(1, "dq-pull-"), (2, "dq-consume-")])
def test_one_consume_thread_runs_the_handler_on_the_pull_thread(node, topic, consume_threads,
                                                                prefix):
    threads: list[threading.Thread] = []
    with DelayQueueClient(node.url) as client:
        for i in range(6):
            client.send(topic, f"m{i}")
        consumer = client.listen(topic, lambda msg: threads.append(threading.current_thread())
                                 or True, consume_threads=consume_threads, limit=6)
        assert consumer.wait(30)
        consumer.stop()
    assert consumer.acked == 6
    assert all(t.name.startswith(prefix) for t in threads), [t.name for t in threads]
    if consume_threads == 1:
        assert set(threads) == set(consumer._pullers)   # no hand-off to another thread
        assert consumer._executor is None


def test_stop_from_inside_an_inline_handler_returns_and_settles_it(node, topic):
    with DelayQueueClient(node.url) as client:
        client.send(topic, "only")
        box: dict = {}

        def handler(msg):
            box["consumer"].stop()
            return True
        box["consumer"] = consumer = client.listen(topic, handler, heartbeat=False,
                                                   long_polling=False)
        wait_until(lambda: consumer.acked == 1, 30)


# ---- heartbeats -----------------------------------------------------------------------
def Msg(msg_id: str) -> SimpleNamespace:
    """What a heartbeat reads of a delivered message."""
    return SimpleNamespace(topic="t", msg_id=msg_id, receipt="r")


class BeatRecorder:
    timeout = 5.0

    def __init__(self) -> None:
        self.beats: list[str] = []

    def change_visibility(self, topic, msg_id, ms, **_):
        self.beats.append(msg_id)


def test_the_heartbeat_thread_is_not_woken_per_message():
    client = BeatRecorder()
    beats = Heartbeats(client, "t", ack_timeout_ms=60_000)  # type: ignore[arg-type]
    try:
        for i in range(300):   # handlers that return long before their beat is due
            delivery = beats.track(Msg(f"m{i}"),
                                   time.monotonic())
            beats.untrack(delivery)
        time.sleep(0.2)
        assert beats.wakeups <= 1 and client.beats == []
        # One due sooner than the thread would look wakes it, and is beaten.
        soon = beats.track(Msg("slow"),
                           time.monotonic() - beats.interval_s + 0.05)
        wait_until(lambda: client.beats == ["slow"], 10)
        beats.untrack(soon)
        assert beats.wakeups <= 3, beats.wakeups
    finally:
        beats.close()


def test_a_listener_of_quick_handlers_keeps_its_heartbeat_thread_asleep(node, topic):
    with DelayQueueClient(node.url) as client:
        for i in range(40):
            client.send(topic, f"m{i}")
        consumer = client.listen(topic, lambda msg: True, limit=40)
        assert consumer.wait(30)
        consumer.stop()
    assert consumer.acked == 40
    assert consumer._heartbeats is not None and consumer._heartbeats.wakeups <= 2


# ---- the transport against a scripted server ----------------------------------------
class Scripted:
    """A one-thread HTTP server on 127.0.0.1 answering each request with the next bytes of
    ``answers`` (a callable gets the connection's socket instead), keeping the connection
    unless an answer says ``Connection: close``."""

    def __init__(self, answers) -> None:
        self.answers = list(answers)
        self.requests: list[bytes] = []
        self.accepted = 0     # connections the client opened
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while self.answers:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            with conn:
                conn.settimeout(10)
                while self.answers:
                    data = b""
                    while b"\r\n\r\n" not in data:
                        chunk = conn.recv(65536)
                        if not chunk:
                            break
                        data += chunk
                    if not data:
                        break
                    head, _, body = data.partition(b"\r\n\r\n")
                    length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                    while len(body) < length:
                        body += conn.recv(65536)
                    self.requests.append(data)
                    answer = self.answers.pop(0)
                    if callable(answer):
                        answer(conn)
                        break
                    conn.sendall(answer)
                    if b"Connection: close" in answer:
                        break

    def close(self) -> None:
        self.listener.close()


def ok(body: bytes, *extra: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\n" + b"".join(e + b"\r\n" for e in extra) + \
        b"Content-Length: %d\r\n\r\n" % len(body) + body


def test_answers_chunked_gzipped_or_closing_are_read_and_the_connection_kept_or_not():
    envelope = b'{"code": 200, "msg": "success", "data": []}'
    zipped = gzip.compress(envelope)
    chunked = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
               + b"".join(b"%x\r\n%s\r\n" % (len(envelope[i:i + 7]), envelope[i:i + 7])
                          for i in range(0, len(envelope), 7)) + b"0\r\n\r\n")

    def to_the_end(conn):     # no length: the body ends with the connection (HTTP/1.0 style)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n" + envelope)
        conn.shutdown(socket.SHUT_RDWR)

    server = Scripted([ok(envelope), chunked, ok(zipped, b"Content-Encoding: gzip"),
                       ok(envelope, b"Connection: close"), ok(envelope), to_the_end])
    try:
        with DelayQueueClient(server.url, token="secret") as client:
            for _ in range(6):
                assert client.topics() == []
        assert server.accepted == 2   # kept alive, then reopened after Connection: close
        first = server.requests[0]
        assert first.startswith(b"POST /camellia/delayQueue/")
        assert b"\r\nAuthorization: Bearer secret\r\n" in first
        assert b"\r\nHost: 127.0.0.1:" in first
    finally:
        server.close()


def test_a_keep_alive_connection_closed_by_the_server_is_not_reused_for_a_send():
    envelope = b'{"code": 200, "msg": "success", "data": []}'

    def answer_then_close(conn):
        conn.sendall(ok(envelope))
        conn.shutdown(socket.SHUT_RDWR)   # the server's keep-alive timeout, while idle

    server = Scripted([answer_then_close, ok(b'{"code": 200}')])
    try:
        with DelayQueueClient(server.url) as client:
            client.topics()
            time.sleep(0.2)
            # Not idempotent: written into the closed connection, it would fail.
            assert client._transport.send(Request("ackMsg", {"topic": "t"})) == {"code": 200}
        assert len(server.requests) == 2 and server.accepted == 2
    finally:
        server.close()


def test_a_read_timeout_is_unavailable_and_says_so():
    listener = socket.create_server(("127.0.0.1", 0))   # accepts (backlog), never answers
    try:
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        with DelayQueueClient(url, timeout=0.3) as client:
            with pytest.raises(UnavailableError, match="read timed out"):
                client.topics()
    finally:
        listener.close()


def test_the_environment_proxy_is_chosen_as_requests_chose_it(monkeypatch):
    proxies = {"http": "http://proxy:3128", "no": "internal.example"}
    monkeypatch.setenv("no_proxy", "internal.example")
    assert proxy_for("http://a.example:8080", proxies) == "http://proxy:3128"
    assert proxy_for("http://node.internal.example:8080", proxies) is None
    assert proxy_for("https://a.example", proxies) is None
    assert proxy_for("https://a.example", {**proxies, "all": "http://p:1"}) == "http://p:1"


def test_a_node_behind_the_environment_proxy_is_reached_through_it(monkeypatch):
    proxy = Scripted([ok(b'{"code": 200, "msg": "success", "data": []}')])
    monkeypatch.setenv("http_proxy", proxy.url)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    try:
        with DelayQueueClient("http://node.invalid:8080", token="secret") as client:
            monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")   # read once: not again
            assert client.topics() == []
        (sent,) = proxy.requests
        assert sent.startswith(b"POST http://node.invalid:8080/camellia/delayQueue/")
        assert b"\r\nAuthorization: Bearer secret\r\n" in sent
    finally:
        proxy.close()
