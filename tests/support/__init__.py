"""Test support shared by every test module (and the benchmarks): ``support.<module>``.

An ordinary package, not conftest.py: tests/spark has a conftest.py of its own, and with two
conftest modules only one can be importable by that name. pyproject's pytest settings put
``tests/`` on ``sys.path`` (``pythonpath``), so this imports as ``support``.

    wait.py          wait_until: the one way a test waits for a state
    ports.py         free ports, a reserved port nothing listens on, and starting a server
                     again on another port when its own was taken
    redis_server.py  throwaway redis-servers, and the Redis databases tests lease from them
    node.py          a real server node (gunicorn, the deployed command) on a free port
    fleet.py         load threads, raw HTTP long polls and timing helpers for multi-process tests
    sdk.py           fixtures of the SDK, consumer and CLI tests (one shared node per module)
    cli.py           helpers of the CLI tests (tests/cli): the installed command as a subprocess
    conformance.py   helpers of the HTTP conformance tests (their fixtures: tests/http/conftest.py)
    lua.py           helpers of the Lua script tests (tests/lua): the one-place invariant
    proxy.py         an HTTP proxy that can drop an answer after the server processed it
    topologies.py    Sentinel (1+2+3) and Cluster (3+3) topologies from redis-server, and the
                     Backend a parametrized node runs on (standalone, sentinel, cluster)
    failover.py      a steady load with a checker (lost, early, unavailability) for failovers
    round_trips.py   RoundTrips: how many round trips redis-py made (a bound a test asserts)
    receiver.py      a scriptable local HTTP receiver for push delivery (answers, holds,
                     closes, goes down; records every request and the most in flight)
"""

from support.wait import wait_until

__all__ = ["wait_until"]
