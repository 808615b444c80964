"""Fixtures of the CLI tests: the shared node, a client of it, and the command run against it.

The helpers (run, popen, assert_one_line_error) are in support/cli.py.
"""

from __future__ import annotations

import pytest

from delayqueue.client import DelayQueueClient

from support.cli import run
from support.ports import refused_port
from support.sdk import node, topic  # noqa: F401 - fixtures


@pytest.fixture
def client(node):
    with DelayQueueClient(node.url) as c:
        yield c


@pytest.fixture
def dq(node):
    """Run a command against the shared node (found through $DELAYQUEUE_URL)."""
    return lambda *argv, **kw: run(node.url, *argv, **kw)


@pytest.fixture
def dead_url():
    """A server URL whose port refuses every connection (held for the test)."""
    with refused_port() as port:
        yield f"http://127.0.0.1:{port}"
