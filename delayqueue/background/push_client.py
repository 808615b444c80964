"""The HTTP client of push delivery: one POST per delivery, classified.

Built on urllib3 (the library under requests, already installed with it): a PoolManager keeps
one keep-alive pool per origin, ``retries=False`` and ``redirect=False`` make every attempt
exactly one request that is never redirected, ``Timeout(connect, read)`` bounds it, and
``preload_content=False`` lets us read at most MAX_ANSWER_BYTES of an answer. requests
itself would add a session-wide proxy and .netrc lookup per call and no way to refuse an
address after DNS; httpx is installed only for tests. The one thing urllib3 does not do is
check where it connects: ``_GuardedConnection`` resolves the host itself and connects only to
an address inside ``push-allowed-networks``, at every new connection (DNS may change after
the URL was accepted), keeping the host name for the Host header, SNI and certificate
checks.
"""

from __future__ import annotations

import itertools
import socket
import threading
import time
from dataclasses import dataclass
from typing import Mapping

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import (
    ConnectTimeoutError,
    HTTPError,
    NewConnectionError,
    ReadTimeoutError,
)
from urllib3.exceptions import (
    TimeoutError as Urllib3Timeout,
)
from urllib3.util import connection

from delayqueue.core.push_target import Resolver, resolve
from delayqueue.settings.push_networks import AllowedNetworks

REAP_S = 0.05                   # how often POSTs past their deadline are looked for
MAX_ANSWER_BYTES = 64 * 1024    # read at most this much of an answer (kept for the error list)
POOLS = 256                     # origins kept alive at once (least recently used dropped)
USER_AGENT = "delayqueue-push/1"

# Outcome classes (monitoring's labels and the last-error list's "outcome").
OK, REDIRECT, CLIENT_ERROR, SERVER_ERROR = "2xx", "3xx", "4xx", "5xx"
TIMEOUT, CONNECTION, REFUSED = "timeout", "connection", "refused"
OUTCOMES = (OK, REDIRECT, CLIENT_ERROR, SERVER_ERROR, TIMEOUT, CONNECTION, REFUSED)


class AddressRefused(NewConnectionError):
    """The host resolved only to addresses outside push-allowed-networks: not connected."""


@dataclass(frozen=True)
class PushAnswer:
    outcome: str                 # one of OUTCOMES
    status: int | None           # the HTTP status, if there was an answer
    retry_after_ms: int | None   # a 429 / 503's Retry-After, in ms
    error: str                   # what went wrong ('' on 2xx), for the last-error list
    millis: float                # from the POST to the answer (or the failure)


def retry_after_ms(value: str | None, now_s: float | None = None) -> int | None:
    """A Retry-After header (seconds, or an HTTP date) in ms from now; None if absent or
    unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return int(value) * 1000
    from email.utils import parsedate_to_datetime
    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return max(0, int((when - (time.time() if now_s is None else now_s)) * 1000))


class Reaper:
    """Ends every POST at its deadline, however the receiver stalls: urllib3's timeouts bound
    the connect and each read, so a receiver trickling its answer a byte at a time could hold
    a POST open past its delivery's ack deadline (pushTimeoutMillis + 1 s) and see it
    redelivered while it is still being answered. One thread for the whole process looks at
    the armed connections every REAP_S and shuts down the socket of each one past its time;
    the POST then fails, and counts as a timeout."""

    def __init__(self) -> None:
        self._armed: dict[int, tuple[float, HTTPConnection]] = {}
        self._reaped: set[int] = set()
        self._tokens = itertools.count()
        self._lock = threading.Lock()
        self._local = threading.local()
        self._thread: threading.Thread | None = None

    def arm(self, seconds: float) -> int:
        """For the next request this thread sends; returns the token to ``release``."""
        token = next(self._tokens)
        self._local.armed = (token, time.monotonic() + seconds)
        return token

    def attach(self, connection: HTTPConnection) -> None:
        """The connection is sending this thread's armed request (called in that thread)."""
        armed = getattr(self._local, "armed", None)
        if armed is None:
            return
        token, deadline = armed
        with self._lock:
            self._armed[token] = (deadline, connection)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="dq-push-reaper")
                self._thread.start()

    def release(self, token: int) -> bool:
        """Disarm; True if the POST was ended by the reaper."""
        self._local.armed = None
        with self._lock:
            self._armed.pop(token, None)
            if token in self._reaped:
                self._reaped.discard(token)
                return True
        return False

    def _run(self) -> None:
        while True:
            time.sleep(REAP_S)
            now = time.monotonic()
            with self._lock:
                late = [(t, c) for t, (d, c) in self._armed.items() if d <= now]
            for token, conn in late:
                sock = getattr(conn, "sock", None)
                if sock is None:
                    continue   # still connecting (bounded by the connect timeout): next turn
                with self._lock:
                    if self._armed.pop(token, None) is None:
                        continue   # answered meanwhile
                    self._reaped.add(token)
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


class _GuardedConnection(HTTPConnection):
    networks: AllowedNetworks
    resolver: Resolver
    reaper: Reaper

    def request(self, *args, **kwargs):  # type: ignore[override]
        self.reaper.attach(self)
        return super().request(*args, **kwargs)

    def _new_conn(self) -> socket.socket:
        host = self._dns_host
        try:
            addresses = self.resolver(host, self.port)
        except (OSError, UnicodeError) as exc:
            raise NewConnectionError(self, f"{host} does not resolve: {exc}") from exc
        allowed = [a for a in addresses if self.networks.allows(a)]
        if not allowed:
            raise AddressRefused(self, f"{host} resolves to {', '.join(addresses)}, outside "
                                 "push-allowed-networks: not connected")
        last: OSError | None = None
        for address in allowed:
            try:
                return connection.create_connection(
                    (address, self.port), self.timeout, source_address=self.source_address,
                    socket_options=self.socket_options)
            except socket.timeout as exc:
                raise ConnectTimeoutError(
                    self, f"connecting to {host} ({address}) timed out") from exc
            except OSError as exc:
                last = exc
        raise NewConnectionError(self, f"cannot connect to {host}: {last}") from last


class _GuardedHTTPSConnection(_GuardedConnection, HTTPSConnection):
    pass


class PushClient:
    """POSTs deliveries; thread-safe (urllib3's pools are)."""

    def __init__(self, networks: AllowedNetworks, resolver: Resolver = resolve,
                 per_origin: int = 64) -> None:
        self.reaper = Reaper()
        guard = {"networks": networks, "resolver": staticmethod(resolver),
                 "reaper": self.reaper}
        http_conn = type("PushHTTPConnection", (_GuardedConnection,), guard)
        https_conn = type("PushHTTPSConnection", (_GuardedHTTPSConnection,), guard)
        self.pools = urllib3.PoolManager(num_pools=POOLS, maxsize=per_origin, block=False,
                                         retries=False)
        self.pools.pool_classes_by_scheme = {
            "http": type("PushHTTPPool", (HTTPConnectionPool,), {"ConnectionCls": http_conn}),
            "https": type("PushHTTPSPool", (HTTPSConnectionPool,),
                          {"ConnectionCls": https_conn}),
        }

    def post(self, url: str, body: bytes, headers: Mapping[str, str],
             timeout_ms: int) -> PushAnswer:
        """One attempt: never redirected, never retried; every failure is an answer."""
        started = time.monotonic()
        seconds = timeout_ms / 1000
        token = self.reaper.arm(seconds)   # the whole POST, not only each read
        try:
            try:
                response = self.pools.request(
                    "POST", url, body=body, headers={**headers, "User-Agent": USER_AGENT},
                    timeout=urllib3.Timeout(connect=seconds, read=seconds), retries=False,
                    redirect=False, preload_content=False)
            except Exception as exc:  # noqa: BLE001 - every failure is a nack, classified
                reaped = self.reaper.release(token)
                return PushAnswer(TIMEOUT if reaped else _failure_class(exc), None, None,
                                  _describe(exc), (time.monotonic() - started) * 1000)
            try:
                answer = response.read(MAX_ANSWER_BYTES + 1)
                read_error = ""
            except (HTTPError, OSError) as exc:   # the status came; the body broke off
                answer, read_error = b"", _describe(exc)
        finally:
            reaped = self.reaper.release(token)
        millis = (time.monotonic() - started) * 1000
        if reaped:
            response.close()
            return PushAnswer(TIMEOUT, response.status, None,
                              f"the POST took over {timeout_ms} ms: ended", millis)
        if len(answer) > MAX_ANSWER_BYTES or read_error:
            response.close()            # not read to the end: this connection is not reused
        else:
            response.release_conn()
        status = response.status
        outcome = _status_class(status)
        error = "" if outcome == OK else f"HTTP {status}: {_excerpt(answer)}"
        delay = retry_after_ms(response.headers.get("Retry-After")) \
            if status in (429, 503) else None
        return PushAnswer(outcome, status, delay, error, millis)

    def close(self) -> None:
        self.pools.clear()


def _status_class(status: int) -> str:
    if 200 <= status < 300:
        return OK
    if 300 <= status < 400:
        return REDIRECT
    return CLIENT_ERROR if 400 <= status < 500 else SERVER_ERROR


def _failure_class(exc: BaseException) -> str:
    seen: BaseException | None = exc
    while seen is not None:   # urllib3 wraps: look down the chain for what happened
        if isinstance(seen, AddressRefused):
            return REFUSED
        if isinstance(seen, NewConnectionError):   # (urllib3 derives it from a timeout)
            return CONNECTION
        if isinstance(seen, (ConnectTimeoutError, ReadTimeoutError, Urllib3Timeout,
                             socket.timeout)):
            return TIMEOUT
        seen = seen.__cause__ or seen.__context__ or next(
            (a for a in getattr(seen, "args", ()) if isinstance(a, BaseException)), None)
    return CONNECTION


def _describe(exc: BaseException) -> str:
    return f"{exc.__class__.__name__}: {exc}"[:300]


def _excerpt(answer: bytes) -> str:
    return answer[:200].decode("utf-8", "replace").replace("\n", " ")
