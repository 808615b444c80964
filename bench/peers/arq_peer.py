"""arq as a peer, at its default ``poll_delay`` (0.5 s) or tuned down (``poll_delay=0.01``).

Producer: ``ArqRedis.enqueue_job("job", ..., _queue_name=topic, _defer_by=seconds)`` (no
``_defer_by`` for immediate jobs), calls in flight from one asyncio loop. Consumers: in each
consumer process one ``arq.Worker`` per topic (an arq worker serves one queue) with
``max_jobs`` = that process's share of the consumers, all on one event loop;
``after_job_end`` (run once the result is recorded) stamps the completion. arq has no
blocking pop: every ``poll_delay`` each worker asks its queue (a sorted set scored by due
time) for the due jobs, so a delayed job waits up to ``poll_delay`` after it is due.

    cd bench && ../.venv-bench/bin/python peers_compare.py --peers arq,arq-tuned --without-ours ...
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, AsyncIterator, Callable

from arq import Worker, create_pool, func
from arq.connections import RedisSettings

from peers.common_peer import BODY, Peer, completed, record

DEFAULT_POLL_DELAY_S = 0.5     # arq.Worker's default
TUNED_POLL_DELAY_S = 0.01


async def _job(ctx: dict, msg_id: str, body: str) -> None:
    record(msg_id)


async def _after_job_end(ctx: dict) -> None:
    completed()


async def _consume(spec: dict, stop: Any, ready: Callable[[], None]) -> None:
    settings = RedisSettings.from_dsn(spec["redis_url"])
    workers = [Worker([func(_job, name="job")], queue_name=topic, redis_settings=settings,
                      max_jobs=spec["concurrency"], poll_delay=spec["poll_delay"],
                      handle_signals=False, after_job_end=_after_job_end)
               for topic in spec["topics"]]
    runs = [asyncio.ensure_future(w.async_run()) for w in workers]
    for _ in range(200):                      # up to 10 s for every worker to be polling
        if all(w._pool is not None for w in workers) or any(r.done() for r in runs):
            break
        await asyncio.sleep(0.05)
    ready()
    while not stop.is_set() and not any(r.done() for r in runs):
        await asyncio.sleep(0.05)
    for run in runs:
        if run.done() and run.exception():
            raise run.exception()
    for worker in workers:
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await asyncio.wait_for(worker.close(), 5)


def serve(spec: dict, stop: Any, ready: Callable[[], None]) -> None:
    asyncio.run(_consume(spec, stop, ready))


@contextlib.asynccontextmanager
async def sender(redis_url: str, topics: list[str], concurrency: int,
                 poll_delay: float = DEFAULT_POLL_DELAY_S) -> AsyncIterator:
    pool = await create_pool(RedisSettings.from_dsn(redis_url))

    async def send(topic: str, msg_id: str, delay_ms: int) -> None:
        job = await pool.enqueue_job("job", msg_id, BODY, _queue_name=topic,
                                     _defer_by=delay_ms / 1000.0 if delay_ms else None)
        if job is None:
            raise RuntimeError(f"arq refused job {msg_id} (id already taken)")

    try:
        yield send
    finally:
        await pool.aclose()


PEER = Peer("arq", serve, sender, {"poll_delay": DEFAULT_POLL_DELAY_S})
TUNED = Peer("arq-tuned", serve, sender, {"poll_delay": TUNED_POLL_DELAY_S})
w1, w3, w6 = PEER.w1, PEER.w3, PEER.w6
