"""The single-message plain path (issue 29): what one delivered message costs.

``sendMsg`` (delay 0); a consumer's ``longPollingMsg`` (batch=1) answers it; ``ackMsg`` with
the receipt; poll again. ``--consumers`` coroutines on one topic and the senders share one
asyncio loop of the lean client (load.py ``Http``); the node is the real one (``stack``:
gunicorn, the project's default worker class and count) on its own redis-server. ``full``:
``--messages`` as fast as ``--senders`` concurrent sends go; ``paced``: ``--rate`` a second
for ``--duration`` s, each send's hint waking consumers held in long polls. Per mode, a CPU
window (no MONITOR): per message, node CPU (every worker) and its ratio to the HTTP floor
(http_floor.py's ``flask`` figure, same run), Redis CPU, HTTP requests, Redis commands (INFO
commandstats, inside scripts too), round trips (INFO total_reads_processed: a read event per
request or pipeline a client sends) and lags; then a shorter MONITOR window (it slows Redis):
commands clients send (lines not marked ``lua``), script calls by script (SHA of the source
the node's tree builds, SCRIPT LOADed), pull calls and empty pulls (pulls - deliveries).

    python bench/single_path.py                      # full (5,000) and paced (200/s, 20 s)
    python bench/single_path.py --quick --mode paced
    python bench/single_path.py --tree /work/old --tree . --rounds 3   # before/after, alternated
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import http_floor
import redis
from send_wrk import DONE, SCRIPT, _wrk

import common
from common import REPO, SERVER_PYTHON, now_ms, progress, stack, summary
from load import CALL_ERRORS, Http, Ledger

BODY = "x" * 64
BARS = {"full": 4.0, "paced": 5.0}   # node CPU per message / the floor; empty pulls paced 0.1


@dataclass
class Run:
    """One window's load: what was sent (and when), answered, acked, and requests made."""

    count: int
    ledger: Ledger = field(default_factory=Ledger)
    sent_at: dict[str, float] = field(default_factory=dict)
    send_lag: list[float] = field(default_factory=list)     # send start -> poll answer, ms
    requests: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("sendMsg", "longPollingMsg", "emptyAnswers", "ackMsg"), 0))
    acked: int = 0
    done: asyncio.Event = field(default_factory=asyncio.Event)


async def consumer(http: Http, topic: str, now: list[Run], poll_ms: int) -> None:
    """longPollingMsg batch=1, ackMsg with the receipt, again; counted in window ``now[0]``."""
    while True:
        try:
            reply = await http.call("longPollingMsg", topic=topic, batch=1,
                                    longPollingTimeoutMillis=poll_ms)
        except CALL_ERRORS as exc:
            now[0].ledger.error(exc)
            await asyncio.sleep(0.1)
            continue
        at, run = now_ms(), now[0]
        run.requests["longPollingMsg"] += 1
        messages = reply.get("delayMsgList") or ()
        run.requests["emptyAnswers"] += not messages
        for m in messages:
            run.ledger.deliveries.append((m["msgId"], at, m["triggerTime"]))
            if m["msgId"] in run.sent_at:
                run.send_lag.append(at - run.sent_at[m["msgId"]])
            try:
                answer = await http.call("ackMsg", topic=topic, msgId=m["msgId"],
                                         receipt=m["receipt"])
                run.requests["ackMsg"] += 1
                if answer.get("code") != 200:
                    run.ledger.error(f"ackMsg code {answer.get('code')}: {answer.get('msg')}")
            except CALL_ERRORS as exc:
                run.ledger.error(exc)
            run.acked += 1
            if run.acked >= run.count:
                run.done.set()


async def produce(http: Http, topic: str, run: Run, rate: float, senders: int) -> None:
    """Send ``run.count`` messages (delay 0): at ``rate`` a second, or as fast as they go."""
    prefix = uuid.uuid4().hex[:12]
    started = time.monotonic()

    async def sender(first: int) -> None:
        for i in range(first, run.count, senders):
            if rate > 0:
                wait = started + i / rate - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
            msg_id = f"{prefix}-{i:08d}"
            run.sent_at[msg_id] = now_ms()
            try:
                reply = await http.call("sendMsg", topic=topic, msgId=msg_id, msg=BODY,
                                        delayMillis=0)
            except CALL_ERRORS as exc:
                run.ledger.error(exc)
                continue
            run.requests["sendMsg"] += 1
            if reply.get("code") == 200 and not reply.get("duplicate"):
                run.ledger.sent[msg_id] = reply["delayMsg"]["triggerTime"]
            else:
                run.ledger.error(f"sendMsg code {reply.get('code')}: {reply.get('msg')}"[:80])

    await asyncio.gather(*(sender(k) for k in range(senders)))


def drive(base: str, topic: str, windows: list[tuple[str, int, float, Any, Any]], *,
          senders: int, consumers: int, poll_ms: int) -> list[tuple[Run, float]]:
    """The consumers long poll ``topic`` through every window (what, count, rate, on_start,
    on_end) in turn: ``on_start()``, the sends, every message acked (bounded: 60 s + 20 ms a
    message), 0.2 s for the consumers' next polls, ``on_end()``. Each window's Run, seconds."""
    async def main() -> list[tuple[Run, float]]:
        http = Http(base, timeout_s=poll_ms / 1000.0 + 30)
        now = [Run(0)]
        tasks = [asyncio.create_task(consumer(http, topic, now, poll_ms))
                 for _ in range(consumers)]
        await asyncio.sleep(0.5)   # their first polls held
        out = []
        for what, count, rate, on_start, on_end in windows:
            progress(f"{topic}: {what}, {count:,} messages"
                     + (f" at {rate:g}/s" if rate else ", as fast as they go"))
            run = now[0] = Run(count)
            on_start()
            started = time.monotonic()
            sending = asyncio.create_task(produce(http, topic, run, rate, senders))
            deadline = started + count / 50 + 60
            while not run.done.is_set() and time.monotonic() < deadline:
                try:
                    await asyncio.wait_for(run.done.wait(), 5)
                except asyncio.TimeoutError:
                    progress(f"  sent {len(run.ledger.sent):,}, acked {run.acked:,}/{count:,}")
            elapsed = time.monotonic() - started
            await asyncio.sleep(0.2)
            on_end()
            sending.cancel()
            await asyncio.gather(sending, return_exceptions=True)
            out.append((run, elapsed))
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await http.close()
        return out

    return asyncio.run(main())


def meter(s) -> dict[str, Any]:
    cpu = s.client.info("cpu")
    return {"node": common.node_workers_cpu(s.node), "bench": common.process_cpu_seconds(),
            "redis": float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]),
            "reads": int(s.client.info("stats")["total_reads_processed"]),
            "calls": {k.removeprefix("cmdstat_"): int(v["calls"])
                      for k, v in s.client.info("commandstats").items()}}


def per_message(before: dict, after: dict, delivered: int) -> dict[str, Any]:
    n = max(delivered, 1)
    calls = {k: v - before["calls"].get(k, 0) for k, v in after["calls"].items()
             if k != "info" and v - before["calls"].get(k, 0) > 0}
    return {"node_cpu_us": round((after["node"] - before["node"]) / n * 1e6, 1),
            "redis_cpu_us": round((after["redis"] - before["redis"]) / n * 1e6, 1),
            "bench_cpu_us": round((after["bench"] - before["bench"]) / n * 1e6, 1),  # the load
            "round_trips": round((after["reads"] - before["reads"] - 3) / n, 2),  # - our INFOs
            "commands": round(sum(calls.values()) / n, 2),
            "top_commands": {k: round(v / n, 2) for k, v in
                             sorted(calls.items(), key=lambda kv: -kv[1])[:8]}}


def script_shas(client: redis.Redis, tree: Path) -> dict[str, str]:
    """{sha: script name}: every script's source as ``tree``'s loader builds it (lua_source,
    includes pasted), SCRIPT LOADed into the bench's Redis."""
    code = ("import json; from delayqueue.core.scripts import Scripts, lua_source; "
            "print(json.dumps({n: lua_source(n) for n in Scripts.NAMES}))")
    out = subprocess.run([SERVER_PYTHON, "-c", code], cwd=tree, check=True, text=True,
                         capture_output=True, env={**os.environ, "PYTHONPATH": str(tree)})
    return {client.script_load(text): name for name, text in json.loads(out.stdout).items()}


class Monitor:
    """MONITOR in a thread: commands clients send (by name; EVALSHA by script) and commands
    scripts run (lines marked ``lua``). Bounded: stops at ``stop()`` or 5M lines."""

    def __init__(self, url: str, names: dict[str, str], own_addr: str) -> None:
        self.client = redis.Redis.from_url(url)
        self.names, self.own = names, own_addr
        self.sent, self.lua = Counter(), Counter()   # by command name (EVALSHA: by script)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._monitor = self.client.monitor().__enter__()
        self._thread.start()

    def _read(self) -> None:
        connection = self._monitor.connection
        for _ in range(5_000_000):
            line = connection.read_response()
            if self._stop.is_set():
                return
            head, _, command = line.decode(errors="replace").partition("] ")
            parts = command.split('"', 4)
            if len(parts) < 2:
                continue
            name, client = parts[1].lower(), head.split(" ", 2)[-1]
            if client == "lua":
                self.lua[name] += 1
            elif client != self.own:
                if name == "evalsha" and len(parts) > 3:
                    name = "evalsha " + self.names.get(parts[3], parts[3][:8])
                self.sent[name] += 1

    def stop(self, poke: redis.Redis) -> None:
        self._stop.set()
        poke.ping()                # a line for the reader to wake on
        self._thread.join(10)
        self._monitor.__exit__()
        self.client.close()


def run_mode(s, mode: str, args, names: dict[str, str], own: str) -> dict[str, Any]:
    """Warm-up (300), the CPU window, the MONITOR window; the mode's figures."""
    paced = mode == "paced"
    rate = args.rate if paced else 0.0   # 0: as fast as the senders go
    count = int(args.rate * args.duration) if paced else args.messages
    m_count = min(count, int(args.rate * args.monitor_seconds) if paced
                  else args.monitor_messages)
    meters: list[dict] = []
    box: list[Monitor] = []
    (_, _), (run, took), (m_run, _) = drive(s.base, f"single-{mode}", [
        ("warm-up", 300, 0.0, lambda: None, lambda: None),
        ("CPU window", count, rate, lambda: meters.append(meter(s)),
         lambda: meters.append(meter(s))),
        ("MONITOR window", m_count, rate,
         lambda: box.append(Monitor(s.redis.url, names, own)), lambda: box[0].stop(s.client)),
    ], senders=4 if paced else args.senders, consumers=args.consumers, poll_ms=args.poll_ms)
    f = run.ledger.figures()
    n = max(f["delivered"], 1)
    f.update(per_message(meters[0], meters[1], n))
    f.update({"messages_per_s": round(n / took, 1), "seconds": round(took, 2),
              "node_cores_busy": round(f["node_cpu_us"] * n / 1e6 / took, 2),
              "http_requests": round(sum(v for k, v in run.requests.items()
                                         if k != "emptyAnswers") / n, 2),
              "requests": run.requests, "send_lag_ms": summary(run.send_lag)})
    f["kept_pace"] = not paced or f["messages_per_s"] >= 0.9 * rate
    if not f["kept_pace"]:
        progress(f"warning: paced at {rate:g}/s, delivered {f['messages_per_s']}/s: the node "
                 "(or the machine) did not keep up, so this is not a paced figure")
    mon, m_n = box[0], max(len({d[0] for d in m_run.ledger.deliveries}), 1)
    pulls = mon.sent.get("evalsha pull", 0)
    if not pulls:
        progress("warning: no EVALSHA of pull.lua's SHA seen: did the loader change?")
    f.update({"monitor_messages": m_n,
              "client_commands": round(sum(mon.sent.values()) / m_n, 2),
              "client_commands_by_name": {k: round(v / m_n, 2) for k, v in
                                          sorted(mon.sent.items(), key=lambda kv: -kv[1])},
              "lua_commands": round(sum(mon.lua.values()) / m_n, 2),
              "pulls": round(pulls / m_n, 2),
              "empty_pulls": round(max(pulls - m_n, 0) / m_n, 2),
              "monitor_lost": m_run.ledger.figures()["lost"]})
    return f


def run_tree(tree: Path, args, floor_us: float) -> dict[str, Any]:
    """One stack running ``tree``'s node (its directory and PYTHONPATH), every mode."""
    wrapper = () if tree == REPO else ("env", "-C", str(tree), f"PYTHONPATH={tree}")
    out: dict[str, Any] = {}
    with stack(workers=args.workers, wrapper=wrapper) as s:
        names, own = script_shas(s.client, tree), s.client.client_info()["addr"]
        for mode in args.modes:
            if out:   # the last mode's polls, cancelled, are held until they time out
                time.sleep(args.poll_ms / 1000.0 + 1)
            f = out[mode] = run_mode(s, mode, args, names, own)
            f.update({"floor_flask_cpu_us": floor_us,
                      "node_cpu_ratio_to_floor": round(f["node_cpu_us"] / floor_us, 2)})
    return out


def show(label: str, mode: str, f: dict[str, Any]) -> None:
    lag, slag = f["lag_ms"], f["send_lag_ms"]
    common.print_table(f"{label}: {mode} ({f['delivered']:,} delivered, "
                       f"{f['messages_per_s']:,} msg/s, node {f['node_cores_busy']} cores"
                       + ("" if f["kept_pace"] else ", DID NOT KEEP PACE") + ")", [
        ("node CPU per message (us, all workers)", f["node_cpu_us"]),
        ("  / the floor request (flask, same run)", f"{f['node_cpu_ratio_to_floor']} (floor "
         f"{f['floor_flask_cpu_us']} us; bar <= {BARS[mode]})"),
        ("Redis CPU / the load generator's CPU per message (us)",
         f"{f['redis_cpu_us']} / {f['bench_cpu_us']}"),
        ("HTTP requests per message", f"{f['http_requests']} {f['requests']}"),
        ("Redis commands per message (commandstats)", f"{f['commands']}: " + ", ".join(
            f"{k} {v}" for k, v in f["top_commands"].items())),
        ("Redis round trips per message (read events)", f["round_trips"]),
        ("client commands per message (MONITOR)", f"{f['client_commands']}: " + ", ".join(
            f"{k} {v}" for k, v in list(f["client_commands_by_name"].items())[:8])),
        ("commands inside scripts per message (MONITOR)", f["lua_commands"]),
        ("pull script calls per message", f["pulls"]),
        ("empty pulls per message", f"{f['empty_pulls']}"
         + (" (bar <= 0.1)" if mode == "paced" else "")),
        ("lag send -> answer p50 / p99 (ms)", f"{slag.get('p50')} / {slag.get('p99')}"),
        ("lag triggerTime -> answer p50 / p99 (ms)", f"{lag.get('p50')} / {lag.get('p99')}"),
        ("early / duplicates / lost / errors",
         f"{f['early']} / {f['duplicates']} / {f['lost']} / {f['errors']}"),
    ])


def measure_floor(args) -> float:
    """http_floor.py's flask figure: its stand-in app under the node's gunicorn settings,
    driven by send_wrk.py's wrk load (its script; http_floor's connections)."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua") as script:
        script.write(SCRIPT + DONE)
        script.flush()
        progress(f"the HTTP floor: flask stand-in, wrk -c64 -d{args.floor_seconds}s")
        return http_floor.measure("flask_app", lambda url, warm_up=False: _wrk(
            "wrk", Path(script.name), url, 1, 8 if warm_up else 64,
            2 if warm_up else args.floor_seconds), workers=args.workers)["cpu_us_per_request"]


def median(runs: list[dict]) -> dict[str, float]:
    """The headline figures' medians over the runs that kept pace (over all, if none did)."""
    kept = [f for f in runs if f["kept_pace"]] or runs
    return {"runs": len(kept), **{k: statistics.median(f[k] for f in kept) for k in (
        "node_cpu_us", "node_cpu_ratio_to_floor", "redis_cpu_us", "http_requests", "commands",
        "round_trips", "client_commands", "pulls", "empty_pulls")}}


def main(argv: list[str] | None = None) -> int:
    from delayqueue.settings.config import Settings
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", default="full,paced", help="full, paced or both")
    parser.add_argument("--messages", type=int, default=5000, help="full: messages")
    parser.add_argument("--rate", type=float, default=200.0, help="paced: messages a second")
    parser.add_argument("--duration", type=float, default=20.0, help="paced: seconds")
    parser.add_argument("--consumers", type=int, default=8)
    parser.add_argument("--senders", type=int, default=8, help="full: concurrent sends")
    parser.add_argument("--poll-ms", type=int, default=5000, help="longPollingTimeoutMillis")
    parser.add_argument("--monitor-messages", type=int, default=1000, help="full")
    parser.add_argument("--monitor-seconds", type=float, default=5.0, help="paced")
    parser.add_argument("--floor-seconds", type=int, default=10)
    parser.add_argument("--workers", type=int, default=Settings().workers)
    parser.add_argument("--tree", action="append", type=Path, default=[],
                        help="source tree the node runs (PYTHONPATH); repeat to compare")
    parser.add_argument("--rounds", type=int, default=1, help="alternations of the trees")
    parser.add_argument("--quick", action="store_true", help="1,000 messages; 5 s paced")
    args = parser.parse_args(argv)
    if args.quick:
        args.messages, args.duration, args.floor_seconds = 1000, 5.0, 4
        args.monitor_messages, args.monitor_seconds = 300, 2.0
    args.modes = [m.strip() for m in args.mode.split(",") if m.strip()]
    if not args.modes or set(args.modes) - set(BARS):
        parser.error("--mode: full, paced or full,paced")
    if shutil.which("wrk") is None:
        raise SystemExit("wrk not found: `apt-get install wrk` (make bench-deps installs it)")
    trees = [t.resolve() for t in args.tree] or [REPO]
    runs: list[tuple[Path, dict]] = []
    for rnd in range(max(1, args.rounds)):
        floor_us = measure_floor(args)
        for tree in trees:
            progress(f"round {rnd + 1}: {tree}")
            runs.append((tree, run_tree(tree, args, floor_us)))
            for mode, f in runs[-1][1].items():
                show(f"{tree} (round {rnd + 1})", mode, f)
    figures: dict[str, Any] = dict(runs[0][1])   # the first tree's first round: run_all's
    if len(runs) > 1:   # each tree's runs, and the median of the headline figures
        figures["trees"] = {str(tree): {"runs": [r for t, r in runs if t == tree], "median": {
            mode: median([r[mode] for t, r in runs if t == tree]) for mode in args.modes}}
            for tree in trees}
        common.print_table(f"medians over {args.rounds} round(s)", [
            (f"{tree} {mode}", " ".join(f"{k}={v:g}" for k, v in m.items()))
            for tree, d in figures["trees"].items() for mode, m in d["median"].items()])
    common.write_result("single", figures, {k: [str(x) for x in v] if isinstance(v, list) else v
                                     for k, v in vars(args).items()})
    bad = any(f[k] for _, r in runs for f in r.values()
              for k in ("lost", "duplicates", "early", "errors", "monitor_lost"))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
