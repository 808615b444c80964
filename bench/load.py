"""The load generator: asyncio + aiohttp over keep-alive connections, as a user's client would.

``Producer`` sends single-message ``sendMsg`` requests at a target rate (or as fast as its
concurrency allows); ``Consumers`` runs long-polling consumers that ack what they receive and
record every delivery. A ``Ledger`` holds what was sent and what was received, and turns it
into the figures every workload reports: lag percentiles, early, duplicate and lost counts.

Run in its own process (``spawn``), so the generator's CPU is visible and can be split over
processes when one core is not enough for it.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import aiohttp

from common import API, now_ms, summary


@dataclass
class Ledger:
    """Sent messages by msgId (their triggerTime) and every delivery seen."""

    sent: dict[str, int] = field(default_factory=dict)          # msgId -> triggerTime
    deliveries: list[tuple[str, float, int]] = field(default_factory=list)  # id, at, trigger
    send_latency_ms: list[float] = field(default_factory=list)
    errors: int = 0

    def merge(self, other: "Ledger") -> None:
        self.sent.update(other.sent)
        self.deliveries.extend(other.deliveries)
        self.send_latency_ms.extend(other.send_latency_ms)
        self.errors += other.errors

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
                "unknown": unknown, "errors": self.errors}


class Http:
    """One aiohttp session with unlimited keep-alive connections to one node."""

    def __init__(self, base: str, timeout_s: float = 90.0) -> None:
        self.base = base.rstrip("/") + API
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, force_close=False),
            timeout=aiohttp.ClientTimeout(total=timeout_s))

    async def call(self, endpoint: str, **form: Any) -> dict:
        async with self.session.post(self.base + endpoint,
                                     data={k: str(v) for k, v in form.items()}) as response:
            return await response.json(content_type=None)

    async def close(self) -> None:
        await self.session.close()


async def produce(http: Http, plan: Iterable[tuple[str, str, int]], ledger: Ledger, *,
                  rate: float = 0.0, concurrency: int = 64, body: str = "x" * 64) -> float:
    """Send every (topic, msgId, delayMillis) of ``plan``; returns the seconds it took.

    ``rate`` > 0 paces the sends (msg/s); otherwise ``concurrency`` requests are in flight.
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
            t0 = time.monotonic()
            try:
                reply = await http.call("sendMsg", topic=topic, msgId=msg_id, msg=body,
                                        delayMillis=delay)
            except (aiohttp.ClientError, asyncio.TimeoutError):
                ledger.errors += 1
                continue
            ledger.send_latency_ms.append((time.monotonic() - t0) * 1000.0)
            if reply.get("code") == 200:
                ledger.sent[msg_id] = reply["delayMsg"]["triggerTime"]
            else:
                ledger.errors += 1

    await asyncio.gather(*(worker(i) for i in range(min(concurrency, total) or 1)))
    return time.monotonic() - started


async def consume(http: Http, topic: str, ledger: Ledger, stop: asyncio.Event, *,
                  batch: int = 1, poll_ms: int = 5000, ack: bool = True,
                  on_done: Callable[[int], None] | None = None) -> None:
    """One long-polling consumer: poll, record, ack each message, poll again, until ``stop``.

    ``on_done(n)`` is called after each poll's ``n`` messages were handled (acked).
    """
    while not stop.is_set():
        try:
            reply = await http.call("longPollingMsg", topic=topic, batch=batch,
                                    longPollingTimeoutMillis=poll_ms)
        except (aiohttp.ClientError, asyncio.TimeoutError):
            ledger.errors += 1
            await asyncio.sleep(0.1 + random.random() * 0.1)
            continue
        at = now_ms()
        for message in reply.get("delayMsgList") or ():
            ledger.deliveries.append((message["msgId"], at, message["triggerTime"]))
            if ack:
                try:
                    await http.call("ackMsg", topic=topic, msgId=message["msgId"])
                except (aiohttp.ClientError, asyncio.TimeoutError):
                    ledger.errors += 1
        if on_done is not None and reply.get("delayMsgList"):
            on_done(len(reply["delayMsgList"]))


# -- consumers in their own processes ---------------------------------------------------------

def _consumer_process(base: str, topics: list[str], per_topic: int, batch: int, poll_ms: int,
                      done, stop_flag, results) -> None:
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
                                             poll_ms=poll_ms, on_done=count))
                 for topic in topics for _ in range(per_topic)]
        await watch()
        # Held polls end within poll_ms; do not wait for them beyond that.
        await asyncio.wait(tasks, timeout=poll_ms / 1000.0 + 2)
        await http.close()

    asyncio.run(main())
    results.put((ledger.deliveries, ledger.errors))


class ConsumerFleet:
    """Long-polling, acking consumers spread over ``processes`` spawned processes.

    ``done`` counts messages handled (received and acked) across all processes.
    """

    def __init__(self, base: str, topics: list[str], per_topic: int, *, processes: int = 2,
                 batch: int = 1, poll_ms: int = 5000) -> None:
        import multiprocessing as mp
        ctx = mp.get_context("spawn")
        self.done = ctx.Value("q", 0)
        self._stop = ctx.Event()
        self._results = ctx.Queue()
        shares = [topics[i::processes] for i in range(processes)]
        self._procs = [ctx.Process(target=_consumer_process, daemon=True,
                                   args=(base, share, per_topic, batch, poll_ms, self.done,
                                         self._stop, self._results))
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
            deliveries, errors = self._results.get(timeout=60)
            ledger.deliveries.extend(deliveries)
            ledger.errors += errors
        for proc in self._procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
        return ledger
