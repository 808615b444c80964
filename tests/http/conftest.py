"""Fixtures of the HTTP conformance tests (tests/http/test_conformance_*.py): live gunicorn
nodes shared by every conformance module, one set per Redis backend.

A node takes about a second to start and stop, so the nodes are session-scoped and every
test keeps apart by a topic of its own: nothing is flushed between tests. They stop after
the last test that uses them, not at the end of the session, so the rest of the suite does
not share the machine with idle nodes. Their helpers are in tests/support/conformance.py.

    node        the defaults, with a 1 s monitoring interval, in the default namespace
                (tests read its keys: support.conformance.NS)
    short_node  keeps ended messages only 500 ms
    hint_node   re-checks held long polls only every 30 s: a wake-up must come from a hint
                or the topic's next due time; ``hint_peer`` is a second node on its data

Each runs on a Redis database (standalone) or namespace (Sentinel, Cluster) of its own:
nodes sharing one would share the scheduler lease, and the settings of whichever held it
(retention, for one) would apply to the others' topics. A module marked ``every_topology``
runs on standalone, Sentinel and Cluster in ``make test``; the others on the topologies
$DQ_TEST_TOPOLOGIES names (standalone unless set: ``make ha`` sets all three).
"""

from __future__ import annotations

import re
import uuid

import pytest

from support.conformance import SESSION
from support.node import ServerProcess
from support.topologies import TOPOLOGIES, backend_named, selected_topologies

HINT_SETTINGS = {"long-polling-safety-millis": 30_000}
_running: list[ServerProcess] = []          # the shared nodes, oldest first
_last_user = pytest.StashKey[object]()      # the last test of the session that uses them


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "every_topology: a conformance module that runs on standalone, Sentinel "
                   "and Cluster in make test (tests/http/conftest.py)")


def pytest_generate_tests(metafunc):
    if "backend" in metafunc.fixturenames:
        every = metafunc.definition.get_closest_marker("every_topology") is not None
        metafunc.parametrize("backend", list(TOPOLOGIES) if every else selected_topologies(),
                             indirect=True, scope="session")


def pytest_runtest_teardown(item, nextitem):
    """Stop the shared nodes once the last test that uses them has run."""
    stash = item.session.stash
    if _last_user not in stash:
        users = [i for i in item.session.items if "backend" in getattr(i, "fixturenames", ())]
        stash[_last_user] = users[-1] if users else None
    if item is stash[_last_user]:
        while _running:
            _stop(_running[-1])


def _run(url, settings):
    """A started node, stopped at the fixture's teardown unless it already was."""
    server = ServerProcess(url, settings=settings).start()
    _running.append(server)
    try:
        yield server
    finally:
        _stop(server)


def _stop(server):
    if server in _running:
        _running.remove(server)
        SESSION.close()       # no keep-alive connection for the graceful stop to wait on
        server.stop()


def node_on(backend, settings, own_namespace=True):
    """A node on a database or namespace of its own; ``placement`` is what a second node
    needs to share its data."""
    with backend.place(own_namespace) as (url, placement):
        for server in _run(url, {**settings, **placement}):
            server.placement = placement
            yield server


@pytest.fixture(scope="session")
def backend(request):
    """The Redis the nodes run on (pytest_generate_tests names them per module)."""
    return backend_named(request, request.param)


@pytest.fixture(scope="session")
def node(backend):
    # The default namespace, taken first: on a topology that empties it all.
    yield from node_on(backend, {"monitor-interval-seconds": 1}, own_namespace=False)


@pytest.fixture(scope="session")
def raw_redis(node, backend):
    """A client of ``node``'s database."""
    client = backend.client(node.redis_url)
    yield client
    client.close()


@pytest.fixture(scope="session")
def short_node(backend, node):
    """Ended messages are kept only 500 ms (dead letters keep their own retention)."""
    yield from node_on(backend, {"end-life-msg-expire-millis": 500})


@pytest.fixture(scope="session")
def hint_node(backend, node):
    """Held long polls re-check on their own only every 30 s."""
    yield from node_on(backend, HINT_SETTINGS)


@pytest.fixture(scope="session")
def hint_peer(hint_node):
    """A second node on ``hint_node``'s data, with the same settings."""
    yield from _run(hint_node.redis_url, {**HINT_SETTINGS, **hint_node.placement})


@pytest.fixture
def topic(request):
    """A topic of the test's own."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", request.node.name)[:60]
    return f"{name}-{uuid.uuid4().hex[:8]}"
