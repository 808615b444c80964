"""Fixtures shared by the SDK, consumer and CLI tests: one server node per test module.

A node per test costs seconds to start and stop; these tests instead share a module-wide
node and keep apart by topic (each test gets its own). Nodes that a test stops or configures
itself run on their own Redis database (``redis_db_url``), so flushing it never disturbs the
shared node.
"""

from __future__ import annotations

import itertools
import re

import pytest
import redis
from server_process import ServerProcess

# Database numbers: 0 belongs to the conftest fixtures, 1 to the shared node.
_next_db = itertools.count(2)
FAST_STOP = {"graceful-timeout-seconds": 1}


def db_url(base_url: str, db: int) -> str:
    url = base_url.rsplit("/", 1)[0] + f"/{db}"
    redis.Redis.from_url(url).flushdb()
    return url


@pytest.fixture(scope="module")
def node(redis_server):
    """A live node shared by the module (Redis db 1, flushed when it starts)."""
    with ServerProcess(db_url(redis_server.url, 1), settings=FAST_STOP) as started:
        yield started


@pytest.fixture
def redis_db_url(redis_server):
    """A flushed Redis database of its own, for a node the test starts itself."""
    return db_url(redis_server.url, next(_next_db) % 16 or 2)


@pytest.fixture
def topic(request):
    """A topic name unique to the test."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", request.node.name)[:200]
