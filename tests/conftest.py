"""Shared fixtures: a real redis-server on a free port, started once per test session.

The helpers themselves live in the ``support`` package (tests/support/).
"""

from __future__ import annotations

import os

import pytest
import redis

from support.node import ACLFILE_ENV_VAR, ServerProcess
from support.redis_server import FIXTURE_DB, RedisServer
from support.topologies import ClusterTopology, SentinelTopology


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    # tests/settings/test_redis_acl.py runs suites with $DQTEST_REDIS_ACLFILE: the server loads that
    # ACL, and nodes (support/node.py) log in as $DQTEST_REDIS_USER.
    aclfile = os.environ.get(ACLFILE_ENV_VAR)
    server = RedisServer(tmp_path_factory.mktemp("redis"),
                         extra_args=["--aclfile", aclfile] if aclfile else []).start()
    yield server
    server.stop()


@pytest.fixture
def redis_client(redis_server):
    """A client of database 0, flushed (FLUSHDB: the other databases have other owners)."""
    client = redis.Redis.from_url(redis_server.db_url(FIXTURE_DB), decode_responses=True)
    client.flushdb()
    yield client
    client.close()


@pytest.fixture
def redis_url(redis_server, redis_client):
    """The URL of a flushed Redis, for tests that start servers of their own."""
    return redis_server.db_url(FIXTURE_DB)


@pytest.fixture
def redis_db_url(redis_server):
    """A flushed Redis database leased to this test alone (not 0, not the shared node's)."""
    with redis_server.leased_db_url() as url:
        yield url


def pytest_configure(config):
    os.environ.setdefault("DELAYQUEUE_LOG_LEVEL", "warning")


@pytest.fixture
def server(redis_url):
    """One live node (gunicorn, 1 gevent worker) on a flushed Redis."""
    with ServerProcess(redis_url) as node:
        yield node


@pytest.fixture(scope="session")
def redis_sentinel(tmp_path_factory):
    """1 master + 2 replicas + 3 sentinels, started on first use, shared by the session."""
    topology = SentinelTopology(tmp_path_factory.mktemp("sentinel")).start()
    yield topology
    topology.stop()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory):
    """3 masters + 3 replicas, started on first use, shared by the session."""
    topology = ClusterTopology(tmp_path_factory.mktemp("cluster")).start()
    yield topology
    topology.stop()

