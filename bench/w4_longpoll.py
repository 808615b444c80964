"""W4 — long-poll capacity of one node: hold N concurrent long polls, then wake them.

Holds ``--polls`` long polls (raw HTTP/1.1 sockets, one per poll) spread over ``--topics``
topics on one node, measures the workers' memory per held poll, then:
  * trickle — ``--trickle`` messages arrive one by one (delay 0, ``--rate`` per second, round
    robin over the topics): wake-up latency = answer received − triggerTime (= arrival);
  * burst — every poll still held gets one message, all due at one instant: the time until
    each is answered.

    python bench/w4_longpoll.py --polls 2000
    python bench/w4_longpoll.py --polls 1000 --worker-class gthread --threads 1000
"""

from __future__ import annotations

import argparse
import asyncio
import time

import psutil

from common import now_ms, print_table, progress, stack, summary, write_result
from load import Http
from support.fleet import accepted_connections, start_polls


def _rss_mib(node) -> float:
    total = 0.0
    for worker in node.workers():
        try:
            total += worker.memory_info().rss / 2**20
        except psutil.Error:
            pass
    return total


async def _measure(s, polls_n: int, topics_n: int, trickle: int, rate: float) -> dict:
    node = s.node
    loop = asyncio.get_running_loop()
    topics = [f"w4-{i:03d}" for i in range(topics_n)]
    http = Http(s.base)
    for i in range(20):  # warm both workers' app and pools before the baseline
        await http.call("pullMsg", topic=topics[i % topics_n])
    rss0 = _rss_mib(node)
    polls, tasks = start_polls(loop, "127.0.0.1", node.port, topics, polls_n,
                               timeout_ms=60_000)
    started = time.monotonic()
    held = 0
    while time.monotonic() - started < 60:
        held = await loop.run_in_executor(None, accepted_connections, node.workers(),
                                          node.port)
        if held >= polls_n and all(p.sent_ms for p in polls):
            break
        await asyncio.sleep(0.2)
    progress(f"holding {held:,} polls after {time.monotonic() - started:.1f}s")
    await asyncio.sleep(2.0)
    rss1 = _rss_mib(node)

    # Trickle: one message at a time, each wakes one held poll.
    sent_at: dict[str, int] = {}
    t0 = time.monotonic()
    for i in range(trickle):
        wait = t0 + i / rate - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        reply = await http.call("sendMsg", topic=topics[i % topics_n], msgId=f"t{i}", msg="x",
                                delayMillis=0)
        sent_at[f"t{i}"] = reply["delayMsg"]["triggerTime"]
    await asyncio.sleep(1.0)
    trickle_lag = [p.answered_ms - sent_at[m["msgId"]] for p in polls if p.body
                   for m in p.body.get("delayMsgList") or () if m["msgId"] in sent_at]
    progress(f"trickle: {len(trickle_lag)} of {trickle} answered")

    # Burst: one message per poll still held, all due at one instant.
    waiting = [p for p in polls if p.answered_ms is None]
    trigger = int(now_ms()) + 4000
    await asyncio.gather(*(http.call("sendMsg", topic=p.topic, msgId=f"b{i}", msg="x",
                                     triggerTime=trigger) for i, p in enumerate(waiting)))
    await asyncio.wait(tasks, timeout=max(trigger - now_ms(), 0) / 1000 + 30)
    burst_lag = [p.answered_ms - trigger for p in waiting if p.body and
                 p.body.get("delayMsgList")]
    await http.close()
    errors = sum(1 for p in polls if p.error or (p.body and p.body.get("code") != 200))
    return {
        "polls": polls_n, "held": held, "errors": errors,
        "rss_base_mib": round(rss0, 1), "rss_holding_mib": round(rss1, 1),
        "kib_per_held_poll": round((rss1 - rss0) * 1024 / max(polls_n, 1), 1),
        "trickle_rate": rate, "trickle_answered": len(trickle_lag),
        "wake_ms": summary(trickle_lag),
        "burst_messages": len(waiting), "burst_answered": len(burst_lag),
        "burst_wake_ms": summary(burst_lag),
        "early": sum(1 for lag in trickle_lag + burst_lag if lag < 0),
    }


def run(*, polls: int = 2000, topics: int = 100, trickle: int = 500, rate: float = 100.0,
        workers: int = 2, worker_class: str = "gevent", threads: int = 1) -> dict:
    settings = {"worker-class": worker_class, "threads": threads,
                "worker-connections": polls + 500}
    with stack(workers=workers, settings=settings) as s:
        return asyncio.run(_measure(s, polls, topics, trickle, rate))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--polls", type=int, default=2000)
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--trickle", type=int, default=500, help="messages arriving one by one")
    parser.add_argument("--rate", type=float, default=100.0, help="trickle messages per second")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--worker-class", choices=["gevent", "gthread"], default="gevent")
    parser.add_argument("--threads", type=int, default=1, help="threads per gthread worker")
    args = parser.parse_args(argv)
    settings = {"polls": args.polls, "topics": args.topics, "trickle": args.trickle,
                "rate": args.rate, "workers": args.workers, "worker_class": args.worker_class,
                "threads": args.threads}
    f = run(**settings)
    wake, burst = f["wake_ms"], f["burst_wake_ms"]
    print_table("W4 long-poll capacity", [
        ("polls held / asked", f"{f['held']:,} / {f['polls']:,}"),
        ("worker RSS base / holding (MiB)", f"{f['rss_base_mib']} / {f['rss_holding_mib']}"),
        ("memory per held poll (KiB)", f["kib_per_held_poll"]),
        (f"trickle wake p50 / p99 / max (ms), {f['trickle_rate']:.0f} msg/s",
         f"{wake.get('p50')} / {wake.get('p99')} / {wake.get('max')}"),
        ("trickle answered", f"{f['trickle_answered']:,}"),
        (f"burst of {f['burst_messages']:,} wake p50 / p99 / max (ms)",
         f"{burst.get('p50')} / {burst.get('p99')} / {burst.get('max')}"),
        ("errors / early", f"{f['errors']} / {f['early']}"),
    ])
    write_result("w4", f, settings)
    ok = f["held"] >= f["polls"] and f["errors"] == 0 and f["early"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
