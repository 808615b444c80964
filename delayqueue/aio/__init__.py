"""The asyncio SDK: DelayQueueClient's calls as coroutines, on httpx.

    from delayqueue.aio import AsyncDelayQueueClient
    async with AsyncDelayQueueClient("http://127.0.0.1:8080") as client:
        await client.send("orders", "order 42 timed out?", delay_ms=60_000)
        async with client.listen("orders", handle, concurrency=8):
            ...

Same methods, arguments, results and exceptions as ``delayqueue.client`` (re-exported here),
because both clients carry out the same plans (delayqueue/client/plans.py).
"""

from delayqueue.client import *  # noqa: F403 - the same models and errors
from delayqueue.client import __all__ as _client_all

from .client import AsyncDelayQueueClient
from .consumer import AsyncConsumer

__all__ = ["AsyncConsumer", "AsyncDelayQueueClient",
           *[n for n in _client_all if n not in ("Consumer", "DelayQueueClient")]]
