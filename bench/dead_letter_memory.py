"""Redis memory per dead letter, beyond its body, with a waiting message as the reference.

Two phases, each on a fresh loopback redis-server of its own (so one phase's keyspace does
not resize the other's tables), through the service layer the HTTP views call
(``delayqueue.background.runtime.Runtime``: the same Lua scripts, called in-process, no
node, no HTTP):

  waiting   --count messages sent with a 1-day delay (status 1): the reference.
  dead      --count messages sent with maxRetry 0, pulled (batches of 1000) and ended with
            status 6 by a nack each (``--death nack``, default) or by their ack timeout
            (``--death timeout``: pulled with a 1 ms ack timeout, then the scheduler's
            timeout sweep is run in-process until none is left consuming). The topic keeps
            dead letters (the server default), so each ends in the dead-letter queue; its
            ``deadLetterMaxSize`` is raised to --count + 1 so none is dropped.

Each phase warms up first (one message through the same path, so the scripts are loaded and
the topic's keys exist), reads ``INFO memory`` ``used_memory``, does its --count messages,
reads it again: (after - before) / count - body bytes = bytes per message beyond its body.
``MEMORY USAGE`` of one message hash and of the topic's queues are printed as a breakdown.

    PYTHONPATH=. .venv/bin/python bench/dead_letter_memory.py --count 100000
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from typing import Any, Callable

from delayqueue.background.runtime import Runtime
from delayqueue.settings.config import Settings

from common import print_table, progress, stack, write_result

MAX_COUNT = 2_000_000
BATCH = 1000
DAY_MS = 86_400_000


def _settings(redis_url: str) -> Settings:
    return dataclasses.replace(Settings(), redis_url=redis_url, snapshot_dir="")


def _ids(prefix: str, count: int) -> list[str]:
    # Fixed-width ids like the server's generated ones (32 hex characters).
    return [f"{prefix}{i:0{32 - len(prefix)}d}" for i in range(count)]


def _loop(label: str, count: int, step: Callable[[int], None]) -> float:
    """Run step(i) for i in range(count) with progress every tenth; returns seconds."""
    started = time.perf_counter()
    tick = max(count // 10, 1)
    for i in range(count):
        step(i)
        if (i + 1) % tick == 0 or i + 1 == count:
            rate = (i + 1) / max(time.perf_counter() - started, 1e-9)
            progress(f"{label}: {i + 1:,}/{count:,} ({rate:,.0f}/s)")
    return time.perf_counter() - started


def _used(rt: Runtime) -> int:
    return int(rt.client.info("memory")["used_memory"])


def _breakdown(rt: Runtime, topic: str, sample_id: str, count: int) -> dict[str, Any]:
    tk = rt.queue.topic_keys(topic)
    records = rt.client.hlen(tk.msgs)
    usage = rt.client.memory_usage(tk.msgs, samples=0) or 0
    out: dict[str, Any] = {"msgs_hash": {"records": records, "bytes": usage,
                                         "bytes_per_record": round(usage / max(records, 1), 1)}}
    for name in ("waiting", "ready", "ack", "expire", "dead", "ended"):
        key = getattr(tk, name)
        size = rt.client.zcard(key)
        if size:
            usage = rt.client.memory_usage(key, samples=0) or 0
            out[f"{name}_zset"] = {"entries": size, "bytes": usage,
                                   "bytes_per_entry": round(usage / size, 1)}
    out["keys_in_db"] = rt.client.dbsize()
    return out


def phase_waiting(count: int, body: str) -> dict[str, Any]:
    topic = "mem-waiting"
    with stack(with_node=False) as s:
        rt = Runtime(_settings(s.redis.url))
        q = rt.queue
        q.send(topic, body, msg_id="warmup", delay_ms=DAY_MS)
        ids = _ids("w", count)
        before = _used(rt)
        seconds = _loop("waiting: send (1-day delay)", count,
                        lambda i: q.send(topic, body, msg_id=ids[i], delay_ms=DAY_MS))
        after = _used(rt)
        info = q.topic_info(topic)
        assert info["waitingQueueSize"] == count + 1, info
        figures = {"used_memory_before": before, "used_memory_after": after,
                   "bytes_per_message": round((after - before) / count, 1),
                   "bytes_beyond_body": round((after - before) / count - len(body), 1),
                   "seconds": round(seconds, 1),
                   "breakdown": _breakdown(rt, topic, ids[0], count)}
        rt.client.close()
    return figures


def _kill_all(rt: Runtime, topic: str, body: str, ids: list[str], death: str) -> None:
    q = rt.queue
    _loop("dead: send (maxRetry 0)", len(ids),
          lambda i: q.send(topic, body, msg_id=ids[i], max_retry=0))
    pulled: list[str] = []
    ack_timeout = 1 if death == "timeout" else 3_600_000
    rounds = (len(ids) + BATCH - 1) // BATCH
    _loop(f"dead: pull (batches of {BATCH})", rounds,
          lambda i: pulled.extend(m.msg_id for m in q.pull(topic, BATCH, ack_timeout).messages))
    if len(pulled) != len(ids):
        raise RuntimeError(f"pulled {len(pulled)} of {len(ids)}")
    if death == "nack":
        _loop("dead: nack (no deliveries left: status 6)", len(pulled),
              lambda i: q.nack(topic, pulled[i]))
    else:
        time.sleep(0.01)
        started = time.perf_counter()
        while rt.client.zcard(q.topic_keys(topic).ack):
            rt.scheduler.run_due()
            progress(f"dead: timeout sweep, {rt.client.zcard(q.topic_keys(topic).ack):,} "
                     f"still consuming")
            if time.perf_counter() - started > 600:
                raise RuntimeError("the timeout sweep did not finish within 10 minutes")


def phase_dead(count: int, body: str, death: str) -> dict[str, Any]:
    topic = "mem-dead"
    with stack(with_node=False) as s:
        rt = Runtime(_settings(s.redis.url))
        q = rt.queue
        # Keep every one: the server default dead-letter-max-size (100,000) would drop the
        # oldest beyond it (the warm-up one at --count 100000).
        rt.admin.set_config(topic, {"deadLetterMaxSize": count + 1})
        _kill_all(rt, topic, body, ["warmup"], death)
        ids = _ids("d", count)
        before = _used(rt)
        started = time.perf_counter()
        _kill_all(rt, topic, body, ids, death)
        seconds = time.perf_counter() - started
        after = _used(rt)
        info = q.topic_info(topic)
        if info.get("deadQueueSize") != count + 1 or info["ackQueueSize"] or \
                info["readyQueueSize"]:
            raise RuntimeError(f"not all dead: {info}")
        sample = q.get(topic, ids[0])
        if int(sample.status) != 6:
            raise RuntimeError(f"sample not dead: {sample}")
        figures = {"used_memory_before": before, "used_memory_after": after,
                   "bytes_per_message": round((after - before) / count, 1),
                   "bytes_beyond_body": round((after - before) / count - len(body), 1),
                   "seconds": round(seconds, 1),
                   "breakdown": _breakdown(rt, topic, ids[0], count)}
        rt.client.close()
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Redis memory per dead letter beyond its body (and per waiting message, "
                    "the reference), on throwaway loopback redis-servers.")
    parser.add_argument("--count", type=int, default=100_000,
                        help=f"messages per phase (1..{MAX_COUNT:,}; default 100000)")
    parser.add_argument("--body-bytes", type=int, default=64,
                        help="body size in bytes (default 64)")
    parser.add_argument("--death", choices=("nack", "timeout"), default="nack",
                        help="how the messages die: a nack each, or their ack timeout")
    parser.add_argument("--no-result", action="store_true",
                        help="do not write bench/results/dead-letter-memory-*.json")
    args = parser.parse_args(argv)
    if not 1 <= args.count <= MAX_COUNT:
        parser.error(f"--count must be between 1 and {MAX_COUNT:,}")
    if not 1 <= args.body_bytes <= 1_048_576:
        parser.error("--body-bytes must be between 1 and 1048576")
    body = "x" * args.body_bytes
    waiting = phase_waiting(args.count, body)
    dead = phase_dead(args.count, body, args.death)
    rows = [
        ("messages per phase", args.count),
        ("body bytes", args.body_bytes),
        ("death by", args.death),
        ("waiting: used_memory before -> after",
         f"{waiting['used_memory_before']:,} -> {waiting['used_memory_after']:,} B"),
        ("waiting: bytes per message", waiting["bytes_per_message"]),
        ("waiting: bytes per message beyond its body", waiting["bytes_beyond_body"]),
        ("dead: used_memory before -> after",
         f"{dead['used_memory_before']:,} -> {dead['used_memory_after']:,} B"),
        ("dead: bytes per dead letter", dead["bytes_per_message"]),
        ("dead: bytes per dead letter beyond its body", dead["bytes_beyond_body"]),
        ("dead letter / waiting (beyond body)",
         f"{dead['bytes_beyond_body'] / waiting['bytes_beyond_body']:.2f}x"),
        ("waiting: msgs hash bytes per record",
         waiting["breakdown"]["msgs_hash"]["bytes_per_record"]),
        ("dead: msgs hash bytes per record", dead["breakdown"]["msgs_hash"]["bytes_per_record"]),
    ]
    for phase, figures in (("waiting", waiting), ("dead", dead)):
        for name, zset in figures["breakdown"].items():
            if name.endswith("_zset"):
                rows.append((f"{phase}: {name} bytes per entry",
                             f"{zset['bytes_per_entry']} ({zset['entries']:,} entries)"))
    print_table("Redis memory per dead letter (INFO memory used_memory)", rows)
    if not args.no_result:
        write_result("dead-letter-memory", {"waiting": waiting, "dead": dead},
                     {"count": args.count, "body_bytes": args.body_bytes,
                      "death": args.death})
    return 0


if __name__ == "__main__":
    sys.exit(main())
