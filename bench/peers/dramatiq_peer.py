"""Dramatiq with its ``RedisBroker`` as a peer.

One actor per topic (``queue_name`` = the topic). Producer: ``actor.send_with_options(args,
delay=ms)`` (plain ``send`` for immediate messages) from a thread pool of ``concurrency``
threads, Dramatiq's client being synchronous. Consumers: in each consumer process one
in-process ``dramatiq.Worker`` (what the ``dramatiq`` CLI runs in each of its processes) with
``worker_threads`` = that process's share of the consumers times the topics, default
``worker_timeout`` (1 s); a middleware's ``after_ack`` stamps the completion. A delayed
message sits on the topic's ``.DQ`` queue; a worker
prefetches it, holds it in memory until its eta, then re-enqueues it on the topic's queue.

    cd bench && ../.venv-bench/bin/python peers_compare.py --peers dramatiq --without-ours ...
"""

from __future__ import annotations

import asyncio
import contextlib
from concurrent.futures import ThreadPoolExecutor
from typing import Any, AsyncIterator, Callable

import dramatiq
from dramatiq.brokers.redis import RedisBroker
from dramatiq.middleware import Middleware

from peers.common_peer import BODY, Peer, completed, record


def _job(msg_id: str, body: str) -> None:
    record(msg_id)


class _Acked(Middleware):
    def after_ack(self, broker: Any, message: Any) -> None:
        completed()


def _actors(redis_url: str, topics: list[str]) -> tuple[RedisBroker, dict[str, Any]]:
    broker = RedisBroker(url=redis_url)
    return broker, {topic: dramatiq.actor(_job, actor_name=f"job_{topic}", queue_name=topic,
                                          broker=broker) for topic in topics}


def serve(spec: dict, stop: Any, ready: Callable[[], None]) -> None:
    broker, _ = _actors(spec["redis_url"], spec["topics"])
    broker.add_middleware(_Acked())
    worker = dramatiq.Worker(broker, worker_threads=spec["concurrency"] * len(spec["topics"]))
    worker.start()
    ready()
    try:
        stop.wait()
    finally:
        worker.stop(timeout=5000)
        broker.close()


@contextlib.asynccontextmanager
async def sender(redis_url: str, topics: list[str], concurrency: int) -> AsyncIterator:
    broker, actors = _actors(redis_url, topics)
    pool = ThreadPoolExecutor(concurrency)
    loop = asyncio.get_running_loop()

    async def send(topic: str, msg_id: str, delay_ms: int) -> None:
        await loop.run_in_executor(pool, lambda: actors[topic].send_with_options(
            args=(msg_id, BODY), delay=delay_ms or None))

    try:
        yield send
    finally:
        pool.shutdown()
        broker.close()


PEER = Peer("dramatiq", serve, sender)
w1, w3, w6 = PEER.w1, PEER.w3, PEER.w6
