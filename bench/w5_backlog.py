"""W5 large backlog: Redis bytes per waiting message, sendMsg p99 under the backlog, and
messages due soon still arriving on time.

Bars: at most 250 bytes of Redis memory per waiting message beyond its body; sendMsg p99
with the backlog within 1.5x of p99 without it.

Phases, on one throwaway redis-server and one node (2 gevent workers, as deployed):

A. empty Redis: ``--sends`` single-message HTTP ``sendMsg`` (delays 1 h - 7 d) paced at
   ``--rate`` msg/s with ``--concurrency`` requests at most in flight, after a short
   unmeasured warm-up; client-side latency p50/p99/max.
B. the backlog: ``--backlog`` messages over ``--topics`` topics, delays uniform 1 h - 7 d,
   ``--body-bytes`` bodies, uuid-hex msgIds, loaded through the core path (the ``send`` Lua
   script, pipelined ``--pipeline`` at a time, no HTTP), then registered the way the node
   does (registry ZADD, due index ZADD LT). ``INFO memory`` used_memory before and after
   gives bytes per message; ``MEMORY USAGE`` / ``MEMORY STATS`` say where they go.
C. with the backlog: the same HTTP measurement as A (fresh msgIds, same topics).
C'. A and C are minutes apart, and on a shared machine a p99 of a few ms moves with whatever
   else runs: so a second, identical node on an empty Redis is started and ``--sends`` more
   go to each node in ``--control-rounds`` alternating slices (ABBA), both seeing the same
   noise; its p99 ratio is reported beside the A/C one (the bar's figure stays A/C).
D. due soon under the backlog: ``--due-soon`` messages with delays 2-5 s on
   ``--due-topics`` of the backlog topics, long-polling consumers that ack; lag
   (receipt - triggerTime), early, lost.

    cd bench && ../.venv-bench/bin/python w5_backlog.py                 # full size (1M)
    cd bench && ../.venv-bench/bin/python w5_backlog.py --scale 0.05 --sends 5000   # quick
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from typing import Any

import redis

from delayqueue.core.keys import NamespaceKeys
from delayqueue.core.outcome import Outcome
from delayqueue.core.scripts import Scripts, SendArgs
from delayqueue.core.topic_config import server_defaults
from delayqueue.settings.config import load_settings

import common
import load

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
PREFIX, NAMESPACE = "dq", "default"  # delayqueue/settings/config.py defaults: the node's keys
TTL_MS, MAX_RETRY = 3_600_000, 10             # the node's defaults (ttl-millis, max-retry)
BAR_BYTES_BEYOND_BODY = 250
BAR_P99_RATIO = 1.5
SERVER_DEFAULTS = server_defaults(load_settings(env={}))   # the node's topic settings
SLICES = 5                                    # p99 per fifth of a measured phase

DEFAULTS: dict[str, Any] = {
    "backlog": 1_000_000, "topics": 100, "body_bytes": 64, "pipeline": 1000,
    "sends": 20_000, "rate": 1500.0, "concurrency": 32, "warmup": 2000, "settle_s": 2.0,
    "due_soon": 500, "due_topics": 5, "consumers_per_topic": 2, "seed": 1,
    "control_rounds": 20,
}


def topic_names(n: int) -> list[str]:
    return [f"w5t{i:03d}" for i in range(n)]


def hex_id(rng: random.Random) -> str:
    return f"{rng.getrandbits(128):032x}"       # a client's uuid4().hex, reproducible


# -- phases A and C: HTTP sendMsg latency ----------------------------------------------------

async def _send_phase(base: str, topics: list[str], count: int, warmup: int, rate: float,
                      concurrency: int, body: str, rng: random.Random) -> dict[str, Any]:
    http = load.Http(base)
    try:
        def plan(n: int) -> list[tuple[str, str, int]]:
            return [(topics[i % len(topics)], hex_id(rng), rng.randint(HOUR_MS, 7 * DAY_MS))
                    for i in range(n)]

        if warmup:
            await load.produce(http, plan(warmup), load.Ledger(), rate=rate,
                               concurrency=concurrency, body=body)
        ledger = load.Ledger()
        cpu0 = common.process_cpu_seconds()
        took = await load.produce(http, plan(count), ledger, rate=rate,
                                  concurrency=concurrency, body=body)
        client_cpu = common.process_cpu_seconds() - cpu0
    finally:
        await http.close()
    # The latencies are in completion order, i.e. time order: p99 of consecutive slices shows
    # how much of a phase's p99 is one noisy moment (the machine is shared).
    lat = ledger.send_latency_ms
    size = max(1, len(lat) // SLICES)
    slices = [common.summary(lat[i:i + size]).get("p99") for i in range(0, size * SLICES, size)
              if lat[i:i + size]]
    return {"latency_ms": common.summary(lat), "p99_by_slice": slices,
            "accepted": len(ledger.sent),
            "errors": ledger.errors, "seconds": round(took, 2),
            "achieved_rate": round(count / took, 1) if took else 0.0,
            "client_cpu_share": round(client_cpu / took, 2) if took else 0.0}


def send_phase(stack: common.Stack, name: str, p: dict[str, Any], body: str,
               rng: random.Random) -> dict[str, Any]:
    common.progress(f"phase {name}: {p['warmup']:,} warm-up + {p['sends']:,} sendMsg at "
                    f"{p['rate']:,.0f}/s, concurrency {p['concurrency']}")
    cpu0 = common.node_workers_cpu(stack.node)
    out = asyncio.run(_send_phase(stack.base, topic_names(p["topics"]), p["sends"],
                                  p["warmup"], p["rate"], p["concurrency"], body, rng))
    out["node_cpu_s"] = round(common.node_workers_cpu(stack.node) - cpu0, 2)
    lat = out["latency_ms"]
    common.progress(f"phase {name}: p50 {lat.get('p50')} ms, p99 {lat.get('p99')} ms, "
                    f"max {lat.get('max')} ms, {out['errors']} errors, achieved "
                    f"{out['achieved_rate']:,.0f}/s")
    return out


async def _interleaved(bases: dict[str, str], topics: list[str], p: dict[str, Any], body: str,
                       rng: random.Random) -> dict[str, list[float]]:
    """Alternate slices of sends between the nodes (ABBA order), so both see the same noise."""
    https = {name: load.Http(base) for name, base in bases.items()}
    latencies: dict[str, list[float]] = {name: [] for name in bases}
    rounds = max(1, p["control_rounds"])
    per_slice = max(1, p["sends"] // rounds)
    try:
        names = list(bases)
        for r in range(rounds):
            for name in (names if r % 2 == 0 else names[::-1]):
                plan = [(topics[i % len(topics)], hex_id(rng),
                         rng.randint(HOUR_MS, 7 * DAY_MS)) for i in range(per_slice)]
                ledger = load.Ledger()
                await load.produce(https[name], plan, ledger, rate=p["rate"],
                                   concurrency=p["concurrency"], body=body)
                latencies[name].extend(ledger.send_latency_ms)
    finally:
        for http in https.values():
            await http.close()
    return latencies


def control_phase(stack: common.Stack, p: dict[str, Any], body: str,
                  rng: random.Random) -> dict[str, Any]:
    """C': the backlog node against an identical control node on an empty Redis, in turns."""
    with common.stack() as control:
        time.sleep(p["settle_s"])
        topics = topic_names(p["topics"])
        common.progress(f"phase C': control node warm-up ({p['warmup']:,} sends)")
        asyncio.run(_send_phase(control.base, topics, 0, p["warmup"], p["rate"],
                                p["concurrency"], body, rng))
        common.progress(f"phase C': {p['sends']:,} sends to each node in "
                        f"{p['control_rounds']} alternating slices")
        lat = asyncio.run(_interleaved({"backlog": stack.base, "control": control.base},
                                       topics, p, body, rng))
    backlog, empty = common.summary(lat["backlog"]), common.summary(lat["control"])
    ratio = round(backlog["p99"] / empty["p99"], 2) if empty.get("p99") else float("nan")
    common.progress(f"phase C': p99 backlog {backlog.get('p99')} ms, control {empty.get('p99')} "
                    f"ms, ratio {ratio}")
    return {"backlog_ms": backlog, "control_ms": empty, "p99_ratio": ratio,
            "rounds": p["control_rounds"]}


# -- phase B: the backlog through the core path ----------------------------------------------

def load_backlog(client: redis.Redis, p: dict[str, Any], body: str,
                 rng: random.Random) -> dict[str, Any]:
    nk = NamespaceKeys(PREFIX, NAMESPACE)
    scripts = Scripts(client)
    topics = topic_names(p["topics"])
    tks = [nk.topic(t) for t in topics]
    head: dict[str, int] = {}
    total, chunk = p["backlog"], p["pipeline"]
    done = rejected = 0
    started = last_report = time.monotonic()
    while done < total:
        n = min(chunk, total - done)
        now = int(common.now_ms())
        trip = scripts.round_trip()
        for i in range(done, done + n):
            tk = tks[i % len(tks)]
            trigger = now + rng.randint(HOUR_MS, 7 * DAY_MS)
            if trigger < head.get(tk.topic, trigger + 1):
                head[tk.topic] = trigger
            scripts.send_many(tk, now, nk.hint_channel, SERVER_DEFAULTS,
                              [SendArgs(hex_id(rng), body, trigger, TTL_MS, MAX_RETRY, "")],
                              trip=trip)
        rejected += sum(1 for reply in trip.execute() if reply.outcome != Outcome.OK)
        done += n
        if time.monotonic() - last_report >= 5:
            last_report = time.monotonic()
            rate = done / (last_report - started)
            common.progress(f"phase B: {done:,}/{total:,} loaded, {rate:,.0f} msg/s, "
                            f"~{(total - done) / rate:,.0f} s left")
    took = time.monotonic() - started
    # Register the topics as DelayQueue._bookkeep does: registry bump, due index lowered.
    now = int(common.now_ms())
    pipe = client.pipeline(transaction=False)
    for topic, first in head.items():
        pipe.zadd(nk.topics, {topic: now})
        pipe.zadd(nk.due, {topic: first}, lt=True)
    pipe.execute()
    return {"loaded": done - rejected, "rejected": rejected, "seconds": round(took, 2),
            "load_rate": round(done / took, 1)}


def flat_memory_stats(client: redis.Redis) -> dict[str, float]:
    stats = client.memory_stats()
    flat = {k: v for k, v in stats.items() if isinstance(v, (int, float))}
    flat.update(stats.get("db.0") or {})
    return flat


def memory_breakdown(client: redis.Redis, p: dict[str, Any], per_msg: float,
                     loaded: int) -> dict[str, Any]:
    """Where a waiting message's bytes go: its record in the topic's msgs hash, its zset
    entries, the keyspace."""
    nk = NamespaceKeys(PREFIX, NAMESPACE)
    topics = topic_names(p["topics"])[:5]
    record_per, record_bytes, waiting_per, expire_per, encodings = [], [], [], [], set()
    for topic in topics:
        tk = nk.topic(topic)
        # Per live message of the topic (a structure may index only some of them).
        live = client.zcard(tk.waiting) + client.zcard(tk.ready) + client.zcard(tk.ack)
        if not live:
            continue
        for member in client.zrandmember(tk.waiting, 10) or []:   # <seq 12 hex><slot>
            record_bytes.append(client.hstrlen(tk.msgs, member[12:]))
        for key, out in ((tk.msgs, record_per), (tk.waiting, waiting_per),
                         (tk.expire, expire_per)):
            size = client.memory_usage(key, samples=0) or 0
            out.append(size / live)
            if size:
                encodings.add(f"{key.rsplit(':', 1)[1]}:{client.object('encoding', key)}")
    stats = client.memory_stats()
    keys = stats.get("keys.count") or 1
    db = stats.get("db.0") or {}
    # overhead.hashtable.main = keys x (dictEntry 24 + robj 16) + bucket array (8 per slot);
    # MEMORY USAGE of a key already counts its dictEntry and robj, so only the buckets here.
    buckets = max(db.get("overhead.hashtable.main", 0) - keys * 40, 0)

    def mean(xs: list[float]) -> float:
        return round(sum(xs) / len(xs), 1) if xs else float("nan")

    parts = {
        "msg_record": mean(record_per),
        "waiting_zset_entry": mean(waiting_per),
        "expire_zset_entry": mean(expire_per),
        "keyspace_buckets": round(buckets / max(loaded, 1), 1),
    }
    return {
        "per_message_measured": round(per_msg, 1),
        **parts,
        "sum_of_parts": round(sum(parts.values()), 1),
        "unexplained": round(per_msg - sum(parts.values()), 1),
        "record_bytes": mean(record_bytes),
        "body_bytes": p["body_bytes"],
        "encodings": sorted(encodings),
        "notes": ("msg_record = MEMORY USAGE of the topic's msgs hash / its live messages "
                  "(record sds + slot field + dict entry); record_bytes = HSTRLEN of a record, "
                  "mean of 50; *_zset_entry = MEMORY USAGE of the topic's zset / its live messages "
                  "(skiplist + dict + member sds; 0 when the zset is empty); "
                  "keyspace_buckets = (MEMORY STATS db.0 "
                  "overhead.hashtable.main - 40 x keys) / messages loaded: the keyspace's "
                  "bucket array (about 0 now that a topic's messages share its keys)"),
        "memory_stats": {**{k: stats.get(k) for k in (
            "keys.count", "dataset.bytes", "allocator.allocated",
            "allocator-fragmentation.ratio")}, **db},
        "messages_loaded": loaded,
    }


# -- phase D: due soon under the backlog -----------------------------------------------------

async def _due_soon(base: str, topics: list[str], p: dict[str, Any], body: str,
                    rng: random.Random) -> dict[str, Any]:
    http = load.Http(base)
    ledger = load.Ledger()
    stop = asyncio.Event()
    consumers = [asyncio.create_task(load.consume(http, t, ledger, stop, batch=10,
                                                  poll_ms=2000))
                 for t in topics for _ in range(p["consumers_per_topic"])]
    try:
        await asyncio.sleep(0.5)                 # the polls are held before the sends
        plan = [(topics[i % len(topics)], hex_id(rng), rng.randint(2000, 5000))
                for i in range(p["due_soon"])]
        await load.produce(http, plan, ledger, concurrency=16, body=body)
        deadline = time.monotonic() + 5 + 20      # the latest delay plus a generous margin
        while time.monotonic() < deadline:
            seen = {d[0] for d in ledger.deliveries}
            if all(m in seen for m in ledger.sent):
                break
            await asyncio.sleep(0.2)
        await asyncio.sleep(0.5)                  # let the last acks and any duplicate land
    finally:
        stop.set()
        await asyncio.sleep(0)
        for task in consumers:
            task.cancel()
        await asyncio.gather(*consumers, return_exceptions=True)
        await http.close()
    return ledger.figures()


def due_soon_phase(stack: common.Stack, p: dict[str, Any], body: str,
                   rng: random.Random) -> dict[str, Any]:
    topics = topic_names(p["topics"])[:p["due_topics"]]
    common.progress(f"phase D: {p['due_soon']} messages due in 2-5 s on {len(topics)} backlog "
                    f"topics, {p['consumers_per_topic']} long-polling consumers each")
    figures = asyncio.run(_due_soon(stack.base, topics, p, body, rng))
    common.progress(f"phase D: delivered {figures['delivered']}/{figures['sent']}, lag "
                    f"{figures['lag_ms']}, early {figures['early']}, lost {figures['lost']}")
    return figures


# -- the workload ----------------------------------------------------------------------------

def run(**params: Any) -> dict[str, Any]:
    p = {**DEFAULTS, **params}
    rng = random.Random(p["seed"])
    body = "b" * p["body_bytes"]
    figures: dict[str, Any] = {}
    with common.stack() as stack:
        figures["redis_version"] = stack.redis_version()
        time.sleep(p["settle_s"])          # let the fresh workers finish starting their loops
        a = send_phase(stack, "A (empty)", p, body, rng)

        before = stack.client.info("memory")["used_memory"]
        stats_before = flat_memory_stats(stack.client)
        keys_before = stack.client.dbsize()
        common.progress(f"phase B: loading {p['backlog']:,} messages over {p['topics']} topics "
                        f"through the send script, pipelines of {p['pipeline']}")
        b = load_backlog(stack.client, p, body, rng)
        time.sleep(1.0)          # let the incremental rehash of the keyspace settle a little
        after = stack.client.info("memory")["used_memory"]
        keys_after = stack.client.dbsize()
        per_msg = (after - before) / max(b["loaded"], 1)
        common.progress(f"phase B: {b['loaded']:,} loaded at {b['load_rate']:,.0f} msg/s; "
                        f"used_memory {before:,} -> {after:,} B = {per_msg:,.1f} B/message")
        breakdown = memory_breakdown(stack.client, p, per_msg, b["loaded"])
        stats_after = flat_memory_stats(stack.client)
        breakdown["memory_stats_delta"] = {
            k: stats_after[k] - stats_before.get(k, 0) for k in stats_after
            if k in ("total.allocated", "overhead.total", "dataset.bytes", "clients.normal",
                     "lua.caches", "overhead.hashtable.main", "keys.count")}
        breakdown.update({"used_memory_before": before, "used_memory_after": after,
                          "keys_before": keys_before, "keys_after": keys_after})

        c = send_phase(stack, "C (backlog)", p, body, rng)
        control = control_phase(stack, p, body, rng) if p["control_rounds"] else None
        d = due_soon_phase(stack, p, body, rng)

    p99_a, p99_c = a["latency_ms"].get("p99"), c["latency_ms"].get("p99")
    ratio = round(p99_c / p99_a, 2) if p99_a else float("nan")

    def median(xs: list[float]) -> float:
        xs = sorted(xs)
        return xs[len(xs) // 2] if xs else float("nan")

    slice_ratio = round(median(c["p99_by_slice"]) / median(a["p99_by_slice"]), 2) \
        if a["p99_by_slice"] and c["p99_by_slice"] else float("nan")
    beyond = per_msg - p["body_bytes"]
    figures.update({
        "backlog": b["loaded"],
        "body_bytes": p["body_bytes"],
        "bytes_per_msg": round(per_msg, 1),
        "bytes_per_msg_beyond_body": round(beyond, 1),
        "bar_bytes_beyond_body": BAR_BYTES_BEYOND_BODY,
        "bytes_bar_met": beyond <= BAR_BYTES_BEYOND_BODY,
        "load_rate": b["load_rate"],
        "load": b,
        "send_p99_empty_ms": p99_a,
        "send_p99_backlog_ms": p99_c,
        "send_p99_ratio": ratio,
        "send_p99_ratio_median_of_slices": slice_ratio,
        "bar_p99_ratio": BAR_P99_RATIO,
        "p99_bar_met": ratio <= BAR_P99_RATIO,
        "send_empty_ms": a["latency_ms"],
        "send_backlog_ms": c["latency_ms"],
        "send_interleaved_with_control": control,
        "send_empty": a,
        "send_backlog": c,
        "due_soon": d,
        "memory_breakdown": breakdown,
    })
    return figures


def print_figures(f: dict[str, Any]) -> None:
    mb = f["memory_breakdown"]
    a, c, d = f["send_empty"], f["send_backlog"], f["due_soon"]
    common.print_table("W5 large backlog: memory", [
        ("waiting messages loaded", f["backlog"]),
        ("load rate (send script, pipelined)", f"{f['load_rate']:,.0f} msg/s"),
        ("used_memory before -> after", f"{mb['used_memory_before']:,} -> "
                                        f"{mb['used_memory_after']:,} B"),
        ("bytes per message", f["bytes_per_msg"]),
        ("  of which body", f["body_bytes"]),
        (f"  beyond the body (bar <= {BAR_BYTES_BEYOND_BODY})",
         f"{f['bytes_per_msg_beyond_body']:.1f}"
                                           f"  {'OK' if f['bytes_bar_met'] else 'MISSED'}"),
        ("  record in the msgs hash, per message", mb["msg_record"]),
        ("    record bytes (HSTRLEN)", mb["record_bytes"]),
        ("  waiting zset, per message", mb["waiting_zset_entry"]),
        ("  expire zset, per message", mb["expire_zset_entry"]),
        ("  keyspace bucket array", mb["keyspace_buckets"]),
        ("  unexplained", mb["unexplained"]),
        ("encodings", ", ".join(mb["encodings"])),
    ])
    rows = []
    for name, s in (("empty", a), ("backlog", c)):
        lat = s["latency_ms"]
        rows.append((f"sendMsg {name}: p50 / p99 / max ms",
                     f"{lat.get('p50')} / {lat.get('p99')} / {lat.get('max')}  "
                     f"(n={lat.get('count')}, {s['errors']} errors, {s['achieved_rate']:,.0f}/s,"
                     f" client CPU {s['client_cpu_share']:.0%}, node CPU {s['node_cpu_s']} s)"))
    for name, s in (("empty", a), ("backlog", c)):
        rows.append((f"  p99 of each fifth, {name}", " / ".join(str(x) for x in
                                                           s["p99_by_slice"])))
    rows.append(("p99 ratio backlog/empty (bar <= 1.5)",
                 f"{f['send_p99_ratio']}  {'OK' if f['p99_bar_met'] else 'MISSED'}"))
    rows.append(("  ratio of the median fifth's p99", f["send_p99_ratio_median_of_slices"]))
    ctl = f["send_interleaved_with_control"]
    if ctl:
        for name in ("backlog", "control"):
            lat = ctl[f"{name}_ms"]
            rows.append((f"interleaved, {name}: p50 / p99 / max ms",
                         f"{lat.get('p50')} / {lat.get('p99')} / {lat.get('max')}  "
                         f"(n={lat.get('count')})"))
        rows.append(("  interleaved p99 ratio backlog/control", ctl["p99_ratio"]))
    common.print_table("W5 large backlog: sendMsg latency", rows)
    lag = d["lag_ms"]
    common.print_table("W5 large backlog: messages due soon (2-5 s)", [
        ("delivered / sent", f"{d['delivered']} / {d['sent']}"),
        ("lag p50 / p99 / max ms", f"{lag.get('p50')} / {lag.get('p99')} / {lag.get('max')}"),
        ("early / duplicates / lost", f"{d['early']} / {d['duplicates']} / {d['lost']}"),
        ("errors", d["errors"]),
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiply the default --backlog and --sends (e.g. 0.05 for a "
                             "quick run); explicit values win")
    parser.add_argument("--backlog", type=int, default=None,
                        help=f"waiting messages (default {DEFAULTS['backlog']:,} x --scale)")
    parser.add_argument("--topics", type=int, default=DEFAULTS["topics"])
    parser.add_argument("--body-bytes", type=int, default=DEFAULTS["body_bytes"])
    parser.add_argument("--pipeline", type=int, default=DEFAULTS["pipeline"])
    parser.add_argument("--sends", type=int, default=None,
                        help=f"measured sendMsg requests per phase A and C "
                             f"(default {DEFAULTS['sends']:,} x --scale)")
    parser.add_argument("--warmup", type=int, default=DEFAULTS["warmup"],
                        help="unmeasured sends before each measured phase (not scaled)")
    parser.add_argument("--settle-s", type=float, default=DEFAULTS["settle_s"],
                        help="pause after the node starts, before phase A")
    parser.add_argument("--rate", type=float, default=DEFAULTS["rate"], help="sendMsg per second")
    parser.add_argument("--concurrency", type=int, default=DEFAULTS["concurrency"])
    parser.add_argument("--due-soon", type=int, default=DEFAULTS["due_soon"])
    parser.add_argument("--due-topics", type=int, default=DEFAULTS["due_topics"])
    parser.add_argument("--consumers-per-topic", type=int,
                        default=DEFAULTS["consumers_per_topic"])
    parser.add_argument("--control-rounds", type=int, default=DEFAULTS["control_rounds"],
                        help="phase C': --sends more to the backlog node and to a control "
                             "node on an empty Redis, alternating in this many slices each "
                             "(0 skips it)")
    parser.add_argument("--seed", type=int, default=DEFAULTS["seed"])
    args = parser.parse_args(argv)
    params = {k: v for k, v in vars(args).items() if k != "scale"}
    for key in ("backlog", "sends"):
        if params[key] is None:
            params[key] = max(1, int(DEFAULTS[key] * args.scale))
    params["due_topics"] = min(params["due_topics"], params["topics"])
    figures = run(**params)
    print_figures(figures)
    common.write_result("w5", figures, {**params, "scale": args.scale})
    return 0 if figures["bytes_bar_met"] and figures["p99_bar_met"] \
        and figures["due_soon"]["early"] == 0 and figures["due_soon"]["lost"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
