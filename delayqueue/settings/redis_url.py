"""Reading a Sentinel or Cluster ``redis-url``, without redis-py.

Apart from the client (redis_connection.py) because gunicorn's master reads the settings,
and so these URLs, and must not import redis-py: ``import redis`` imports
``redis.asyncio.connection``, which takes ``ssl.SSLContext`` by name, and a worker forked
from a master holding that name is monkey-patched by gevent after it, which gevent warns
about (``MonkeyPatchWarning``; tests/server/test_startup.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

SENTINEL_SCHEMES = ("redis-sentinel", "redis+sentinel")
CLUSTER_SCHEMES = ("redis-cluster", "redis+cluster")
STANDALONE_SCHEMES = ("redis", "rediss", "unix")


class RedisUrlError(ValueError):
    """A Sentinel or Cluster URL that does not follow its format; the message says how."""


@dataclass(frozen=True)
class RedisTarget:
    """What a Sentinel or Cluster URL names."""

    kind: str                            # "sentinel" or "cluster"
    hosts: tuple[tuple[str, int], ...]   # the sentinels, or the cluster's startup nodes
    master: str = ""                     # sentinel: the monitored master's name
    db: int = 0
    username: str | None = None
    password: str | None = None


def scheme_of(url: str) -> str:
    return url.split("://", 1)[0].lower() if "://" in url else ""


def parse_target(url: str) -> RedisTarget:
    """Parse a ``redis-sentinel://`` or ``redis-cluster://`` URL (either spelling).

    Raises:
        RedisUrlError: the URL breaks its format (the message gives the format).
    """
    scheme = scheme_of(url)
    if scheme in SENTINEL_SCHEMES:
        kind, form = "sentinel", f"{scheme}://[password@]host:port[,host:port...]/master[/db]"
    elif scheme in CLUSTER_SCHEMES:
        kind, form = "cluster", f"{scheme}://[password@]host:port[,host:port...]"
    else:
        raise RedisUrlError(f"not a Sentinel or Cluster URL (scheme {scheme!r})")
    rest = url.split("://", 1)[1]
    if "?" in rest or "#" in rest:
        raise RedisUrlError(f"takes no query or fragment; the form is {form}")
    # The credentials end at the last '@' before the host list (a password may hold '@' and '/').
    authority, _, path = rest.rpartition("@")[2].partition("/")
    credentials = rest.rpartition("@")[0] if "@" in rest else None
    username = password = None
    if credentials is not None:
        # camellia writes the password alone ("secret@host"); "user:secret" and ":secret" too.
        if ":" in credentials:
            user, _, secret = credentials.partition(":")
            username, password = unquote(user) or None, unquote(secret)
        else:
            password = unquote(credentials)
        password = password or None   # camellia writes "redis-cluster://@host:port" for none
    hosts = []
    for item in authority.split(","):
        host, sep, port = item.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise RedisUrlError(f"{item.strip() or 'an empty entry'!r} is not host:port; "
                                f"the form is {form}")
        hosts.append((host.strip("[]"), int(port)))
    parts = [p for p in path.split("/")] if path else []
    master, db = "", 0
    if kind == "sentinel":
        if not parts or not parts[0] or len(parts) > 2:
            raise RedisUrlError(f"needs the master's name after the hosts; the form is {form}")
        master = unquote(parts[0])
        if len(parts) == 2:
            if not parts[1].isdigit():
                raise RedisUrlError(f"db must be a number, got {parts[1]!r}; the form is {form}")
            db = int(parts[1])
    elif any(parts):
        raise RedisUrlError(f"a Cluster has no master name or db (one database: 0); "
                            f"the form is {form}")
    return RedisTarget(kind, tuple(hosts), master, db, username, password)
