"""The test helpers themselves: servers that find their port taken start again elsewhere, a
refused port refuses, wait_until waits for a state and says why it gave up."""

from __future__ import annotations

import socket
import time

import pytest
import redis
import requests

import support.node
import support.ports
import support.redis_server
from support import wait_until
from support.node import ServerProcess
from support.ports import free_port, refused_port
from support.redis_server import RedisServer


@pytest.fixture
def taken_port():
    """A loopback port another process holds: listening, never answering."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def ports_from(monkeypatch, module, first: int) -> list[int]:
    """Make ``module.free_port`` (the first port) and ``support.ports.free_port`` (the ports
    tried after a taken one) hand out ``first``, then really free ports; the ports handed out
    are returned (the list fills as they are)."""
    handed: list[int] = []

    def fake() -> int:
        handed.append(first if not handed else free_port())
        return handed[-1]

    monkeypatch.setattr(module, "free_port", fake)
    monkeypatch.setattr(support.ports, "free_port", fake)
    return handed


def test_redis_server_whose_port_is_taken_starts_on_another(tmp_path, monkeypatch, taken_port):
    handed = ports_from(monkeypatch, support.redis_server, taken_port)
    server = RedisServer(tmp_path).start()
    try:
        assert handed[0] == taken_port and server.port == handed[-1] != taken_port
        client = redis.Redis.from_url(server.url)
        assert int(client.info("server")["process_id"]) == server.process.pid
        client.close()
    finally:
        server.stop()


def test_node_whose_port_is_taken_starts_on_another(redis_db_url, monkeypatch, taken_port):
    handed = ports_from(monkeypatch, support.node, taken_port)
    with ServerProcess(redis_db_url) as node:
        assert handed[0] == taken_port and node.port == handed[-1] != taken_port
        assert requests.get(node.url + "/camellia/health/check", timeout=5).json() == \
            {"code": 200}


def test_a_node_started_on_a_given_taken_port_fails_instead_of_moving(redis_db_url,
                                                                      taken_port):
    with pytest.raises(support.ports.PortTaken):
        ServerProcess(redis_db_url, port=taken_port).start()


def test_a_refused_port_refuses_connections():
    with refused_port() as port:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=1)


def test_wait_until_returns_the_value_and_explains_a_timeout():
    started = time.monotonic()
    assert wait_until(lambda: time.monotonic() - started > 0.05 and "done", 5) == "done"
    with pytest.raises(AssertionError, match=r"never true \(waited 0.1 s; last value 0\)"):
        wait_until(lambda: 0, 0.1, message=lambda: "never true")


def test_leased_databases_are_flushed_exclusive_and_never_the_fixtures_or_the_shared_nodes(
        redis_server):
    leased = []
    try:
        for _ in support.redis_server.LEASED_DBS:
            db = redis_server.lease_db()
            redis.Redis.from_url(redis_server.db_url(db)).set("left-over", db)
            leased.append(db)
        assert sorted(leased) == list(range(2, 16))     # 0: fixtures, 1: the SDK's shared node
        with pytest.raises(RuntimeError, match="in use"):
            redis_server.lease_db()
        redis_server.release_db(leased[3])
        again = redis_server.lease_db()
        assert again == leased[3]
        assert redis.Redis.from_url(redis_server.db_url(again)).dbsize() == 0   # flushed
    finally:
        for db in leased:
            redis_server.release_db(db)
