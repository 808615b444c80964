"""What the peer adapters share: consumer processes, receipts, the producer, the figures.

A peer adapter supplies a :class:`Peer` with two hooks and gets the three workloads from it:

* ``serve(spec, stop, ready)`` runs in a consumer process (``spawn``): consume every topic of
  ``spec["topics"]`` with ``spec["concurrency"]`` jobs in flight per topic until ``stop`` (a
  multiprocessing Event) is set, calling ``ready()`` once consuming, :func:`record` with
  the message id as the first thing its job function does, and :func:`completed` from the
  library's hook that runs once a job is acknowledged (W3 ends at the last completion);
* ``sender(redis_url, topics, concurrency, **options)``, an async context manager yielding
  ``send(topic, msg_id, delay_ms)``, one single-message enqueue call of the library.

Lag is the job function's ``time.time()`` minus the trigger time the producer intended
(wall time just before the enqueue call, in whole ms like every system's own trigger times,
+ delay); both run on this machine, one clock.
Receipts travel back to the parent over a multiprocessing queue in batches every 50 ms, so
shipping them costs the job function one ``deque.append``. Everything is bounded: consumers
that never come up, never deliver or never stop show up as ``lost``, not as a hang.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import math
import multiprocessing as mp
import os
import queue as queue_module
import random
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

from common import RedisMeter, now_ms, progress, summary

BODY = "x" * 64                 # the payload, as in our load generator
READY_TIMEOUT_S = 60.0
PRODUCE_TIMEOUT_S = 1800.0
STOP_TIMEOUT_S = 15.0

# -- inside a consumer process ---------------------------------------------------------------

_receipts: collections.deque = collections.deque()


def record(msg_id: str) -> None:
    """Stamp one job as started (call it first thing in the job function)."""
    _receipts.append((msg_id, time.time() * 1000.0))


def completed(*_: Any) -> None:
    """Stamp one job as completed: the library has acknowledged it."""
    _receipts.append((None, time.time() * 1000.0))


def _drain_receipts() -> list[tuple[str, float]]:
    batch = []
    with contextlib.suppress(IndexError):
        while True:
            batch.append(_receipts.popleft())
    return batch


def _consumer_main(serve: Callable, spec: dict, out: Any, stop: Any) -> None:
    done = threading.Event()
    parent = os.getppid()

    def flush_loop() -> None:
        while not done.wait(0.05):
            batch = _drain_receipts()
            if batch:
                out.put(("receipts", batch))
            if os.getppid() != parent:          # the parent was killed: do not linger
                os._exit(1)

    flusher = threading.Thread(target=flush_loop, daemon=True)
    flusher.start()
    try:
        serve(spec, stop, lambda: out.put(("ready", os.getpid())))
    except BaseException:  # noqa: BLE001 - reported to the parent, which goes on
        out.put(("error", traceback.format_exc()))
    finally:
        done.set()
        flusher.join(1.0)
        batch = _drain_receipts()
        if batch:
            out.put(("receipts", batch))


# -- in the parent ---------------------------------------------------------------------------

@dataclass
class Run:
    """What one run sent (intended trigger times) and what the consumers received."""

    sent: dict[str, float] = field(default_factory=dict)        # msg_id -> trigger ms
    first: dict[str, float] = field(default_factory=dict)       # msg_id -> first receipt ms
    duplicates: int = 0
    errors: int = 0
    started_ms: float = 0.0
    produce_s: float = 0.0
    last_receipt_ms: float = 0.0
    last_done_ms: float = 0.0

    def take(self, message: tuple) -> None:
        kind, payload = message
        if kind == "receipts":
            for msg_id, at in payload:
                if msg_id is None:
                    self.last_done_ms = max(self.last_done_ms, at)
                elif msg_id in self.first:
                    self.duplicates += 1
                else:
                    self.first[msg_id] = at
                if msg_id is not None:
                    self.last_receipt_ms = max(self.last_receipt_ms, at)
        elif kind == "error":
            self.errors += 1
            progress(f"consumer process failed:\n{payload}")

    def lag_figures(self) -> dict[str, Any]:
        lags = [self.first[i] - trigger for i, trigger in self.sent.items() if i in self.first]
        return {"sent": len(self.sent), "delivered": len(lags), "lag_ms": summary(lags),
                "early": sum(1 for lag in lags if lag < 0), "duplicates": self.duplicates,
                "lost": len(self.sent) - len(lags), "errors": self.errors}


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


async def _produce(peer: "Peer", redis_url: str, topics: list[str],
                   plan: list[tuple[str, str, int]], run: Run, *, rate: float,
                   concurrency: int, options: dict) -> None:
    """Send the plan through ``concurrency`` concurrent calls.

    With ``rate`` > 0 message n is sent at a random instant of [n, n + 1) / rate: the rate is
    kept, but the sends do not phase-lock with a consumer that polls at a multiple of it (a
    1 msg/s producer against arq's 0.5 s poll would otherwise see one constant lag per run).
    """
    pending = collections.deque(plan)
    dither = random.Random(len(plan))
    async with peer.sender(redis_url, topics, concurrency, **options) as send:
        started = time.monotonic()
        run.started_ms = now_ms()

        async def one_caller() -> None:
            while pending:
                n = len(plan) - len(pending)
                topic, msg_id, delay_ms = pending.popleft()
                if rate > 0:
                    due = started + (n + dither.random()) / rate
                    await asyncio.sleep(max(0.0, due - time.monotonic()))
                at = math.floor(now_ms())        # whole ms, as every system stamps times
                try:
                    await send(topic, msg_id, delay_ms)
                except Exception as error:  # noqa: BLE001 - counted, the run goes on
                    if not run.errors:
                        progress(f"{peer.name}: send failed: {error!r}")
                    run.errors += 1
                    continue
                run.sent[msg_id] = at + delay_ms

        await asyncio.gather(*(one_caller() for _ in range(max(1, min(concurrency, len(plan))))))
        run.produce_s = time.monotonic() - started


def execute(peer: "Peer", redis_url: str, topics: list[str], consumers: int,
            plan: list[tuple[str, str, int]], *, rate: float = 0.0, concurrency: int = 64,
            grace_s: float = 30.0, processes: int | None = None,
            on_start: Callable[[], None] | None = None, on_end: Callable[[], None] | None = None,
            **options: Any) -> Run:
    """Start the consumer processes, produce ``plan``, collect receipts, stop everything.

    ``consumers`` jobs in flight per topic, split over ``processes`` consumer processes
    (default: one per core, at most one per consumer). Collection ends when every sent message
    has been received, or ``grace_s`` after the last trigger time / last receipt, whichever
    is later. ``on_start`` runs once the consumers are ready, just before the producer starts;
    ``on_end`` once collection ended (after the half second kept for late duplicates).
    """
    options = {**peer.options, **options}
    processes = processes or max(1, min(consumers, os.cpu_count() or 1))
    ctx = mp.get_context("spawn")
    out, stop = ctx.Queue(), ctx.Event()
    workers = [ctx.Process(target=_consumer_main, daemon=True, name=f"{peer.name}-consumer{i}",
                           args=(peer.serve, {"redis_url": redis_url, "topics": topics,
                                              "concurrency": share, **options}, out, stop))
               for i, share in enumerate(_split(consumers, processes)) if share]
    run = Run()
    ready: set[int] = set()

    def receive(timeout: float) -> bool:
        try:
            message = out.get(timeout=timeout)
        except queue_module.Empty:
            return False
        if message[0] == "ready":
            ready.add(message[1])
        run.take(message)
        return True

    try:
        for process in workers:
            process.start()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while len(ready) < len(workers) and time.monotonic() < deadline and run.errors == 0:
            receive(0.1)
        if len(ready) < len(workers):
            progress(f"{peer.name}: only {len(ready)}/{len(workers)} consumer processes ready")
        if on_start:
            on_start()
        asyncio.run(asyncio.wait_for(
            _produce(peer, redis_url, topics, plan, run, rate=rate, concurrency=concurrency,
                     options=options), PRODUCE_TIMEOUT_S))
        last_trigger = max(run.sent.values(), default=now_ms())
        while len(run.first.keys() & run.sent.keys()) < len(run.sent):
            if now_ms() - max(last_trigger, run.last_receipt_ms) > grace_s * 1000.0:
                progress(f"{peer.name}: gave up waiting, {len(run.sent) - len(run.first)} "
                         "messages not received")
                break
            receive(0.1)
        linger = time.monotonic() + 0.5          # late duplicates
        while time.monotonic() < linger:
            receive(0.05)
        if on_end:
            on_end()
    except asyncio.TimeoutError:
        progress(f"{peer.name}: producer timed out after {PRODUCE_TIMEOUT_S:.0f} s")
        run.errors += 1
    finally:
        stop.set()
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while any(p.is_alive() for p in workers) and time.monotonic() < deadline:
            receive(0.05)                        # a child exits only once its queue is fed
        for process in workers:
            if process.is_alive():
                progress(f"{peer.name}: {process.name} did not stop, killing it")
                process.kill()
            process.join(5)
        while receive(0.01):
            pass
        out.close()
    return run


@dataclass
class Peer:
    """One peer library: its hooks, its options, and the three workloads run through them."""

    name: str
    serve: Callable[[dict, Any, Callable[[], None]], None]
    sender: Callable[..., Any]
    options: dict[str, Any] = field(default_factory=dict)

    def w1(self, redis_url: str, *, topics: int, per_topic: int, delay_min_s: float,
           delay_max_s: float, consumers: int, concurrency: int = 64, seed: int = 1,
           **options: Any) -> dict[str, Any]:
        """W1 scaled: topics x per_topic messages, uniform delays, consumers per topic."""
        rng = random.Random(seed)
        names = [f"t{i}" for i in range(topics)]
        low, high = round(delay_min_s * 1000), round(delay_max_s * 1000)
        plan = [(t, f"{t}-{i}", rng.randint(low, high)) for i in range(per_topic) for t in names]
        run = execute(self, redis_url, names, consumers, plan, concurrency=concurrency,
                      **options)
        return {"send_rate": round(len(run.sent) / run.produce_s, 1) if run.produce_s else 0.0,
                **run.lag_figures()}

    def w3(self, redis_url: str, *, messages: int, consumers: int, topics: int = 4,
           concurrency: int = 32, **options: Any) -> dict[str, Any]:
        """W3 immediate: delay 0, ``consumers`` in all spread over ``topics``; end to end,
        from the first enqueue to the last job completed (topics and producer concurrency
        as in w3_immediate); the Redis work (common.RedisMeter) from the producer's start to
        the end of collection."""
        names = [f"t{i}" for i in range(topics)]
        plan = [(names[i % topics], f"m{i}", 0) for i in range(messages)]
        meter, readings = RedisMeter(redis_url), []
        run = execute(self, redis_url, names, max(1, consumers // topics), plan,
                      concurrency=concurrency, on_start=lambda: readings.append(meter.read()),
                      on_end=lambda: readings.append(meter.read()), **options)
        meter.close()
        figures = run.lag_figures()
        redis_work = meter.per_message(readings[0], figures["delivered"], readings[-1]) \
            if len(readings) == 2 else {}
        end_ms = max(run.last_done_ms, run.last_receipt_ms)
        seconds = (end_ms - run.started_ms) / 1000.0
        return {"throughput": round(figures["delivered"] / seconds, 1) if seconds > 0 else 0.0,
                "messages": messages, "seconds": round(seconds, 3),
                "delivered": figures["delivered"],
                **{k: figures[k] for k in ("sent", "duplicates", "lost", "errors")},
                **redis_work}

    def w6(self, redis_url: str, *, duration_s: float, delay_s: float = 5.0, rate: float = 1.0,
           **options: Any) -> dict[str, Any]:
        """W6 idle precision: ``rate`` msg/s due ``delay_s`` later, for ``duration_s``; one
        consumer."""
        plan = [("t0", f"i{i}", round(delay_s * 1000)) for i in range(int(duration_s * rate))]
        run = execute(self, redis_url, ["t0"], 1, plan, rate=rate, concurrency=1, **options)
        return run.lag_figures()
