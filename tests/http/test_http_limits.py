"""Every answer a client can get is the JSON envelope — also the ones gunicorn and Werkzeug
give before our views run: a request line over 4094 bytes (414), too many or too large header
fields (431), a malformed request (400), a body over the size limit (413, with a
Content-Length and chunked).

Real gunicorn nodes of each worker class (tests/support/node.py) and raw sockets, so the
bytes on the wire are what is checked: status line, Content-Type, Connection, JSON body.
"""

from __future__ import annotations

import json
import socket
import threading
import uuid
from dataclasses import dataclass, field

import pytest
import requests

from support.node import ServerProcess

MIB = 1024 * 1024
MAX_MSG_BYTES = MIB                      # the default max-msg-bytes
BODY_LIMIT = 4 * MAX_MSG_BYTES + 65536   # app.py: MAX_CONTENT_LENGTH
FORM_FIELD_LIMIT = MAX_MSG_BYTES + 65536  # app.py: MAX_FORM_MEMORY_SIZE
SEND = "/camellia/delayQueue/sendMsg"
FORM = "application/x-www-form-urlencoded"


@pytest.fixture(scope="module", params=["gevent", "gthread", "sync"])
def node(request, redis_server):
    # A database of its own: the function-scoped fixtures flush database 0 under it.
    with redis_server.leased_db_url() as url, \
            ServerProcess(url, worker_class=request.param) as server:
        yield server


@pytest.fixture
def topic(request):
    return f"limits-{uuid.uuid4().hex[:12]}"


# -- a raw HTTP/1.1 exchange ----------------------------------------------------------------
@dataclass
class Answer:
    status: int
    reason: str
    headers: dict[str, str]
    body: bytes
    closed: bool                     # the server closed the connection after the answer
    send_error: OSError | None = None
    raw: bytes = field(default=b"", repr=False)

    def json(self) -> dict:
        return json.loads(self.body)


def exchange(port: int, data: bytes, timeout_s: float = 20.0) -> Answer:
    """Send ``data`` (from a thread, so a server answering early is read while we still
    send) and read one answer; then whether the server closes the connection."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
    send_error: list[OSError] = []

    def send() -> None:
        try:
            sock.sendall(data)
        except OSError as exc:  # the server answered and closed before taking it all
            send_error.append(exc)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    buf = b""
    try:
        while b"\r\n\r\n" not in buf:
            chunk = sock.recv(65536)
            assert chunk, f"connection closed without an answer (got {buf!r})"
            buf += chunk
        head, _, body = buf.partition(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        _, status, reason = status_line.split(" ", 2)
        headers = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers["content-length"])
        while len(body) < length:
            chunk = sock.recv(65536)
            assert chunk, "connection closed inside the answer's body"
            body += chunk
        sender.join(timeout_s)
        closed = headers.get("connection", "").lower() == "close" and _peer_closed(sock)
        return Answer(int(status), reason, headers, body[:length], closed,
                      send_error[0] if send_error else None, buf)
    finally:
        sock.close()


def _peer_closed(sock: socket.socket) -> bool:
    try:
        sock.settimeout(5)
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def assert_envelope(answer: Answer, status: int, msg_start: str, *, close: bool = True) -> dict:
    assert answer.status == status, answer.raw[:300]
    assert answer.headers["content-type"].startswith("application/json"), answer.headers
    envelope = answer.json()
    assert set(envelope) == {"code", "msg"}, envelope
    assert envelope["code"] == status, envelope
    assert envelope["msg"].startswith(msg_start), envelope
    if close:
        assert answer.headers["connection"].lower() == "close", answer.headers
        assert answer.closed, "the server kept the connection open"
    return envelope


def request_bytes(target: str, headers: dict[str, str] | None = None, body: bytes = b"",
                  method: str = "POST") -> bytes:
    lines = [f"{method} {target} HTTP/1.1", "Host: 127.0.0.1"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def chunked(body: bytes, size: int = 65536) -> bytes:
    parts = [b"%x\r\n%s\r\n" % (len(body[i:i + size]), body[i:i + size])
             for i in range(0, len(body), size)]
    return b"".join(parts) + b"0\r\n\r\n"


def still_serves(node: ServerProcess, topic: str) -> None:
    reply = node.call("sendMsg", topic=topic, msg="after", delayMillis=0)
    assert reply["code"] == 200, reply
    assert requests.get(node.url + "/camellia/health/status", timeout=5).status_code == 200


# -- what gunicorn answers itself (delayqueue/server/gunicorn_workers.py) ------------------------
def test_request_line_over_4094_bytes_is_414_json(node, topic):
    target = "/camellia/delayQueue/getMsg?topic=" + "a" * 5000
    answer = exchange(node.port, request_bytes(target, method="GET"))
    envelope = assert_envelope(answer, 414, "request line: longer than 4094 bytes")
    assert answer.reason == "URI Too Long"
    assert envelope["msg"] == "request line: longer than 4094 bytes"
    still_serves(node, topic)


def test_request_line_of_4094_bytes_is_served(node):
    line = "GET /camellia/health/check?x= HTTP/1.1"
    line = line.replace("?x=", "?x=" + "a" * (4094 - len(line)))
    assert len(line) == 4094
    answer = exchange(node.port, (line + "\r\nHost: x\r\n\r\n").encode())
    assert answer.status == 200 and answer.json() == {"code": 200}


def test_long_request_line_followed_by_a_body_still_gets_its_414(node):
    """The rest of the request is still arriving when gunicorn refuses the line: the answer
    must not be lost to a connection reset."""
    body = b"x" * (2 * MIB)
    data = request_bytes("/" + "a" * 5000, {"Content-Length": str(len(body))}, body)
    assert_envelope(exchange(node.port, data), 414, "request line: longer than 4094 bytes")


def test_too_many_header_fields_is_431_json(node):
    headers = {f"X-Field-{i}": "y" for i in range(150)}
    answer = exchange(node.port, request_bytes("/camellia/health/check", headers, method="GET"))
    assert_envelope(answer, 431, "headers: more than 100 header fields")
    assert answer.reason == "Request Header Fields Too Large"


def test_too_large_header_field_is_431_json(node):
    answer = exchange(node.port, request_bytes("/camellia/health/check", {"X-Big": "y" * 9000},
                                               method="GET"))
    assert_envelope(answer, 431, "headers: a header field longer than 8190 bytes")


@pytest.mark.parametrize("line", [b"GARBAGE", b"get / HTTP/1.1", b"GET / HTTP/9.9",
                                  b"GET  HTTP/1.1", b"GET /a b c HTTP/1.1"])
def test_malformed_request_line_is_400_json(node, line):
    answer = exchange(node.port, line + b"\r\nHost: x\r\n\r\n")
    assert_envelope(answer, 400, "request line: malformed")


def test_malformed_header_is_400_json(node):
    answer = exchange(node.port, request_bytes(SEND, {"Content-Length": "abc"}))
    assert_envelope(answer, 400, "headers: malformed")


def test_malformed_chunked_body_is_400_json(node, topic):
    data = request_bytes(SEND, {"Content-Type": FORM, "Transfer-Encoding": "chunked"},
                         b"zz\r\ntopic=x\r\n0\r\n\r\n")
    assert_envelope(exchange(node.port, data), 400, "body: malformed chunked encoding")
    still_serves(node, topic)


def test_unknown_transfer_coding_is_501_json(node):
    data = request_bytes(SEND, {"Transfer-Encoding": "foo"})
    assert_envelope(exchange(node.port, data), 501, "headers: unsupported transfer coding")


def test_unmet_expectation_is_417_json(node):
    data = request_bytes(SEND, {"Expect": "magic", "Content-Length": "0"})
    assert_envelope(exchange(node.port, data), 417, "headers: unsupported Expect")


# -- what Werkzeug refuses (delayqueue/http/app.py) ----------------------------------------------
BODY_MSG = (f"body: larger than {BODY_LIMIT} bytes (4 x max-msg-bytes + 65536, "
            f"max-msg-bytes {MAX_MSG_BYTES})")


def big_form(topic: str, size: int) -> bytes:
    prefix = f"topic={topic}&delayMillis=0&msg=".encode()
    return prefix + b"x" * (size - len(prefix))


def test_10mb_body_with_content_length_is_413_json(node, topic):
    body = big_form(topic, 10 * MIB)
    answer = exchange(node.port, request_bytes(
        SEND, {"Content-Type": FORM, "Content-Length": str(len(body))}, body))
    envelope = assert_envelope(answer, 413, "body: larger than", close=False)
    assert envelope["msg"] == BODY_MSG
    still_serves(node, topic)
    assert node.call("pullMsg", topic=topic, batch=10)["delayMsgList"][0]["msg"] == "after"


def test_10mb_chunked_body_is_413_json(node, topic):
    """Werkzeug alone would cut a chunked body at the limit and parse the truncated form;
    it is refused like one with a Content-Length."""
    body = big_form(topic, 10 * MIB)
    answer = exchange(node.port, request_bytes(
        SEND, {"Content-Type": FORM, "Transfer-Encoding": "chunked"}, chunked(body)))
    envelope = assert_envelope(answer, 413, "body: larger than", close=False)
    assert envelope["msg"] == BODY_MSG
    still_serves(node, topic)
    assert node.call("pullMsg", topic=topic, batch=10)["delayMsgList"][0]["msg"] == "after"


def test_chunked_body_one_byte_over_the_limit_is_413_and_at_the_limit_is_read(node, topic):
    # Padding after the parameters: a form cut at the limit would still look valid.
    params = f"topic={topic}&delayMillis=0&msg=whole&pad=".encode()
    at_limit = params + b"p" * (BODY_LIMIT - len(params))
    answer = exchange(node.port, request_bytes(
        SEND, {"Content-Type": FORM, "Transfer-Encoding": "chunked"}, chunked(at_limit)))
    assert answer.status == 200 and answer.json()["code"] == 200, answer.raw[:300]
    over = at_limit + b"p"
    answer = exchange(node.port, request_bytes(
        SEND, {"Content-Type": FORM, "Transfer-Encoding": "chunked"}, chunked(over)))
    assert_envelope(answer, 413, BODY_MSG, close=False)


def test_small_chunked_body_is_served(node, topic):
    body = f"topic={topic}&delayMillis=0&msg=chunked".encode()
    answer = exchange(node.port, request_bytes(
        SEND, {"Content-Type": FORM, "Transfer-Encoding": "chunked"}, chunked(body, 7)))
    assert answer.status == 200, answer.raw[:300]
    assert answer.json()["delayMsg"]["msg"] == "chunked"


def test_body_over_the_limit_is_413_on_any_endpoint(node):
    """Also where the view never reads the body (the health check)."""
    response = requests.post(node.url + "/camellia/health/check", data=b"x" * (BODY_LIMIT + 1),
                             timeout=30)
    assert response.status_code == 413
    assert response.json() == {"code": 413, "msg": BODY_MSG}


def test_multipart_field_over_the_form_limit_is_413_json(node, topic):
    """Werkzeug's other 413: one multipart field over MAX_FORM_MEMORY_SIZE, in a body under
    the whole-body limit."""
    response = requests.post(node.url + SEND, timeout=30,
                             files={"topic": (None, topic),
                                    "msg": (None, "x" * (FORM_FIELD_LIMIT + 1))})
    assert response.status_code == 413
    envelope = response.json()
    assert envelope["code"] == 413
    assert envelope["msg"].startswith(
        f"form: a multipart field larger than {FORM_FIELD_LIMIT} bytes"), envelope


def test_chunked_multipart_field_over_the_form_limit_is_413_form(node, topic):
    boundary = "dq-boundary"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"topic\"\r\n\r\n{topic}\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"msg\"\r\n\r\n").encode()
    body += b"x" * (FORM_FIELD_LIMIT + 1) + f"\r\n--{boundary}--\r\n".encode()
    answer = exchange(node.port, request_bytes(
        SEND, {"Content-Type": f"multipart/form-data; boundary={boundary}",
               "Transfer-Encoding": "chunked"}, chunked(body)))
    assert_envelope(answer, 413, f"form: a multipart field larger than {FORM_FIELD_LIMIT}",
                    close=False)


def test_msg_over_max_msg_bytes_but_under_the_body_limit_is_our_400(node, topic):
    """Below the transport limits the max-msg-bytes rule answers (camellia's shape)."""
    response = requests.post(node.url + SEND, timeout=30,
                             data={"topic": topic, "msg": "x" * (MAX_MSG_BYTES + 1)})
    envelope = response.json()
    assert envelope["code"] == 400 and envelope["msg"].startswith("msg: "), envelope


# -- the error answer itself, for errors a live node cannot be made to raise ----------------
def test_error_answer_for_every_gunicorn_parse_error():
    from gunicorn.config import Config
    from gunicorn.http import errors

    from delayqueue.server.gunicorn_workers import error_answer, json_error_bytes

    cfg = Config()
    cases = {
        errors.LimitRequestLine(5000, 4094): 414,
        errors.LimitRequestHeaders("limit request headers fields"): 431,
        errors.LimitRequestHeaders("limit request headers fields size"): 431,
        errors.LimitRequestHeaders("max buffer headers"): 431,
        errors.LimitRequestHeaders("limit request trailer section size"): 431,
        errors.InvalidRequestLine("x"): 400,
        errors.InvalidRequestMethod("x"): 400,
        errors.InvalidHTTPVersion("x"): 400,
        errors.InvalidHeader("x"): 400,
        errors.InvalidHeaderName("x"): 400,
        errors.InvalidChunkSize(b"x"): 400,
        errors.InvalidProxyLine("x"): 400,
        errors.ForbiddenProxyRequest("x"): 403,
        errors.UnsupportedTransferCoding("x"): 501,
        errors.ExpectationFailed("x"): 417,
        errors.ConfigurationProblem("x"): 500,
        errors.InvalidResponseHeader("x"): 500,
        RuntimeError("boom"): 500,
    }
    for exc, status in cases.items():
        code, reason, msg = error_answer(exc, cfg)
        assert code == status, (exc, code)
        raw = json_error_bytes(code, reason, msg)
        head, _, body = raw.partition(b"\r\n\r\n")
        assert head.startswith(f"HTTP/1.1 {status} ".encode())
        assert b"Content-Type: application/json" in head and b"Connection: close" in head
        assert f"Content-Length: {len(body)}".encode() in head
        assert json.loads(body) == {"code": status, "msg": msg}
    # What the client sent is quoted, but only so much of it.
    _, _, msg = error_answer(errors.InvalidRequestLine("A" * 10_000), cfg)
    assert len(msg) < 200
