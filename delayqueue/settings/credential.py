"""API tokens: who may call what (the ``auth-tokens`` setting).

Each token has a name (what logs and error messages show: never the secret), the secret,
roles (``produce``, ``consume``, ``admin``), the namespaces it may use and the topic patterns
(``fnmatch``: ``orders-*``) it may touch. Given as a YAML list in the config file, or as the
same list in JSON (or YAML) text in ``DELAYQUEUE_AUTH_TOKENS``; a token's secret may instead
be read from another environment variable with ``secret-env``, so the file holds none.
"""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
import os
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import yaml

ROLES = ("produce", "consume", "admin")
MIN_SECRET_LENGTH = 16
_FIELDS = {"name", "secret", "secret-env", "roles", "namespaces", "topics"}


class TokenError(ValueError):
    """An auth-tokens entry is malformed; the message names the entry and the rule."""


@dataclass(frozen=True)
class Token:
    name: str
    digest: bytes                    # sha256 of the secret: the secret itself is not kept
    roles: frozenset[str]
    namespaces: tuple[str, ...]
    topics: tuple[str, ...]

    def __repr__(self) -> str:
        return f"Token(name={self.name!r}, roles={sorted(self.roles)})"

    def has_role(self, roles: Iterable[str]) -> bool:
        return "admin" in self.roles or any(role in self.roles for role in roles)

    def allows_namespace(self, namespace: str) -> bool:
        return any(fnmatch.fnmatchcase(namespace, p) for p in self.namespaces)

    def allows_topic(self, topic: str) -> bool:
        return any(fnmatch.fnmatchcase(topic, p) for p in self.topics)

    @property
    def all_topics(self) -> bool:
        return "*" in self.topics


class Tokens(tuple):
    """The configured tokens; empty means authentication is off. Never prints a secret."""

    def __repr__(self) -> str:
        return f"<{len(self)} token(s): {', '.join(t.name for t in self)}>" if self else "<none>"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:      # the same tokens as a YAML list compare equal
        if isinstance(other, (list, tuple)):
            return tuple(self) == tuple(other)
        return NotImplemented

    __hash__ = tuple.__hash__

    def find(self, secret: str) -> Token | None:
        digest = _digest(secret)
        found = None
        for token in self:               # compare every one: no timing hint of which matched
            if hmac.compare_digest(token.digest, digest):
                found = token
        return found


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


def _names(entry: Mapping, key: str, where: str, default: list[str]) -> tuple[str, ...]:
    value = entry.get(key, default)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(
            isinstance(v, str) and v for v in value):
        raise TokenError(f"{where}: {key} must be a non-empty list of strings")
    return tuple(value)


def parse_tokens(raw: Any, env: Mapping[str, str] | None = None) -> Tokens:
    """A list of token mappings (or its JSON/YAML text) -> Tokens."""
    env = os.environ if env is None else env
    if isinstance(raw, Tokens):
        return raw
    if isinstance(raw, str):
        if not raw.strip():
            return Tokens()
        try:
            raw = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise TokenError(f"not a JSON or YAML list of tokens: {exc}") from None
    if raw is None:
        return Tokens()
    if not isinstance(raw, (list, tuple)):
        raise TokenError("must be a list of tokens (name, secret, roles, namespaces, topics)")
    tokens, names, digests = [], set(), set()
    for i, entry in enumerate(raw):
        where = f"token {i + 1}"
        if not isinstance(entry, Mapping):
            raise TokenError(f"{where}: must be a mapping")
        unknown = set(entry) - _FIELDS
        if unknown:
            raise TokenError(f"{where}: unknown field(s) {sorted(unknown)}; "
                             f"known: {sorted(_FIELDS)}")
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise TokenError(f"{where}: name is required (a string)")
        where = f"token {name!r}"
        if ("secret" in entry) == ("secret-env" in entry):
            raise TokenError(f"{where}: give exactly one of secret, secret-env")
        secret = entry.get("secret")
        if "secret-env" in entry:
            secret = env.get(str(entry["secret-env"]))
            if secret is None:
                raise TokenError(f"{where}: environment variable {entry['secret-env']} "
                                 f"(secret-env) is not set")
        if not isinstance(secret, str) or len(secret) < MIN_SECRET_LENGTH or any(
                c.isspace() for c in secret):
            raise TokenError(f"{where}: the secret must be a string of at least "
                             f"{MIN_SECRET_LENGTH} characters without spaces")
        roles = _names(entry, "roles", where, [])
        bad = set(roles) - set(ROLES)
        if bad:
            raise TokenError(f"{where}: unknown role(s) {sorted(bad)}; roles are {list(ROLES)}")
        digest = _digest(secret)
        if name in names or digest in digests:
            raise TokenError(f"{where}: name or secret given twice")
        names.add(name)
        digests.add(digest)
        tokens.append(Token(name, digest, frozenset(roles),
                            _names(entry, "namespaces", where, ["*"]),
                            _names(entry, "topics", where, ["*"])))
    return Tokens(tokens)
