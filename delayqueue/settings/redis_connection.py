"""Creating the Redis client for a standalone Redis, a Sentinel-watched master or a Cluster.

``redis-url`` takes redis-py's own URLs (``redis://``, ``rediss://``, ``unix://``) and
camellia's resource URLs for the other two setups, with either spelling of the scheme:

    redis-sentinel://[[user:]password@]h1:p1,h2:p2/<master>[/db]   (or redis+sentinel://)
    redis-cluster://[[user:]password@]h1:p1,h2:p2                  (or redis+cluster://)

The password is the data nodes' (master, replicas, cluster nodes); sentinels are reached
without one. Both are built on redis-py's own clients: ``Sentinel.master_for`` (finds the
master through the sentinels and follows a failover) and ``RedisCluster`` (slot map, MOVED
and ASK redirections, topology refresh).
"""

from __future__ import annotations

import select
import sys
from urllib.parse import quote

import redis
from redis.backoff import ExponentialBackoff
from redis.cluster import ClusterNode, ClusterPipeline, RedisCluster
from redis.retry import Retry
from redis.sentinel import Sentinel, SentinelConnectionPool, SentinelManagedConnection

# The URL's reading, apart so that gunicorn's master reads it without redis-py (redis_url.py).
from .redis_url import CLUSTER_SCHEMES, SENTINEL_SCHEMES, parse_target, scheme_of

# Attempts of a cluster command through MOVED/ASK, a failover's CLUSTERDOWN and a dead node;
# with the backoff below they span ~3 s, more than a graceful CLUSTER FAILOVER takes.
CLUSTER_ATTEMPTS = 8


def never_rerun_after_a_timeout() -> None:
    """Take TimeoutError out of the errors redis-py's Cluster client retries.

    A read that timed out does not mean the command did not run: Redis may have run a script
    and been slow to answer, and a second run is a second transition (a pull delivering
    twice, a send re-creating a message after its ack). redis-py's RedisCluster retries a
    timed-out command up to its retry count (a slow script measured: 5 runs), and its
    pipelines resend the whole pipeline; which errors it retries is a class attribute that
    both paths read (``RedisCluster.ERRORS_ALLOW_RETRY``, ``ClusterPipeline.ERRORS_ALLOW_RETRY``),
    so this narrows those, for this process. Connection errors, CLUSTERDOWN, MOVED and ASK are
    still retried: a failover and a resharding go on as before
    (tests/settings/test_redis_failover.py).
    Standalone and Sentinel clients get the same rule from their ``retry_on_error``.
    """
    for cls in (RedisCluster, ClusterPipeline):
        cls.ERRORS_ALLOW_RETRY = tuple(
            error for error in cls.ERRORS_ALLOW_RETRY if error is not redis.TimeoutError)


class SentinelConnection(SentinelManagedConnection):
    """A connection to the Sentinel-named master that closes itself when a read fails or
    times out, as redis-py's plain Connection does.

    redis-py's SentinelManagedConnection keeps the socket after a timed-out read, and nothing
    else closes it when timeouts are not retried (``connect_redis``): the pool hands it out
    again with the late reply still owed, and the next command reads the reply of the one
    before (seen after a failover, with WAIT outlasting the socket timeout: a pull handed a
    WAIT's count, a WAIT a script's SHA). Callers that pass ``disconnect_on_error=False``
    themselves (pub/sub reads with a timeout) keep their way.
    """

    def read_response(self, *args, disconnect_on_error: bool = True, **kwargs):
        return super().read_response(*args, disconnect_on_error=disconnect_on_error, **kwargs)


def unpatched_poll():
    """The operating system's ``select.poll`` when gevent has patched ``select``, else None.

    redis-py checks every connection it takes from the pool for unread data first
    (``can_read()``: hiredis' reader, then a zero-timeout ``select.poll`` of the socket). Under
    gevent's monkey-patching that poll is gevent's emulation, which waits for the next turn of
    the hub even with a zero timeout: a loop turn per Redis command. A zero-timeout poll never
    blocks, so the system's own answers it in one system call, with nothing to wait for.
    """
    gevent_monkey = sys.modules.get("gevent.monkey")
    if gevent_monkey is None or not gevent_monkey.is_module_patched("select"):
        return None
    return gevent_monkey.get_original("select", "poll")


class ZeroWaitReadCheck:
    """A connection whose pool check (``can_read()`` with no timeout) polls the socket with
    the system's poll (``unpatched_poll``); set on the class by ``read_check_class``. Only the
    quiet case, the usual one, is answered here (hiredis holds no reply and the socket has
    nothing to read): anything else, a wait, or a connection without hiredis' reader goes to
    redis-py's own check, so a dirty or closed connection is found as before."""

    _system_poll = None

    def can_read(self, timeout: float = 0) -> bool:
        sock, poll = self._sock, self._system_poll
        reader = getattr(self._parser, "_reader", None)
        if timeout == 0 and poll is not None and sock is not None and reader is not None \
                and not reader.has_data() and not getattr(sock, "pending", None):
            poller = poll()
            poller.register(sock, select.POLLIN)
            if not poller.poll(0):
                return False
        return super().can_read(timeout)


def read_check_class(base: type) -> type:
    """``base`` with ``ZeroWaitReadCheck`` where gevent patched ``select``, else ``base``."""
    poll = unpatched_poll()
    if poll is None:
        return base
    return type(f"ZeroWait{base.__name__}", (ZeroWaitReadCheck, base),
                {"_system_poll": staticmethod(poll)})


class BlockingSentinelPool(SentinelConnectionPool, redis.BlockingConnectionPool):
    """The master's connections, capped: a caller waits up to ``timeout`` for a free one
    (as with a standalone Redis) instead of failing at once with "Too many connections"."""


def connect_redis(url: str, *, socket_timeout_ms: int, connect_timeout_ms: int,
                  max_connections: int) -> redis.Redis | RedisCluster:
    """A client for any ``redis-url``.

    A blocking pool caps connections per process (per node on a Cluster; thousands of held
    long polls share a few dozen); a request that cannot get one within the socket timeout
    fails with 500 rather than hanging. One retry with backoff rides over a dropped idle
    connection, on connection errors only: redis-py's default also retries a read that timed
    out, which runs a script again after it already ran (a send re-run after its message was
    acked re-created it). A Cluster command retries through redirections and failovers, but
    not after a timeout either (``never_rerun_after_a_timeout``).
    """
    timeout_s, connect_s = socket_timeout_ms / 1000.0, connect_timeout_ms / 1000.0
    common = dict(socket_timeout=timeout_s, socket_connect_timeout=connect_s,
                  decode_responses=True)
    scheme = scheme_of(url)
    if scheme in SENTINEL_SCHEMES:
        target = parse_target(url)
        sentinel = Sentinel(list(target.hosts), sentinel_kwargs=dict(
            socket_timeout=timeout_s, socket_connect_timeout=connect_s))
        return sentinel.master_for(
            target.master, connection_pool_class=BlockingSentinelPool,
            connection_class=read_check_class(SentinelConnection),
            max_connections=max_connections, timeout=timeout_s, db=target.db,
            username=target.username, password=target.password, health_check_interval=30,
            retry=Retry(ExponentialBackoff(cap=0.2, base=0.01), 1,
                        supported_errors=(redis.ConnectionError,)),
            retry_on_error=[redis.ConnectionError], **common)
    if scheme in CLUSTER_SCHEMES:
        never_rerun_after_a_timeout()
        target = parse_target(url)
        # Only a client made from a URL builds its node pools with connection_pool_class.
        (host, port), *others = target.hosts
        credentials = ""
        if target.password is not None:
            credentials = f"{quote(target.username or '', safe='')}:" \
                          f"{quote(target.password, safe='')}@"
        return RedisCluster(
            url=f"redis://{credentials}{host}:{port}",
            startup_nodes=[ClusterNode(h, p) for h, p in others],
            connection_pool_class=redis.BlockingConnectionPool,
            max_connections=max_connections, timeout=timeout_s,
            retry=Retry(ExponentialBackoff(cap=0.5, base=0.02), CLUSTER_ATTEMPTS), **common)
    plain = {"redis": redis.Connection, "unix": redis.UnixDomainSocketConnection}.get(scheme)
    if plain is not None:   # rediss: redis-py's SSL connection, whose check it keeps
        common["connection_class"] = read_check_class(plain)
    pool = redis.BlockingConnectionPool.from_url(
        url,
        max_connections=max_connections,
        timeout=timeout_s,
        health_check_interval=30,
        retry=Retry(ExponentialBackoff(cap=0.2, base=0.01), 1,
                    supported_errors=(redis.ConnectionError,)),
        retry_on_error=[redis.ConnectionError],
        **common,
    )
    return redis.Redis(connection_pool=pool)


def is_cluster(client) -> bool:
    return isinstance(client, RedisCluster)
