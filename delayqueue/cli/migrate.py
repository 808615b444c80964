"""``delayqueue migrate-storage``: convert a namespace's messages to the record format.

Run it once, with every node stopped, on a Redis written by a version that kept a hash per
message (a node refuses to start on such a namespace and names this command). Bounded
batches, progress on stderr, idempotent: safe to re-run after an interruption.

It talks to Redis with the server's own modules, which come with the ``server`` extra: they
are imported when the command runs, so the client alone names the extra instead.
"""

from __future__ import annotations

import argparse
import sys

from . import failure


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "migrate-storage",
        help="convert the namespace's messages from a hash per message to records",
        description="Convert every registered topic of the namespace to the record storage "
                    "format and mark the namespace. Stop every node first.",
    )
    parser.add_argument("--config", metavar="PATH", help="YAML settings file (as for serve)")
    parser.add_argument("--redis-url", help="Redis URL (default: the settings' redis-url)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        import redis
        from redis.cluster import RedisCluster

        from delayqueue.core.bookkeeping import namespace_keys
        from delayqueue.core.clock import RedisClock
        from delayqueue.core.storage import migrate
        from delayqueue.settings.config import ConfigError, load_settings
        from delayqueue.settings.redis_connection import connect_redis
    except ModuleNotFoundError as missing:
        return failure.missing_extra("migrate-storage", "server", missing)
    try:
        settings = load_settings(args.config, overrides={"redis_url": args.redis_url})
    except ConfigError as exc:
        print(f"delayqueue: config error: {exc}", file=sys.stderr)
        return 2
    if not settings.redis_url:
        print("delayqueue: config error: redis-url: is empty; pass --redis-url or set "
              "DELAYQUEUE_REDIS_URL", file=sys.stderr)
        return 2
    client = connect_redis(settings.redis_url,
                           socket_timeout_ms=settings.redis_socket_timeout_millis,
                           connect_timeout_ms=settings.redis_connect_timeout_millis,
                           max_connections=2)
    keys = namespace_keys(settings, isinstance(client, RedisCluster))
    try:
        migrate(client, keys, RedisClock(client).now_ms,
                lambda line: print(line, file=sys.stderr, flush=True))
    except redis.RedisError as exc:
        print(f"delayqueue: migrate-storage: Redis error: {exc} (safe to re-run)",
              file=sys.stderr)
        return 1
    return 0
