"""BullMQ (the ``bullmq`` Python package: the same Lua scripts as BullMQ for Node) as a peer.

Producer: one ``Queue`` per topic, ``Queue.add(name, data, {"delay": ms})`` per message (no
``delay`` for immediate jobs), calls in flight from one asyncio loop. Consumers: in each
consumer process one ``Worker`` per topic with ``concurrency`` = that process's share of the
consumers; the job function records its start and returns, the worker completes the job and
its "completed" event stamps the completion. Delayed jobs need no extra process since
BullMQ 2: the worker promotes them itself, blocking on the queue's marker key (BZPOPMIN with
a timeout) until the next one is due. Redis ends a blocking command's timeout from its
periodic cron (``hz``, 10 by default), so an idle worker wakes 0-100 ms after the due time.

Workaround (``bullmq``; ``bullmq-stock`` runs without it): bullmq 3.4.4 for Python never asks
Redis its version on a worker's blocking connection, so the worker keeps the default
capability ``canDoubleTimeout: False`` and rounds every BZPOPMIN timeout *up to whole
seconds*: a delayed job then starts up to 1 s after it is due (p50 ~500 ms). BullMQ for Node
reads the version when it connects; we do the same before starting each worker
(``autorun: False``, ``getRedisVersion()``, ``run()``), which gives ms timeouts on Redis >= 6.

    cd bench && ../.venv-bench/bin/python peers_compare.py --peers bullmq --without-ours ...
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, AsyncIterator, Callable

import redis.asyncio
from bullmq import Queue, Worker

from peers.common_peer import BODY, Peer, completed, record


async def _process(job: Any, token: str) -> None:
    record(job.data["id"])


async def _consume(spec: dict, stop: Any, ready: Callable[[], None]) -> None:
    opts = {"connection": spec["redis_url"], "concurrency": spec["concurrency"],
            "autorun": False}
    workers = [Worker(topic, _process, opts) for topic in spec["topics"]]
    for worker in workers:
        worker.on("completed", completed)
        if spec["detect_redis_version"]:
            # the attribute's name moved between bullmq releases (2.25: blockingRedisConnection)
            blocking = getattr(worker, "blockingRedisConnection", None) \
                or worker.backend.blocking_connection
            await blocking.getRedisVersion()
        asyncio.ensure_future(worker.run())
    for _ in range(200):                      # up to 10 s for every worker to be running
        if all(w.running for w in workers):
            break
        await asyncio.sleep(0.05)
    ready()
    while not stop.is_set():
        await asyncio.sleep(0.05)
    await asyncio.wait_for(asyncio.gather(*(w.close() for w in workers),
                                          return_exceptions=True), 10)


def serve(spec: dict, stop: Any, ready: Callable[[], None]) -> None:
    asyncio.run(_consume(spec, stop, ready))


@contextlib.asynccontextmanager
async def sender(redis_url: str, topics: list[str], concurrency: int,
                 detect_redis_version: bool = True) -> AsyncIterator:
    # One pooled client shared by the queues, so ``concurrency`` calls can be in flight
    # (a Queue given a URL makes a single-connection client: one call at a time per topic).
    client = redis.asyncio.Redis.from_url(redis_url, decode_responses=True,
                                          max_connections=concurrency)
    queues = {topic: Queue(topic, {"connection": client}) for topic in topics}

    async def send(topic: str, msg_id: str, delay_ms: int) -> None:
        await queues[topic].add("job", {"id": msg_id, "body": BODY},
                                {"delay": delay_ms} if delay_ms else {})

    try:
        yield send
    finally:
        await client.aclose()


PEER = Peer("bullmq", serve, sender, {"detect_redis_version": True})
STOCK = Peer("bullmq-stock", serve, sender, {"detect_redis_version": False})
w1, w3, w6 = PEER.w1, PEER.w3, PEER.w6
