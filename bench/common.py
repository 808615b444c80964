"""Shared pieces of the benchmark suite: the system under test, figures, results.

Every workload starts its own ``redis-server`` on a free port and, unless it measures the
core without HTTP, one delayqueue node exactly as deployed (gunicorn, ``gunicorn_conf``,
gevent workers). Figures are printed as a table and written as JSON under
``bench/results/`` with the command, the commit and the machine, so ``docs/benchmarks.md``
can quote them.

Clocks: the server stamps ``triggerTime`` from Redis ``TIME``; the load generator stamps
receipts with ``time.time()``. Both run on this machine, so they read the same clock;
"lag" is always receipt time minus ``triggerTime`` (negative would be early).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

import redis

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from support.node import ServerProcess  # noqa: E402
from support.redis_server import RedisServer  # noqa: E402

RESULTS = REPO / "bench" / "results"
SERVER_PYTHON = str(REPO / ".venv" / "bin" / "python")
API = "/camellia/delayQueue/"


def now_ms() -> float:
    return time.time() * 1000.0


def process_cpu_seconds() -> float:
    """User + system CPU this process has used so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# -- figures ---------------------------------------------------------------------------------

def percentile(ordered: Sequence[float], p: float) -> float:
    """Nearest-rank percentile of an already sorted sequence (nan when empty)."""
    if not ordered:
        return float("nan")
    rank = max(1, math.ceil(p / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def summary(values: Sequence[float]) -> dict[str, float]:
    """count, mean, p50/p90/p99/p99.9, min and max of ``values`` (ms)."""
    ordered = sorted(values)
    if not ordered:
        return {"count": 0}
    return {
        "count": len(ordered),
        "mean": round(sum(ordered) / len(ordered), 2),
        "min": round(ordered[0], 2),
        "p50": round(percentile(ordered, 50), 2),
        "p90": round(percentile(ordered, 90), 2),
        "p99": round(percentile(ordered, 99), 2),
        "p99.9": round(percentile(ordered, 99.9), 2),
        "max": round(ordered[-1], 2),
    }


def print_table(title: str, rows: Sequence[tuple[str, Any]]) -> None:
    width = max((len(name) for name, _ in rows), default=10)
    print(f"\n== {title}")
    for name, value in rows:
        if isinstance(value, float):
            value = f"{value:,.2f}"
        elif isinstance(value, int):
            value = f"{value:,}"
        print(f"  {name:<{width}}  {value}")
    sys.stdout.flush()


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- provenance ------------------------------------------------------------------------------

def commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, text=True,
                              capture_output=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=REPO, text=True, capture_output=True).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def machine() -> dict[str, Any]:
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {"cpus": os.cpu_count(), "cpu": model, "python": platform.python_version(),
            "kernel": platform.release()}


def write_result(name: str, figures: dict[str, Any], settings: dict[str, Any]) -> Path:
    """Write one run's figures as JSON; returns the path."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = RESULTS / f"{name}-{stamp}.json"
    document = {
        "workload": name,
        "command": " ".join(shlex.quote(a) for a in [Path(sys.executable).name, *sys.argv]),
        "commit": commit(),
        "machine": machine(),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "settings": settings,
        "figures": figures,
    }
    path.write_text(json.dumps(document, indent=2, default=str) + "\n")
    print(f"\nresult: {path.relative_to(REPO)}")
    return path


# -- Redis work: CPU from /proc, commands from INFO commandstats ------------------------------

CLK_TCK = os.sysconf("SC_CLK_TCK")


class RedisMeter:
    """The Redis work of one redis-server over a window, for any system that uses it (ours
    or a peer): the server's CPU (user + system, /proc/<pid>/stat of the pid INFO names: a
    loopback server on this machine) and its commands (INFO commandstats, which counts the
    commands scripts run as well as the ones clients send; our own INFO calls left out).

        meter = RedisMeter(url); before = meter.read(); ...; meter.per_message(before, n)
    """

    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url, decode_responses=True)
        self.pid = int(self.client.info("server")["process_id"])

    def cpu_seconds(self) -> float:
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return float("nan")
        return (int(fields[11]) + int(fields[12])) / CLK_TCK    # utime, stime: stat(5) 14, 15

    def read(self) -> dict[str, Any]:
        calls = {name.removeprefix("cmdstat_"): int(value["calls"])
                 for name, value in self.client.info("commandstats").items()}
        return {"cpu": self.cpu_seconds(), "calls": calls}

    def per_message(self, before: dict[str, Any], messages: int,
                    after: dict[str, Any] | None = None) -> dict[str, Any]:
        """Redis CPU µs, commands, and the commands by name, per message, since ``before``."""
        after = after or self.read()
        n = max(messages, 1)
        calls = {name: count - before["calls"].get(name, 0)
                 for name, count in after["calls"].items() if name != "info"}
        calls = {name: count for name, count in calls.items() if count > 0}
        return {"redis_cpu_us_per_message": round((after["cpu"] - before["cpu"]) / n * 1e6, 1),
                "redis_commands_per_message": round(sum(calls.values()) / n, 2),
                "redis_commands_by_name": {name: round(count / n, 3) for name, count in
                                           sorted(calls.items(), key=lambda kv: -kv[1])}}

    def close(self) -> None:
        self.client.close()


# -- the system under test -------------------------------------------------------------------

@dataclass
class Stack:
    """A redis-server and (optionally) one node on it, started for one workload."""

    redis: RedisServer
    node: ServerProcess | None
    client: redis.Redis
    workdir: Path
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def base(self) -> str:
        assert self.node is not None
        return self.node.url

    def redis_version(self) -> str:
        return self.client.info("server")["redis_version"]

    def reset_stats(self) -> None:
        self.client.config_resetstat()
        self.client.slowlog_reset()

    def commandstats(self) -> dict[str, dict[str, float]]:
        """INFO commandstats: {command: {calls, usec, usec_per_call}} since the last reset."""
        stats = self.client.info("commandstats")
        return {name.removeprefix("cmdstat_"): {k: v for k, v in value.items()
                                               if k in ("calls", "usec", "usec_per_call")}
                for name, value in stats.items()}

    def slowest_commands(self, count: int = 5) -> list[dict[str, Any]]:
        """The slowest entries of SLOWLOG (commands over 1 ms since the reset), slowest first."""
        entries = self.client.slowlog_get(1024)
        entries.sort(key=lambda e: e["duration"], reverse=True)
        return [{"ms": round(e["duration"] / 1000.0, 3),
                 "command": (e["command"].decode(errors="replace")
                             if isinstance(e["command"], bytes) else str(e["command"]))[:80]}
                for e in entries[:count]]


@contextlib.contextmanager
def stack(*, workers: int = 2, with_node: bool = True, settings: dict[str, Any] | None = None,
          slowlog: bool = False, wrapper: Sequence[str] = ()) -> Iterator[Stack]:
    """Start redis-server (and a node), yield them, stop both whatever happens.

    ``slowlog=True`` logs every Redis command slower than 1 ms (1024 entries kept), for
    workloads that report the slowest command. The node runs on the project's own venv
    (``.venv``, what ``make install`` builds, the deployed dependency set), not on the
    benchmark venv with its peers and load-generator libraries. ``wrapper`` prefixes the
    node's command (single_path.py's ``--tree``: ``env -C TREE PYTHONPATH=TREE``).
    """
    with tempfile.TemporaryDirectory(prefix="dq-bench-") as tmp:
        workdir = Path(tmp)
        (workdir / "redis").mkdir()
        server = RedisServer(workdir / "redis").start()
        client = redis.Redis.from_url(server.url, decode_responses=True)
        node = None
        try:
            if slowlog:
                client.config_set("slowlog-log-slower-than", 1000)
                client.config_set("slowlog-max-len", 1024)
            if with_node:
                node = ServerProcess(server.url, workers=workers, settings=settings or {},
                                     log_path=workdir / "node.log", python=SERVER_PYTHON,
                                     wrapper=wrapper).start()
            progress(f"redis {server.url}" + (f", node {node.url} ({workers} workers)"
                                              if node else ""))
            yield Stack(server, node, client, workdir)
        finally:
            if node is not None:
                node.stop()
                log = (workdir / "node.log").read_text(errors="replace")
                errors = [line for line in log.splitlines() if "Traceback" in line
                          or " ERROR " in line or "[ERROR]" in line]
                if errors:
                    progress(f"node log had {len(errors)} error lines, first: {errors[0]}")
            client.close()
            server.stop()


def start_profile(node: ServerProcess, seconds: float, out: Path) -> subprocess.Popen:
    """py-spy record of the node's first worker for ``seconds`` into ``out`` (raw stacks,
    one line per stack: ``frames count``); ``folded()`` below reads it back."""
    py_spy = Path(sys.executable).parent / "py-spy"
    worker = node.workers()[0].pid
    return subprocess.Popen([str(py_spy), "record", "-p", str(worker), "-d", str(int(seconds)),
                             "-r", "250", "-f", "raw", "-o", str(out), "--nonblocking"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def profile_summary(path: Path, top: int = 25) -> list[tuple[str, float]]:
    """Inclusive share (%) of the ``top`` functions of a raw py-spy profile."""
    inclusive: dict[str, int] = {}
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack_text, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue  # a stack py-spy could not render whole
        n = int(count)
        total += n
        seen = set()
        for frame in stack_text.split(";"):
            name = frame.split(" (")[0]
            if name not in seen:
                seen.add(name)
                inclusive[name] = inclusive.get(name, 0) + n
    ranked = sorted(inclusive.items(), key=lambda kv: kv[1], reverse=True)[:top]
    return [(name, round(100.0 * n / max(total, 1), 1)) for name, n in ranked]


def node_workers_cpu(node: ServerProcess, each: bool = False) -> float | list[float]:
    """User+system CPU seconds of the node's workers so far: summed, or one per worker."""
    per_worker = []
    for worker in node.workers():
        with contextlib.suppress(Exception):
            times = worker.cpu_times()
            per_worker.append(times.user + times.system)
    return per_worker if each else sum(per_worker)
