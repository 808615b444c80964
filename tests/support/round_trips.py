"""RoundTrips: counts the round trips redis-py makes, for tests that bound them."""

from __future__ import annotations

import threading

import pytest
import redis


class RoundTrips:
    """Counts the writes redis-py makes to its sockets from the thread that built it: each
    is one round trip (a pipeline writes all its commands at once, then reads every reply).
    Other threads' writes (a server's background loops: the clock resyncs more often on a
    loaded machine) are not the code under test and are not counted. Counts from
    construction until ``monkeypatch`` is undone."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        send = redis.connection.AbstractConnection.send_packed_command
        caller = threading.get_ident()

        def counted(connection, command, check_health=True):
            if threading.get_ident() == caller:
                self.count += 1
            return send(connection, command, check_health)

        monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counted)
