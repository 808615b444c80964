"""RoundTrips: counts the round trips redis-py makes, for tests that bound them."""

from __future__ import annotations

import pytest
import redis


class RoundTrips:
    """Counts the writes redis-py makes to its sockets: each is one round trip (a pipeline
    writes all its commands at once, then reads every reply). Counts from construction until
    ``monkeypatch`` is undone."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        send = redis.connection.AbstractConnection.send_packed_command

        def counted(connection, command, check_health=True):
            self.count += 1
            return send(connection, command, check_health)

        monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counted)
