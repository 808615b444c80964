"""Fixtures shared by the SDK, consumer and CLI tests: one server node per test module.

A node per test costs seconds to start and stop; these tests instead share a module-wide
node and keep apart by topic (each test gets its own). The shared node runs on Redis database
1 (support/redis_server.py); a node that a test stops or configures itself runs on a
database leased for that test (conftest.py's ``redis_db_url``), so flushing it never disturbs
the shared node. Import the fixtures a module uses:

    from support.sdk import FAST_STOP, node, topic  # noqa: F401 - fixtures

``push_node`` is a node that may push to 127.0.0.1, and ``receiver`` a push receiver there.

``stop_in_background`` stops a consumer while the test still holds its handlers.
"""

from __future__ import annotations

import asyncio
import functools
import re
import threading
from typing import Any, Callable, Coroutine

import pytest

from support.node import ServerProcess
from support.receiver import Receiver
from support.redis_server import SHARED_NODE_DB, flush_db
from support.wait import wait_until

FAST_STOP = {"graceful-timeout-seconds": 1}
# A node that may push to a receiver on this machine (push-allowed-networks is public
# addresses only by default).
PUSH_NODE = {**FAST_STOP, "push-allowed-networks": "127.0.0.0/8"}


@pytest.fixture(scope="module")
def node(redis_server):
    """A live node shared by the module (Redis db 1, flushed when it starts)."""
    url = redis_server.db_url(SHARED_NODE_DB)
    flush_db(url)
    with ServerProcess(url, settings=FAST_STOP) as started:
        yield started


@pytest.fixture(scope="module")
def push_node(redis_server):
    """A live node that may push to 127.0.0.1, shared by the module (a leased Redis db)."""
    with redis_server.leased_db_url() as url, ServerProcess(url, settings=PUSH_NODE) as started:
        yield started


@pytest.fixture
def receiver():
    """A push receiver on 127.0.0.1 (support/receiver.py): 200 to every POST unless scripted."""
    with Receiver() as started:
        yield started


@pytest.fixture
def topic(request):
    """A topic name unique to the test."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", request.node.name)[:200]


def run_async(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run an ``async def`` test in its own event loop (the dev dependencies have no
    pytest-asyncio); its fixtures are the coroutine function's parameters."""
    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))
    return run


def stop_in_background(consumer, **stop_options) -> threading.Thread:
    """Call ``consumer.stop()`` in a thread and return once the consumer is stopping: no pull
    starts any more and what a poll in flight brings back is nacked, while stop() still waits
    for the running handlers. A test then releases its handlers and joins the thread, so
    whatever it asserts about stopping does not hang on how fast this machine calls stop()."""
    thread = threading.Thread(target=consumer.stop, kwargs=stop_options, daemon=True,
                              name="test-stop")
    thread.start()
    wait_until(consumer._stopping.is_set, 5, message="stop() never began")
    return thread
