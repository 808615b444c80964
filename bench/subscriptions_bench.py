"""Named subscriptions: the Redis bytes a ready message costs each extra subscription, and
what fan-out costs sends and deliveries.

Bar (the subscriptions work): a ready message costs at most 150 bytes of Redis per named
subscription beyond the first; the first one's own cost (the message's ``refs`` and
``sexpire`` entries, once however many subscriptions) and the throughput are reported with
no bar.

In-process (``Runtime``: the service layer the HTTP views call and its Lua scripts; no node,
no HTTP, no scheduler loop), one thread, sequential round trips; 64-byte bodies and
32-character msgIds. For each count of named subscriptions in ``--subs`` (0 first: the
reference), created on the topic before anything is sent:

A. memory, a fresh redis-server per count: one warm-up message makes the topic's keys, then
   ``--memory`` messages due now are sent (sendMsgBatch's path, ``--chunk`` a round trip).
   A send due now fans out at once (send.lua calls fan_out); one scheduler visit runs anyway
   and the fan-out must be empty after it, every subscription's ready queue ``--memory`` + 1
   long. ``INFO memory`` used_memory before and after gives bytes per ready message; the
   ``MEMORY USAGE`` of every key before and after, summed, cross-checks it and says where
   the bytes go. Per extra subscription: (bytes(k) - bytes(1)) / (k - 1), the bar's figure.
B. throughput, one redis-server per count, all of them up at once: ``--messages`` messages
   sent in batches of 100 (one sendMsgBatch a round trip), then every subscription (the
   default one and each named one) drained by pulls of 100, each acked by one ackMsgBatch,
   the subscriptions taking turns a pull each. Sends and drains run in ``--rounds`` slices
   that go round the counts, reversed every other round (ABCD DCBA), so a burst of another
   job's load lands on all of them. Sends/s, deliveries/s (summed over the subscriptions)
   and each redis-server's own CPU (``INFO cpu`` used_cpu_user + used_cpu_sys, so the
   bench's four servers never mix) and its scripts' time (EVALSHA usec) per message sent and
   per delivery, with their ratios against no named subscription. Every subscription must
   get every message exactly once.

    PYTHONPATH=. .venv/bin/python bench/subscriptions_bench.py          # about 2 minutes
    PYTHONPATH=. .venv/bin/python bench/subscriptions_bench.py --quick  # seconds
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import time
from typing import Any, Callable, Sequence

import redis

from delayqueue.background.runtime import Runtime
from delayqueue.core.queue import DelayQueue
from delayqueue.core.requests import AckRequest, SendRequest
from delayqueue.settings.config import Settings

from common import Stack, print_table, progress, stack, write_result

BAR_BYTES = 150             # per ready message per named subscription beyond the first
BATCH = 100                 # sendMsgBatch / pullMsg batch of the throughput run
TOPIC = "fan"
DEFAULT = "(default)"

DEFAULTS: dict[str, Any] = {"memory": 20_000, "messages": 5000, "rounds": 10, "chunk": 1000,
                            "body_bytes": 64}
HELP = {"memory": "A: ready messages measured per count", "messages":
        "B: messages sent per count", "rounds": "B: alternating slices (even)",
        "chunk": "A: messages a round trip", "body_bytes": "body size"}
QUICK: dict[str, Any] = {"memory": 5000, "messages": 1000, "rounds": 4}
SUBS = (0, 1, 4, 16)


def msg_ids(prefix: str, count: int, start: int = 0) -> list[str]:
    """Fixed-width ids, 32 characters like a client's uuid4().hex."""
    return [f"{prefix}{i:0{32 - len(prefix)}d}" for i in range(start, start + count)]


def sub_names(count: int) -> list[str]:
    return [f"sub-{i:02d}" for i in range(count)]


def runtime(redis_url: str, subs: int) -> Runtime:
    """A Runtime (loops not started) whose topic has ``subs`` named subscriptions."""
    rt = Runtime(dataclasses.replace(Settings(), redis_url=redis_url, snapshot_dir=""))
    for name in sub_names(subs):
        rt.subscriptions.create(TOPIC, name)
    return rt


def send_all(q: DelayQueue, ids: list[str], body: str, chunk: int) -> None:
    """Send due now through sendMsgBatch's path, ``chunk`` a round trip; all accepted."""
    for start in range(0, len(ids), chunk):
        for answer in q.send_batch(TOPIC, [SendRequest(body, m, delay_ms=0)
                                           for m in ids[start:start + chunk]]):
            if not hasattr(answer, "duplicate") or answer.duplicate:
                raise RuntimeError(f"a send was not accepted: {answer!r}")


def used_memory(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


def redis_cpu(client: redis.Redis) -> float:
    """The redis-server's own CPU seconds so far (user + system)."""
    cpu = client.info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def ratio(a: float, b: float) -> float:
    return round(a / b, 2) if b else float("nan")


# -- A: bytes per ready message ------------------------------------------------------------

def key_kind(key: str) -> str:
    """A key's kind with the topic's prefix cut and a named subscription's name folded:
    ``dq:{dq:fan}:s:sub-03:ready`` -> ``s:*:ready``."""
    kind = key.split("}:", 1)[-1]
    if kind.startswith("s:"):
        kind = "s:*:" + kind.split(":", 2)[2]
    return kind


def key_bytes(client: redis.Redis) -> dict[str, int]:
    """MEMORY USAGE (every element counted) of every key, summed by kind."""
    out: dict[str, int] = {}
    for key in client.scan_iter(count=1000):
        kind = key_kind(key)
        out[kind] = out.get(kind, 0) + (client.memory_usage(key, samples=0) or 0)
    return out


def phase_memory(p: dict[str, Any], body: str, subs: int) -> dict[str, Any]:
    n = p["memory"]
    with stack(with_node=False) as s:
        rt = runtime(s.redis.url, subs)
        q = rt.queue
        send_all(q, ["warmup"], body, 1)
        before, keys_before = used_memory(s.client), key_bytes(s.client)
        send_all(q, msg_ids("m-", n), body, p["chunk"])
        rt.scheduler.visit([TOPIC])
        after, keys_after = used_memory(s.client), key_bytes(s.client)
        tk = q.topic_keys(TOPIC)
        fanout = s.client.zcard(tk.fanout)
        ready = {name: s.client.zcard(q.context_keys(TOPIC, name).ready)
                 for name in [None, *sub_names(subs)]}
        rt.client.close()
    if fanout or set(ready.values()) != {n + 1}:
        raise RuntimeError(f"{subs} subscriptions: not fanned out: fanout {fanout}, "
                           f"ready {ready}")
    per_kind = {kind: round((keys_after.get(kind, 0) - keys_before.get(kind, 0)) / n, 1)
                for kind in sorted(set(keys_after) | set(keys_before))}
    per_message = (after - before) / n
    return {"subscriptions": subs, "messages": n,
            "bytes_per_message": round(per_message, 1),
            "beyond_body": round(per_message - len(body), 1),
            "memory_usage_per_message": round(sum(per_kind.values()), 1),
            "memory_usage_by_kind": {k: v for k, v in per_kind.items() if v}}


def memory_figures(rows: list[dict[str, Any]]) -> dict[str, Any]:
    by_subs = {r["subscriptions"]: r for r in rows}
    base = by_subs[0]["bytes_per_message"]
    one = by_subs.get(1, {}).get("bytes_per_message")
    extra = {k: round((r["bytes_per_message"] - one) / (k - 1), 1)
             for k, r in by_subs.items() if one is not None and k > 1}
    one_keys = by_subs.get(1, {}).get("memory_usage_per_message")
    extra_keys = {k: round((r["memory_usage_per_message"] - one_keys) / (k - 1), 1)
                  for k, r in by_subs.items() if one_keys is not None and k > 1}
    # The least-squares slope of bytes against subscriptions, from one subscription on.
    points = [(k, r["bytes_per_message"]) for k, r in by_subs.items() if k >= 1]
    slope = float("nan")
    if len(points) >= 2:
        mk = sum(k for k, _ in points) / len(points)
        mb = sum(b for _, b in points) / len(points)
        slope = round(sum((k - mk) * (b - mb) for k, b in points)
                      / sum((k - mk) ** 2 for k, _ in points), 1)
    return {"rows": rows, "no_subscription": base,
            "first_subscription": round(one - base, 1) if one is not None else None,
            "per_extra_subscription": extra, "slope": slope,
            "memory_usage_per_extra_subscription": extra_keys,
            "bar_met": bool(extra) and all(v <= BAR_BYTES for v in extra.values())}


# -- B: send -> deliver throughput ---------------------------------------------------------

@dataclasses.dataclass
class Run:
    """One count of subscriptions on its own redis-server, and what it measured."""

    subs: int
    stack: Stack
    rt: Runtime
    sent: list[str] = dataclasses.field(default_factory=list)
    got: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    send_s: float = 0.0
    send_cpu: float = 0.0
    send_script_us: float = 0.0
    drain_s: float = 0.0
    drain_cpu: float = 0.0
    drain_script_us: float = 0.0

    def timed(self, step: Callable[[], None]) -> tuple[float, float, float]:
        """Wall seconds, the redis-server's CPU seconds and its scripts' time (EVALSHA usec:
        what another job's load moves least) over ``step``."""
        self.stack.client.config_resetstat()
        cpu, t0 = redis_cpu(self.stack.client), time.perf_counter()
        step()
        took, cpu = time.perf_counter() - t0, redis_cpu(self.stack.client) - cpu
        script = float(self.stack.commandstats().get("evalsha", {}).get("usec", 0.0))
        return took, cpu, script


def drain(q: DelayQueue, names: Sequence[str | None], count: int,
          got: dict[str, list[str]]) -> None:
    """Take ``count`` messages from each subscription by pulls of BATCH, each acked by one
    ackMsgBatch, the subscriptions taking turns a pull each."""
    left = {name: count for name in names}
    empty = 0
    while any(left.values()):
        for name in names:
            if not left[name]:
                continue
            msgs = q.pull(TOPIC, min(BATCH, left[name]), 60_000, subscription=name).messages
            if not msgs:
                empty += 1
                if empty > 100:
                    raise RuntimeError(f"{name or DEFAULT}: nothing to pull, {left[name]} left")
                continue
            for answer in q.ack_batch(TOPIC, [AckRequest(m.msg_id, m.receipt) for m in msgs],
                                      subscription=name):
                if not hasattr(answer, "msg_id"):
                    raise RuntimeError(f"{name or DEFAULT}: an ack failed: {answer!r}")
            got.setdefault(name or DEFAULT, []).extend(m.msg_id for m in msgs)
            left[name] -= len(msgs)


def phase_throughput(p: dict[str, Any], body: str) -> dict[str, Any]:
    rounds = p["rounds"]
    per_slice = max(1, p["messages"] // rounds)
    n = per_slice * rounds
    with contextlib.ExitStack() as exits:
        runs = []
        for subs in SUBS:
            s = exits.enter_context(stack(with_node=False))
            runs.append(Run(subs, s, runtime(s.redis.url, subs)))
            send_all(runs[-1].rt.queue, [f"warmup-{subs}"], body, 1)   # scripts loaded
            drain(runs[-1].rt.queue, [None, *sub_names(subs)], 1, {})

        def each_round(step: Callable[[Run, int], None]) -> None:
            for r in range(rounds):
                for run in (runs if r % 2 == 0 else list(reversed(runs))):
                    step(run, r)

        def send(run: Run, r: int) -> None:
            ids = msg_ids(f"r{r:02d}-", per_slice)
            took, cpu, script = run.timed(lambda: send_all(run.rt.queue, ids, body, BATCH))
            run.send_s, run.send_cpu = run.send_s + took, run.send_cpu + cpu
            run.send_script_us += script
            run.sent.extend(ids)

        def consume(run: Run, _r: int) -> None:
            names = [None, *sub_names(run.subs)]
            took, cpu, script = run.timed(lambda: drain(run.rt.queue, names, per_slice,
                                                        run.got))
            run.drain_s, run.drain_cpu = run.drain_s + took, run.drain_cpu + cpu
            run.drain_script_us += script

        each_round(send)
        progress(f"B: {n:,} sent to each of {len(runs)} redis-servers; draining")
        each_round(consume)
        for run in runs:
            run.rt.client.close()
    for run in runs:
        expected = sorted(run.sent)
        for name in [DEFAULT, *sub_names(run.subs)]:
            if sorted(run.got.get(name, [])) != expected:
                raise RuntimeError(f"{run.subs} subscriptions: {name} got "
                                   f"{len(run.got.get(name, []))} deliveries for {n} sends")
    rows = []
    for run in runs:
        deliveries = n * (run.subs + 1)
        rows.append({"subscriptions": run.subs, "messages": n, "deliveries": deliveries,
                     "sends_per_s": round(n / run.send_s), "deliveries_per_s":
                     round(deliveries / run.drain_s),
                     "redis_cpu_us_per_send": round(run.send_cpu / n * 1e6, 1),
                     "redis_cpu_us_per_delivery": round(run.drain_cpu / deliveries * 1e6, 1),
                     "script_us_per_send": round(run.send_script_us / n, 1),
                     "script_us_per_delivery": round(run.drain_script_us / deliveries, 1)})
    base = rows[0]
    for row in rows:
        row["ratio"] = {k: ratio(row[k], base[k]) for k in
                        ("sends_per_s", "deliveries_per_s", "redis_cpu_us_per_send",
                         "redis_cpu_us_per_delivery", "script_us_per_send",
                         "script_us_per_delivery")}
    return {"messages": n, "rounds": rounds, "rows": rows}


# -- the run ---------------------------------------------------------------------------------

def print_figures(f: dict[str, Any], p: dict[str, Any]) -> None:
    a = f["memory"]
    rows: list[tuple[str, Any]] = []
    for r in a["rows"]:
        rows.append((f"{r['subscriptions']} named: bytes per message (beyond body) / "
                     "MEMORY USAGE", f"{r['bytes_per_message']} ({r['beyond_body']}) / "
                                     f"{r['memory_usage_per_message']}"))
    rows.append(("first named subscription: bytes per message", a["first_subscription"]))
    for k, v in a["per_extra_subscription"].items():
        rows.append((f"per named subscription beyond the first, 1 -> {k} (MEMORY USAGE)",
                     f"{v} ({a['memory_usage_per_extra_subscription'][k]})"))
    rows.append(("least-squares slope from 1 on", a["slope"]))
    rows.append((f"bar (<= {BAR_BYTES} B per extra subscription) met",
                 "yes" if a["bar_met"] else "NO"))
    for r in a["rows"]:
        rows.append((f"{r['subscriptions']} named: MEMORY USAGE per message by key",
                     ", ".join(f"{k} {v}" for k, v in r["memory_usage_by_kind"].items())))
    print_table(f"A. Redis bytes per ready message, {p['memory']:,} messages, "
                f"{p['body_bytes']}-byte bodies", rows)
    b = f["throughput"]
    columns = {"sends_per_s": "sends/s", "deliveries_per_s": "deliveries/s",
               "redis_cpu_us_per_send": "Redis CPU us/send",
               "redis_cpu_us_per_delivery": "Redis CPU us/delivery",
               "script_us_per_send": "script us/send",
               "script_us_per_delivery": "script us/delivery"}
    print_table(f"B. send -> deliver, {b['messages']:,} messages per count, batches of "
                f"{BATCH}, the ratio against 0 named in brackets", [
        (f"{r['subscriptions']} named: {label}", f"{r[c]:,} ({r['ratio'][c]})")
        for r in b["rows"] for c, label in columns.items()])
    load = f["load_average"]
    print_table("load average (1 min)", [("before, after",
                                          f"{load['before'][0]:.2f}, {load['after'][0]:.2f}")])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--quick", action="store_true",
                        help="scaled down (" + ", ".join(f"--{k.replace('_', '-')} {v}"
                                                         for k, v in QUICK.items()) + ")")
    for key, value in DEFAULTS.items():
        parser.add_argument(f"--{key.replace('_', '-')}", type=int, default=None,
                            help=f"{HELP[key]} (default {value:,})")
    args = parser.parse_args(argv)
    params = {k: (getattr(args, k) if getattr(args, k) is not None
                  else QUICK.get(k, v) if args.quick else v) for k, v in DEFAULTS.items()}
    limits = {"memory": 1_000_000, "messages": 1_000_000, "rounds": 1000, "chunk": 1000,
              "body_bytes": 1_048_576}
    for key, top in limits.items():
        if not 1 <= params[key] <= top:
            parser.error(f"--{key.replace('_', '-')} must be between 1 and {top:,}")
    if params["rounds"] % 2:
        parser.error("--rounds must be even (the counts alternate ABCD DCBA)")
    body = "x" * params["body_bytes"]
    load_before = os.getloadavg()
    rows = []
    for subs in SUBS:
        rows.append(phase_memory(params, body, subs))
        progress(f"A: {subs} named: {rows[-1]['bytes_per_message']} B per message")
    figures: dict[str, Any] = {"memory": memory_figures(rows),
                               "throughput": phase_throughput(params, body)}
    figures["load_average"] = {"before": load_before, "after": os.getloadavg()}
    print_figures(figures, params)
    write_result("subscriptions", figures, {**params, "subs": SUBS, "quick": args.quick})
    return 0 if figures["memory"]["bar_met"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
