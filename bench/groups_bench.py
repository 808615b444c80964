"""Message groups: what blocked groups cost a pull, what groups cost sends and pulls, and the
Redis bytes of a blocked message.

Bars (issue 23): a pull (pull.lua, batch 1) on a topic holding ``--groups`` blocked groups
costs at most 1.5x the latency (p50 and p99) and 1.5x the Redis commands of a pull on a plain
topic, same run, same Redis. Throughput and memory are reported, with no bar.

Three phases, each on a fresh redis-server of its own, in-process (``Runtime``: the
service layer the HTTP views call and its Lua scripts; no node, no HTTP), one thread,
sequential round trips:

A. pull under blocked groups: topic ``grouped`` gets ``--groups`` groups, each a consuming
   head (delivered with a one-day ack timeout) and ``--behind`` due messages blocked behind it
   (each counts in groupBlockedSize), loaded through the send script (calls of 100 entries,
   ``--chunk`` entries a round trip). Then ``--pulls`` ungrouped due messages go to it and as
   many to ``plain`` (nothing else). Pulls of one (one ``pull`` script call a round trip, timed
   client-side) take them, in slices of ``--slice`` alternating between the topics (ABBA), so
   a burst of another job's load lands on both. Around each slice, ``CONFIG RESETSTAT`` and
   ``INFO commandstats`` give the Redis commands per pull (every command the script ran, plus
   its EVALSHA) and the Redis time per pull (EVALSHA's usec), and the SLOWLOG (every command
   logged) each pull's own time in Redis: its percentiles beside the client's.
B. throughput through the service (``DelayQueue``): ``--messages`` messages to
   ``tp-grouped`` (spread round robin over ``--tp-groups`` groups) and as many to
   ``tp-plain``: single sends, then pull + ack of one at a time; then sendMsgBatch-sized
   batches (100), then pulls of 100 acked by one ackMsgBatch. ``--rounds`` slices alternate
   between the topics as in A; msgs/s each and the ratio, and the scripts' time in Redis per
   message. Every message is delivered once, each group's in its send order, the plain
   topic's in send order, at most one per group a pull.
C. memory: ``--memory`` ungrouped messages waiting one day (the reference), then as many
   messages blocked (status 1) behind the waiting fronts of ``--memory-groups`` groups, both
   loaded as in A; ``INFO memory`` used_memory before and after each gives bytes per message;
   ``MEMORY USAGE`` of the topic's keys says where they go.

    PYTHONPATH=. .venv/bin/python bench/groups_bench.py            # 100,000 groups (1.1M msgs)
    PYTHONPATH=. .venv/bin/python bench/groups_bench.py --quick    # scaled down, under a minute
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
from typing import Any, Callable, Sequence

import redis

from delayqueue.background.runtime import Runtime
from delayqueue.core.outcome import Outcome
from delayqueue.core.queue import SCRIPT_LIMIT, SEND_CHUNK, DelayQueue
from delayqueue.core.requests import AckRequest, SendRequest
from delayqueue.core.scripts import SendArgs
from delayqueue.settings.config import Settings

from common import print_table, progress, stack, summary, write_result

DAY_MS = 86_400_000
BAR_RATIO = 1.5
BATCH = 100                 # sendMsgBatch / pullMsg batch of the batched throughput run
GROUP = 9                   # index of the groupId in a script's message fields

DEFAULTS: dict[str, Any] = {
    "groups": 100_000, "behind": 10, "pulls": 20_000, "slice": 200, "rounds": 20,
    "chunk": 1000,
    "messages": 10_000, "tp_groups": 1000, "memory": 100_000, "memory_groups": 1000,
    "body_bytes": 64,
}
HELP = {
    "groups": "A: blocked groups on the grouped topic", "behind": "A: messages blocked per group",
    "pulls": "A: timed pulls of each topic", "slice": "A: pulls per alternating slice",
    "rounds": "B: alternating slices (even)", "chunk": "entries per round trip when loading",
    "messages": "B: messages per topic and run", "tp_groups": "B: groups of the grouped topic",
    "memory": "C: messages per kind", "memory_groups": "C: groups the blocked ones wait in",
    "body_bytes": "body size",
}
QUICK: dict[str, Any] = {"groups": 10_000, "pulls": 5000, "rounds": 10, "messages": 3000,
                         "memory": 20_000}


def msg_ids(prefix: str, count: int, start: int = 0) -> list[str]:
    """Fixed-width ids, 32 characters like a client's uuid4().hex."""
    return [f"{prefix}{i:0{32 - len(prefix)}d}" for i in range(start, start + count)]


def group_id(g: int) -> str:
    return f"order-{g:07d}"


def runtime(redis_url: str) -> Runtime:
    return Runtime(dataclasses.replace(Settings(), redis_url=redis_url, snapshot_dir=""))


def alternate(rounds: int, names: Sequence[str], step: Callable[[str, int], None]) -> None:
    """step(name, round) for each round, the names in ABBA order."""
    for r in range(rounds):
        for name in (names if r % 2 == 0 else list(reversed(names))):
            step(name, r)


def send_all(q: DelayQueue, topic: str, requests: list[SendRequest], chunk: int) -> None:
    """Send through sendMsgBatch's path, ``chunk`` a round trip; every one must be accepted."""
    for start in range(0, len(requests), chunk):
        for answer in q.send_batch(topic, requests[start:start + chunk]):
            if not hasattr(answer, "duplicate") or answer.duplicate:
                raise RuntimeError(f"{topic}: a send was not accepted: {answer!r}")


def load(q: DelayQueue, topic: str, ids: list[str], body: str, chunk: int, *, delay_ms: int,
         ttl_ms: int = -1, group: Callable[[int], str] | None = None) -> None:
    """Bulk load through the send script itself (calls of 100 entries, ``chunk`` entries a
    round trip; no bookkeeping: nothing here runs a scheduler): message i gets ``ids[i]`` and
    ``group(i)``. Every one must be accepted."""
    tk = q.topic_keys(topic)
    for start in range(0, len(ids), chunk):
        now = q.clock.now_ms()
        trip = q.scripts.round_trip()
        for at in range(start, min(start + chunk, len(ids)), SEND_CHUNK):
            q.scripts.send_many(tk, now, q.keys.hint_channel, q.defaults, [
                SendArgs(ids[i], body, now + delay_ms, ttl_ms, -1, "", group(i) if group else "")
                for i in range(at, min(at + SEND_CHUNK, start + chunk, len(ids)))], trip=trip)
        for reply in trip.execute():
            if getattr(reply, "outcome", None) != Outcome.OK:
                raise RuntimeError(f"{topic}: a send was not accepted: {reply!r}")


def used_memory(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


def ratio(a: float, b: float) -> float:
    return round(a / b, 2) if b else float("nan")


# -- A: pull under blocked groups --------------------------------------------------------

def build_groups(q: DelayQueue, p: dict[str, Any], body: str) -> dict[str, Any]:
    """``groups`` groups on topic ``grouped``: round 0 sends each its head, pulled at once
    (consuming, a one-day ack timeout); rounds 1..behind block a due message behind each."""
    groups, started = p["groups"], time.perf_counter()
    for r in range(p["behind"] + 1):
        load(q, "grouped", msg_ids(f"g{r}-", groups), body, p["chunk"], delay_ms=0,
             ttl_ms=DAY_MS, group=group_id)
        if r == 0:
            heads = 0
            while heads < groups:
                got = q.pull("grouped", SCRIPT_LIMIT, ack_timeout_ms=DAY_MS).messages
                if not got:
                    raise RuntimeError(f"only {heads} of {groups} heads could be pulled")
                heads += len(got)
        done = (r + 1) * groups
        progress(f"A: {done:,} of {groups * (p['behind'] + 1):,} grouped messages sent "
                 f"({done / (time.perf_counter() - started):,.0f}/s)")
    info = q.topic_info("grouped")
    expected = {"ackQueueSize": groups, "groupBlockedSize": groups * p["behind"],
                "readyQueueSize": 0, "waitingQueueSize": 0}
    if any(info[k] != v for k, v in expected.items()):
        raise RuntimeError(f"grouped topic is not as built: {info}")
    return {"seconds": round(time.perf_counter() - started, 1), "topic_info": info}


def phase_pull(p: dict[str, Any], body: str) -> dict[str, Any]:
    with stack(with_node=False) as s:
        rt = runtime(s.redis.url)
        q = rt.queue
        built = build_groups(q, p, body)
        warmup = max(p["pulls"] // 20, 100)
        stream = warmup + p["pulls"]
        for topic in ("grouped", "plain"):
            load(q, topic, msg_ids(f"s-{topic}-", stream), body, p["chunk"], delay_ms=0,
                 ttl_ms=DAY_MS)
        progress(f"A: {stream:,} ungrouped due messages on each topic; pulling")
        latency: dict[str, list[float]] = {"grouped": [], "plain": []}
        calls: dict[str, dict[str, int]] = {"grouped": {}, "plain": {}}
        script_usec = {"grouped": 0.0, "plain": 0.0}
        in_redis: dict[str, list[float]] = {"grouped": [], "plain": []}
        per_slice = min(p["slice"], p["pulls"])
        rounds = max(2, p["pulls"] // per_slice // 2 * 2)
        # Every command into the SLOWLOG (a script's own commands too): each pull's time in
        # Redis, beside the client's.
        slowlog_len = per_slice * 20 + 100
        s.client.config_set("slowlog-log-slower-than", 0)
        s.client.config_set("slowlog-max-len", slowlog_len)

        def pulls(topic: str, count: int, out: list[float] | None) -> None:
            tk = q.topic_keys(topic)
            for _ in range(count):
                t0 = time.perf_counter()
                reply = q.scripts.pull(tk, q.clock.now_ms(), 1, DAY_MS, q.end_life_ms,
                                       SCRIPT_LIMIT, q.keys.hint_channel, q.defaults)
                took = (time.perf_counter() - t0) * 1000.0
                if len(reply.messages) != 1 or reply.messages[0].fields[GROUP]:
                    raise RuntimeError(f"{topic}: a pull of one gave {reply.messages!r}")
                if out is not None:
                    out.append(took)

        def slice_(topic: str, _round: int) -> None:
            s.client.config_resetstat()
            s.client.slowlog_reset()
            pulls(topic, per_slice, latency[topic])
            scripts = [e["duration"] / 1000.0 for e in s.client.slowlog_get(slowlog_len)
                       if e["command"][:8].upper() in (b"EVALSHA ", "EVALSHA ")]
            if len(scripts) != per_slice:
                raise RuntimeError(f"SLOWLOG kept {len(scripts)} of {per_slice} pulls")
            in_redis[topic].extend(scripts)
            for name, stat in s.commandstats().items():
                if name.startswith(("config", "info", "slowlog")) or name == "time":
                    continue    # the bench's own commands; TIME: the clock's re-sync
                calls[topic][name] = calls[topic].get(name, 0) + int(stat["calls"])
                if name == "evalsha":
                    script_usec[topic] += float(stat["usec"])

        for topic in ("grouped", "plain"):
            pulls(topic, warmup, None)
        alternate(rounds, ["grouped", "plain"], slice_)
        after = q.topic_info("grouped")
        rt.client.close()
    if after["groupBlockedSize"] != p["groups"] * p["behind"]:
        raise RuntimeError(f"the blocked groups changed under the pulls: {after}")
    figures: dict[str, Any] = {"build": built}
    for topic in ("grouped", "plain"):
        n = len(latency[topic])
        figures[topic] = {
            "pulls": n, "latency_ms": summary(latency[topic]),
            "in_redis_ms": summary(in_redis[topic]),
            "commands_per_pull": round(sum(calls[topic].values()) / n, 2),
            "commands": {k: round(v / n, 2) for k, v in sorted(calls[topic].items())},
            "redis_us_per_pull": round(script_usec[topic] / n, 2),
        }
    g, pl = figures["grouped"], figures["plain"]
    figures["ratio"] = {
        **{q_: ratio(g["latency_ms"][q_], pl["latency_ms"][q_]) for q_ in ("p50", "p90", "p99")},
        "commands": ratio(g["commands_per_pull"], pl["commands_per_pull"]),
        "redis_us": ratio(g["redis_us_per_pull"], pl["redis_us_per_pull"]),
        **{f"in_redis_{q_}": ratio(g["in_redis_ms"][q_], pl["in_redis_ms"][q_])
           for q_ in ("p50", "p99")},
    }
    r = figures["ratio"]
    figures["bar_met"] = all(r[k] <= BAR_RATIO for k in ("p50", "p99", "commands"))
    return figures


# -- B: throughput with and without groups -----------------------------------------------

def phase_throughput(p: dict[str, Any], body: str) -> dict[str, Any]:
    topics = {"grouped": "tp-grouped", "plain": "tp-plain"}
    n, rounds = p["messages"], p["rounds"]
    per_slice = max(1, n // rounds)
    n = per_slice * rounds
    figures: dict[str, Any] = {"messages": n, "groups": p["tp_groups"]}
    with stack(with_node=False) as s:
        rt = runtime(s.redis.url)
        q = rt.queue

        def requests(name: str, run: str, start: int, count: int) -> list[SendRequest]:
            return [SendRequest(body, msg_id=m, delay_ms=0,
                                group_id=group_id((start + i) % p["tp_groups"])
                                if name == "grouped" else None)
                    for i, m in enumerate(msg_ids(f"{run}-{name}-", count, start))]

        def measure(label: str, step: Callable[[str, int], None]) -> None:
            """msgs/s of each topic, and the scripts' time in Redis per message (EVALSHA's
            usec: the part a busy machine moves least)."""
            took = {"grouped": 0.0, "plain": 0.0}
            script_usec = {"grouped": 0.0, "plain": 0.0}

            def timed(name: str, r: int) -> None:
                s.client.config_resetstat()
                t0 = time.perf_counter()
                step(name, r)
                took[name] += time.perf_counter() - t0
                script_usec[name] += float(s.commandstats().get("evalsha", {}).get("usec", 0))

            alternate(rounds, ["grouped", "plain"], timed)
            rates = {name: round(n / took[name], 1) for name in took}
            redis_us = {name: round(script_usec[name] / n, 1) for name in took}
            figures[label] = {**rates, "ratio": ratio(rates["grouped"], rates["plain"]),
                              "redis_us_per_msg": redis_us,
                              "redis_us_ratio": ratio(redis_us["grouped"], redis_us["plain"])}
            progress(f"B: {label}: grouped {rates['grouped']:,.0f}/s, plain "
                     f"{rates['plain']:,.0f}/s")

        for run, batch in (("one", 1), ("batch", BATCH)):
            sent: dict[str, list[str]] = {"grouped": [], "plain": []}
            delivered: dict[str, list[Any]] = {"grouped": [], "plain": []}
            plans = {name: [requests(name, run, r * per_slice, per_slice)
                            for r in range(rounds)] for name in topics}

            def send(name: str, r: int) -> None:
                plan = plans[name][r]
                if batch == 1:
                    for req in plan:
                        q.send(topics[name], req.body, msg_id=req.msg_id, delay_ms=0,
                               group_id=req.group_id)
                else:
                    send_all(q, topics[name], plan, BATCH)
                sent[name].extend(req.msg_id for req in plan)

            def consume(name: str, _r: int) -> None:
                topic, got, empty = topics[name], 0, 0
                while got < per_slice:
                    msgs = q.pull(topic, min(batch, per_slice - got), 60_000).messages
                    if not msgs:
                        empty += 1
                        if empty > 100:
                            raise RuntimeError(f"{topic}: nothing to pull, {got} taken")
                        continue
                    if batch == 1:
                        q.ack(topic, msgs[0].msg_id, msgs[0].receipt)
                    else:
                        for answer in q.ack_batch(topic, [AckRequest(m.msg_id, m.receipt)
                                                          for m in msgs]):
                            if not hasattr(answer, "msg_id"):
                                raise RuntimeError(f"{topic}: an ack failed: {answer!r}")
                    if len({m.group_id for m in msgs if m.group_id}) < \
                            sum(1 for m in msgs if m.group_id):
                        raise RuntimeError(f"{topic}: a pull gave two of one group")
                    delivered[name].extend(msgs)
                    got += len(msgs)

            label = "one at a time" if batch == 1 else f"batches of {BATCH}"
            measure(f"send, {label}", send)
            measure(f"pull + ack, {label}", consume)
            check_deliveries(sent, delivered)
        rt.client.close()
    return figures


def check_deliveries(sent: dict[str, list[str]], delivered: dict[str, list[Any]]) -> None:
    """Each message once; the plain topic's in send order, each group's in its send order."""
    for name in sent:
        got = [m.msg_id for m in delivered[name]]
        if sorted(got) != sorted(sent[name]):
            raise RuntimeError(f"{name}: {len(got)} deliveries for {len(sent[name])} sends")
    if [m.msg_id for m in delivered["plain"]] != sent["plain"]:
        raise RuntimeError("plain: not delivered in send order")
    order = {m: i for i, m in enumerate(sent["grouped"])}
    last: dict[str, int] = {}
    for m in delivered["grouped"]:
        if order[m.msg_id] < last.get(m.group_id, -1):
            raise RuntimeError(f"group {m.group_id}: {m.msg_id} delivered out of order")
        last[m.group_id] = order[m.msg_id]


# -- C: memory of a blocked message ------------------------------------------------------

def key_usage(client: redis.Redis, q: DelayQueue, topic: str) -> dict[str, str]:
    """MEMORY USAGE of each of the topic's keys that exists, per entry: "bytes x entries"."""
    tk = q.topic_keys(topic)
    out = {}
    for name in ("waiting", "ready", "ack", "expire", "msgs", "groups", "blocked", "held"):
        key = getattr(tk, name)
        size = client.memory_usage(key, samples=0)
        if size:
            entries = client.hlen(key) if name in ("msgs", "groups") else client.zcard(key)
            out[name] = f"{size / entries:.1f} x {entries:,}"
    return out


def phase_memory(p: dict[str, Any], body: str) -> dict[str, Any]:
    n, groups = p["memory"], p["memory_groups"]
    with stack(with_node=False) as s:
        rt = runtime(s.redis.url)
        q = rt.queue
        figures: dict[str, Any] = {"messages": n, "groups": groups,
                                   "group_id_chars": len(group_id(0)), "body_bytes": len(body)}
        # plain: the reference, waiting a day (after one warm-up message makes the keys).
        load(q, "mem-plain", ["warmup"], body, 1, delay_ms=DAY_MS)
        before = used_memory(s.client)
        load(q, "mem-plain", msg_ids("p-", n), body, p["chunk"], delay_ms=DAY_MS)
        plain = (used_memory(s.client) - before) / n
        figures["plain"] = {"bytes_per_message": round(plain, 1),
                            "beyond_body": round(plain - len(body), 1),
                            "per_key": key_usage(s.client, q, "mem-plain")}
        # grouped: each group's front waits a day; the messages after it block behind it.
        load(q, "mem-grouped", msg_ids("f-", groups), body, p["chunk"], delay_ms=DAY_MS,
             group=group_id)
        before = used_memory(s.client)
        load(q, "mem-grouped", msg_ids("b-", n), body, p["chunk"], delay_ms=DAY_MS + 1000,
             group=lambda i: group_id(i % groups))
        grouped = (used_memory(s.client) - before) / n
        info = q.topic_info("mem-grouped")
        if info["waitingQueueSize"] != n + groups or s.client.zcard(
                q.topic_keys("mem-grouped").blocked) != n:
            raise RuntimeError(f"mem-grouped is not {n} blocked behind {groups}: {info}")
        figures["blocked"] = {"bytes_per_message": round(grouped, 1),
                              "beyond_body": round(grouped - len(body), 1),
                              "per_key": key_usage(s.client, q, "mem-grouped")}
        figures["ratio"] = ratio(grouped - len(body), plain - len(body))
        rt.client.close()
    return figures


# -- the run ---------------------------------------------------------------------------------

def print_figures(f: dict[str, Any], p: dict[str, Any]) -> None:
    a = f["pull"]
    g, pl, r = a["grouped"], a["plain"], a["ratio"]
    lat = "p50 / p90 / p99 / max (ms)"
    print_table(f"A. pull of one under {p['groups']:,} blocked groups x {p['behind']} "
                f"(bar: ratios <= {BAR_RATIO})", [
        ("grouped topic built (s)", a["build"]["seconds"]),
        (f"grouped: {lat}", " / ".join(str(g["latency_ms"][k])
                                       for k in ("p50", "p90", "p99", "max"))),
        (f"plain: {lat}", " / ".join(str(pl["latency_ms"][k])
                                     for k in ("p50", "p90", "p99", "max"))),
        ("ratio p50 / p90 / p99", f"{r['p50']} / {r['p90']} / {r['p99']}"),
        (f"in Redis (SLOWLOG), grouped: {lat}", " / ".join(
            str(g["in_redis_ms"][k]) for k in ("p50", "p90", "p99", "max"))),
        (f"in Redis (SLOWLOG), plain: {lat}", " / ".join(
            str(pl["in_redis_ms"][k]) for k in ("p50", "p90", "p99", "max"))),
        ("in Redis, ratio p50 / p99", f"{r['in_redis_p50']} / {r['in_redis_p99']}"),
        ("Redis commands per pull, grouped / plain",
         f"{g['commands_per_pull']} / {pl['commands_per_pull']} (ratio {r['commands']})"),
        ("Redis time per pull (us), grouped / plain",
         f"{g['redis_us_per_pull']} / {pl['redis_us_per_pull']} (ratio {r['redis_us']})"),
        ("bar met", "yes" if a["bar_met"] else "NO"),
    ])
    b = f["throughput"]
    print_table(f"B. throughput, {b['messages']:,} messages each, {b['groups']:,} groups "
                f"(msg/s)", [
        row for label in b if isinstance(b[label], dict) for row in (
            (f"{label}: grouped / plain (ratio)",
             f"{b[label]['grouped']:,.0f} / {b[label]['plain']:,.0f} ({b[label]['ratio']})"),
            ("  Redis time per message (us): grouped / plain (ratio)",
             f"{b[label]['redis_us_per_msg']['grouped']} / "
             f"{b[label]['redis_us_per_msg']['plain']} ({b[label]['redis_us_ratio']})"))])
    c = f["memory"]
    print_table(f"C. Redis bytes per waiting message, {c['messages']:,} each, "
                f"{c['body_bytes']}-byte bodies", [
        ("ungrouped: bytes per message (beyond body)",
         f"{c['plain']['bytes_per_message']} ({c['plain']['beyond_body']})"),
        (f"blocked behind {c['groups']:,} fronts: bytes per message (beyond body)",
         f"{c['blocked']['bytes_per_message']} ({c['blocked']['beyond_body']})"),
        ("blocked / ungrouped, beyond body", c["ratio"]),
        *[(f"{kind}: MEMORY USAGE of {key} per entry x entries", value)
          for kind, part in (("ungrouped", "plain"), ("grouped", "blocked"))
          for key, value in c[part]["per_key"].items()],
    ])


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
    limits = {"groups": 1_000_000, "behind": 100, "pulls": 1_000_000, "slice": 100_000,
              "rounds": 1000, "chunk": 1000, "messages": 1_000_000, "tp_groups": 1_000_000,
              "memory": 2_000_000, "memory_groups": 1_000_000, "body_bytes": 1_048_576}
    for key, top in limits.items():
        if not 1 <= params[key] <= top:
            parser.error(f"--{key.replace('_', '-')} must be between 1 and {top:,}")
    if params["rounds"] % 2:
        parser.error("--rounds must be even (the topics alternate ABBA)")
    body = "x" * params["body_bytes"]
    load_before = os.getloadavg()
    figures = {"memory": phase_memory(params, body),
               "throughput": phase_throughput(params, body),
               "pull": phase_pull(params, body)}
    figures["load_average"] = {"before": load_before, "after": os.getloadavg()}
    print_figures(figures, params)
    write_result("groups", figures, {**params, "quick": args.quick})
    return 0 if figures["pull"]["bar_met"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
