"""The load generator: asyncio over keep-alive HTTP/1.1 connections, as a user's client would.

``Producer`` sends single-message ``sendMsg`` requests at a target rate (or as fast as its
concurrency allows); ``Consumers`` runs long-polling consumers that ack what they receive and
record every delivery. A ``Ledger`` holds what was sent and what was received, and turns it
into the figures every workload reports: lag percentiles, early, duplicate and lost counts.

Run in its own process (``spawn``), so the generator's CPU is visible and can be split over
processes when one core is not enough for it.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable
from urllib.parse import urlencode, urlsplit

from common import API, now_ms, summary


@dataclass
class Ledger:
    """Sent messages by msgId (their triggerTime) and every delivery seen."""

    sent: dict[str, int] = field(default_factory=dict)          # msgId -> triggerTime
    deliveries: list[tuple[str, float, int]] = field(default_factory=list)  # id, at, trigger
    send_latency_ms: list[float] = field(default_factory=list)
    errors: int = 0
    error_kinds: dict[str, int] = field(default_factory=dict)

    def error(self, what: BaseException | str) -> None:
        kind = what if isinstance(what, str) else f"{what.__class__.__name__}: {what}"[:80]
        self.errors += 1
        self.error_kinds[kind] = self.error_kinds.get(kind, 0) + 1

    def merge(self, other: "Ledger") -> None:
        self.sent.update(other.sent)
        self.deliveries.extend(other.deliveries)
        self.send_latency_ms.extend(other.send_latency_ms)
        self.errors += other.errors
        for kind, n in other.error_kinds.items():
            self.error_kinds[kind] = self.error_kinds.get(kind, 0) + n

    def figures(self) -> dict[str, Any]:
        """Lag = receipt - triggerTime of each first delivery; early, duplicates, lost."""
        first: dict[str, float] = {}
        lags: list[float] = []
        duplicates = early = unknown = 0
        for msg_id, at, trigger in self.deliveries:
            if msg_id in first:
                duplicates += 1
                continue
            if msg_id not in self.sent:
                unknown += 1
            first[msg_id] = at
            lag = at - trigger
            if lag < 0:
                early += 1
            lags.append(lag)
        lost = sum(1 for msg_id in self.sent if msg_id not in first)
        return {"sent": len(self.sent), "delivered": len(first), "lag_ms": summary(lags),
                "early": early, "duplicates": duplicates, "lost": lost,
                "unknown": unknown, "errors": self.errors, "error_kinds": self.error_kinds}


class HttpError(Exception):
    """The node answered something that is not an HTTP 200 with a JSON body."""


# What a call may raise when the node or the connection fails.
CALL_ERRORS = (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError,
               asyncio.LimitOverrunError, HttpError, ValueError)


class Http:
    """A lean HTTP/1.1 keep-alive client for one node: form POSTs, JSON answers.

    Written for the load generator's CPU budget: aiohttp's client spends ~2.5x the CPU per
    request (bench/client_cpu.py: ~125 against ~50 us), and on a 2-core machine every
    microsecond the generator spends is taken from the server it measures. Idle connections
    are reused (LIFO); one request at a time per connection; any failure closes it.
    """

    def __init__(self, base: str, timeout_s: float = 90.0) -> None:
        url = urlsplit(base)
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 80
        self.prefix = f"POST {url.path.rstrip('/')}{API}"
        self.head_tail = (f" HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                          "Content-Type: application/x-www-form-urlencoded\r\n"
                          "Content-Length: ")
        self.json_head_tail = self.head_tail.replace("application/x-www-form-urlencoded",
                                                     "application/json")
        self.timeout_s = timeout_s
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def call(self, endpoint: str, **form: Any) -> dict:
        body = urlencode(form).encode()
        return await self._request(endpoint, self.head_tail, body)

    async def call_json(self, endpoint: str, document: dict) -> dict:
        """POST a JSON body (the batch endpoints)."""
        return await self._request(endpoint, self.json_head_tail, json.dumps(document).encode())

    async def _request(self, endpoint: str, head_tail: str, body: bytes) -> dict:
        request = f"{self.prefix}{endpoint}{head_tail}{len(body)}\r\n\r\n".encode() + body
        while self._idle:
            connection = self._idle.pop()
            try:
                return await self._exchange(*connection, request)
            except (ConnectionError, asyncio.IncompleteReadError) as exc:
                # The node closes idle keep-alive connections (gunicorn's keepalive, 5 s); a
                # reused connection that ends before a single byte of the answer was closed
                # before the request reached the app (nothing kills workers in a benchmark):
                # send it again on another one, as HTTP clients do.
                if isinstance(exc, asyncio.IncompleteReadError) and exc.partial:
                    raise
        return await self._exchange(*await asyncio.open_connection(self.host, self.port),
                                    request)

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                        request: bytes) -> dict:
        try:
            async with asyncio.timeout(self.timeout_s):
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
                if not head.startswith(b"HTTP/1.1 200"):
                    raise HttpError(head.split(b"\r\n", 1)[0].decode("latin-1"))
                at = head.lower().find(b"content-length:")
                if at < 0:
                    raise HttpError("answer without Content-Length")
                length = int(head[at + 15:head.index(b"\r\n", at)])
                payload = await reader.readexactly(length)
        except BaseException:
            writer.close()
            raise
        self._idle.append((reader, writer))
        return json.loads(payload)

    async def close(self) -> None:
        while self._idle:
            _, writer = self._idle.pop()
            writer.close()


def _record_send(ledger: Ledger, msg_id: str, reply: dict) -> None:
    if reply.get("code") == 200 and reply.get("duplicate"):
        ledger.error("sendMsg answered duplicate for a new msgId")
    elif reply.get("code") == 200:
        ledger.sent[msg_id] = reply["delayMsg"]["triggerTime"]
    else:
        ledger.error(f"sendMsg code {reply.get('code')}: {reply.get('msg')}"[:80])


async def produce_batches(http: Http, plan: Iterable[tuple[str, str, int]], ledger: Ledger, *,
                          batch: int, concurrency: int = 8, body: str = "x" * 64) -> float:
    """Send ``plan`` in sendMsgBatch requests of ``batch`` messages (of one topic each)."""
    by_topic: dict[str, list[tuple[str, int]]] = {}
    for topic, msg_id, delay in plan:
        by_topic.setdefault(topic, []).append((msg_id, delay))
    queue: asyncio.Queue = asyncio.Queue()
    for topic, items in by_topic.items():
        for i in range(0, len(items), batch):
            queue.put_nowait((topic, items[i:i + batch]))
    started = time.monotonic()

    async def worker() -> None:
        while True:
            try:
                topic, items = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            t0 = time.monotonic()
            try:
                reply = await http.call_json("sendMsgBatch", {"topic": topic, "msgs": [
                    {"msgId": msg_id, "msg": body, "delayMillis": delay}
                    for msg_id, delay in items]})
            except CALL_ERRORS as exc:
                ledger.error(exc)
                continue
            ledger.send_latency_ms.append((time.monotonic() - t0) * 1000.0)
            if reply.get("code") != 200:
                ledger.error(f"sendMsgBatch code {reply.get('code')}: {reply.get('msg')}"[:80])
                continue
            for (msg_id, _), result in zip(items, reply["results"]):
                _record_send(ledger, msg_id, result)

    await asyncio.gather(*(worker() for _ in range(min(concurrency, queue.qsize()) or 1)))
    return time.monotonic() - started


async def produce(http: Http, plan: Iterable[tuple[str, str, int]], ledger: Ledger, *,
                  rate: float = 0.0, concurrency: int = 64, body: str = "x" * 64,
                  trigger_time: int | None = None) -> float:
    """Send every (topic, msgId, delayMillis) of ``plan``; returns the seconds it took.

    ``rate`` > 0 paces the sends (msg/s); otherwise ``concurrency`` requests are in flight.
    ``trigger_time`` sends every message with that absolute ``triggerTime`` instead of its
    delay. Every msgId is meant to be new: an answer flagged ``duplicate`` is an error.
    """
    queue: asyncio.Queue = asyncio.Queue()
    for item in plan:
        queue.put_nowait(item)
    total = queue.qsize()
    started = time.monotonic()

    async def worker(index: int) -> None:
        n = index
        while True:
            try:
                topic, msg_id, delay = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            if rate > 0:
                wait = started + n / rate - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                n += concurrency
            timing = {"delayMillis": delay} if trigger_time is None \
                else {"triggerTime": trigger_time}
            t0 = time.monotonic()
            try:
                reply = await http.call("sendMsg", topic=topic, msgId=msg_id, msg=body,
                                        **timing)
            except CALL_ERRORS as exc:
                ledger.error(exc)
                continue
            ledger.send_latency_ms.append((time.monotonic() - t0) * 1000.0)
            _record_send(ledger, msg_id, reply)

    await asyncio.gather(*(worker(i) for i in range(min(concurrency, total) or 1)))
    return time.monotonic() - started


async def consume(http: Http, topic: str, ledger: Ledger, stop: asyncio.Event, *,
                  batch: int = 1, poll_ms: int = 5000, ack: bool = True,
                  ack_batch: bool = False,
                  on_done: Callable[[int], None] | None = None) -> None:
    """One long-polling consumer: poll, record, ack each message, poll again, until ``stop``.

    ``ack_batch``: a poll's messages are acked together in one ackMsgBatch request.
    ``on_done(n)`` is called after each poll's ``n`` messages were handled (acked).
    """
    while not stop.is_set():
        try:
            reply = await http.call("longPollingMsg", topic=topic, batch=batch,
                                    longPollingTimeoutMillis=poll_ms)
        except CALL_ERRORS as exc:
            ledger.error(exc)
            await asyncio.sleep(0.1 + random.random() * 0.1)
            continue
        at = now_ms()
        messages = reply.get("delayMsgList") or ()
        if ack and ack_batch and messages:
            for message in messages:
                ledger.deliveries.append((message["msgId"], at, message["triggerTime"]))
            try:
                answer = await http.call_json("ackMsgBatch", {"topic": topic, "acks": [
                    {"msgId": m["msgId"], "receipt": m["receipt"]} for m in messages]})
                bad = [r for r in answer.get("results", ()) if r.get("code") != 200]
                if answer.get("code") != 200 or bad:
                    ledger.error(f"ackMsgBatch: {answer.get('msg') or bad[0].get('msg')}"[:80])
            except CALL_ERRORS as exc:
                ledger.error(exc)
            messages = ()
            if on_done is not None:
                on_done(len(reply["delayMsgList"]))
            continue
        for message in messages:
            ledger.deliveries.append((message["msgId"], at, message["triggerTime"]))
            if ack:
                try:
                    answer = await http.call("ackMsg", topic=topic, msgId=message["msgId"])
                except CALL_ERRORS as exc:
                    ledger.error(exc)
                    continue
                if answer.get("code") != 200:
                    ledger.error(f"ackMsg code {answer.get('code')}: {answer.get('msg')}"[:80])
        if on_done is not None and reply.get("delayMsgList"):
            on_done(len(reply["delayMsgList"]))


# -- consumers in their own processes ---------------------------------------------------------

def _consumer_process(base: str, topics: list[str], per_topic: int, batch: int, poll_ms: int,
                      done, stop_flag, results, ack_batch: bool = False) -> None:
    """Entry point of one consumer process: run until ``stop_flag`` is set, then report."""
    ledger = Ledger()

    async def main() -> None:
        http = Http(base)
        stop = asyncio.Event()

        def count(n: int) -> None:
            with done.get_lock():
                done.value += n

        async def watch() -> None:
            while not stop_flag.is_set():
                await asyncio.sleep(0.05)
            stop.set()

        tasks = [asyncio.create_task(consume(http, topic, ledger, stop, batch=batch,
                                             poll_ms=poll_ms, ack_batch=ack_batch,
                                             on_done=count))
                 for topic in topics for _ in range(per_topic)]
        await watch()
        # Held polls end within poll_ms; do not wait for them beyond that.
        await asyncio.wait(tasks, timeout=poll_ms / 1000.0 + 2)
        await http.close()

    asyncio.run(main())
    results.put((ledger.deliveries, ledger.errors, ledger.error_kinds))


def _sdk_consumer_process(base: str, topics: list[str], per_topic: int, batch: int,
                          poll_ms: int, done, stop_flag, results, ack_batch: bool = True) -> None:
    """One consumer process of the SDK's own listener, with its default settings: per topic,
    ``per_topic`` listeners (``DelayQueueClient.listen``: long polls sized to the idle consume
    threads, acks batched). The handler records the receipt time and returns True (ack)."""
    import threading

    from delayqueue.client import DelayQueueClient

    ledger = Ledger()
    lock = threading.Lock()

    def handler(msg) -> bool:
        at = time.time() * 1000.0
        with lock:
            ledger.deliveries.append((msg.msg_id, at, msg.trigger_time))
        with done.get_lock():
            done.value += 1
        return True

    client = DelayQueueClient(base, pool_size=max(32, len(topics) * per_topic * 2))
    consumers = [client.listen(topic, handler) for topic in topics for _ in range(per_topic)]
    stop_flag.wait()
    # Each stop waits for its held long poll and its last acks: stop them all at once.
    stoppers = [threading.Thread(target=consumer.stop) for consumer in consumers]
    for stopper in stoppers:
        stopper.start()
    for stopper in stoppers:
        stopper.join()
    results.put((ledger.deliveries, ledger.errors, ledger.error_kinds))


class ConsumerFleet:
    """Long-polling, acking consumers spread over ``processes`` spawned processes.

    ``done`` counts messages handled (received and acked) across all processes. ``sdk``:
    the consumers are the SDK's listener with its defaults instead of the bench's own loop.
    """

    def __init__(self, base: str, topics: list[str], per_topic: int, *, processes: int = 2,
                 batch: int = 1, poll_ms: int = 5000, sdk: bool = False,
                 ack_batch: bool = False) -> None:
        import multiprocessing as mp
        ctx = mp.get_context("spawn")
        self.done = ctx.Value("q", 0)
        self._stop = ctx.Event()
        self._results = ctx.Queue()
        shares = [topics[i::processes] for i in range(processes)]
        target = _sdk_consumer_process if sdk else _consumer_process
        self._procs = [ctx.Process(target=target, daemon=True,
                                   args=(base, share, per_topic, batch, poll_ms, self.done,
                                         self._stop, self._results, ack_batch))
                       for share in shares if share]
        for proc in self._procs:
            proc.start()

    def wait_for(self, count: int, timeout_s: float, label: str = "handled") -> bool:
        """Wait until ``count`` messages were handled or ``timeout_s`` passed; reports progress."""
        from common import progress
        deadline = time.monotonic() + timeout_s
        last_report = 0.0
        while time.monotonic() < deadline:
            value = self.done.value
            if value >= count:
                return True
            if time.monotonic() - last_report > 5:
                progress(f"{label} {value:,}/{count:,}")
                last_report = time.monotonic()
            time.sleep(0.02)
        return self.done.value >= count

    def cpu_seconds(self) -> float:
        """User + system CPU the consumer processes have used so far."""
        import psutil
        total = 0.0
        for proc in self._procs:
            try:
                times = psutil.Process(proc.pid).cpu_times()
                total += times.user + times.system
            except psutil.Error:
                pass
        return total

    def stop(self) -> Ledger:
        self._stop.set()
        ledger = Ledger()
        for _ in self._procs:
            deliveries, errors, kinds = self._results.get(timeout=60)
            ledger.merge(Ledger(deliveries=deliveries, errors=errors, error_kinds=kinds))
        for proc in self._procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
        return ledger
