"""Who may call which route: bearer tokens, roles, namespaces, topics, and per-token limits.

Off while ``auth-tokens`` is empty (camellia's clients send no token). On, every route
wants ``Authorization: Bearer <secret>`` unless its row in endpoints.py says ``OPEN``: 401
without a valid token, 403 outside the row's ``rule``, 429 (with ``Retry-After``) over its
request rate or concurrent long polls. A route with no row is refused to everyone (fail
closed; tests/http/test_access.py checks that every route has one).
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any, Callable

from flask import Flask, g, request

from delayqueue.core.errors import Forbidden, TooManyRequests, Unauthorized
from delayqueue.settings.config import Settings
from delayqueue.settings.credential import Token

from .endpoints import BY_NAME, BY_PATH, Rule

# The one endpoint counted against token-max-long-polls while it holds its request.
LONG_POLL = BY_NAME["longPollingMsg"].path
BEARER = "Bearer "


class Limits:
    """Per-token request rate (a token bucket, one second of burst) and concurrent long
    polls, in this worker process. ``clock`` is a monotonic clock in seconds (a test's own)."""

    def __init__(self, rate: int, long_polls: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.long_polls = long_polls
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[str, tuple[float, float]] = {}   # name -> (tokens, at)
        self._polls: dict[str, int] = {}

    def take(self, name: str) -> None:
        if not self.rate:
            return
        with self._lock:
            now = self._clock()
            tokens, at = self._buckets.get(name, (float(self.rate), now))
            tokens = min(float(self.rate), tokens + (now - at) * self.rate)
            if tokens < 1.0:
                self._buckets[name] = (tokens, now)
                wait_s = max(1, math.ceil((1.0 - tokens) / self.rate))
                raise TooManyRequests(
                    f"rate: token {name!r} is over token-rate-limit ({self.rate} requests/s)",
                    {"Retry-After": str(wait_s)})
            self._buckets[name] = (tokens - 1.0, now)

    def hold_poll(self, name: str) -> bool:
        if not self.long_polls:
            return False
        with self._lock:
            held = self._polls.get(name, 0)
            if held >= self.long_polls:
                raise TooManyRequests(
                    f"longPollingMsg: token {name!r} already holds {held} long polls "
                    f"(token-max-long-polls {self.long_polls})", {"Retry-After": "1"})
            self._polls[name] = held + 1
        return True

    def release_poll(self, name: str) -> None:
        with self._lock:
            self._polls[name] = max(0, self._polls.get(name, 0) - 1)


def authenticate(settings: Settings) -> Token:
    """The request's token, or 401."""
    header = request.headers.get("Authorization")
    challenge = {"WWW-Authenticate": 'Bearer realm="delayqueue"'}
    if header is None:
        raise Unauthorized("Authorization: missing; send 'Authorization: Bearer <token>'",
                           challenge)
    secret = header[len(BEARER):].strip() if header.startswith(BEARER) else ""
    if not secret or " " in secret:
        raise Unauthorized("Authorization: malformed; the form is 'Bearer <token>'", challenge)
    token = settings.auth_tokens.find(secret)
    if token is None:
        raise Unauthorized("Authorization: unknown token", challenge)
    return token


def request_topic() -> Any:
    """The topic the view will use: request.params() lets a JSON body override the form, and the
    form the query string, so the check reads them in that order."""
    if request.is_json:
        body = request.get_json(silent=True)
        if isinstance(body, dict) and "topic" in body:
            return body["topic"]
    if "topic" in request.form:
        return request.form["topic"]
    return request.args.get("topic")


def authorize(token: Token, rule: Rule, name: str, settings: Settings) -> None:
    """403 unless the token has the rule's role, the namespace and the topic; ``name``: the
    endpoint's name in the table, which the refusal names."""
    if not token.has_role(rule.roles):
        raise Forbidden(f"token {token.name!r}: {name} needs role "
                        f"{' or '.join(rule.roles)} (it has {', '.join(sorted(token.roles))})")
    if not token.allows_namespace(settings.namespace):
        raise Forbidden(f"token {token.name!r}: namespace {settings.namespace!r} is outside "
                        f"its namespaces")
    if rule.scope == "namespace" and not token.all_topics:
        raise Forbidden(f"token {token.name!r}: {name} covers every topic; the token is "
                        f"limited to topics {list(token.topics)}")
    if rule.scope == "topic":
        value = request_topic()
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)           # as Params.string() reads a JSON number
        # A missing or malformed topic is the view's to refuse (400, naming the parameter).
        if isinstance(value, str) and value and not token.allows_topic(value):
            raise Forbidden(f"topic: {value!r} is outside token {token.name!r}'s topics")


def register_access(app: Flask, settings: Settings) -> None:
    if not settings.auth_tokens:
        return
    limits = Limits(settings.token_rate_limit, settings.token_max_long_polls)

    @app.before_request
    def check_access() -> None:
        if request.url_rule is None:
            return                       # no such route: 404 as usual
        route = request.url_rule.rule
        endpoint = BY_PATH.get(route)
        if endpoint is None:
            raise Forbidden(f"{route}: not in the access table; refused to every token")
        if endpoint.rule.scope == "open":
            return
        token = authenticate(settings)
        g.token = token                  # who made the request, for the audit trail (audit.py)
        authorize(token, endpoint.rule, endpoint.name, settings)
        limits.take(token.name)
        if route == LONG_POLL and limits.hold_poll(token.name):
            g.long_poll_token = token.name

    @app.teardown_request
    def release(_exc: BaseException | None) -> None:
        name = g.pop("long_poll_token", None)
        if name is not None:
            limits.release_poll(name)
