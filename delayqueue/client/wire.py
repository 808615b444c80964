"""One keep-alive HTTP/1.1 connection to a node: urllib3 connects, we frame the exchange.

urllib3 opens the connection (connect timeout, TCP_NODELAY, TLS with certificate and host
name checks); the request and its answer are framed here, because http.client's framing
under urllib3 costs ~450 us of CPU per request (its header parser is the email package's)
where one ``sendall`` of the whole request and a ``recv_into`` of the answer cost ~40
(docs/benchmarks.md, "SDK listener cost"). What is framed is the little this client needs:
a POST with a body of known length, and an answer with Content-Length, chunked, or read to
the end of the connection, plain or gzip/deflate encoded.

A connection that answered keeps its socket for the next request; one whose peer closed it
while idle is found before it is used again (a zero-timeout poll, as urllib3 does), so a
request is never written into a connection the server already closed.
"""

from __future__ import annotations

import select
import socket
import zlib
from typing import Any, Callable

from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.exceptions import ProtocolError, ReadTimeoutError

MAX_HEAD_BYTES = 64 * 1024
RECV_BYTES = 64 * 1024


class Answer:
    __slots__ = ("status", "body")

    def __init__(self, status: int, body: bytes) -> None:
        self.status, self.body = status, body


class Connection:
    """One connection to ``host:port`` (https: ``ca_certs`` verifies it; None, the system's
    certificates). Not thread-safe: one thread uses it at a time (a Transport hands it out
    from its pool of idle ones)."""

    def __init__(self, scheme: str, host: str, port: int, *, connect_timeout_s: float,
                 ca_certs: str | None = None,
                 on_open: Callable[[], None] | None = None) -> None:
        self.scheme, self.host, self.port = scheme, host, port
        self.on_open = on_open
        self.connect_timeout_s = connect_timeout_s
        self.ca_certs = ca_certs
        default = 443 if scheme == "https" else 80
        self.host_header = (host if port == default else f"{host}:{port}").encode("idna")
        if ":" in host and not host.startswith("["):  # an IPv6 address
            self.host_header = (f"[{host}]" if port == default else f"[{host}]:{port}").encode()
        self.sock: Any = None
        self._timeout: float | None = None
        self._buffer = bytearray()

    def open(self) -> None:
        """Connect. Raises urllib3's NewConnectionError, ConnectTimeoutError or SSLError."""
        conn: HTTPConnection
        if self.scheme == "https":
            conn = HTTPSConnection(self.host, self.port, timeout=self.connect_timeout_s,
                                   cert_reqs="CERT_REQUIRED", ca_certs=self.ca_certs)
        else:
            conn = HTTPConnection(self.host, self.port, timeout=self.connect_timeout_s)
        conn.connect()
        self.sock, self._timeout = conn.sock, None
        if self.on_open is not None:
            self.on_open()
        self._buffer.clear()

    def close(self) -> None:
        sock, self.sock = self.sock, None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass

    def usable(self) -> bool:
        """Open, and not closed by the peer (nor sent anything unasked) since its last
        answer."""
        if self.sock is None:
            return False
        if self._buffer:
            return False
        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):
            return False
        return not readable

    def post(self, path: str, headers: bytes, body: bytes, read_timeout_s: float) -> Answer:
        """Send one POST (``headers``: whole header lines, each ending in CRLF, without
        Host and Content-Length) and read its answer. Opens the connection if it is not.

        Raises:
            urllib3.exceptions.HTTPError: NewConnectionError or ConnectTimeoutError (never
                sent), ReadTimeoutError, ProtocolError (reset, closed, not HTTP); or OSError.
                The connection is closed then.
        """
        if not self.usable():
            self.close()
            self.open()
        try:
            if self._timeout != read_timeout_s:
                self.sock.settimeout(read_timeout_s)
                self._timeout = read_timeout_s
            self.sock.sendall(b"".join((
                b"POST ", path.encode(), b" HTTP/1.1\r\nHost: ", self.host_header,
                b"\r\n", headers, b"Content-Length: ", str(len(body)).encode(), b"\r\n\r\n",
                body)))
            return self._read_answer()
        except socket.timeout as exc:
            self.close()
            raise ReadTimeoutError(None, path, f"Read timed out. (read timeout="
                                   f"{read_timeout_s})") from exc  # type: ignore[arg-type]
        except (OSError, ProtocolError, ValueError, zlib.error) as exc:
            self.close()
            if isinstance(exc, ProtocolError):
                raise
            raise ProtocolError("Connection aborted.", exc) from exc

    # ---- reading the answer (the buffer holds what was received and not yet used) -------
    def _fill(self) -> None:
        chunk = self.sock.recv(RECV_BYTES)
        if not chunk:
            raise ProtocolError("Connection aborted.",
                                ConnectionResetError("the server closed the connection"))
        self._buffer += chunk

    def _line(self) -> bytes:
        while True:
            end = self._buffer.find(b"\r\n")
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[:end + 2]
                return line
            if len(self._buffer) > MAX_HEAD_BYTES:
                raise ProtocolError("answer head too long")
            self._fill()

    def _exactly(self, size: int) -> bytes:
        while len(self._buffer) < size:
            self._fill()
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    def _read_answer(self) -> Answer:
        while True:
            status_line = self._line()
            parts = status_line.split(None, 2)
            if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
                raise ProtocolError(f"not an HTTP answer: {status_line[:80]!r}")
            status = int(parts[1])
            fields: dict[bytes, bytes] = {}
            while True:
                line = self._line()
                if not line:
                    break
                name, _, value = line.partition(b":")
                fields[name.strip().lower()] = value.strip()
            if status >= 200 or status == 101:
                break  # 1xx: an interim answer, the real one follows
        keep = parts[0] == b"HTTP/1.1" and fields.get(b"connection", b"").lower() != b"close"
        if b"chunked" in fields.get(b"transfer-encoding", b"").lower():
            body = self._chunked()
        elif b"content-length" in fields:
            body = self._exactly(int(fields[b"content-length"]))
        elif status in (204, 304):
            body = b""
        else:  # delimited by the end of the connection
            while True:
                try:
                    self._fill()
                except ProtocolError:
                    break
            body, keep = bytes(self._buffer), False
            self._buffer.clear()
        if not keep:
            self.close()
        encoding = fields.get(b"content-encoding", b"").lower()
        if encoding in (b"gzip", b"x-gzip"):
            body = zlib.decompress(body, 16 + zlib.MAX_WBITS)
        elif encoding == b"deflate":
            try:
                body = zlib.decompress(body)
            except zlib.error:
                body = zlib.decompress(body, -zlib.MAX_WBITS)
        return Answer(status, body)

    def _chunked(self) -> bytes:
        pieces = []
        while True:
            size = int(self._line().split(b";", 1)[0].strip(), 16)
            if size == 0:
                while self._line():  # trailers, up to the empty line
                    pass
                return b"".join(pieces)
            pieces.append(self._exactly(size))
            if self._exactly(2) != b"\r\n":
                raise ProtocolError("bad chunk end")
