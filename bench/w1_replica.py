"""W1 — camellia's own test, replayed: topics × messages, random delays, long-polling consumers.

camellia's README: 100 topics × 1,000 messages, delays uniformly random 10–70 s, 10 consumers
per topic; 100k sent in 41 s (~2,400 msg/s) on a 6-core desktop; lag average 43 ms, max
798 ms (and up to 100 ms early). Here the producer sends single-message ``sendMsg`` requests
as fast as ``--send-concurrency`` requests in flight allow (8: a producer that waits for its
answers; 64 floods the node's two cores with sends and the deliveries queue behind them —
both are in docs/benchmarks.md) while the consumers (in their own processes) long poll,
record the receipt time of every delivery and ack it.

    python bench/w1_replica.py                 # the full replica (~2.5 minutes)
    python bench/w1_replica.py --scale         # 100 topics x 100 messages, delays 2-10 s
    python bench/w1_replica.py --send-rate 1000   # the producer paced at 1,000 msg/s
    python bench/w1_replica.py --send-rate 2400 --sdk --consumers 1   # camellia's rate, SDK
"""

from __future__ import annotations

import argparse
import asyncio
import random
import uuid

from common import node_workers_cpu, print_table, progress, stack, summary, write_result
from load import ConsumerFleet, Http, Ledger, produce


def run(*, topics: int = 100, per_topic: int = 1000, delay_min_s: float = 10.0,
        delay_max_s: float = 70.0, consumers: int = 10, send_concurrency: int = 8,
        consumer_processes: int = 2, workers: int = 2, batch: int = 1,
        send_rate: float = 0.0, grace_s: float = 30.0, sdk: bool = False) -> dict:
    names = [f"w1-{i:03d}" for i in range(topics)]
    plan = [(topic, uuid.uuid4().hex,
             int(random.uniform(delay_min_s, delay_max_s) * 1000))
            for topic in names for _ in range(per_topic)]
    random.shuffle(plan)
    with stack(workers=workers) as s:
        fleet = ConsumerFleet(s.base, names, consumers, processes=consumer_processes,
                              batch=batch, sdk=sdk)
        ledger = Ledger()
        cpu0 = node_workers_cpu(s.node)

        async def send() -> float:
            http = Http(s.base)
            try:
                return await produce(http, plan, ledger, concurrency=send_concurrency,
                                     rate=send_rate)
            finally:
                await http.close()

        progress(f"sending {len(plan):,} messages to {topics} topics "
                 f"({consumers} consumers each)")
        send_s = asyncio.run(send())
        progress(f"sent {len(ledger.sent):,} in {send_s:.1f}s; waiting for deliveries")
        fleet.wait_for(len(ledger.sent), delay_max_s + grace_s, "delivered+acked")
        consumer_cpu = fleet.cpu_seconds()
        redis_top = sorted(s.commandstats().items(), key=lambda kv: kv[1]["usec"],
                           reverse=True)[:6]
        received = fleet.stop()
        cpu = node_workers_cpu(s.node) - cpu0
        per_worker = [round(c, 1) for c in node_workers_cpu(s.node, each=True)]
    ledger.merge(received)
    figures = ledger.figures()
    figures.update({
        "send_rate": round(len(ledger.sent) / send_s, 1),
        "send_seconds": round(send_s, 2),
        "send_latency_ms": summary(ledger.send_latency_ms),
        "node_cpu_seconds": round(cpu, 1),
        "node_cpu_per_worker": per_worker,
        "consumer_cpu_seconds": round(consumer_cpu, 1),
        "redis_commands": {name: stats for name, stats in redis_top},
    })
    return figures


def rows(figures: dict) -> list[tuple[str, object]]:
    lag = figures["lag_ms"]
    return [
        ("messages sent", figures["sent"]),
        ("send throughput (msg/s)", figures["send_rate"]),
        ("send latency p50 / p99 (ms)",
         f"{figures['send_latency_ms'].get('p50')} / {figures['send_latency_ms'].get('p99')}"),
        ("delivered", figures["delivered"]),
        ("lag p50 / p90 / p99 / p99.9 / max (ms)",
         f"{lag.get('p50')} / {lag.get('p90')} / {lag.get('p99')} / {lag.get('p99.9')} / "
         f"{lag.get('max')}"),
        ("lag mean (ms)", lag.get("mean")),
        ("early / duplicates / lost", f"{figures['early']} / {figures['duplicates']} / "
                                      f"{figures['lost']}"),
        ("client errors", f"{figures['errors']} {figures['error_kinds'] or ''}"),
        ("CPU seconds: node workers / consumer processes",
         f"{figures['node_cpu_seconds']} {figures['node_cpu_per_worker']} / "
         f"{figures['consumer_cpu_seconds']}"),
        ("Redis time by command (s, calls)", ", ".join(
            f"{name} {stats['usec'] / 1e6:.1f} ({stats['calls']:,})"
            for name, stats in figures["redis_commands"].items())),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", action="store_true",
                        help="quick check: 100 messages per topic, delays 2-10 s")
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--per-topic", type=int, default=1000)
    parser.add_argument("--delay-min", type=float, default=10.0, help="seconds")
    parser.add_argument("--delay-max", type=float, default=70.0, help="seconds")
    parser.add_argument("--consumers", type=int, default=10, help="per topic")
    parser.add_argument("--send-concurrency", type=int, default=8,
                        help="sendMsg requests in flight")
    parser.add_argument("--send-rate", type=float, default=0.0,
                        help="pace the sends at this many per second (0: as fast as they go)")
    parser.add_argument("--consumer-processes", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers of the node")
    parser.add_argument("--sdk", action="store_true",
                        help="consumers: the SDK's listener with its default settings, "
                             "--consumers listeners per topic")
    args = parser.parse_args(argv)
    if args.scale:
        args.per_topic, args.delay_min, args.delay_max = 100, 2.0, 10.0
    settings = {"topics": args.topics, "per_topic": args.per_topic,
                "delay_min_s": args.delay_min, "delay_max_s": args.delay_max,
                "consumers": args.consumers, "send_concurrency": args.send_concurrency,
                "send_rate": args.send_rate,
                "consumer_processes": args.consumer_processes, "workers": args.workers,
                "sdk": args.sdk}
    figures = run(**settings)
    print_table("W1 camellia replica" + (", SDK listeners" if args.sdk else ""), rows(figures))
    # A paced run is its own workload in the summary (run_all's "w1paced"; with the SDK's
    # listener, "w1sdk").
    name = "w1sdk" if args.sdk else "w1paced" if args.send_rate > 0 else "w1"
    write_result(name, figures, settings)
    ok = figures["early"] == 0 and figures["lost"] == 0 and figures["duplicates"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
