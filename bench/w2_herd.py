"""W2 thundering herd: N messages due at the same instant; time to drain, lag tail, and the
slowest Redis command (SLOWLOG) during the drain.

Bars: no Redis command over 50 ms; drain >= 20,000 msg/s.

One throwaway redis-server (SLOWLOG on: every command over 1 ms) and one node (2 gevent
workers, as deployed). Steps:

1. calibrate: ``--calibrate`` sends to a side topic (due in a day, never consumed) give the
   node's send rate, from which the lead time is chosen (``--lead-s`` overrides it);
2. send ``--messages`` over HTTP (``--concurrency`` in flight, ``--producer-procs`` processes)
   to ``--topics`` topics, every one with the same absolute ``triggerTime``; every send must be
   accepted before that instant, else the run stops;
3. before the instant, ``--consumer-procs`` processes (spawned) run ``--consumers-per-topic``
   long-polling consumers per topic, pulling ``--batch`` at a time and acking every message
   with a single-message ``ackMsg``: ``--ack-mode pool`` hands the acks to
   ``--ack-concurrency`` ack senders per process and polls again at once (a client with a
   consume thread pool); ``inline`` acks the batch one by one before polling again
   (``load.consume``'s loop);
4. Redis stats are reset just before the instant; at the end: drain (first and last delivery
   receipt since the instant, rate), acks (last ack done, ack-inclusive rate), lag
   (receipt - triggerTime) percentiles, early / duplicates / lost, SLOWLOG's slowest
   commands (script names resolved), INFO commandstats' top commands by total time, and CPU
   seconds of the node's workers, of Redis and of the consumer processes during the drain.

    cd bench && ../.venv-bench/bin/python w2_herd.py                      # full size (50k)
    cd bench && ../.venv-bench/bin/python w2_herd.py --messages 5000      # a quick run
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import random
import threading
import time
from typing import Any

import redis

from delayqueue.core.scripts import Scripts

import common
import load

BAR_SLOWEST_MS = 50.0
BAR_DRAIN_RATE = 20_000.0
DAY_MS = 86_400_000

DEFAULTS: dict[str, Any] = {
    "messages": 50_000, "topics": 10, "consumers_per_topic": 4, "batch": 100,
    "concurrency": 256, "producer_procs": 1, "consumer_procs": 1, "ack_mode": "pool",
    "ack_concurrency": 64, "ack_timeout_ms": 60_000, "poll_ms": 10_000, "lead_s": None,
    "calibrate": 2000, "max_drain_s": 180.0, "body_bytes": 64, "workers": 2, "seed": 2,
}


def topic_names(n: int) -> list[str]:
    return [f"w2t{i:02d}" for i in range(n)]


def plan_ids(p: dict[str, Any]) -> list[tuple[str, str]]:
    """(topic, msgId) of every message: round robin over the topics, uuid-hex ids."""
    rng = random.Random(p["seed"])
    topics = topic_names(p["topics"])
    return [(topics[i % len(topics)], f"{rng.getrandbits(128):032x}")
            for i in range(p["messages"])]


# -- producing -------------------------------------------------------------------------------

async def _produce_at(base: str, plan: list[tuple[str, str]], trigger: int | None,
                      delay_ms: int, concurrency: int, body: str) -> dict[str, Any]:
    """Send every (topic, msgId) with ``triggerTime=trigger`` (or ``delayMillis``)."""
    http = load.Http(base)
    ledger = load.Ledger()
    cpu0 = common.process_cpu_seconds()
    try:
        seconds = await load.produce(http, [(topic, msg_id, delay_ms) for topic, msg_id in plan],
                                     ledger, concurrency=concurrency, body=body,
                                     trigger_time=trigger)
    finally:
        await http.close()
    return {"sent": ledger.sent, "latency_ms": ledger.send_latency_ms, "errors": ledger.errors,
            "seconds": seconds, "cpu_s": common.process_cpu_seconds() - cpu0}


def produce_part(base: str, plan: list[tuple[str, str]], trigger: int | None, delay_ms: int,
                 concurrency: int, body: str) -> dict[str, Any]:
    """One producer process's share (also called in-process when there is one producer)."""
    return asyncio.run(_produce_at(base, plan, trigger, delay_ms, concurrency, body))


def produce(pool: Any, base: str, plan: list[tuple[str, str]], trigger: int | None,
            p: dict[str, Any], body: str, delay_ms: int = 0) -> dict[str, Any]:
    procs = p["producer_procs"] if pool is not None else 1
    started = time.monotonic()
    if procs <= 1:
        parts = [produce_part(base, plan, trigger, delay_ms, p["concurrency"], body)]
    else:
        shares = [plan[i::procs] for i in range(procs)]
        parts = pool.starmap(produce_part, [(base, share, trigger, delay_ms,
                                             max(1, p["concurrency"] // procs), body)
                             for share in shares])
    sent: dict[str, int] = {}
    latencies: list[float] = []
    for part in parts:
        sent.update(part["sent"])
        latencies.extend(part["latency_ms"])
    took = time.monotonic() - started
    return {"sent": sent, "errors": sum(x["errors"] for x in parts), "seconds": took,
            "rate": len(plan) / took if took else 0.0, "latency_ms": common.summary(latencies),
            "client_cpu_s": sum(x["cpu_s"] for x in parts)}


# -- consuming -------------------------------------------------------------------------------

async def _consume_part(base: str, expected: dict[str, int], start_at_ms: float,
                        trigger: int, p: dict[str, Any]) -> dict[str, Any]:
    http = load.Http(base, timeout_s=p["poll_ms"] / 1000.0 + 30.0)
    deliveries: list[tuple[str, float, int]] = []
    acked: list[tuple[str, float]] = []
    got: dict[str, set[str]] = {t: set() for t in expected}
    counters = {"polls": 0, "empty_polls": 0, "poll_errors": 0, "ack_errors": 0,
                "ack_rejected": 0}
    unacked = 0                     # deliveries whose ack has not finished yet
    marks = {"cpu_at_last_delivery": 0.0}
    cpu0 = common.process_cpu_seconds()
    deadline = trigger / 1000.0 + p["max_drain_s"]
    all_delivered = asyncio.Event()
    acks: asyncio.Queue = asyncio.Queue()

    async def ack(topic: str, msg_id: str) -> None:
        nonlocal unacked
        try:
            reply = await http.call("ackMsg", topic=topic, msgId=msg_id)
            if reply.get("code") == 200:
                acked.append((msg_id, common.now_ms()))
            else:
                counters["ack_rejected"] += 1
        except load.CALL_ERRORS:
            counters["ack_errors"] += 1
        finally:
            unacked -= 1

    async def ack_sender() -> None:
        while True:
            topic, msg_id = await acks.get()
            await ack(topic, msg_id)

    async def consumer(topic: str) -> None:
        nonlocal unacked
        while len(got[topic]) < expected[topic] and time.time() < deadline:
            try:
                reply = await http.call("longPollingMsg", topic=topic, batch=p["batch"],
                                        longPollingTimeoutMillis=p["poll_ms"],
                                        ackTimeoutMillis=p["ack_timeout_ms"])
            except load.CALL_ERRORS:
                counters["poll_errors"] += 1
                await asyncio.sleep(0.1 + random.random() * 0.1)
                continue
            at = common.now_ms()
            messages = reply.get("delayMsgList") or ()
            counters["polls"] += 1
            counters["empty_polls"] += not messages
            unacked += len(messages)
            for message in messages:
                deliveries.append((message["msgId"], at, message["triggerTime"]))
                got[topic].add(message["msgId"])
            if messages:
                marks["cpu_at_last_delivery"] = common.process_cpu_seconds() - cpu0
            if all(len(got[t]) >= expected[t] for t in expected):
                all_delivered.set()
            for message in messages:
                if p["ack_mode"] == "inline":
                    await ack(topic, message["msgId"])
                else:
                    acks.put_nowait((topic, message["msgId"]))

    await asyncio.sleep(max(0.0, start_at_ms / 1000.0 - time.time()))
    cpu0 = common.process_cpu_seconds()
    marks["cpu_at_last_delivery"] = 0.0
    senders = [asyncio.create_task(ack_sender()) for _ in range(p["ack_concurrency"])] \
        if p["ack_mode"] == "pool" else []
    consumers = [asyncio.create_task(consumer(t)) for t in expected
                 for _ in range(p["consumers_per_topic"])]
    try:
        await asyncio.wait_for(all_delivered.wait(), max(1.0, deadline - time.time()))
        # Every message seen: wait for the outstanding acks (bounded by the deadline).
        while unacked > 0 and time.time() < deadline:
            await asyncio.sleep(0.005)
    except asyncio.TimeoutError:
        pass
    finally:
        for task in consumers + senders:      # the other topics' polls still held: drop them
            task.cancel()
        await asyncio.gather(*consumers, *senders, return_exceptions=True)
        await http.close()
    return {"deliveries": deliveries, "acked": acked, "cpu_s": common.process_cpu_seconds() - cpu0,
            "unacked_left": unacked, **marks, **counters}


def consume_part(base: str, expected: dict[str, int], start_at_ms: float, trigger: int,
                 p: dict[str, Any]) -> dict[str, Any]:
    """One consumer process: its topics' consumers, from ``start_at_ms`` until drained."""
    return asyncio.run(_consume_part(base, expected, start_at_ms, trigger, p))


# -- the workload ----------------------------------------------------------------------------

class CpuSampler:
    """Samples (time ms, node workers' CPU s, Redis CPU s) every ``period_s`` in a thread,
    so the CPU spent up to the last delivery and after it (the acks) can be told apart."""

    def __init__(self, stack: common.Stack, period_s: float = 0.05) -> None:
        self.stack, self.period_s = stack, period_s
        self.samples: list[tuple[float, float, float]] = []
        self.stop = threading.Event()
        self.client = redis.Redis.from_url(stack.redis.url, decode_responses=True)
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def sample(self) -> None:
        info = self.client.info("cpu")
        self.samples.append((common.now_ms(), common.node_workers_cpu(self.stack.node),
                             float(info["used_cpu_sys"]) + float(info["used_cpu_user"])))

    def loop(self) -> None:
        deadline = time.monotonic() + 3600           # bounded, whatever happens
        while not self.stop.wait(self.period_s) and time.monotonic() < deadline:
            self.sample()

    def __enter__(self) -> "CpuSampler":
        self.sample()
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.thread.join(5)
        self.sample()
        self.client.close()

    def at(self, t_ms: float) -> tuple[float, float]:
        """(node, redis) CPU seconds used from the first sample until ``t_ms`` (interpolated)."""
        s = self.samples
        if not s:
            return 0.0, 0.0
        if t_ms <= s[0][0]:
            return 0.0, 0.0
        for (t0, n0, r0), (t1, n1, r1) in zip(s, s[1:]):
            if t0 <= t_ms <= t1:
                f = (t_ms - t0) / (t1 - t0) if t1 > t0 else 1.0
                return n0 + f * (n1 - n0) - s[0][1], r0 + f * (r1 - r0) - s[0][2]
        return s[-1][1] - s[0][1], s[-1][2] - s[0][2]


def script_names(stack: common.Stack) -> dict[str, str]:
    scripts = Scripts(stack.client)
    return {scripts.script(name).sha: name for name in Scripts.NAMES}


def name_command(command: str, shas: dict[str, str]) -> str:
    parts = command.split()
    if len(parts) >= 2 and parts[0].upper() == "EVALSHA" and parts[1] in shas:
        return f"script {shas[parts[1]]}: " + " ".join(parts[3:6])
    return command


def run(**params: Any) -> dict[str, Any]:
    p = {**DEFAULTS, **params}
    body = "b" * p["body_bytes"]
    plan = plan_ids(p)
    topics = topic_names(p["topics"])
    expected = {t: 0 for t in topics}
    for topic, _ in plan:
        expected[topic] += 1
    n_procs = max(1, min(p["consumer_procs"], len(topics)))
    shares = [{t: expected[t] for t in topics[i::n_procs]} for i in range(n_procs)]
    ctx = multiprocessing.get_context("spawn")
    figures: dict[str, Any] = {"messages": p["messages"], "topics": p["topics"],
                               "consumers": p["topics"] * p["consumers_per_topic"],
                               "batch": p["batch"], "ack_mode": p["ack_mode"],
                               "consumer_procs": n_procs, "producer_procs": p["producer_procs"]}
    with common.stack(workers=p["workers"], slowlog=True) as stack, \
            ctx.Pool(n_procs + (p["producer_procs"] if p["producer_procs"] > 1 else 0)) as pool:
        figures["redis_version"] = stack.redis_version()
        shas = script_names(stack)     # now: the node loaded the scripts as they are now
        base = stack.base
        # 1. calibrate the send rate (side topic, due in a day, never consumed).
        lead_s = p["lead_s"]
        if lead_s is None:
            rng = random.Random(p["seed"] + 1)
            side = [("w2calibrate", f"{rng.getrandbits(128):032x}")
                    for _ in range(p["calibrate"])]
            half = len(side) // 2           # the first half warms the node up
            produce(pool, base, side[:half], None, p, body, delay_ms=DAY_MS)
            cal = produce(pool, base, side[half:], None, p, body, delay_ms=DAY_MS)
            # Room for the sends at 60 % of the calibrated rate, plus 5 s for the consumers.
            lead_s = p["messages"] / (0.6 * max(cal["rate"], 1.0)) + 5.0
            figures["calibrated_send_rate"] = round(cal["rate"], 1)
            common.progress(f"calibration: {p['calibrate']} sends at {cal['rate']:,.0f}/s "
                            f"-> lead {lead_s:.1f} s")
        trigger = int(common.now_ms() + lead_s * 1000)
        # 3 (started first). Consumers wait in their processes until 2 s before the instant.
        start_at = trigger - 2000
        pending = [pool.apply_async(consume_part, (base, share, start_at, trigger, p))
                   for share in shares]
        # 2. the herd.
        common.progress(f"sending {p['messages']:,} messages to {p['topics']} topics, all due "
                        f"at one instant {lead_s:.1f} s ahead")
        sends = produce(pool, base, plan, trigger, p, body)
        sends_done = common.now_ms()
        slack_s = (trigger - sends_done) / 1000.0
        common.progress(f"sent {len(sends['sent']):,} ({sends['errors']} errors) in "
                        f"{sends['seconds']:.1f} s ({sends['rate']:,.0f}/s); "
                        f"{slack_s:.1f} s before the instant")
        if len(sends["sent"]) != p["messages"] or any(t != trigger
                                                       for t in sends["sent"].values()):
            pool.terminate()
            raise RuntimeError(f"only {len(sends['sent'])} of {p['messages']} sends accepted "
                               f"with triggerTime {trigger}")
        if slack_s < 1.0:
            pool.terminate()
            raise RuntimeError(f"sending ended {-slack_s:.1f} s after the instant less 1 s; "
                               f"give a larger --lead-s")
        # 4. stats from just before the instant.
        time.sleep(max(0.0, (trigger - 500) / 1000.0 - time.time()))
        stack.reset_stats()
        common.progress("stats reset; waiting for the drain")
        with CpuSampler(stack) as sampler:
            time.sleep(max(0.0, trigger / 1000.0 - time.time()))
            sampler.sample()                       # the instant itself
            parts = [r.get(timeout=p["max_drain_s"] + lead_s + 60) for r in pending]
        slowest = stack.slowest_commands(10)
        commandstats = stack.commandstats()

    ledger = load.Ledger(sent=sends["sent"])
    acked: list[tuple[str, float]] = []
    counters: dict[str, int] = {}
    for part in parts:
        ledger.merge(load.Ledger(deliveries=part["deliveries"]))
        acked.extend(part["acked"])
        for key in ("polls", "empty_polls", "poll_errors", "ack_errors", "ack_rejected",
                    "unacked_left"):
            counters[key] = counters.get(key, 0) + part[key]
    ledger.errors = counters["poll_errors"] + counters["ack_errors"]
    lf = ledger.figures()
    receipts = sorted(at for _, at, _ in ledger.deliveries)
    ack_times = sorted(at for _, at in acked)
    n = lf["delivered"]
    first_s = (receipts[0] - trigger) / 1000.0 if receipts else float("nan")
    last_s = (receipts[-1] - trigger) / 1000.0 if receipts else float("nan")
    acks_s = (ack_times[-1] - trigger) / 1000.0 if ack_times else float("nan")
    drain_rate = n / last_s if receipts and last_s > 0 else 0.0
    window = max(acks_s, last_s) if ack_times else last_s
    slowest_named = [{**e, "command": name_command(e["command"], shas)} for e in slowest]
    node_at_trigger, redis_at_trigger = sampler.at(trigger)
    node_last, redis_last = sampler.at(receipts[-1]) if receipts else (0.0, 0.0)
    node_end, redis_end = sampler.at(float("inf"))
    node_cpu, cpu_redis = node_end - node_at_trigger, redis_end - redis_at_trigger
    top = sorted(commandstats.items(), key=lambda kv: kv[1].get("usec", 0), reverse=True)[:8]
    slowest_ms = slowest[0]["ms"] if slowest else 0.0
    figures.update({
        "sends": {"seconds": round(sends["seconds"], 2), "rate": round(sends["rate"], 1),
                  "errors": sends["errors"], "latency_ms": sends["latency_ms"],
                  "lead_s": round(lead_s, 2), "slack_s": round(slack_s, 2),
                  "client_cpu_s": round(sends["client_cpu_s"], 2)},
        "first_receipt_s": round(first_s, 3),
        "last_receipt_s": round(last_s, 3),
        "drain_s": round(last_s, 3),
        "drain_span_s": round(last_s - first_s, 3),
        "drain_rate": round(drain_rate, 1),
        "acks_done_s": round(acks_s, 3),
        "acked": len(acked),
        "ack_rate": round(len(acked) / acks_s, 1) if ack_times and acks_s > 0 else 0.0,
        "lag_ms": lf["lag_ms"],
        "early": lf["early"], "duplicates": lf["duplicates"], "lost": lf["lost"],
        "delivered": n, "unknown": lf["unknown"],
        **counters,
        "slowest_ms": slowest_ms,
        "slowest_commands": slowest_named,
        "commandstats_top": {name: stats for name, stats in top},
        "cpu_s": {"window_s": round(window, 2), "node_workers": round(node_cpu, 2),
                  "redis": round(cpu_redis, 2),
                  "consumer_procs": round(sum(x["cpu_s"] for x in parts), 2),
                  "per_consumer_proc": [round(x["cpu_s"], 2) for x in parts],
                  "to_last_receipt": {
                      "seconds": round(last_s, 3),
                      "node_workers": round(node_last - node_at_trigger, 2),
                      "redis": round(redis_last - redis_at_trigger, 2),
                      "consumer_procs": round(sum(x["cpu_at_last_delivery"] for x in parts),
                                              2)}},
        "bar_slowest_ms": BAR_SLOWEST_MS, "slowest_bar_met": slowest_ms <= BAR_SLOWEST_MS,
        "bar_drain_rate": BAR_DRAIN_RATE, "drain_bar_met": drain_rate >= BAR_DRAIN_RATE,
    })
    return figures


def print_figures(f: dict[str, Any]) -> None:
    s, lag, cpu = f["sends"], f["lag_ms"], f["cpu_s"]
    d = cpu["to_last_receipt"]
    common.print_table("W2 thundering herd", [
        ("messages / topics", f"{f['messages']:,} / {f['topics']}"),
        ("consumers (procs)", f"{f['consumers']} long-polling, batch {f['batch']}, acks "
                              f"{f['ack_mode']} ({f['consumer_procs']} process"
                              f"{'es' if f['consumer_procs'] > 1 else ''})"),
        ("sends", f"{s['seconds']:.1f} s at {s['rate']:,.0f}/s, {s['errors']} errors, "
                  f"done {s['slack_s']:.1f} s before the instant (lead {s['lead_s']:.1f} s)"),
        ("first / last receipt after the instant", f"{f['first_receipt_s']:.3f} / "
                                                   f"{f['last_receipt_s']:.3f} s"),
        ("drain rate (bar >= 20,000/s)", f"{f['drain_rate']:,.0f} msg/s  "
                                         f"{'OK' if f['drain_bar_met'] else 'MISSED'}"),
        ("all acks done after the instant", f"{f['acks_done_s']:.3f} s "
                                            f"({f['acked']:,} acked, {f['ack_rate']:,.0f}/s)"),
        ("lag p50 / p99 / max ms", f"{lag.get('p50')} / {lag.get('p99')} / {lag.get('max')}"),
        ("delivered / early / duplicates / lost", f"{f['delivered']:,} / {f['early']} / "
                                                  f"{f['duplicates']} / {f['lost']}"),
        ("polls (empty) / errors", f"{f['polls']:,} ({f['empty_polls']:,}) / "
                                   f"poll {f['poll_errors']}, ack {f['ack_errors']}, "
                                   f"ack rejected {f['ack_rejected']}"),
        ("slowest Redis command (bar <= 50 ms)", f"{f['slowest_ms']} ms  "
                                                 f"{'OK' if f['slowest_bar_met'] else 'MISSED'}"),
        *[(f"  {e['ms']} ms", e["command"]) for e in f["slowest_commands"][:5]],
        ("CPU s, instant to last receipt", f"{d['seconds']} s: node workers "
                                           f"{d['node_workers']}, redis {d['redis']}, "
                                           f"consumers {d['consumer_procs']} (2 cores)"),
        ("CPU s, instant to last ack", f"{cpu['window_s']} s: node workers "
                                       f"{cpu['node_workers']}, redis {cpu['redis']}, "
                                       f"consumers {cpu['consumer_procs']} "
                                       f"{cpu['per_consumer_proc']}"),
        *[(f"  {name}", f"{st.get('calls'):,} calls, {st.get('usec', 0) / 1000:,.0f} ms, "
                        f"{st.get('usec_per_call')} us/call")
          for name, st in f["commandstats_top"].items()],
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=DEFAULTS["messages"])
    parser.add_argument("--topics", type=int, default=DEFAULTS["topics"])
    parser.add_argument("--consumers-per-topic", type=int,
                        default=DEFAULTS["consumers_per_topic"])
    parser.add_argument("--batch", type=int, default=DEFAULTS["batch"],
                        help="batch of each long poll (the API's max-batch is 1000)")
    parser.add_argument("--ack-mode", choices=["pool", "inline"], default=DEFAULTS["ack_mode"])
    parser.add_argument("--ack-concurrency", type=int, default=DEFAULTS["ack_concurrency"],
                        help="acks in flight per consumer process (--ack-mode pool)")
    parser.add_argument("--ack-timeout-ms", type=int, default=DEFAULTS["ack_timeout_ms"],
                        help="ackTimeoutMillis of each pull")
    parser.add_argument("--poll-ms", type=int, default=DEFAULTS["poll_ms"],
                        help="longPollingTimeoutMillis")
    parser.add_argument("--concurrency", type=int, default=DEFAULTS["concurrency"],
                        help="sends in flight (over all producer processes)")
    parser.add_argument("--producer-procs", type=int, default=DEFAULTS["producer_procs"])
    parser.add_argument("--consumer-procs", type=int, default=DEFAULTS["consumer_procs"],
                        help="consumer processes; the topics are split between them")
    parser.add_argument("--lead-s", type=float, default=DEFAULTS["lead_s"],
                        help="seconds from the first send to the instant (default: calibrated)")
    parser.add_argument("--calibrate", type=int, default=DEFAULTS["calibrate"])
    parser.add_argument("--max-drain-s", type=float, default=DEFAULTS["max_drain_s"])
    parser.add_argument("--body-bytes", type=int, default=DEFAULTS["body_bytes"])
    parser.add_argument("--workers", type=int, default=DEFAULTS["workers"],
                        help="the node's gunicorn workers")
    parser.add_argument("--seed", type=int, default=DEFAULTS["seed"])
    params = vars(parser.parse_args(argv))
    figures = run(**params)
    print_figures(figures)
    common.write_result("w2", figures, params)
    ok = figures["slowest_bar_met"] and figures["drain_bar_met"] and figures["lost"] == 0 \
        and figures["early"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
