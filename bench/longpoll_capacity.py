"""Long-poll capacity of one node: hold N concurrent long polls, wake them, measure.

Starts its own redis-server and one node (the deployed gunicorn command), holds ``--polls``
long polls over raw HTTP/1.1 asyncio sockets, then sends one message per poll, all due at
one instant, and prints: polls held, answered, wake-up latency (answer - triggerTime)
p50/p99/max, worker RSS before/while holding/after, memory per held poll, worker CPU.

    .venv/bin/python bench/longpoll_capacity.py --polls 1000 --worker-class gevent
    .venv/bin/python bench/longpoll_capacity.py --polls 1000 --worker-class gthread --threads 1000
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import requests

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from conftest import RedisServer  # noqa: E402
from fleet_support import accepted_connections, now_ms, percentile, post, start_polls  # noqa: E402
from server_process import ServerProcess  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--polls", type=int, default=1000, help="concurrent long polls")
    parser.add_argument("--worker-class", choices=["gevent", "gthread"], default="gevent")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1000,
                        help="threads per gthread worker (ignored for gevent)")
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--lead-ms", type=int, default=8000,
                        help="messages are due this long after the sends start")
    parser.add_argument("--hold-s", type=float, default=3.0,
                        help="how long to hold the polls before sending")
    return parser.parse_args(argv)


def worker_stats(node: ServerProcess) -> tuple[float, float, int]:
    """Summed worker RSS (MiB), summed worker CPU seconds, summed worker threads."""
    rss = cpu = 0.0
    threads = 0
    for worker in node.workers():
        try:
            rss += worker.memory_info().rss / 2**20
            times = worker.cpu_times()
            cpu += times.user + times.system
            threads += worker.num_threads()
        except psutil.Error:
            pass
    return rss, cpu, threads


async def run(node: ServerProcess, args: argparse.Namespace) -> dict:
    loop = asyncio.get_running_loop()
    executor = ThreadPoolExecutor(8)
    topics = [f"bench{i}" for i in range(args.topics)]
    # Warm every worker's pool and app before the baseline.
    for i in range(20):
        node.call("pullMsg", topic=topics[i % len(topics)])
    rss0, cpu0, threads0 = worker_stats(node)
    polls, tasks = start_polls(loop, "127.0.0.1", node.port, topics, args.polls,
                               timeout_ms=60_000)
    started = time.monotonic()
    held = 0
    while time.monotonic() - started < 60:
        held = await loop.run_in_executor(executor, accepted_connections, node.workers(),
                                          node.port)
        if held >= args.polls and all(p.sent_ms for p in polls):
            break
        await asyncio.sleep(0.2)
    connect_s = time.monotonic() - started
    _, cpu_connected, _ = worker_stats(node)
    await asyncio.sleep(args.hold_s)
    answered_early = sum(1 for p in polls if p.answered_ms is not None)
    held = await loop.run_in_executor(executor, accepted_connections, node.workers(),
                                      node.port)
    rss1, cpu1, threads1 = worker_stats(node)

    trigger = int(now_ms()) + args.lead_ms

    failures = []

    def send(i: int) -> int:
        # A worker model whose every thread is pinned by a held poll cannot take a send:
        # after a few timeouts, stop trying and report it.
        if len(failures) >= 16:
            return -1
        try:
            return post(requests.Session(), node.url, "sendMsg", topic=topics[i % len(topics)],
                        msgId=f"b{i}", msg="x", triggerTime=trigger, timeout=5)["code"]
        except requests.RequestException as exc:
            failures.append(exc)
            return -1

    codes = await asyncio.gather(*[loop.run_in_executor(executor, send, i)
                                   for i in range(args.polls)])
    sends_done = now_ms()
    rss2, cpu2, _ = worker_stats(node)
    wait_s = (trigger - now_ms()) / 1000 + 30 if not failures else 1
    _, pending = await asyncio.wait(tasks, timeout=max(wait_s, 1))
    rss3, cpu3, _ = worker_stats(node)
    for task in pending:
        task.cancel()
    executor.shutdown()
    answered = [p for p in polls if p.body and p.body.get("code") == 200
                and p.body.get("delayMsgList")]
    lags = [p.answered_ms - trigger for p in answered]
    return {
        "polls": args.polls, "held": held, "answered_early": answered_early,
        "connect_s": connect_s, "answered": len(answered),
        "errors": sum(1 for p in polls if p.error or (p.body and p.body.get("code") != 200)),
        "sends_ok": sum(1 for c in codes if c == 200),
        "sends_late_ms": max(0.0, sends_done - trigger),
        "p50": percentile(lags, 50), "p99": percentile(lags, 99),
        "max": max(lags) if lags else float("nan"), "early": sum(1 for l in lags if l < 0),
        "rss_base": rss0, "rss_held": rss1, "rss_after": rss3,
        "per_poll_kib": (rss1 - rss0) * 1024 / max(args.polls, 1),
        "threads_base": threads0, "threads_held": threads1,
        "cpu_connect": cpu_connected - cpu0, "cpu_idle_per_s": (cpu1 - cpu_connected) / args.hold_s, "cpu_send": cpu2 - cpu1, "cpu_wake": cpu3 - cpu2,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        store = RedisServer(Path(tmp))
        try:
            settings = {"threads": args.threads, "worker-connections": max(2000, args.polls),
                        "redis-max-connections": 64}
            with ServerProcess(store.url, workers=args.workers, worker_class=args.worker_class,
                               settings=settings) as node:
                r = asyncio.run(run(node, args))
        finally:
            store.stop()
    model = args.worker_class + (f" threads={args.threads}" if args.worker_class == "gthread"
                                 else "")
    print(f"worker model        {model}, workers={args.workers}, topics={args.topics}")
    print(f"polls held          {r['held']} of {r['polls']} (connected in {r['connect_s']:.1f}s;"
          f" answered early: {r['answered_early']})")
    print(f"answered            {r['answered']} with a message, {r['errors']} errors, "
          f"{r['early']} before triggerTime; sends ok {r['sends_ok']} of {r['polls']}"
          + (f" (sends finished {r['sends_late_ms']:.0f} ms after the due time!)"
             if r["sends_late_ms"] else ""))
    print(f"wake-up latency     p50 {r['p50']:.0f} ms, p99 {r['p99']:.0f} ms, "
          f"max {r['max']:.0f} ms (answer received - triggerTime)")
    print(f"worker RSS (sum)    base {r['rss_base']:.1f} MiB, holding {r['rss_held']:.1f} MiB, "
          f"after {r['rss_after']:.1f} MiB -> {r['per_poll_kib']:.1f} KiB per held poll")
    print(f"worker threads      base {r['threads_base']}, holding {r['threads_held']}")
    print(f"worker CPU (sum)    accepting the polls {r['cpu_connect']:.2f}s, idle holding "
          f"{r['cpu_idle_per_s'] * 100:.0f}% of a core, during sends "
          f"{r['cpu_send']:.2f}s, waking {r['cpu_wake']:.2f}s")
    return 0 if r["answered"] == r["polls"] and r["early"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
