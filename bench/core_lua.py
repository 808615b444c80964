"""The core without HTTP: the service layer and its Lua scripts called in-process.

The same ``DelayQueue`` methods the HTTP views call (send, pull, ack), from one Python thread
on a fresh redis-server, sequentially (one round trip each). Set against the HTTP figures
(send_wrk.py, w3_immediate.py) it shows how much of a request's cost is HTTP (gunicorn,
Flask, JSON) and how much is the queue itself.

    python bench/core_lua.py --messages 20000
"""

from __future__ import annotations

import argparse
import dataclasses
import time
import uuid

from delayqueue.background.runtime import Runtime
from delayqueue.settings.config import Settings

from common import print_table, progress, stack, write_result


def _timed(label: str, count: int, fn) -> dict:
    started_cpu, started = time.process_time(), time.perf_counter()
    for i in range(count):
        fn(i)
    wall, cpu = time.perf_counter() - started, time.process_time() - started_cpu
    progress(f"{label}: {count / wall:,.0f}/s")
    return {"ops_per_s": round(count / wall, 1), "us_per_op": round(wall / count * 1e6, 1),
            "client_cpu_us_per_op": round(cpu / count * 1e6, 1)}


def run(*, messages: int = 20_000) -> dict:
    with stack(with_node=False) as s:
        settings = dataclasses.replace(Settings(), redis_url=s.redis.url, snapshot_dir="")
        rt = Runtime(settings)
        queue = rt.queue
        ids = [uuid.uuid4().hex for _ in range(messages)]
        body = "x" * 64
        figures = {
            "send_delayed": _timed("send (1 h delay)", messages,
                                   lambda i: queue.send("core-wait", body, msg_id=ids[i],
                                                        delay_ms=3_600_000)),
            "send_immediate": _timed("send (delay 0)", messages,
                                     lambda i: queue.send("core-now", body, msg_id=ids[i],
                                                          delay_ms=0)),
        }
        pulled: list[str] = []
        figures["pull"] = _timed("pull (batch 1)", messages, lambda i: pulled.extend(
            m.msg_id for m in queue.pull("core-now", 1).messages))
        figures["ack"] = _timed("ack", len(pulled),
                                lambda i: queue.ack("core-now", pulled[i]))
        cycle = figures["send_immediate"]["us_per_op"] + figures["pull"]["us_per_op"] + \
            figures["ack"]["us_per_op"]
        figures["send_pull_ack_per_s"] = round(1e6 / cycle, 1)
        figures["delivered"] = len(pulled)
        rt.client.close()
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    args = parser.parse_args(argv)
    f = run(messages=args.messages)
    print_table("core without HTTP (one thread, sequential round trips)", [
        (f"{name}: ops/s, us/op, client CPU us/op",
         f"{f[name]['ops_per_s']:,} / {f[name]['us_per_op']} / {f[name]['client_cpu_us_per_op']}")
        for name in ("send_delayed", "send_immediate", "pull", "ack")
    ] + [("send + pull + ack cycles per second", f["send_pull_ack_per_s"])])
    write_result("core", f, {"messages": args.messages})
    return 0 if f["delivered"] == args.messages else 1


if __name__ == "__main__":
    raise SystemExit(main())
