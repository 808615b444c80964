"""HTTP to one or more server nodes: a pooled keep-alive session, spreading and fail-over.

Requests go round-robin over the nodes. A node that fails at the connection level is skipped
for a cool-down that doubles with each consecutive failure (camellia's discovery mode drops a
failed node the same way); when every node is cooling down, the one that recovers first is
tried anyway, so a restarted single node is found again at once.

Which failures move on to the next node depends on the call: a request that never reached a
server (connection refused, connect timeout) is always safe to send elsewhere; one that may
have been executed (read timeout, reset) is re-sent only when the call is idempotent.
"""

from __future__ import annotations

import gzip
import itertools
import logging
import threading
import time
from typing import Any, Callable, Mapping, NoReturn

import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError

from .errors import (
    DelayQueueError,
    ServerError,
    UnavailableError,
    UnsupportedError,
    error_for,
)
from .plan import Request

logger = logging.getLogger(__name__)

BASE_PATH = "/camellia/delayQueue/"
NODE_COOLDOWN_BASE_S = 0.5
NODE_COOLDOWN_MAX_S = 30.0
JSON_HEADERS = {"Content-Type": "application/json; charset=utf-8"}
GZIP_JSON_HEADERS = {**JSON_HEADERS, "Content-Encoding": "gzip"}
# gzip level 1: most of the gain on JSON at a small part of the default level's CPU.
GZIP_LEVEL = 1


class Node:
    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self.failures = 0
        self.down_until = 0.0


class NodePool:
    """The nodes and their health; ``order()`` is the try order for one request."""

    def __init__(self, urls: list[str], cooldown_base_s: float = NODE_COOLDOWN_BASE_S,
                 cooldown_max_s: float = NODE_COOLDOWN_MAX_S) -> None:
        if not urls:
            raise ValueError("at least one server URL is required")
        self.nodes = [Node(u) for u in urls]
        self._next = itertools.count()
        self._lock = threading.Lock()
        self.cooldown_base_s = cooldown_base_s
        self.cooldown_max_s = cooldown_max_s

    def order(self) -> list[Node]:
        start = next(self._next) % len(self.nodes)
        rotated = self.nodes[start:] + self.nodes[:start]
        now = time.monotonic()
        with self._lock:
            healthy = [n for n in rotated if n.down_until <= now]
            down = sorted((n for n in rotated if n.down_until > now), key=lambda n: n.down_until)
        return healthy + down

    def failed(self, node: Node) -> None:
        with self._lock:
            node.failures += 1
            cooldown = min(self.cooldown_max_s,
                           self.cooldown_base_s * 2 ** min(node.failures - 1, 16))
            node.down_until = time.monotonic() + cooldown

    def succeeded(self, node: Node) -> None:
        if node.failures:
            with self._lock:
                node.failures = 0
                node.down_until = 0.0


def _never_sent(exc: requests.RequestException) -> bool:
    """True when the request cannot have reached a server (safe to send anywhere)."""
    if isinstance(exc, requests.ConnectTimeout):
        return True
    reason = getattr(exc.args[0], "reason", None) if exc.args else None
    return isinstance(reason, (NewConnectionError, ConnectTimeoutError))


def _reason(exc: requests.RequestException) -> str:
    """A short cause: "connection refused", "read timed out", ..."""
    if isinstance(exc, requests.ConnectTimeout):
        return "connect timed out"
    if isinstance(exc, requests.ReadTimeout):
        return "read timed out"
    reason = getattr(exc.args[0], "reason", None) if exc.args else None
    if isinstance(reason, NewConnectionError):
        text = str(reason).rsplit("]", 1)[-1].strip() or str(reason)
        return text[:1].lower() + text[1:]
    return f"{type(exc).__name__}: {exc}"[:200]


class TransportBase:
    """The nodes, timeouts and compression of a transport, blocking or asyncio
    (delayqueue.aio); each sends through ``Attempts``."""

    def __init__(self, urls: list[str], *, connect_timeout_s: float, read_timeout_s: float,
                 compress_over_bytes: int | None = None) -> None:
        if compress_over_bytes is not None and compress_over_bytes < 0:
            raise ValueError(f"compress_over_bytes: must be at least 0 or None, got "
                             f"{compress_over_bytes}")
        self.compress_over_bytes = compress_over_bytes
        self.pool = NodePool(urls)
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s

    @staticmethod
    def headers(token: str | None) -> dict[str, str]:
        """The headers of every request."""
        headers = {"User-Agent": "delayqueue-python"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return headers


class Transport(TransportBase):
    """POSTs forms to ``/camellia/delayQueue/<endpoint>`` and unwraps the envelope.

    ``compress_over_bytes``: a JSON body (a batch) longer than this is sent gzip-compressed
    (``Content-Encoding: gzip``, which delayqueue decodes and camellia's server has no batch
    endpoints to refuse); None sends every body as it is.
    """

    def __init__(self, urls: list[str], *, connect_timeout_s: float, read_timeout_s: float,
                 pool_size: int, token: str | None = None,
                 compress_over_bytes: int | None = None) -> None:
        super().__init__(urls, connect_timeout_s=connect_timeout_s,
                         read_timeout_s=read_timeout_s, compress_over_bytes=compress_over_bytes)
        self.session = requests.Session()
        adapter = HTTPAdapter(pool_connections=len(self.pool.nodes), pool_maxsize=pool_size)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)
        self.session.headers.update(self.headers(token))

    def close(self) -> None:
        self.session.close()

    def send(self, request: Request) -> dict[str, Any]:
        """Carry out one request of a plan (plan.py): the envelope of a code-200 answer.

        Raises:
            DelayQueueError: the subclass for the server's code, or UnavailableError;
                UnsupportedError when the server has no such endpoint (HTTP 404).
        """
        endpoint = request.endpoint
        timeout = (self.connect_timeout_s, request.read_timeout_s or self.read_timeout_s)
        body, headers = encode_body(request.body, self.compress_over_bytes)
        attempts = Attempts(self.pool, endpoint, request.idempotent)
        for node in attempts.nodes():
            try:
                response = self.session.post(node.url + BASE_PATH + endpoint,
                                             data=(request.params or {}) if body is None else body,
                                             headers=headers, timeout=timeout)
            except requests.RequestException as exc:
                attempts.failed(node, exc, _reason(exc), _never_sent(exc))
                continue
            envelope = attempts.answered(node, response.status_code, response.json)
            if envelope is not None:
                return envelope
        return attempts.exhausted()


def encode_body(body: bytes | None, compress_over_bytes: int | None
                ) -> tuple[bytes | None, Mapping[str, str] | None]:
    """A JSON body and its headers, gzip-compressed when longer than ``compress_over_bytes``;
    (None, None) for a form."""
    if body is None:
        return None, None
    if compress_over_bytes is not None and len(body) > compress_over_bytes:
        return gzip.compress(body, GZIP_LEVEL, mtime=0), GZIP_JSON_HEADERS
    return body, JSON_HEADERS


class Attempts:
    """The fail-over policy of one request, apart from the HTTP library that sends it (the
    blocking Transport here, the asyncio one in delayqueue.aio): which node to try next,
    what a failure or an answer means, and what is raised when every node failed.

    The caller tries each of ``nodes()`` in turn, and reports each try to ``failed`` (no
    answer) or ``answered`` (which returns the envelope, or None to try the next node);
    after the last, ``exhausted()`` raises.
    """

    def __init__(self, pool: NodePool, endpoint: str, idempotent: bool) -> None:
        self.pool, self.endpoint, self.idempotent = pool, endpoint, idempotent
        self.last: Exception | None = None
        self.failures: list[str] = []

    def nodes(self) -> list[Node]:
        return self.pool.order()

    def failed(self, node: Node, exc: Exception, reason: str, never_sent: bool) -> None:
        """No answer from ``node``: ``reason`` says why; ``never_sent``, the request cannot
        have reached a server (safe to send anywhere).

        Raises:
            UnavailableError: it may have been executed and the call is not idempotent.
        """
        self.pool.failed(node)
        logger.debug("%s %s failed: %s", node.url, self.endpoint, exc)
        self.last = exc
        self.failures.append(f"{node.url} ({reason})")
        if not (self.idempotent or never_sent):
            raise UnavailableError(f"{self.endpoint} failed: {self.failures[-1]}") from exc

    def answered(self, node: Node, status_code: int,
                 read_json: Callable[[], Any]) -> dict[str, Any] | None:
        """The envelope of a code-200 answer, or None to try the next node.

        Raises:
            DelayQueueError: the subclass for the server's code, UnsupportedError for an
                unknown endpoint, ServerError for an answer that is not the envelope.
        """
        endpoint = self.endpoint
        try:
            envelope: dict[str, Any] = read_json()
            code = int(envelope["code"])
        except (ValueError, KeyError, TypeError) as exc:
            # Not our envelope: a proxy's 502/503 means the node is gone; camellia (Spring)
            # answers an unknown endpoint with its own 404 page.
            if status_code == 404:
                self.pool.succeeded(node)
                raise UnsupportedError(f"{node.url}: no endpoint {endpoint} (HTTP 404)",
                                       404) from exc
            if status_code >= 500:
                self.pool.failed(node)
                self.last = ServerError(f"{node.url}: HTTP {status_code}")
                if self.idempotent:
                    return None
            raise ServerError(f"{node.url}: HTTP {status_code}, "
                              "not a delayqueue answer") from exc
        self.pool.succeeded(node)
        if status_code == 404 and code == 404:
            raise UnsupportedError(f"{node.url}: no endpoint {endpoint} (HTTP 404)", 404)
        if code != 200:
            raise error_for(code, envelope.get("msg"), status_code, envelope)
        return envelope

    def exhausted(self) -> NoReturn:
        """Every node was tried: the last server error, or UnavailableError."""
        if isinstance(self.last, DelayQueueError):
            raise self.last
        raise UnavailableError("no server reachable: " + ", ".join(self.failures)) \
            from self.last
