"""How the Redis work of many topics spreads over a 3-master Cluster, and what it costs per
message against one standalone redis-server, under the same paced load.

    .venv/bin/python bench/cluster_scale.py [--topics 1000] [--rate 300] [--seconds 20]
        [--consumers 40] [--send-batch 10] [--runs cluster,cluster-1,standalone]

Each run starts one node (2 gevent workers) in a namespace of its own and drives it over
HTTP: producer threads pace ``--rate`` messages a second in sendMsgBatch requests of
``--send-batch`` to one topic, round-robin over the topics (each due 0..300 ms later);
consumer threads each own topics/consumers of them and go round them with longPollingMsg
(batch 32, held up to 200 ms) and one ackMsgBatch for what it answered. Batches keep the
node's HTTP work (Python) from being what limits the load on a small machine. Sending stops after
``--seconds``; consumers stop once every accepted message was acked, or ``--drain-seconds``
later. Every loop is bounded in time; everything runs on loopback.

Runs: ``cluster`` (3 masters + 3 replicas, tests/support/topologies.py; bookkeeping-shards
auto: 16), ``cluster-1`` (the same Cluster, bookkeeping-shards 1: the whole registry and due
index on the master of ``{ns}``, the layout before shards), ``standalone`` (one
redis-server). Per Redis process: CPU (``used_cpu_sys + used_cpu_user`` from INFO, from the
first send to the last ack) and commands (INFO commandstats: every command, the ones scripts
run included). Per run: each master's share of the masters' CPU and commands (bar: within
±15 % of a third each), and the masters' CPU per acked message (bar: within 20 % of
standalone's), also net of the Redis processes' CPU with the node idle (``--idle-seconds``
before the load: cron, the Cluster bus, the node's own loops); the replicas' CPU is shown
apart (the standalone run has none).
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import redis  # noqa: E402
import requests  # noqa: E402

from support.node import ServerProcess  # noqa: E402
from support.redis_server import RedisServer  # noqa: E402
from support.topologies import ClusterTopology, unique_namespace  # noqa: E402

API = "/camellia/delayQueue/"
MAX_DELAY_MS = 300
PRODUCERS = 4


def redis_figures(port: int) -> tuple[float, dict[str, tuple[int, int]]]:
    """(CPU seconds, (calls, usec) by command) of one redis-server so far."""
    client = redis.Redis(port=port)
    cpu = client.info("cpu")
    stats = client.info("commandstats")
    client.close()
    return (cpu["used_cpu_sys"] + cpu["used_cpu_user"],
            {name: (stat["calls"], stat["usec"]) for name, stat in stats.items()})


def calls_of(stats: dict[str, tuple[int, int]]) -> int:
    return sum(calls for calls, _ in stats.values())


def top_commands(before: dict, after: dict, per: int) -> dict:
    """The six commands that took the most time: calls and microseconds per message (a
    script's time includes that of the commands it ran, which are listed too)."""
    delta = {name: (calls - before.get(name, (0, 0))[0], usec - before.get(name, (0, 0))[1])
             for name, (calls, usec) in after.items()}
    top = sorted(delta.items(), key=lambda item: -item[1][1])[:6]
    return {name.removeprefix("cmdstat_"): f"{calls / per:.2f} calls, {usec / per:.1f} us"
            for name, (calls, usec) in top}


class Load:
    """The paced sends, the long-polling consumers, and what they counted."""

    def __init__(self, base: str, topics: list[str], rate: float, consumers: int,
                 batch: int) -> None:
        self.base, self.topics, self.rate, self.batch = base, topics, rate, batch
        self.consumers = consumers
        self.lock = threading.Lock()
        self.accepted = self.acked = self.pulls = self.errors = 0
        self.stop_sending = threading.Event()
        self.stop_consuming = threading.Event()

    def post(self, session: requests.Session, endpoint: str, body: dict | None = None,
             **params) -> dict | None:
        try:
            answer = session.post(self.base + API + endpoint, data=params or None, json=body,
                                  timeout=10).json()
        except (requests.RequestException, ValueError):
            answer = None
        if answer is None or answer.get("code") != 200:
            with self.lock:
                self.errors += 1
            return None
        return answer

    def succeeded(self, answer: dict | None) -> int:
        results = (answer or {}).get("results") or []
        failed = sum(1 for result in results if result.get("code") != 200)
        if failed:
            with self.lock:
                self.errors += failed
        return len(results) - failed

    def produce(self, offset: int) -> None:
        session, rng = requests.Session(), random.Random(offset)
        topics = itertools.cycle(self.topics[offset::PRODUCERS])
        interval = PRODUCERS * self.batch / self.rate
        next_at = time.monotonic()
        while not self.stop_sending.is_set():
            msgs = [{"msg": "x" * 64, "msgId": uuid.uuid4().hex,
                     "delayMillis": rng.randint(0, MAX_DELAY_MS)} for _ in range(self.batch)]
            sent = self.succeeded(self.post(session, "sendMsgBatch",
                                            {"topic": next(topics), "msgs": msgs}))
            with self.lock:
                self.accepted += sent
            next_at += interval
            self.stop_sending.wait(max(0.0, next_at - time.monotonic()))

    def consume(self, mine: list[str]) -> None:
        session = requests.Session()
        for topic in itertools.cycle(mine):
            if self.stop_consuming.is_set():
                return
            answer = self.post(session, "longPollingMsg", topic=topic, batch=32,
                               longPollingTimeoutMillis=200, ackTimeoutMillis=30_000)
            with self.lock:
                self.pulls += 1
            got = (answer or {}).get("delayMsgList") or []
            if got:
                acks = [{"msgId": m["msgId"], "receipt": m.get("receipt", "")} for m in got]
                acked = self.succeeded(self.post(session, "ackMsgBatch",
                                                 {"topic": topic, "acks": acks}))
                with self.lock:
                    self.acked += acked

    def run(self, seconds: float, drain_seconds: float) -> float:
        threads = [threading.Thread(target=self.produce, args=(i,), daemon=True)
                   for i in range(PRODUCERS)]
        threads += [threading.Thread(target=self.consume, args=(self.topics[i::self.consumers],),
                                     daemon=True) for i in range(self.consumers)]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        self.stop_sending.wait(seconds)
        self.stop_sending.set()
        deadline = time.monotonic() + drain_seconds
        while self.acked < self.accepted and time.monotonic() < deadline:
            time.sleep(0.1)
        self.stop_consuming.set()
        for thread in threads:
            thread.join(15)
        return time.monotonic() - started


def measure(name: str, url: str, masters: list[int], replicas: list[int], args,
            shards: int | None) -> dict:
    settings = {"namespace": unique_namespace("scale")}
    if shards is not None:
        settings["bookkeeping-shards"] = shards
    topics = [f"t{n:04d}" for n in range(args.topics)]
    with ServerProcess(url, settings=settings, workers=2) as node:
        idle_from = {port: redis_figures(port)[0] for port in masters + replicas}
        time.sleep(args.idle_seconds)     # the fleet's cost with no load, to subtract
        before = {port: redis_figures(port) for port in masters + replicas}
        idle = {port: (before[port][0] - idle_from[port]) / args.idle_seconds
                for port in before}
        load = Load(node.url, topics, args.rate, args.consumers, args.send_batch)
        elapsed = load.run(args.seconds, args.drain_seconds)
        after = {port: redis_figures(port) for port in masters + replicas}
    cpu = {port: after[port][0] - before[port][0] for port in after}
    calls = {port: calls_of(after[port][1]) - calls_of(before[port][1]) for port in after}
    master_cpu, master_calls = sum(cpu[p] for p in masters), sum(calls[p] for p in masters)
    acked = max(load.acked, 1)
    return {
        "run": name, "seconds": round(elapsed, 1), "accepted": load.accepted,
        "acked": load.acked, "pulls": load.pulls, "errors": load.errors,
        "sends_per_s": round(load.accepted / args.seconds, 1),
        "masters": {str(p): {"cpu_percent": round(cpu[p] / elapsed * 100, 1),
                             "cpu_share": round(cpu[p] / master_cpu, 3) if master_cpu else None,
                             "command_share": round(calls[p] / master_calls, 3)
                             if master_calls else None,
                             "commands_per_msg": top_commands(before[p][1], after[p][1],
                                                              max(load.acked, 1))}
                    for p in masters},
        "masters_cpu_us_per_msg": round(master_cpu * 1e6 / acked, 1),
        "masters_commands_per_msg": round(master_calls / acked, 1),
        "replicas_cpu_us_per_msg": round(sum(cpu[p] for p in replicas) * 1e6 / acked, 1),
        "masters_idle_cpu_percent": round(sum(idle[p] for p in masters) * 100, 1),
        "masters_cpu_us_per_msg_above_idle": round(
            (master_cpu - sum(idle[p] for p in masters) * elapsed) * 1e6 / acked, 1),
    }


def verdict(results: list[dict]) -> dict:
    """The two bars: each master within ±15 % of a third; the Cluster's masters' CPU per
    message within 20 % of standalone's."""
    out = {}
    by_run = {r["run"]: r for r in results}
    for r in results:
        if len(r["masters"]) == 3:
            shares = [m["cpu_share"] for m in r["masters"].values()]
            commands = [m["command_share"] for m in r["masters"].values()]
            out[r["run"] + ": cpu shares within a third ±15 %"] = all(
                abs(s - 1 / 3) <= 0.05 for s in shares)
            out[r["run"] + ": command shares within a third ±15 %"] = all(
                abs(s - 1 / 3) <= 0.05 for s in commands)
    if "standalone" in by_run:
        for r in results:
            if r["run"] != "standalone":
                for figure in ("masters_cpu_us_per_msg", "masters_cpu_us_per_msg_above_idle"):
                    ratio = r[figure] / by_run["standalone"][figure]
                    out[f"{r['run']}: {figure} / standalone = {ratio:.2f} (bar 0.8..1.2)"] \
                        = 0.8 <= ratio <= 1.2
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=300, help="sends a second")
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--drain-seconds", type=float, default=30)
    parser.add_argument("--consumers", type=int, default=40)
    parser.add_argument("--idle-seconds", type=float, default=5)
    parser.add_argument("--send-batch", type=int, default=10, help="messages per sendMsgBatch")
    parser.add_argument("--runs", default="cluster,cluster-1,standalone")
    args = parser.parse_args()
    runs = [run.strip() for run in args.runs.split(",") if run.strip()]
    results = []
    work = Path(tempfile.mkdtemp(prefix="dq-scale-"))
    cluster = ClusterTopology(work / "cluster").start() if any(
        run.startswith("cluster") for run in runs) else None
    try:
        for run in runs:
            if run == "standalone":
                server = RedisServer(work / "standalone").start()
                try:
                    results.append(measure(run, server.url, [server.port], [], args, None))
                finally:
                    server.stop()
            else:
                masters = cluster.masters()
                replicas = [cluster.replica_of(port) for port in masters]
                results.append(measure(run, cluster.url, masters, replicas, args,
                                       1 if run == "cluster-1" else None))
            print(json.dumps(results[-1], indent=1), flush=True)
    finally:
        if cluster is not None:
            cluster.stop()
    print(json.dumps({"bars": verdict(results)}, indent=1))


if __name__ == "__main__":
    main()
