"""gunicorn worker classes: gunicorn's own, with each response written in one send and every
error answer of gunicorn's own in delayqueue's JSON envelope.

gunicorn's HTTP/1 ``Response`` writes the status line and headers with one ``sendall`` and
the body with another. A delay-queue response is a few hundred bytes, so that is two system
calls (and two loopback/TCP segments) per request where one does — measured on the HTTP
path as the largest single cost after Flask itself (docs/benchmarks.md). ``OneSendResponse``
holds the header block back and sends it together with the first body bytes; a response
without a body (HEAD, 204) still sends its headers when gunicorn closes it.

A request gunicorn cannot parse (a request line over ``limit_request_line``, too many or too
large header fields, a malformed request line, header or chunked body) never reaches Flask:
gunicorn answers it itself from ``Worker.handle_error``, with an HTML page. ``JsonErrors``
overrides that method so those answers are the envelope every other answer is —
``{"code": <status>, "msg": "<what>: <rule>"}`` with the same HTTP status,
``Content-Type: application/json``, ``Connection: close`` and the security headers every
answer carries (``http/headers.py``'s ``COMMON``; see ``error_answer`` for the statuses).

gunicorn decides on every request whether the peer may set the forwarding and scheme headers
(``forwarded_allow_ips``): an ``ipaddress`` parse of the peer's address and a network test
for each trusted network.
``TrustCachedRequest`` keeps that decision per peer address (the settings do not change
in a worker), so a keep-alive connection pays for it once.

``worker-class: gevent`` / ``gthread`` / ``sync`` in our settings select these subclasses;
they differ from gunicorn's only in that response class, that request class and those error
answers. Both of gunicorn's request parsers (``http_parser``, gunicorn_conf.py) build that
Request.
"""

from __future__ import annotations

import json
import socket
import ssl
from datetime import datetime
from typing import Any

from gunicorn import util
from gunicorn.http import errors as http_errors
from gunicorn.http import message, parser, wsgi
from gunicorn.workers.ggevent import GeventWorker
from gunicorn.workers.gthread import ThreadWorker
from gunicorn.workers.sync import SyncWorker

from delayqueue.http.headers import COMMON


class _HeaderBuffer:
    """Stands in for the socket while gunicorn writes the header block."""

    def __init__(self) -> None:
        self.data = b""

    def sendall(self, data: bytes) -> None:
        self.data += data


class OneSendResponse(wsgi.Response):
    _pending = b""

    def send_headers(self) -> None:
        if self.headers_sent:
            return
        sock, self.sock = self.sock, _HeaderBuffer()
        try:
            super().send_headers()
        finally:
            self._pending, self.sock = self.sock.data, sock

    def _flush_headers(self) -> None:
        if self._pending:
            pending, self._pending = self._pending, b""
            self.sock.sendall(pending)

    def _emit_body(self, data: bytes) -> None:
        if self._pending and not self.chunked:
            pending, self._pending = self._pending, b""
            self.sock.sendall(pending + data)
            return
        self._flush_headers()
        super()._emit_body(data)

    def sendfile(self, respiter) -> bool:
        # gunicorn's sendfile sends the headers (here: holds them back) and then the file
        # straight to the socket, so the held block must go out first. Should it then decline
        # (no fileno), the fallback write() finds the headers sent: two sends, in order.
        self.send_headers()
        self._flush_headers()
        return super().sendfile(respiter)

    def close(self) -> None:
        self.send_headers()
        self._flush_headers()
        super().close()


# Peers whose trust was decided, per worker: (id of the settings, peer address) -> trusted.
# Bounded: past this many distinct peers the cache starts again (a worker serves a few
# proxies or clients; a scan of many addresses costs only the uncached check).
_TRUST_CACHE_MAX = 4096
_trusted_peers: dict[tuple[int, str], bool] = {}


class TrustCachedRequest(message.Request):
    """gunicorn's Request, deciding whether the peer is a trusted proxy once per address."""

    def _peer_is_trusted_proxy(self) -> bool:
        peer = self.peer_addr
        if not isinstance(peer, tuple):
            return True  # a unix socket: gunicorn trusts it too
        key = (id(self.cfg), peer[0])
        trusted = _trusted_peers.get(key)
        if trusted is None:
            if len(_trusted_peers) >= _TRUST_CACHE_MAX:
                _trusted_peers.clear()
            trusted = _trusted_peers[key] = super()._peer_is_trusted_proxy()
        return trusted


def _install() -> None:
    # wsgi.create() resolves ``Response`` from its module at call time (HTTP/2 passes its own
    # class and is not affected). A gunicorn without the ``_emit_body`` hook (< 27) writes the
    # body past it, so it keeps its own Response: two sends, but never body before headers.
    if hasattr(wsgi.Response, "_emit_body"):
        wsgi.Response = OneSendResponse
    # The parser makes each request from its class attribute; a gunicorn without the shared
    # header policy (< 27) decides trust elsewhere and keeps its own class.
    if hasattr(message.Request, "_peer_is_trusted_proxy"):
        parser.RequestParser.mesg_class = TrustCachedRequest


# --- gunicorn's own error answers as the JSON envelope ----------------------------------------

# How gunicorn's parser reads its limits (gunicorn/http/message.py): limit_request_line < 0
# or above 8190 means 8190, and 0 means none (its optional C parser still stops at 1 MiB);
# limit_request_fields <= 0 or above 32768 means 32768; limit_request_field_size <= 0 means
# 8190.
_MAX_REQUEST_LINE = 8190
_UNLIMITED_REQUEST_LINE = 1024 * 1024
_MAX_HEADERS = 32768
_DEFAULT_MAX_HEADERFIELD_SIZE = 8190
# A message quoting what the client sent quotes at most this much of it.
_QUOTE_MAX = 80


def _error_classes(*names: str) -> tuple[type, ...]:
    """The named gunicorn.http.errors classes this gunicorn has (older ones lack a few)."""
    return tuple(cls for cls in (getattr(http_errors, name, None) for name in names)
                 if isinstance(cls, type))


_REQUEST_LINE_ERRORS = _error_classes("InvalidRequestLine", "InvalidRequestMethod",
                                      "InvalidHTTPVersion")
_HEADER_ERRORS = _error_classes("InvalidHeader", "InvalidHeaderName", "ObsoleteFolding",
                                "InvalidSchemeHeaders")
_CHUNK_ERRORS = _error_classes("InvalidChunkSize", "ChunkMissingTerminator",
                               "InvalidChunkExtension")
_PROXY_ERRORS = _error_classes("InvalidProxyLine", "InvalidProxyHeader", "InvalidH2CPreface")
# The application's own fault (a response header it may not send): 500, as gunicorn does.
_APP_ERRORS = _error_classes("InvalidResponseHeader", "InvalidResponseHeaderName")
_UNSUPPORTED_CODING = _error_classes("UnsupportedTransferCoding")
_EXPECTATION_FAILED = _error_classes("ExpectationFailed")
_FORBIDDEN_PROXY = _error_classes("ForbiddenProxyRequest")
_CONFIGURATION = _error_classes("ConfigurationProblem")
_ANY_PARSE_ERROR = _error_classes("ParseException")  # one a later gunicorn may add


def _quote(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) <= _QUOTE_MAX else text[:_QUOTE_MAX] + "..."


def _line_limit(value: Any) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return _MAX_REQUEST_LINE
    if number == 0:
        return _UNLIMITED_REQUEST_LINE
    return _MAX_REQUEST_LINE if number < 0 or number > _MAX_REQUEST_LINE else number


def _limit(value: Any, default: int, ceiling: int | None = None) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return default
    if number <= 0:
        return default
    return min(number, ceiling) if ceiling else number


def error_answer(exc: BaseException, cfg: Any) -> tuple[int, str, str]:
    """(HTTP status, reason phrase, envelope msg) for an error gunicorn handles itself.

    The status is gunicorn's own choice for each error (so a proxy in front sees what it
    would without us); only the body changes. ``msg`` names what was refused and the rule.
    """
    if isinstance(exc, _APP_ERRORS):
        return 500, "Internal Server Error", "internal error: invalid response header"
    if isinstance(exc, http_errors.LimitRequestLine):
        line_limit = _line_limit(getattr(cfg, "limit_request_line", 4094))
        return 414, "URI Too Long", f"request line: longer than {line_limit} bytes"
    if isinstance(exc, http_errors.LimitRequestHeaders):
        detail = str(exc)
        fields = _limit(getattr(cfg, "limit_request_fields", 100), _MAX_HEADERS, _MAX_HEADERS)
        field_size = _limit(getattr(cfg, "limit_request_field_size", 8190),
                            _DEFAULT_MAX_HEADERFIELD_SIZE)
        if "trailer" in detail:
            msg = "trailers: the trailer section is too large"
        elif detail.endswith("size"):
            msg = f"headers: a header field longer than {field_size} bytes"
        elif "fields" in detail:
            msg = f"headers: more than {fields} header fields"
        else:  # "max buffer headers": the whole header section
            msg = (f"headers: the header section is too large (at most {fields} fields of "
                   f"{field_size} bytes)")
        return 431, "Request Header Fields Too Large", msg
    if isinstance(exc, _REQUEST_LINE_ERRORS):
        return 400, "Bad Request", f"request line: malformed ({_quote(exc)})"
    if isinstance(exc, _HEADER_ERRORS):
        return 400, "Bad Request", f"headers: malformed ({_quote(exc)})"
    if isinstance(exc, _CHUNK_ERRORS):
        return 400, "Bad Request", f"body: malformed chunked encoding ({_quote(exc)})"
    if isinstance(exc, _UNSUPPORTED_CODING):
        return 501, "Not Implemented", f"headers: unsupported transfer coding ({_quote(exc)})"
    if isinstance(exc, _EXPECTATION_FAILED):
        return 417, "Expectation Failed", f"headers: unsupported Expect ({_quote(exc)})"
    if isinstance(exc, _FORBIDDEN_PROXY):
        return 403, "Forbidden", "request: proxy request not allowed"
    if isinstance(exc, _PROXY_ERRORS):
        return 400, "Bad Request", f"request: malformed ({_quote(exc)})"
    if isinstance(exc, _CONFIGURATION):
        return 500, "Internal Server Error", f"internal error: {_quote(exc)}"
    if isinstance(exc, _ANY_PARSE_ERROR):
        return 400, "Bad Request", f"request: malformed ({_quote(exc)})"
    if isinstance(exc, ssl.SSLError):
        return 403, "Forbidden", "request: TLS error"
    return 500, "Internal Server Error", "internal error"


def json_error_bytes(status: int, reason: str, msg: str) -> bytes:
    body = json.dumps({"code": status, "msg": msg}, separators=(",", ":")).encode()
    head = (f"HTTP/1.1 {status} {reason}\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n"
            "Connection: close\r\n"
            + "".join(f"{name}: {value}\r\n" for name, value in COMMON)
            + "\r\n").encode("latin-1")
    return head + body


class JsonErrors:
    """Mixin for gunicorn workers: ``handle_error`` answers with the JSON envelope.

    gunicorn's ``Worker.handle_error`` logs, writes the access-log line and sends an HTML
    page; this does the same logging and access log, and sends the envelope instead. The
    worker closes the connection afterwards, as it does after gunicorn's page.
    """

    def handle_error(self, req, client, addr, exc) -> None:  # gunicorn's signature
        request_start = datetime.now()
        addr = addr or ("", -1)  # unix socket case
        status, reason, msg = error_answer(exc, self.cfg)
        if status == 500:
            if hasattr(req, "uri") and hasattr(req, "method"):
                self.log.exception("Error handling request %s %s", req.method, req.uri)
            elif hasattr(req, "uri"):
                self.log.exception("Error handling request %s", req.uri)
            else:
                self.log.exception("Error handling request (no URI read)")
        else:
            self.log.warning("Invalid request from ip=%s: %s", addr[0], exc)
        data = json_error_bytes(status, reason, msg)
        if req is None and hasattr(exc, "req") and hasattr(exc.req, "uri"):
            req = exc.req  # a header error after the request line: for the access log
        if req is not None and hasattr(req, "uri"):
            try:
                environ = wsgi.default_environ(req, client, self.cfg)
                environ["REMOTE_ADDR"] = addr[0]
                environ["REMOTE_PORT"] = str(addr[1])
                resp = wsgi.Response(req, client, self.cfg)
                resp.status = f"{status} {reason}"
                resp.response_length = len(data)
                self.log.access(resp, req, environ, datetime.now() - request_start)
            except Exception:  # noqa: BLE001 - never let the access log stop the answer
                self.log.debug("Failed to write the access log of an error.")
        try:
            util.write_nonblock(client, data)
        except Exception:  # noqa: BLE001 - the client may be gone; so was gunicorn's page
            self.log.debug("Failed to send error message.")
            return
        self._close_after_error(client)

    def _close_after_error(self, client) -> None:
        """End our side cleanly: FIN, then read what the client still sends for a moment.

        Closing a socket with unread request bytes in its buffer makes the kernel send RST,
        which can destroy the answer before the client reads it (a long request line is
        refused while the rest of the request is still arriving). gunicorn's sync and gthread
        workers close that way themselves; its async (gevent) worker closes at once, so this
        does it for all three (a second close is harmless).
        """
        graceful = getattr(util, "close_graceful", None)
        if graceful is not None:
            graceful(client, timeout=1.0)
            return
        try:
            client.shutdown(socket.SHUT_WR)
        except OSError:
            pass


class DrainOnExit:
    """On SIGTERM, besides gunicorn's own stop (no new connections, requests in flight
    finish within graceful-timeout-seconds), answer every held long poll at once with an
    empty list, so the worker exits well inside the grace period instead of being killed at
    its end; worker_exit (gunicorn_conf.py) then stops the loops and releases the leases."""

    def handle_exit(self, sig, frame) -> None:  # gunicorn's signature
        super().handle_exit(sig, frame)
        app = getattr(self, "wsgi", None)
        service = getattr(app, "extensions", {}).get("delayqueue") if app is not None else None
        drain = getattr(service, "drain", None)
        if callable(drain):
            self.start_drain(drain)

    def start_drain(self, drain) -> None:
        drain()


class OneSendGeventWorker(DrainOnExit, JsonErrors, GeventWorker):
    def start_drain(self, drain) -> None:
        import gevent

        gevent.spawn(drain)  # out of the signal handler: it takes locks and wakes greenlets

    def init_process(self) -> None:
        _install()
        super().init_process()


class OneSendThreadWorker(DrainOnExit, JsonErrors, ThreadWorker):
    def init_process(self) -> None:
        _install()
        super().init_process()


class OneSendSyncWorker(DrainOnExit, JsonErrors, SyncWorker):
    def init_process(self) -> None:
        _install()
        super().init_process()


GUNICORN_WORKERS = {
    "gevent": "delayqueue.server.gunicorn_workers.OneSendGeventWorker",
    "gthread": "delayqueue.server.gunicorn_workers.OneSendThreadWorker",
    "sync": "delayqueue.server.gunicorn_workers.OneSendSyncWorker",
}
