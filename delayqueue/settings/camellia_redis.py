"""A pasted camellia ``camellia-redis`` section: honoured as redis-url, or refused loudly.

camellia names its Redis with a resource URL under ``camellia-redis``::

    camellia-redis:
      type: local
      local:
        resource: redis://passwd@127.0.0.1:6379

Standalone resources (``redis://`` and ``rediss://``, with camellia's password-only
``passwd@`` or ``user:passwd@`` and an optional ``?db=N``) become our ``redis-url``;
camellia's ``redis-sentinel://`` and ``redis-cluster://`` resources are our URL forms too and
are taken as they are. Every other form (proxies, ``type: remote`` / ``custom``, JSON
resource tables) is refused with a ConfigError naming the resource: the server never starts
on some other Redis (the embedded one) than the one the pasted config names.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from .redis_url import CLUSTER_SCHEMES, SENTINEL_SCHEMES, RedisUrlError, parse_target

SECTION = "camellia-redis"
_STANDALONE = re.compile(
    r"^(?P<scheme>rediss?)://(?:(?P<auth>.*)@)?(?P<host>[^:/?@]+|\[[0-9a-fA-F:]+\])"
    r":(?P<port>\d+)/?(?:\?db=(?P<db>\d+))?$")


class CamelliaRedisError(ValueError):
    """The section names a Redis we cannot serve from; the message says why and what to do."""


def _refuse(what: str) -> CamelliaRedisError:
    return CamelliaRedisError(
        f"{SECTION}: {what}; delayqueue serves from a standalone, Sentinel or Cluster Redis: "
        "set redis-url (e.g. redis://:password@host:6379/0) instead of the camellia-redis "
        "section")


def resource_to_url(resource: str) -> str:
    """camellia's resource URL -> our redis-url (a standalone one in redis-py's form)."""
    scheme = resource.strip().split("://", 1)[0]
    if scheme in SENTINEL_SCHEMES + CLUSTER_SCHEMES:
        try:
            parse_target(resource.strip())
        except RedisUrlError as exc:
            raise _refuse(f"resource {scheme}://...: {exc}") from None
        return resource.strip()
    match = _STANDALONE.match(resource.strip())
    if not match:
        kind = resource.split("://", 1)[0] if "://" in resource else resource
        raise _refuse(f"resource {resource!r} ({kind}) is not a redis://, rediss://, "
                      "redis-sentinel:// or redis-cluster:// resource")
    auth = match["auth"] or ""
    if ":" in auth:
        user, password = auth.split(":", 1)
    else:
        user, password = "", auth   # camellia's redis://passwd@host:port
    credentials = f"{quote(user, safe='')}:{quote(password, safe='')}@" if password or user \
        else ""
    return f"{match['scheme']}://{credentials}{match['host']}:{match['port']}/{match['db'] or 0}"


def section_to_url(section: Any) -> str:
    """The ``camellia-redis`` mapping -> redis-url, or CamelliaRedisError."""
    if not isinstance(section, dict):
        raise _refuse("must be a mapping with type: local and local.resource")
    kind = str(section.get("type", "local")).strip().lower()
    if kind != "local":
        raise _refuse(f"type {kind!r} is not supported (only type: local with a resource)")
    local = section.get("local")
    resource = local.get("resource") if isinstance(local, dict) else None
    if not isinstance(resource, str) or not resource.strip():
        raise _refuse("type local without local.resource (a JSON resource table or a "
                      "missing resource is not supported)")
    return resource_to_url(resource)
