"""W3 — immediate throughput: delay 0, end to end (send → deliver → ack) messages per second.

A producer sends single-message ``sendMsg`` requests with no delay while long-polling consumers
(in their own processes) receive and ack each message. The figure is messages / (last ack −
first send). ``--batches 100``: the producer sends ``sendMsgBatch`` requests of 100, the
consumers long poll up to 100 at a time and ack each poll's messages in one ``ackMsgBatch``.

    python bench/w3_immediate.py --messages 20000 --consumers 8
    python bench/w3_immediate.py --messages 50000 --batches 100
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid

from common import RedisMeter, node_workers_cpu, print_table, progress, stack, write_result
from load import ConsumerFleet, Http, Ledger, produce, produce_batches


def run(*, messages: int = 20_000, consumers: int = 8, topics: int = 4, batch: int = 10,
        send_concurrency: int = 32, consumer_processes: int = 2, workers: int = 2,
        batches: int = 0) -> dict:
    """``batches`` > 0: send, pull and ack in batches of that many (sendMsgBatch, a long poll
    of that batch, ackMsgBatch)."""
    if batches:
        batch = batches
    names = [f"w3-{i}" for i in range(topics)]
    plan = [(names[i % topics], uuid.uuid4().hex, 0) for i in range(messages)]
    ledger = Ledger()
    with stack(workers=workers) as s:
        fleet = ConsumerFleet(s.base, names, max(1, consumers // topics),
                              processes=consumer_processes, batch=batch,
                              ack_batch=batches > 0)
        time.sleep(1.0)  # let the consumers' first polls arrive
        cpu0 = node_workers_cpu(s.node)
        meter = RedisMeter(s.redis.url)
        redis0 = meter.read()

        async def send() -> float:
            http = Http(s.base)
            try:
                if batches:
                    return await produce_batches(http, plan, ledger, batch=batches,
                                                 concurrency=max(2, send_concurrency // 8))
                return await produce(http, plan, ledger, concurrency=send_concurrency)
            finally:
                await http.close()

        progress(f"{messages:,} messages, {consumers} consumers on {topics} topics")
        started = time.monotonic()
        send_s = asyncio.run(send())
        fleet.wait_for(len(ledger.sent), 120, "acked")
        elapsed = time.monotonic() - started
        cpu = node_workers_cpu(s.node) - cpu0
        redis1 = meter.read()
        meter.close()
        received = fleet.stop()
    ledger.merge(received)
    figures = ledger.figures()
    figures.update({
        "messages": messages,
        "seconds": round(elapsed, 2),
        "throughput": round(figures["delivered"] / elapsed, 1),
        "send_seconds": round(send_s, 2),
        "node_cpu_us_per_message": round(cpu / max(figures["delivered"], 1) * 1e6, 1),
        **meter.per_message(redis0, figures["delivered"], redis1),
    })
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--consumers", type=int, default=8, help="in all, spread over topics")
    parser.add_argument("--topics", type=int, default=4)
    parser.add_argument("--batch", type=int, default=10, help="long-poll batch size")
    parser.add_argument("--batches", type=int, default=0,
                        help="send, pull and ack in batches of this many (0: single sends)")
    args = parser.parse_args(argv)
    settings = {"messages": args.messages, "consumers": args.consumers,
                "topics": args.topics, "batch": args.batch, "batches": args.batches}
    f = run(**settings)
    lag = f["lag_ms"]
    print_table("W3 immediate throughput" + (f", batches of {args.batches}" if args.batches
                                              else ""), [
        ("messages sent / delivered", f"{f['sent']:,} / {f['delivered']:,}"),
        ("end-to-end throughput (msg/s)", f["throughput"]),
        ("elapsed / sending (s)", f"{f['seconds']} / {f['send_seconds']}"),
        ("lag p50 / p99 / max (ms)", f"{lag.get('p50')} / {lag.get('p99')} / {lag.get('max')}"),
        ("early / duplicates / lost", f"{f['early']} / {f['duplicates']} / {f['lost']}"),
        ("node worker CPU per message (us)", f["node_cpu_us_per_message"]),
        ("Redis CPU per message (us)", f["redis_cpu_us_per_message"]),
        ("Redis commands per message", f"{f['redis_commands_per_message']}: " + ", ".join(
            f"{k} {v}" for k, v in list(f["redis_commands_by_name"].items())[:8])),
    ])
    write_result("w3batch" if args.batches else "w3", f, settings)
    return 0 if f["lost"] == 0 and f["duplicates"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
