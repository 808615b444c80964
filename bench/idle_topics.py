"""What idle topics cost Redis (issue 32): N topics, one message each due in 6 h, no traffic.

For each ``--topics`` count: a fresh redis-server and one node as deployed (gunicorn, 2 gevent
workers, default configuration: scheduler, snapshot writer on, 60 s monitoring interval);
N topics loaded through the send script (pipelined, no HTTP), registered as the node would
and with one ``sendMsg`` in the cumulative monitor hash each (as a real send leaves); a
warm-up (a few /metrics scrapes, so each worker has read once), then two windows of
``--seconds``: without scrapes, then with a GET /metrics every ``--scrape-every`` s as
Prometheus would. Each window prints Redis CPU (``INFO cpu`` used_cpu_user + used_cpu_sys) as %
of a core, and Redis commands per second by name (``INFO commandstats`` diff), against a
control window of the empty Redis alone before the node starts (Redis's own housekeeping,
``hz`` 10). Last, one
message due in 2 s is sent into a random idle topic and a long poll waits for it: how late it
came (receipt time minus triggerTime; never negative).

    PYTHONPATH=. .venv/bin/python bench/idle_topics.py
    PYTHONPATH=. .venv/bin/python bench/idle_topics.py --topics 0 10000 --seconds 30
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

import redis
import requests

from delayqueue.core.keys import NamespaceKeys
from delayqueue.core.monitor_hash import FIELD_SEPARATOR
from delayqueue.core.outcome import Outcome
from delayqueue.core.scripts import Scripts, SendArgs
from delayqueue.core.topic_config import server_defaults
from delayqueue.settings.config import load_settings

import common

PREFIX, NAMESPACE = "dq", "default"  # delayqueue/settings/config.py defaults: the node's keys
SERVER_DEFAULTS = server_defaults(load_settings(env={}))
HOUR_MS = 3_600_000
TTL_MS = 7 * 24 * HOUR_MS
CHUNK = 2000


def topic_name(i: int) -> str:
    return f"idle-{i:06d}"


def load_topics(client: redis.Redis, count: int) -> dict[str, Any]:
    """``count`` topics, one message each due in 6 h, through the send script."""
    nk = NamespaceKeys(PREFIX, NAMESPACE)
    scripts = Scripts(client)
    started = last = time.monotonic()
    refused = 0
    for first in range(0, count, CHUNK):
        now = int(common.now_ms())
        names = [topic_name(i) for i in range(first, min(first + CHUNK, count))]
        trip = scripts.round_trip()
        for topic in names:
            scripts.send_many(nk.topic(topic), now, nk.hint_channel, SERVER_DEFAULTS,
                              [SendArgs(f"m-{topic}", "idle", now + 6 * HOUR_MS, TTL_MS, 3, "")],
                              trip=trip)
        refused += sum(1 for reply in trip.execute() if reply.outcome != Outcome.OK)
        # Registered as DelayQueue.bookkeep does, and counted as a real send is.
        pipe = client.pipeline(transaction=False)
        pipe.zadd(nk.topics, {topic: now for topic in names})
        pipe.zadd(nk.due, {topic: now + 6 * HOUR_MS for topic in names}, lt=True)
        pipe.hset(nk.monitor_total, mapping={f"{topic}{FIELD_SEPARATOR}sendMsg": 1
                                             for topic in names})
        pipe.execute()
        if time.monotonic() - last >= 5:
            last = time.monotonic()
            common.progress(f"loaded {first + len(names):,}/{count:,} topics")
    took = time.monotonic() - started
    if refused:
        raise RuntimeError(f"{refused} sends refused while loading")
    return {"seconds": round(took, 1), "rate": round(count / took) if took else 0}


def redis_cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def calls(client: redis.Redis) -> dict[str, int]:
    return {name.removeprefix("cmdstat_"): int(value["calls"])
            for name, value in client.info("commandstats").items()}


def scrape(base: str) -> float | None:
    """One GET /metrics: its seconds, or None when it failed (a worker killed by gunicorn's
    timeout answers nothing)."""
    started = time.monotonic()
    try:
        requests.get(base + "/metrics", timeout=120).raise_for_status()
    except requests.RequestException as exc:
        common.progress(f"/metrics failed: {exc}")
        return None
    return time.monotonic() - started


def window(s: common.Stack, seconds: float, scrape_every: float | None) -> dict[str, Any]:
    """Redis CPU and commands per second over ``seconds``, scraping /metrics or not."""
    cpu0, calls0, t0 = redis_cpu(s.client), calls(s.client), time.monotonic()
    took: list[float | None] = []
    next_scrape = t0
    while time.monotonic() - t0 < seconds:
        if scrape_every is not None and time.monotonic() >= next_scrape:
            took.append(scrape(s.base))
            next_scrape += scrape_every
        time.sleep(0.2)
    elapsed = time.monotonic() - t0
    cpu1, calls1 = redis_cpu(s.client), calls(s.client)
    # INFO itself and the bench's own reads are not the fleet's cost
    per_s = {name: round((n - calls0.get(name, 0)) / elapsed, 2) for name, n in calls1.items()
             if name not in ("info",) and n > calls0.get(name, 0)}
    top = dict(sorted(per_s.items(), key=lambda item: -item[1])[:8])
    answered = [t for t in took if t is not None]
    return {"cpu_pct": round((cpu1 - cpu0) / elapsed * 100, 3), "scrapes": len(took),
            "scrapes_failed": len(took) - len(answered),
            "scrape_s_max": round(max(answered), 3) if answered else None,
            "commands_per_s": round(sum(per_s.values()), 1), "top": top}


def lateness(s: common.Stack, count: int, rng: random.Random) -> float | None:
    """Send one message due in 2 s into a random idle topic; ms from its triggerTime to the
    long poll's answer."""
    topic = topic_name(rng.randrange(count)) if count else "idle-probe"
    api = s.base + common.API
    sent = requests.post(api + "sendMsg", data={"topic": topic, "msg": "probe",
                                                 "msgId": "probe", "delayMillis": 2000},
                         timeout=10).json()
    trigger = sent["delayMsg"]["triggerTime"]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        answer = requests.post(api + "longPollingMsg",
                               data={"topic": topic, "longPollingTimeoutMillis": 10000},
                               timeout=20).json()
        got = common.now_ms()
        for message in answer.get("delayMsgList") or ():
            if message["msgId"] == "probe":
                late = got - trigger
                if late < 0:
                    raise AssertionError(f"probe delivered {-late:.1f} ms early")
                return round(late, 1)
    return None


def measure(count: int, p: argparse.Namespace, rng: random.Random) -> dict[str, Any]:
    with common.stack(workers=2, with_node=False) as bare:
        control = window(bare, p.control_seconds, None) if p.control_seconds else None
        loaded = load_topics(bare.client, count)
        common.progress(f"{count:,} topics loaded in {loaded['seconds']} s")
        snapshots = bare.workdir / "snapshots"
        node = common.ServerProcess(bare.redis.url, workers=2,
                                    settings={"snapshot-dir": str(snapshots)},
                                    log_path=bare.workdir / "node.log",
                                    python=common.SERVER_PYTHON).start()
        s = common.Stack(bare.redis, node, bare.client, bare.workdir)
        try:
            for _ in range(6):      # each worker reads once before the windows
                scrape(s.base)
            time.sleep(p.warmup)
            quiet = window(s, p.seconds, None)
            common.progress(f"{count:,} topics, no scrapes: {quiet['cpu_pct']} % of a core")
            scraped = window(s, p.seconds, p.scrape_every)
            common.progress(f"{count:,} topics, scraped: {scraped['cpu_pct']} % of a core")
            late = lateness(s, count, rng)
            lines = sum(1 for path in snapshots.rglob("*.jsonl")
                        for _ in path.open(encoding="utf-8"))
        finally:
            node.stop()
    return {"topics": count, "control": control, "load": loaded, "quiet": quiet, "scraped": scraped,
            "late_ms": late, "snapshot_lines": lines}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, nargs="+", default=[0, 10_000, 100_000])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--scrape-every", type=float, default=15.0)
    parser.add_argument("--warmup", type=float, default=10.0)
    parser.add_argument("--quick", action="store_true",
                        help="--topics 0 10000 --seconds 20")
    parser.add_argument("--control-seconds", type=float, default=20.0,
                        help="a window of Redis alone (no node, empty) first: its own cost")
    parser.add_argument("--seed", type=int, default=32)
    p = parser.parse_args()
    if p.quick:
        p.topics, p.seconds = [0, 10_000], 20.0
    rng = random.Random(p.seed)
    runs = [measure(count, p, rng) for count in p.topics]
    rows: list[tuple[str, Any]] = []
    for run in runs:
        n = f"{run['topics']:,} topics"
        if run["control"]:
            rows.append((f"{n}: Redis CPU, Redis alone (control)",
                         f"{run['control']['cpu_pct']:.3f} % of a core"))
        rows += [
            (f"{n}: Redis CPU, no scrapes", f"{run['quiet']['cpu_pct']:.3f} % of a core"),
            (f"{n}: Redis CPU, /metrics every {p.scrape_every:g} s",
             f"{run['scraped']['cpu_pct']:.3f} % of a core"),
            (f"{n}: scrapes answered / failed, slowest",
             f"{run['scraped']['scrapes'] - run['scraped']['scrapes_failed']} / "
             f"{run['scraped']['scrapes_failed']}, {run['scraped']['scrape_s_max']} s"),
            (f"{n}: commands/s, no scrapes", run["quiet"]["commands_per_s"]),
            (f"{n}: commands/s, scraped", run["scraped"]["commands_per_s"]),
            (f"{n}: top commands/s, scraped",
             ", ".join(f"{k} {v:g}" for k, v in run["scraped"]["top"].items())),
            (f"{n}: probe due in 2 s, late by", f"{run['late_ms']} ms"),
            (f"{n}: snapshot lines written", run["snapshot_lines"]),
        ]
    common.print_table(f"Idle topics: Redis cost over {p.seconds:g} s windows", rows)
    common.write_result("idle_topics", {"runs": runs},
                        {"topics": p.topics, "seconds": p.seconds,
                         "scrape_every": p.scrape_every, "warmup": p.warmup})


if __name__ == "__main__":
    main()
