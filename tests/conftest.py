"""Shared fixtures: a real redis-server on a free port, started once per test session."""

from __future__ import annotations

import os

import pytest
import redis

from redis_support import RedisServer


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.fixture
def redis_client(redis_server):
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    client.flushall()
    yield client
    client.close()


@pytest.fixture
def redis_url(redis_server, redis_client):
    """The URL of a flushed Redis, for tests that start servers of their own."""
    return redis_server.url


def pytest_configure(config):
    os.environ.setdefault("DELAYQUEUE_LOG_LEVEL", "warning")


@pytest.fixture
def server(redis_url):
    """One live node (gunicorn, 1 gevent worker) on a flushed Redis."""
    from server_process import ServerProcess

    with ServerProcess(redis_url) as node:
        yield node
