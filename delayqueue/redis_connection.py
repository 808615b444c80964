"""Creating the Redis client: the one place Sentinel and Cluster URLs will be added."""

from __future__ import annotations

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry


def connect_redis(url: str, *, socket_timeout_ms: int, connect_timeout_ms: int,
                max_connections: int) -> redis.Redis:
    """A client for ``redis://``, ``rediss://`` or ``unix://`` URLs.

    A blocking pool caps connections per process (thousands of held long polls share a few
    dozen); a request that cannot get one within the socket timeout fails with 500 rather
    than hanging. One retry with backoff rides over a dropped idle connection, on connection
    errors only: redis-py's default also retries a read that timed out, which runs a script
    again after it already ran (a send re-run after its message was acked re-created it).
    """
    pool = redis.BlockingConnectionPool.from_url(
        url,
        max_connections=max_connections,
        timeout=socket_timeout_ms / 1000.0,
        socket_timeout=socket_timeout_ms / 1000.0,
        socket_connect_timeout=connect_timeout_ms / 1000.0,
        health_check_interval=30,
        retry=Retry(ExponentialBackoff(cap=0.2, base=0.01), 1,
                    supported_errors=(redis.ConnectionError,)),
        retry_on_error=[redis.ConnectionError],
        decode_responses=True,
    )
    return redis.Redis(connection_pool=pool)
