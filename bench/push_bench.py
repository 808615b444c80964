"""Push delivery: how fast one node POSTs a backlog, and how late a due message arrives.

Bars (the push work, issue 26): one node pushes at least 1,500 deliveries a second to a
receiver that answers at once; at 200 deliveries a second coming due, the p99 of the lag
(receiver's arrival time - the message's triggerTime) is at most 20 ms.

The system: a fresh redis-server and one node as deployed (gunicorn, gevent workers,
``--workers`` of them, push-allowed-networks 127.0.0.0/8) started by bench/common.py's
``stack``; the receiver is a separate process (``Receiver``): a bare asyncio HTTP/1.1
server that reads each request (head, Content-Length body), stamps its arrival with
``time.time()`` and answers ``204 No Content`` on the same keep-alive connection at once. It
parses nothing else while the run goes on (the bodies are read after), so it costs the two
shared cores as little as a receiver can. The bench process itself sends the messages and
sets the push settings in-process (``Runtime``: the core the HTTP views call), on the
topic's default subscription (no fan-out: the sends cost only themselves), then only reads
Redis (ZCARDs every POLL_S) until the node is done.

1. Backlog: ``--backlog`` messages due now on a topic whose default subscription has no
   pushUrl yet; then pushUrl and pushConcurrency ``--concurrency`` are set (the node hears
   of it by the control message). Pushes/s = backlog / (the first arrival -> the moment
   the subscription's waiting, ready and ack queues are all empty: the last 2xx acked).
   A warm-up topic (``--warmup`` messages pushed and acked first) has the node's pools,
   threads and the receiver's connections made before. CPU per push from /proc (the
   node's master and workers: utime + stime), Redis's (INFO cpu) and the receiver's, and
   Redis commands per push (INFO commandstats) say where the time goes.
2. Lag: ``--rate`` messages a second come due for ``--seconds`` s: sent beforehand with
   triggerTime T0 + i / rate (T0 a few seconds ahead, so no send runs while they come due)
   to a topic already pushed. Lag = arrival - triggerTime (the body's delayMsg.triggerTime:
   the server stamps it from Redis TIME, the receiver from time.time(), one machine, one
   clock); p50/p90/p99/p99.9/max.

Both check, and fail on, what must hold whatever the load: every message sent arrived (none
lost) and was acked (queues empty, none dead), none arrived before its triggerTime. A
message POSTed twice (its ack timeout passed first) is counted, not an error (at least once).

    PYTHONPATH=. .venv/bin/python bench/push_bench.py           # about 1.5 minutes
    PYTHONPATH=. .venv/bin/python bench/push_bench.py --quick   # about 40 s
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import multiprocessing
import os
import resource
import time
from pathlib import Path
from typing import Any

import orjson

from delayqueue.background.runtime import Runtime
from delayqueue.core.queue import DelayQueue
from delayqueue.core.requests import SendRequest
from delayqueue.settings.config import Settings

from common import Stack, print_table, progress, stack, summary, write_result

BAR_RATE = 1500          # pushes a second, one node, answered at once
BAR_P99_MS = 20.0        # lag p99 at 200 pushes a second
NETWORKS = "127.0.0.0/8"
POLL_S = 0.01            # how often the bench reads the queues' sizes
SEND_CHUNK = 500         # messages a sendMsgBatch round trip
CLK_TCK = os.sysconf("SC_CLK_TCK")
RESPONSE = b"HTTP/1.1 204 No Content\r\nServer: push-bench\r\n\r\n"

DEFAULTS: dict[str, Any] = {"backlog": 20_000, "concurrency": 64, "warmup": 1000,
                            "rate": 200, "seconds": 30, "workers": 2, "body_bytes": 64}
HELP = {"backlog": "1: ready messages pushed", "concurrency": "pushConcurrency of both runs",
        "warmup": "1: messages pushed before (pools, connections)",
        "rate": "2: messages coming due a second", "seconds": "2: for how long",
        "workers": "the node's gunicorn workers", "body_bytes": "body size"}
QUICK: dict[str, Any] = {"backlog": 5000, "warmup": 500, "seconds": 10}


# -- the receiver (its own process) -----------------------------------------------------------

class _Connection(asyncio.Protocol):
    """HTTP/1.1 keep-alive, requests with a Content-Length (what urllib3 sends a bytes body
    with): each complete request is stamped and answered 204 at once."""

    def __init__(self, records: list[tuple[float, bytes]]) -> None:
        self.records = records
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        while True:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(buffer[:end]).lower()
            at = head.find(b"\r\ncontent-length:")
            length = 0
            if at >= 0:
                stop = head.find(b"\r\n", at + 2)
                length = int(head[at + 17:stop if stop >= 0 else len(head)])
            total = end + 4 + length
            if len(buffer) < total:
                return
            self.records.append((time.time() * 1000.0, bytes(buffer[end + 4:total])))
            del buffer[:total]
            assert self.transport is not None
            self.transport.write(RESPONSE)


def _receiver_main(conn: Any) -> None:
    """Serve on a free loopback port (sent back first), answer commands on ``conn``:
    "count" -> requests so far; "take" -> [(arrival ms, topic, msgId, triggerTime)] of
    every request so far, emptied; "cpu" -> this process's CPU seconds; "stop"."""
    records: list[tuple[float, bytes]] = []
    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(loop.create_server(lambda: _Connection(records),
                                                        "127.0.0.1", 0, backlog=1024))
    conn.send(server.sockets[0].getsockname()[1])
    done = loop.create_future()

    def command() -> None:
        try:
            what = conn.recv()
        except EOFError:
            what = "stop"
        if what == "count":
            conn.send(len(records))
        elif what == "take":
            taken = records[:]
            del records[:len(taken)]
            rows = []
            for arrival, body in taken:
                message = orjson.loads(body)["delayMsg"]
                rows.append((arrival, message["topic"], message["msgId"],
                             message["triggerTime"]))
            conn.send(rows)
        elif what == "cpu":
            usage = resource.getrusage(resource.RUSAGE_SELF)
            conn.send(usage.ru_utime + usage.ru_stime)
        elif not done.done():
            done.set_result(None)

    loop.add_reader(conn.fileno(), command)
    loop.run_until_complete(done)
    server.close()
    conn.send("stopped")


class Receiver:
    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_receiver_main, args=(child,), daemon=True,
                                       name="push-bench-receiver")
        self.process.start()
        if not self.conn.poll(30):
            raise RuntimeError("the receiver did not start")
        self.port = self.conn.recv()
        self.rows: list[tuple[float, str, str, int]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/push"

    def ask(self, what: str) -> Any:
        self.conn.send(what)
        if not self.conn.poll(60):
            raise RuntimeError(f"the receiver did not answer {what!r}")
        return self.conn.recv()

    def count(self) -> int:
        return self.ask("count")

    def take(self) -> list[tuple[float, str, str, int]]:
        return self.ask("take")

    def cpu(self) -> float:
        return self.ask("cpu")

    def stop(self) -> None:
        try:
            self.ask("stop")
        except (OSError, RuntimeError, EOFError):
            pass
        self.process.join(5)
        if self.process.is_alive():
            self.process.kill()


# -- measuring --------------------------------------------------------------------------------

def proc_cpu(pid: int) -> tuple[float, float]:
    """(utime, stime) of one process, from /proc/<pid>/stat (seconds)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0, 0.0
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK   # fields 14, 15 of stat(5)


@dataclasses.dataclass
class Meter:
    """CPU seconds of the node (master + each worker), Redis, the receiver and the bench;
    Redis's commands; the wall clock. ``since(earlier)`` gives the differences."""

    wall: float
    master: int
    node: dict[int, tuple[float, float]]
    redis: float
    receiver: float
    bench: float
    commands: dict[str, int]

    @classmethod
    def read(cls, s: Stack, receiver: Receiver) -> "Meter":
        assert s.node is not None
        pids = [s.node.process.pid, *(w.pid for w in s.node.workers())]
        cpu = s.client.info("cpu")
        stats = s.client.info("commandstats")
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return cls(time.monotonic(), pids[0], {pid: proc_cpu(pid) for pid in pids},
                   float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]), receiver.cpu(),
                   usage.ru_utime + usage.ru_stime,
                   {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()})

    def since(self, earlier: "Meter", pushes: int) -> dict[str, Any]:
        """CPU per push (µs) of each party, and Redis commands per push."""
        user = sum(u - earlier.node.get(pid, (0.0, 0.0))[0]
                   for pid, (u, _) in self.node.items())
        node = {pid: u + k - sum(earlier.node.get(pid, (0.0, 0.0)))
                for pid, (u, k) in self.node.items()}
        per = max(pushes, 1)
        commands = {k: round((v - earlier.commands.get(k, 0)) / per, 2)
                    for k, v in self.commands.items()
                    if v - earlier.commands.get(k, 0) > 0}
        return {"node_cpu_us_per_push": round(sum(node.values()) / per * 1e6, 1),
                "node_user_share": round(user / max(sum(node.values()), 1e-9), 2),
                "node_workers_cpu_us_per_push": [round(v / per * 1e6, 1)
                                                 for pid, v in sorted(node.items())
                                                 if pid != self.master],
                "node_cpu_share_of_one_core": round(sum(node.values())
                                                    / max(self.wall - earlier.wall, 1e-9), 2),
                "redis_cpu_us_per_push": round((self.redis - earlier.redis) / per * 1e6, 1),
                "receiver_cpu_us_per_push": round((self.receiver - earlier.receiver) / per
                                                  * 1e6, 1),
                "bench_cpu_us_per_push": round((self.bench - earlier.bench) / per * 1e6, 1),
                "redis_commands_per_push": dict(sorted(commands.items(),
                                                       key=lambda kv: -kv[1]))}


def msg_ids(prefix: str, count: int) -> list[str]:
    return [f"{prefix}{i:0{32 - len(prefix)}d}" for i in range(count)]


def send(q: DelayQueue, topic: str, ids: list[str], body: str,
         trigger_ms: list[int] | None = None) -> None:
    for start in range(0, len(ids), SEND_CHUNK):
        chunk = range(start, min(start + SEND_CHUNK, len(ids)))
        answers = q.send_batch(topic, [
            SendRequest(body, ids[i], delay_ms=None if trigger_ms else 0,
                        trigger_time_ms=trigger_ms[i] if trigger_ms else None)
            for i in chunk])
        for answer in answers:
            if not hasattr(answer, "duplicate") or answer.duplicate:
                raise RuntimeError(f"a send was not accepted: {answer!r}")


def left(q: DelayQueue, topic: str) -> tuple[int, int]:
    """(waiting + ready + ack, dead) of the topic's default subscription."""
    k = q.context_keys(topic)
    pipe = q.client.pipeline(transaction=False)
    pipe.zcard(k.waiting).zcard(k.ready).zcard(k.ack).zcard(k.dead)
    waiting, ready, ack, dead = pipe.execute()
    return waiting + ready + ack, dead


def push(rt: Runtime, topic: str, url: str, concurrency: int) -> None:
    rt.subscriptions.set_config(topic, None, {"pushUrl": url,
                                              "pushConcurrency": str(concurrency)})


def wait_done(rt: Runtime, receiver: Receiver, topic: str, expected: int,
              timeout_s: float) -> tuple[float, list[tuple[float, str, str, int]]]:
    """Poll until the receiver has ``expected`` requests more and the subscription's queues
    are empty; (time.time() ms it was seen done, the rows received)."""
    deadline = time.monotonic() + timeout_s
    rows: list[tuple[float, str, str, int]] = []
    polls = 0
    while True:
        pending, dead = left(rt.queue, topic)
        now = time.time() * 1000.0
        # (the receiver is asked only once the queues are empty: polling costs the node's
        # cores nothing but what Redis spends on four ZCARDs)
        if pending == 0 and receiver.count() + len(rows) >= expected:
            rows.extend(receiver.take())
            return now, rows
        if dead:
            raise RuntimeError(f"{topic}: {dead} messages went to the dead letter queue")
        if time.monotonic() > deadline:
            rows.extend(receiver.take())
            raise RuntimeError(f"{topic}: not done in {timeout_s:.0f} s: {pending} left in "
                               f"the queues, {len(rows)} of {expected} received")
        polls += 1
        if polls % 100 == 0:   # once a second: the receiver's memory and last take stay small
            rows.extend(receiver.take())
        time.sleep(POLL_S)


def check(topic: str, sent: list[str], rows: list[tuple[float, str, str, int]],
          trigger: dict[str, int] | None = None) -> dict[str, Any]:
    """None lost, none early, nothing from another topic; duplicates counted."""
    mine = [r for r in rows if r[1] == topic]
    if len(mine) != len(rows):
        raise RuntimeError(f"{topic}: {len(rows) - len(mine)} POSTs of another topic")
    got = {r[2] for r in mine}
    lost = set(sent) - got
    if lost:
        raise RuntimeError(f"{topic}: {len(lost)} of {len(sent)} never arrived, e.g. "
                           f"{sorted(lost)[:3]}")
    if got - set(sent):
        raise RuntimeError(f"{topic}: POSTs of messages never sent: {sorted(got - set(sent))[:3]}")
    early = [r for r in mine if r[0] < r[3]]
    if early:
        raise RuntimeError(f"{topic}: {len(early)} arrived before their triggerTime, e.g. "
                           f"{early[0][2]} {early[0][3] - early[0][0]:.1f} ms early")
    if trigger is not None:
        wrong = [r for r in mine if r[3] != trigger[r[2]]]
        if wrong:
            raise RuntimeError(f"{topic}: {len(wrong)} POSTs with another triggerTime")
    return {"sent": len(sent), "posts": len(mine), "duplicates": len(mine) - len(got),
            "lost": 0, "early": 0}


# -- the runs ---------------------------------------------------------------------------------

def warm_up(rt: Runtime, receiver: Receiver, p: dict[str, Any], body: str) -> None:
    topic = "push-warm"
    push(rt, topic, receiver.url, p["concurrency"])
    ids = msg_ids("w-", p["warmup"])
    send(rt.queue, topic, ids, body)
    _, rows = wait_done(rt, receiver, topic, len(ids), 60 + len(ids) / 50)
    check(topic, ids, rows)


def run_backlog(s: Stack, rt: Runtime, receiver: Receiver, p: dict[str, Any],
                body: str) -> dict[str, Any]:
    topic = "push-backlog"
    n = p["backlog"]
    ids = msg_ids("b-", n)
    send(rt.queue, topic, ids, body)
    progress(f"1: {n:,} ready; setting pushUrl (pushConcurrency {p['concurrency']})")
    before = Meter.read(s, receiver)
    set_at = time.time() * 1000.0
    push(rt, topic, receiver.url, p["concurrency"])
    done_ms, rows = wait_done(rt, receiver, topic, n, 60 + n / 50)
    after = Meter.read(s, receiver)
    figures = check(topic, ids, rows)
    arrivals = sorted(r[0] for r in rows)
    first, last = arrivals[0], arrivals[-1]
    took_s = (done_ms - first) / 1000.0
    figures.update({
        "pushes_per_s": round(n / took_s),
        "arrivals_per_s": round((n - 1) / max((last - first) / 1000.0, 1e-9)),
        "first_arrival_after_set_ms": round(first - set_at, 1),
        "first_to_last_acked_s": round(took_s, 3),
        "bar_met": n / took_s >= BAR_RATE,
        **after.since(before, len(rows)),
    })
    return figures


def run_lag(s: Stack, rt: Runtime, receiver: Receiver, p: dict[str, Any],
            body: str) -> dict[str, Any]:
    topic = "push-lag"
    n = p["rate"] * p["seconds"]
    push(rt, topic, receiver.url, p["concurrency"])
    ids = msg_ids("l-", n)
    start = rt.clock.now_ms() + 3000 + n // 20          # sends done well before
    trigger = [start + (i * 1000) // p["rate"] for i in range(n)]
    send(rt.queue, topic, ids, body, trigger)
    lead_ms = start - rt.clock.now_ms()
    if lead_ms < 500:
        raise RuntimeError(f"the sends took too long: {lead_ms} ms before the first was due")
    progress(f"2: {n:,} sent, coming due {p['rate']}/s for {p['seconds']} s from "
             f"{lead_ms / 1000:.1f} s ahead")
    time.sleep(max(0.0, (start - rt.clock.now_ms()) / 1000.0 - 0.2))
    before = Meter.read(s, receiver)
    _, rows = wait_done(rt, receiver, topic, n, p["seconds"] + 60)
    after = Meter.read(s, receiver)
    figures = check(topic, ids, rows, dict(zip(ids, trigger)))
    first_post: dict[str, float] = {}
    for arrival, _, msg_id, _ in sorted(rows):
        first_post.setdefault(msg_id, arrival)
    lag = summary([first_post[m] - t for m, t in zip(ids, trigger)])
    # The same, a second at a time: is the lag steady, or does it climb?
    by_second: dict[int, list[float]] = {}
    for m, t in zip(ids, trigger):
        by_second.setdefault((t - start) // 1000, []).append(first_post[m] - t)
    worst_second = max(by_second.items(), key=lambda kv: max(kv[1]))
    figures.update({"messages": n, "lag_ms": lag, "bar_met": lag["p99"] <= BAR_P99_MS,
                    "p99_ms_by_second": [summary(v)["p99"] for _, v in
                                         sorted(by_second.items())],
                    "worst_second": {"second": worst_second[0],
                                     "max_ms": round(max(worst_second[1]), 2)},
                    **after.since(before, len(rows))})
    return figures


def print_figures(f: dict[str, Any], p: dict[str, Any]) -> None:
    def cpu_rows(r: dict[str, Any]) -> list[tuple[str, Any]]:
        commands = ", ".join(f"{k} {v}" for k, v in list(r["redis_commands_per_push"].items()))
        return [("node CPU per push (master + workers, /proc)",
                 f"{r['node_cpu_us_per_push']:,} µs (workers "
                 f"{', '.join(f'{v:,}' for v in r['node_workers_cpu_us_per_push'])}; "
                 f"{r['node_user_share']:.0%} user, the rest the kernel's)"),
                ("node CPU, in cores busy", r["node_cpu_share_of_one_core"]),
                ("Redis CPU per push", f"{r['redis_cpu_us_per_push']:,} µs"),
                ("receiver CPU per push", f"{r['receiver_cpu_us_per_push']:,} µs"),
                ("bench (polling) CPU per push", f"{r['bench_cpu_us_per_push']:,} µs"),
                ("Redis commands per push", commands)]
    if "backlog" in f:
        print_backlog(f["backlog"], p, cpu_rows)
    if "lag" in f:
        print_lag(f["lag"], p, cpu_rows)
    load = f["load_average"]
    print_table("load average (1, 5, 15 min)", [
        ("before", ", ".join(f"{v:.2f}" for v in load["before"])),
        ("after", ", ".join(f"{v:.2f}" for v in load["after"]))])


def print_backlog(b: dict[str, Any], p: dict[str, Any], cpu_rows: Any) -> None:
    print_table(f"1. backlog: {b['sent']:,} ready messages, pushConcurrency "
                f"{p['concurrency']}, {p['workers']} workers, 204 at once", [
        ("pushes/s (first arrival -> last acked)", b["pushes_per_s"]),
        ("arrivals/s (first -> last arrival)", b["arrivals_per_s"]),
        (f"bar (>= {BAR_RATE:,}/s) met", "yes" if b["bar_met"] else "NO"),
        ("first arrival after pushUrl set", f"{b['first_arrival_after_set_ms']} ms"),
        ("POSTs, duplicates, lost, early",
         f"{b['posts']:,}, {b['duplicates']}, {b['lost']}, {b['early']}"),
        *cpu_rows(b)])


def print_lag(lag: dict[str, Any], p: dict[str, Any], cpu_rows: Any) -> None:
    q = lag["lag_ms"]
    print_table(f"2. lag: {p['rate']} due a second for {p['seconds']} s "
                f"({lag['messages']:,} messages)", [
        ("lag p50 / p90 / p99 / p99.9 / max (ms)",
         f"{q['p50']} / {q['p90']} / {q['p99']} / {q['p99.9']} / {q['max']}"),
        ("lag min / mean (ms)", f"{q['min']} / {q['mean']}"),
        (f"bar (p99 <= {BAR_P99_MS:g} ms) met", "yes" if lag["bar_met"] else "NO"),
        ("p99 each second (ms)", " ".join(f"{v:g}" for v in lag["p99_ms_by_second"])),
        ("worst second (its max)", f"{lag['worst_second']['second']} "
                                   f"({lag['worst_second']['max_ms']} ms)"),
        ("POSTs, duplicates, lost, early",
         f"{lag['posts']:,}, {lag['duplicates']}, {lag['lost']}, {lag['early']}"),
        *cpu_rows(lag)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--quick", action="store_true",
                        help="scaled down (" + ", ".join(f"--{k.replace('_', '-')} {v}"
                                                         for k, v in QUICK.items()) + ")")
    for key, value in DEFAULTS.items():
        parser.add_argument(f"--{key.replace('_', '-')}", type=int, default=None,
                            help=f"{HELP[key]} (default {value:,})")
    parser.add_argument("--only", choices=("backlog", "lag"), default=None,
                        help="run one of the two (the other's bar is not judged)")
    args = parser.parse_args(argv)
    p = {k: (getattr(args, k) if getattr(args, k) is not None
             else QUICK.get(k, v) if args.quick else v) for k, v in DEFAULTS.items()}
    limits = {"backlog": 1_000_000, "concurrency": 10_000, "warmup": 100_000, "rate": 5000,
              "seconds": 600, "workers": 16, "body_bytes": 65_536}
    for key, top in limits.items():
        if not 1 <= p[key] <= top:
            parser.error(f"--{key.replace('_', '-')} must be between 1 and {top:,}")
    body = "x" * p["body_bytes"]
    load_before = os.getloadavg()
    receiver = Receiver()
    try:
        with stack(workers=p["workers"], settings={"push-allowed-networks": NETWORKS}) as s:
            rt = Runtime(dataclasses.replace(Settings(), redis_url=s.redis.url, snapshot_dir="",
                                             push_allowed_networks=NETWORKS))
            try:
                progress(f"receiver {receiver.url}; warming up ({p['warmup']:,} pushes)")
                warm_up(rt, receiver, p, body)
                figures: dict[str, Any] = {}
                if args.only != "lag":
                    figures["backlog"] = run_backlog(s, rt, receiver, p, body)
                    progress(f"1: {figures['backlog']['pushes_per_s']:,} pushes/s")
                if args.only != "backlog":
                    figures["lag"] = run_lag(s, rt, receiver, p, body)
            finally:
                rt.client.close()
    finally:
        receiver.stop()
    figures["load_average"] = {"before": load_before, "after": os.getloadavg()}
    figures["receiver"] = "asyncio HTTP/1.1 keep-alive, 204 at once, separate process"
    print_figures(figures, p)
    write_result("push", figures, {**p, "quick": args.quick, "only": args.only})
    return 0 if all(figures[k]["bar_met"] for k in ("backlog", "lag") if k in figures) else 1


if __name__ == "__main__":
    raise SystemExit(main())
