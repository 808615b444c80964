"""HTTP to one or more server nodes for the asyncio client, on httpx's AsyncClient.

The policy is the blocking transport's, shared through ``Attempts`` (client/transport.py):
round-robin over the nodes, a failed node cooling down, a request that never reached a
server sent to the next node, one that may have been executed re-sent only when idempotent;
the same envelope reading and the same exceptions. Only the sending differs: one
``httpx.AsyncClient`` (HTTP/1.1 keep-alive pool) for every node.
"""

from __future__ import annotations

import os
from typing import Any

import httpx

from delayqueue.client.plan import Request
from delayqueue.client.transport import BASE_PATH, Attempts, TransportBase, encode_body

# Failures that happen before any byte of the request left: safe to send to another node.
NEVER_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


def _reason(exc: httpx.TransportError) -> str:
    """A short cause, worded as the blocking transport's: "connection refused", ..."""
    if isinstance(exc, httpx.ConnectTimeout):
        return "connect timed out"
    if isinstance(exc, httpx.ReadTimeout):
        return "read timed out"
    if isinstance(exc, httpx.ConnectError):
        # anyio wraps the socket's error ("All connection attempts failed"): name the cause.
        cause: BaseException | None = exc
        while cause is not None and not (isinstance(cause, OSError) and cause.errno):
            cause = cause.__cause__ or cause.__context__
        text = os.strerror(cause.errno) if isinstance(cause, OSError) and cause.errno \
            else str(exc) or type(exc).__name__
        return text[:1].lower() + text[1:]
    return f"{type(exc).__name__}: {exc}"[:200]


class AsyncTransport(TransportBase):
    """POSTs forms (or JSON bodies) to ``/camellia/delayQueue/<endpoint>``, unwraps the
    envelope; ``compress_over_bytes`` as in the blocking Transport."""

    def __init__(self, urls: list[str], *, connect_timeout_s: float, read_timeout_s: float,
                 pool_size: int, token: str | None = None,
                 compress_over_bytes: int | None = None) -> None:
        super().__init__(urls, connect_timeout_s=connect_timeout_s,
                         read_timeout_s=read_timeout_s, compress_over_bytes=compress_over_bytes)
        # httpx bounds connections over all hosts: keep ``pool_size`` alive per node, as the
        # blocking transport's per-node pools do, and open more when that many are busy.
        limits = httpx.Limits(max_connections=None,
                              max_keepalive_connections=pool_size * len(self.pool.nodes))
        self.http = httpx.AsyncClient(headers=self.headers(token), limits=limits)

    async def aclose(self) -> None:
        await self.http.aclose()

    async def send(self, request: Request) -> dict[str, Any]:
        """Carry out one request of a plan: the envelope of a code-200 answer.

        Raises:
            DelayQueueError: the subclass for the server's code, or UnavailableError.
        """
        body, headers = encode_body(request.body, self.compress_over_bytes)
        timeout = httpx.Timeout(request.read_timeout_s or self.read_timeout_s,
                                connect=self.connect_timeout_s)
        attempts = Attempts(self.pool, request.endpoint, request.idempotent)
        for node in attempts.nodes():
            url = node.url + BASE_PATH + request.endpoint
            try:
                if body is None:
                    response = await self.http.post(url, data=request.params or {},
                                                    timeout=timeout)
                else:
                    response = await self.http.post(url, content=body, headers=headers,
                                                    timeout=timeout)
            except httpx.TransportError as exc:
                attempts.failed(node, exc, _reason(exc), isinstance(exc, NEVER_SENT))
                continue
            envelope = attempts.answered(node, response.status_code, response.json)
            if envelope is not None:
                return envelope
        return attempts.exhausted()
