"""The push signature, both ends: the server signs each push delivery with the
subscription's ``pushSecret`` (background/push.py); a receiver checks it with
``verify_signature``, which the SDK exports (``delayqueue.client.verify_signature``). In
core, beside the message and status modules, as the one part of the server's wire format the
SDK imports.

Header ``X-DelayQueue-Signature: t=<ms>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>``: the
timestamp is the server's clock when it POSTed (ms since the epoch) and the MAC covers it,
so a captured request cannot be replayed once ``tolerance_ms`` has passed. Standard library
only: a receiver needs nothing of ours but this module.

    from flask import Flask, request
    from delayqueue.client import verify_signature

    @app.post("/hooks/orders")
    def orders():
        if not verify_signature(SECRET, request.headers, request.get_data()):
            return "bad signature", 401       # not 2xx: the delivery is retried
        handle(request.get_json()["delayMsg"])
        return "", 204                        # any 2xx acks it
"""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import Mapping

HEADER = "X-DelayQueue-Signature"
DEFAULT_TOLERANCE_MS = 5 * 60_000


def sign(secret: str, timestamp_ms: int, body: bytes) -> str:
    """The header's value for ``body`` POSTed at ``timestamp_ms``."""
    mac = hmac.new(secret.encode(), f"{timestamp_ms}.".encode() + body, hashlib.sha256)
    return f"t={timestamp_ms},v1={mac.hexdigest()}"


def verify_signature(secret: str, headers: Mapping[str, str], body: bytes, *,
                     tolerance_ms: int | None = DEFAULT_TOLERANCE_MS,
                     now_ms: int | None = None) -> bool:
    """Whether ``body`` (the raw bytes received) was signed with ``secret`` by the server,
    at most ``tolerance_ms`` from now (None: any time). ``headers``: any mapping of the
    request's headers (Flask's, Django's ``request.headers``, a dict; the name is matched
    without regard to case). Compares in constant time; never raises on a malformed header."""
    value = _header(headers)
    if not value or not secret:
        return False
    fields: dict[str, list[str]] = {}
    for part in value.split(","):
        key, _, item = part.strip().partition("=")
        fields.setdefault(key, []).append(item)
    stamps = fields.get("t", [])
    if len(stamps) != 1 or not (stamps[0].isascii() and stamps[0].isdigit()):
        return False
    timestamp = int(stamps[0])
    if tolerance_ms is not None:
        now = int(time.time() * 1000) if now_ms is None else now_ms
        if abs(now - timestamp) > tolerance_ms:
            return False
    expected = sign(secret, timestamp, bytes(body)).rpartition("v1=")[2]
    # As bytes: compare_digest refuses str with non-ASCII characters (a malformed value).
    return any(hmac.compare_digest(expected.encode(), given.encode("utf-8", "replace"))
               for given in fields.get("v1", []))


def _header(headers: Mapping[str, str]) -> str | None:
    value = headers.get(HEADER)
    if value is None:
        for name, item in headers.items():
            if name.lower() == HEADER.lower():
                return item
    return value
