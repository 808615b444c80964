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
import json
import logging
import os
import threading
import time
from typing import Any, Callable, Mapping, NoReturn
from urllib.parse import urlencode, urlsplit
from urllib.request import getproxies, proxy_bypass

import urllib3
from urllib3.connectionpool import HTTPConnectionPool
from urllib3.exceptions import (
    ConnectTimeoutError,
    HTTPError,
    NewConnectionError,
    ReadTimeoutError,
)

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
FORM_HEADERS = {"Content-Type": "application/x-www-form-urlencoded"}
# gzip level 1: most of the gain on JSON at a small part of the default level's CPU.
GZIP_LEVEL = 1
# What requests sent besides our own headers, kept so a server or a proxy sees the same.
DEFAULT_HEADERS = {"Accept-Encoding": "gzip, deflate", "Accept": "*/*",
                   "Connection": "keep-alive"}


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


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it wraps (urllib3 wraps a socket error in its own, a proxy's in
    ProxyError), outermost first."""
    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and seen not in chain and len(chain) < 8:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__ or next(
            (a for a in getattr(seen, "args", ()) if isinstance(a, BaseException)), None)
    return chain


def _never_sent(exc: BaseException) -> bool:
    """True when the request cannot have reached a server (safe to send anywhere): no
    connection was made (refused, name not resolved, connect timeout)."""
    return any(isinstance(e, (NewConnectionError, ConnectTimeoutError)) for e in _causes(exc))


def _reason(exc: BaseException) -> str:
    """A short cause: "connection refused", "read timed out", ..."""
    for seen in _causes(exc):
        # NewConnectionError derives from ConnectTimeoutError in urllib3 2: it comes first.
        if isinstance(seen, NewConnectionError):
            text = str(seen).rsplit("]", 1)[-1].strip() or str(seen)
            return text[:1].lower() + text[1:]
        if isinstance(seen, ConnectTimeoutError):
            return "connect timed out"
        if isinstance(seen, ReadTimeoutError):
            return "read timed out"
    return f"{type(exc).__name__}: {exc}"[:200]


def encode_form(params: Mapping[str, Any] | None) -> bytes:
    """A form body as requests encoded one: None values left out, a list or tuple gives the
    key once per item, everything else ``str()``-ed (urlencode's quote_plus, UTF-8)."""
    if not params:
        return b""
    pairs: list[tuple[str, Any]] = []
    for key, value in params.items():
        for item in (value if isinstance(value, (list, tuple)) else (value,)):
            if item is not None:
                pairs.append((key, item))
    return urlencode(pairs).encode("ascii")


def _ca_bundle() -> str | None:
    """The CA certificates requests verified HTTPS with: REQUESTS_CA_BUNDLE or
    CURL_CA_BUNDLE from the environment, else certifi's bundle (None: the system's)."""
    bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
    if bundle:
        return bundle
    try:
        import certifi
    except ImportError:  # pragma: no cover - certifi comes with the SDK's dependencies
        return None
    return str(certifi.where())


def proxy_for(url: str, proxies: Mapping[str, str] | None = None) -> str | None:
    """The proxy the environment names for ``url`` (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY,
    minus NO_PROXY), as requests chose it; None: connect directly."""
    proxies = getproxies() if proxies is None else proxies
    if not proxies:
        return None
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    if proxy_bypass(netloc) or proxy_bypass(host):
        return None
    return proxies.get(parts.scheme) or proxies.get("all") or None


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

    Each node has one urllib3 connection pool keeping up to ``pool_size`` idle keep-alive
    connections: a thread takes one for its request and puts it back (last in, first out,
    so a thread calling again gets a warm one; past ``pool_size`` a new one is opened and
    closed after use: ``block=False``). urllib3 sends the request and reads its answer
    (Content-Length, chunked or to the end of the connection; gzip and deflate decoded).

    Every attempt is one request: urllib3 neither retries nor redirects (``retries=False``,
    Attempts decides what is tried again and where). An idle connection the server closed
    (its keep-alive timeout) is found by urllib3 before it is used again (a zero-timeout
    poll as the pool hands it out) and reopened, as requests did; one closed in the instant
    between that poll and the request fails as a maybe-executed request. urllib3's own Retry
    cannot tell that case apart from a request the server received (both are "read" errors
    on a POST), so a retry there could send a message twice: fail-over (idempotent calls
    only) handles it instead.

    The environment is read once, here: the proxy of each node (HTTP_PROXY, HTTPS_PROXY,
    ALL_PROXY, NO_PROXY; a node behind one is reached through urllib3's ProxyManager) and
    the CA bundle for HTTPS (REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, else certifi's). The
    headers are built once too.
    """

    def __init__(self, urls: list[str], *, connect_timeout_s: float, read_timeout_s: float,
                 pool_size: int, token: str | None = None,
                 compress_over_bytes: int | None = None) -> None:
        super().__init__(urls, connect_timeout_s=connect_timeout_s,
                         read_timeout_s=read_timeout_s, compress_over_bytes=compress_over_bytes)
        common = {**self.headers(token), **DEFAULT_HEADERS}
        self._headers = common
        self._form_headers = {**common, **FORM_HEADERS}
        self._json_headers = {**common, **JSON_HEADERS}
        self._gzip_headers = {**common, **GZIP_JSON_HEADERS}
        self._timeouts: dict[float, urllib3.Timeout] = {}
        self.pool_size = pool_size
        proxies = getproxies()
        ca_certs = _ca_bundle() if any(n.url.startswith("https:") for n in self.pool.nodes) \
            else None
        options: dict[str, Any] = {
            "maxsize": pool_size, "block": False, "retries": False,
            "timeout": self._timeout(read_timeout_s)}
        self._managers: list[urllib3.PoolManager] = []
        # node URL -> urllib3's pool for it, and what goes before the endpoint's path: the
        # node URL's own path or, through a plain-HTTP proxy, the node's whole URL (a
        # forwarding proxy takes the absolute form)
        self._routes: dict[str, tuple[HTTPConnectionPool, str]] = {}
        for node in self.pool.nodes:
            proxy = proxy_for(node.url, proxies)
            if proxy is not None:  # a PoolManager drops ca_certs for plain HTTP itself
                with_ca = {**options, "ca_certs": ca_certs} if ca_certs else options
                self._routes[node.url] = self._proxied(node.url, proxy, with_ca)
                continue
            https = node.url.startswith("https:")
            pool = urllib3.connection_from_url(
                node.url, **({**options, "ca_certs": ca_certs} if https and ca_certs
                             else options))
            self._routes[node.url] = pool, urlsplit(node.url).path

    def _timeout(self, read_timeout_s: float) -> urllib3.Timeout:
        """The urllib3 Timeout for a read timeout, made once per value (the client's, and
        each long poll's: a handful)."""
        timeout = self._timeouts.get(read_timeout_s)
        if timeout is None:
            timeout = urllib3.Timeout(connect=self.connect_timeout_s, read=read_timeout_s)
            if len(self._timeouts) < 64:
                self._timeouts[read_timeout_s] = timeout
        return timeout

    def _proxied(self, url: str, proxy: str,
                 options: dict[str, Any]) -> tuple[HTTPConnectionPool, str]:
        manager: urllib3.PoolManager
        if proxy.lower().startswith("socks"):
            from urllib3.contrib.socks import SOCKSProxyManager  # needs PySocks, as requests
            manager = SOCKSProxyManager(proxy, num_pools=1, **options)
        else:
            if "://" not in proxy:
                proxy = "http://" + proxy
            auth = urlsplit(proxy)
            headers = urllib3.make_headers(
                proxy_basic_auth=f"{auth.username}:{auth.password or ''}") \
                if auth.username else None
            manager = urllib3.ProxyManager(proxy, num_pools=1, proxy_headers=headers,
                                           **options)
        self._managers.append(manager)
        pool = manager.connection_from_url(url)
        absolute = not proxy.lower().startswith("socks") and url.startswith("http:")
        return pool, url if absolute else urlsplit(url).path

    def close(self) -> None:
        for pool, _ in self._routes.values():
            pool.close()
        for manager in self._managers:
            manager.clear()

    def send(self, request: Request) -> dict[str, Any]:
        """Carry out one request of a plan (plan.py): the envelope of a code-200 answer.

        Raises:
            DelayQueueError: the subclass for the server's code, or UnavailableError;
                UnsupportedError when the server has no such endpoint (HTTP 404).
        """
        endpoint = request.endpoint
        read_timeout_s = request.read_timeout_s or self.read_timeout_s
        body, encoded = encode_body(request.body, self.compress_over_bytes)
        if body is None:
            body = encode_form(request.params)
            headers = self._form_headers if body else self._headers
        else:
            headers = self._gzip_headers if encoded is GZIP_JSON_HEADERS else self._json_headers
        attempts = Attempts(self.pool, endpoint, request.idempotent)
        for node in attempts.nodes():
            try:
                status, data = self._post(node.url, BASE_PATH + endpoint, body, headers,
                                          read_timeout_s)
            except (HTTPError, OSError) as exc:
                attempts.failed(node, exc, _reason(exc), _never_sent(exc))
                continue
            envelope = attempts.answered(node, status, lambda: json.loads(data))
            if envelope is not None:
                return envelope
        return attempts.exhausted()

    def _post(self, url: str, path: str, body: bytes, headers: Mapping[str, str],
              read_timeout_s: float) -> tuple[int, bytes]:
        """One POST to a node, read to the end and its connection given back for the next:
        the status and the (decoded) body."""
        pool, prefix = self._routes[url]
        response = pool.urlopen("POST", prefix + path, body=body, headers=headers,
                                timeout=self._timeout(read_timeout_s), retries=False,
                                redirect=False, assert_same_host=False, preload_content=True)
        return response.status, response.data


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
