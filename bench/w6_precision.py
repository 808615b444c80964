"""W6 — idle precision: 1 message per second with a 5 s delay, one long-polling consumer.

With nothing else going on, the lag (receipt − triggerTime) is the floor of the design: the
held poll's own wake-up at the due time, the pull script, the HTTP answer.

    python bench/w6_precision.py --duration 180
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid

from common import print_table, progress, stack, write_result
from load import Http, Ledger, consume


async def _drive(base: str, duration_s: float, delay_s: float, rate: float,
                 ledger: Ledger) -> None:
    topic = "w6"
    producer, consumer = Http(base), Http(base)
    stop = asyncio.Event()
    task = asyncio.create_task(consume(consumer, topic, ledger, stop, poll_ms=10_000))
    try:
        count = int(duration_s * rate)
        started = time.monotonic()
        for i in range(count):
            wait = started + i / rate - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            msg_id = uuid.uuid4().hex
            reply = await producer.call("sendMsg", topic=topic, msgId=msg_id, msg="tick",
                                        delayMillis=int(delay_s * 1000))
            ledger.sent[msg_id] = reply["delayMsg"]["triggerTime"]
            if i and i % 30 == 0:
                progress(f"sent {i}/{count}")
        deadline = time.monotonic() + delay_s + 5
        while time.monotonic() < deadline and len(ledger.deliveries) < len(ledger.sent):
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await asyncio.wait([task], timeout=12)
        await producer.close()
        await consumer.close()


def run(*, duration_s: float = 180.0, delay_s: float = 5.0, rate: float = 1.0,
        workers: int = 2) -> dict:
    ledger = Ledger()
    with stack(workers=workers) as s:
        asyncio.run(_drive(s.base, duration_s, delay_s, rate, ledger))
    return ledger.figures()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=180.0, help="seconds of sending")
    parser.add_argument("--delay", type=float, default=5.0, help="seconds")
    parser.add_argument("--rate", type=float, default=1.0, help="messages per second")
    args = parser.parse_args(argv)
    settings = {"duration_s": args.duration, "delay_s": args.delay, "rate": args.rate}
    f = run(**settings)
    lag = f["lag_ms"]
    print_table("W6 idle precision", [
        ("messages", f["sent"]),
        ("lag p50 / p90 / p99 / max (ms)",
         f"{lag.get('p50')} / {lag.get('p90')} / {lag.get('p99')} / {lag.get('max')}"),
        ("lag min (ms)", lag.get("min")),
        ("early / duplicates / lost", f"{f['early']} / {f['duplicates']} / {f['lost']}"),
    ])
    write_result("w6", f, settings)
    return 0 if f["early"] == 0 and f["lost"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
