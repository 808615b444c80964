"""Helpers for the multi-process tests and the long-poll benchmark: load threads, raw polls.

Clients stamp receive times with ``time.time()``: the nodes follow the Redis server's clock
and Redis runs on this machine, so a receive stamp taken after the answer arrived is later
than the moment the server handed the message out, on the same clock.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

import requests
from redis.cluster import RedisCluster

from delayqueue.core.bookkeeping import shard_count
from delayqueue.core.keys import NamespaceKeys
from delayqueue.settings.redis_connection import connect_redis

from support.wait import wait_until

API = "/camellia/delayQueue/"
REGISTRY = NamespaceKeys("dq", "default").topics


def now_ms() -> float:
    return time.time() * 1000.0


def hold_long_poll(node, topic: str, timeout_ms: int = 5000) -> tuple[threading.Thread, dict]:
    """Start a long poll on ``node`` in a thread; the dict receives the envelope ("answer")
    and the client's receive time in ms ("at")."""
    result: dict = {}

    def poll() -> None:
        result["answer"] = node.call("longPollingMsg", timeout=timeout_ms / 1000 + 10,
                                     topic=topic, longPollingTimeoutMillis=timeout_ms)
        result["at"] = now_ms()

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    return thread, result


def wait_until_pulled(redis_url: str, topic: str, timeout_s: float = 10.0,
                      namespace: str = "default") -> None:
    """Wait until a node has run a pull on ``topic``, a topic never used before.

    A node registers a topic (``dq:{default}:topics``, on a Cluster its shard of the
    registry) right after the first script that
    touched it in the process; for a pull, after the script found nothing to hand out. A
    long poll that pulled is then waiting: a message sent now reaches it only through a hint
    or its own re-check, never through that first pull.
    """
    client = connect_redis(redis_url, socket_timeout_ms=2000, connect_timeout_ms=1000,
                           max_connections=4)  # any redis-url: Sentinel and Cluster too
    shards = shard_count(0, isinstance(client, RedisCluster))     # the nodes' default
    registry = NamespaceKeys("dq", namespace, shards).registry_of(topic)
    try:
        wait_until(lambda: client.zscore(registry, topic) is not None, timeout_s,
                   interval_s=0.005, message=f"no pull on {topic!r} reached Redis")
    finally:
        client.close()


def wait_until_held(redis_url: str, topic: str, thread: threading.Thread, result: dict,
                    timeout_s: float = 10.0) -> None:
    """Wait until the long poll of ``hold_long_poll`` on a topic never used before is held."""
    wait_until_pulled(redis_url, topic, timeout_s)
    assert thread.is_alive(), f"the long poll on {topic!r} answered at once: {result}"


@dataclass
class Ledger:
    """What the clients saw: accepted sends, and every delivery with its receive time."""

    accepted: dict[str, dict] = field(default_factory=dict)          # msgId -> delayMsg
    deliveries: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    # Receive times per copy of a message, (msgId, produceTime): a re-sent msgId whose first
    # copy had already ended is a new copy (docs/api.md: an ended message is replaced).
    copies: dict[tuple[str, int], list[float]] = field(
        default_factory=lambda: defaultdict(list))
    resent: set[str] = field(default_factory=set)                    # sends retried
    early: list[tuple[str, float, int]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, message: dict, received_ms: float) -> None:
        with self.lock:
            self.deliveries[message["msgId"]].append(received_ms)
            self.copies[(message["msgId"], message["produceTime"])].append(received_ms)
            if received_ms < message["triggerTime"]:
                self.early.append((message["msgId"], received_ms, message["triggerTime"]))

    def delivered(self) -> int:
        with self.lock:
            return len(self.deliveries)


def post(session: requests.Session, base: str, endpoint: str, timeout: float = 15.0,
         **params) -> dict:
    response = session.post(base + API + endpoint, data=params, timeout=timeout)
    return response.json()


def produce(bases: list[str], plan: list[tuple[str, str, int]], ledger: Ledger,
            stop_at: float) -> None:
    """Send (topic, msgId, delayMillis) entries round-robin over the nodes.

    A send whose connection broke (a killed worker) is retried with the same msgId: a
    repeat of a live message is answered with the stored one, so it is not enqueued twice —
    unless the first copy was already delivered and acked, which a repeat replaces
    (docs/api.md).
    """
    session = requests.Session()
    for i, (topic, msg_id, delay) in enumerate(plan):
        attempt = 0
        while time.monotonic() < stop_at:
            base = bases[(i + attempt) % len(bases)]
            try:
                answer = post(session, base, "sendMsg", timeout=10, topic=topic, msgId=msg_id,
                              msg=f"body-{msg_id}", delayMillis=delay)
            except requests.RequestException as exc:
                attempt += 1
                session = requests.Session()
                with ledger.lock:
                    ledger.errors.append(f"send {msg_id}: {exc.__class__.__name__}")
                    ledger.resent.add(msg_id)
                continue
            if answer.get("code") == 200:
                with ledger.lock:
                    ledger.accepted[msg_id] = answer["delayMsg"]
                break
            attempt += 1
            with ledger.lock:
                ledger.errors.append(f"send {msg_id}: {answer}")


def consume(base: str, topic: str, ledger: Ledger, stop: threading.Event, *,
            ack_timeout_ms: int, long_poll_ms: int = 1000, batch: int = 10,
            long_poll: bool = True, ack: bool = True, forget_first: int = 0,
            forgotten: list[str] | None = None) -> None:
    """Pull (or long-poll) and ack until ``stop``; connection errors are retried.

    ``forget_first``: never ack the first that many messages received (their ids go to
    ``forgotten``), so they are redelivered after their ack timeout.
    """
    session = requests.Session()
    to_forget = forget_first
    endpoint = "longPollingMsg" if long_poll else "pullMsg"
    while not stop.is_set():
        try:
            answer = post(session, base, endpoint, timeout=long_poll_ms / 1000 + 10,
                          topic=topic, batch=batch, ackTimeoutMillis=ack_timeout_ms,
                          longPollingTimeoutMillis=long_poll_ms)
        except requests.RequestException as exc:
            with ledger.lock:
                ledger.errors.append(f"{endpoint} {topic}: {exc.__class__.__name__}")
            session = requests.Session()
            stop.wait(0.05)
            continue
        received = now_ms()
        if answer.get("code") != 200:
            with ledger.lock:
                ledger.errors.append(f"{endpoint} {topic}: {answer}")
            stop.wait(0.05)
            continue
        messages = answer["delayMsgList"]
        for message in messages:
            ledger.record(message, received)
        if ack:
            for message in messages:
                if to_forget > 0:
                    to_forget -= 1
                    if forgotten is not None:
                        with ledger.lock:
                            forgotten.append(message["msgId"])
                    continue
                try:
                    post(session, base, "ackMsg", timeout=10, topic=topic,
                         msgId=message["msgId"])
                except requests.RequestException as exc:
                    # A lost ack is redelivered after its ack timeout: still no loss.
                    with ledger.lock:
                        ledger.errors.append(f"ack {message['msgId']}: {exc.__class__.__name__}")
                    session = requests.Session()
        if not messages and not long_poll:
            stop.wait(random.uniform(0.005, 0.02))


def start_threads(targets: list[tuple]) -> list[threading.Thread]:
    threads = [threading.Thread(target=fn, args=args, kwargs=kwargs, daemon=True)
               for fn, args, kwargs in targets]
    for thread in threads:
        thread.start()
    return threads


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, int(round(p / 100.0 * (len(ordered) - 1)))))
    return ordered[index]


# -- many concurrent long polls over raw HTTP/1.1 (one socket each, no threads) -----------

@dataclass
class RawPoll:
    topic: str
    sent_ms: float = 0.0
    answered_ms: float | None = None
    status: int | None = None
    body: dict | None = None
    error: str | None = None


async def _one_poll(host: str, port: int, poll: RawPoll, timeout_ms: int,
                    connected: asyncio.Semaphore) -> None:
    form = f"topic={poll.topic}&batch=1&longPollingTimeoutMillis={timeout_ms}" \
           f"&ackTimeoutMillis=60000"
    request = (f"POST {API}longPollingMsg HTTP/1.1\r\nHost: {host}:{port}\r\n"
               f"Content-Type: application/x-www-form-urlencoded\r\n"
               f"Content-Length: {len(form)}\r\nConnection: close\r\n\r\n{form}").encode()
    writer = None
    try:
        async with connected:  # cap concurrent connects, not concurrent holds
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(request)
            await writer.drain()
            poll.sent_ms = now_ms()
        head = await reader.readuntil(b"\r\n\r\n")
        poll.answered_ms = now_ms()
        lines = head.decode("latin-1").split("\r\n")
        poll.status = int(lines[0].split()[1])
        headers = {k.strip().lower(): v.strip()
                   for k, _, v in (line.partition(":") for line in lines[1:] if line)}
        if "content-length" in headers:
            payload = await reader.readexactly(int(headers["content-length"]))
        else:
            payload = await reader.read()
        poll.body = json.loads(payload)
    except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
        poll.error = f"{exc.__class__.__name__}: {exc}"
        if poll.answered_ms is None:
            poll.answered_ms = now_ms()
    finally:
        if writer is not None:
            writer.close()


def start_polls(loop: asyncio.AbstractEventLoop, host: str, port: int, topics: list[str],
                count: int, timeout_ms: int) -> tuple[list[RawPoll], list[asyncio.Task]]:
    """Create ``count`` polls spread over ``topics`` as tasks on ``loop`` (not awaited)."""
    connected = asyncio.Semaphore(100)
    polls = [RawPoll(topics[i % len(topics)]) for i in range(count)]
    tasks = [loop.create_task(_one_poll(host, port, p, timeout_ms, connected)) for p in polls]
    return polls, tasks


def accepted_connections(workers, port: int) -> int:
    """Established connections the server's workers have accepted on ``port``."""
    total = 0
    for worker in workers:
        try:
            conns = worker.net_connections(kind="tcp")
        except Exception:  # noqa: BLE001 - a worker may be restarting
            continue
        total += sum(1 for c in conns if c.status == "ESTABLISHED" and c.laddr
                     and c.laddr.port == port)
    return total
