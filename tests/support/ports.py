"""Loopback ports for tests.

``free_port()`` is free only at the instant it is asked: anything else on the machine (an
outgoing connection's ephemeral port included) may take it before the server binds it. So
the helpers that start servers on one (redis_server.py, node.py) check that the server that
answers is theirs and start again on another port when it is not. ``refused_port()`` holds
a port bound but not listening: connecting to it is refused, and nothing else can take it.
"""

from __future__ import annotations

import contextlib
import socket
from typing import Callable, Iterator

# What a server prints when its port is taken: redis-server, gunicorn, a node
# (delayqueue/server/startup.py).
PORT_TAKEN = ("Address already in use", "Connection in use", "is in use; choose another")
START_ATTEMPTS = 5


class PortTaken(RuntimeError):
    """Another process has the port a server was started on."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def refused_port() -> Iterator[int]:
    """A loopback port on which every connection is refused, for as long as the block runs.

    The socket is bound (without SO_REUSEADDR, so no server can bind the port meanwhile) and
    never listens: a connection attempt gets a reset, i.e. "connection refused".
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def listening_pids(pids: list[int], port: int) -> list[int]:
    """Those of ``pids`` that have a TCP socket listening on ``port``."""
    import psutil

    owners = []
    for pid in pids:
        try:
            conns = psutil.Process(pid).net_connections(kind="tcp")
        except psutil.Error:
            continue
        if any(c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port
               for c in conns):
            owners.append(pid)
    return owners


def start_on_a_free_port(server, start_once: Callable[[], object]) -> None:
    """Run ``start_once()`` until ``server`` holds its port (``server.port``).

    When another process turns out to hold it (``start_once`` raises PortTaken), again on
    another free port, at most START_ATTEMPTS times in all, unless the caller fixed the port
    (``server.fixed_port``). Once started, the port is fixed: a restart must come back on it.
    """
    for attempt in range(START_ATTEMPTS):
        try:
            start_once()
        except PortTaken:
            if server.fixed_port or attempt == START_ATTEMPTS - 1:
                raise
            server.port = free_port()
        else:
            server.fixed_port = True
            return
