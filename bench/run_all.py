"""``make bench``: every workload in turn, each against a server it starts itself, then one
table of the figures against the bars of the performance issue.

Each workload is its own script (run it alone with ``--help``); this runner starts them one
after another (never two at once: they would share the two cores), reads the JSON each one
wrote under ``bench/results/``, and prints the summary. ``--only w1,w6`` picks some; ``--quick``
passes each script its short form (for a smoke run of the whole suite in a few minutes).

    python bench/run_all.py            # the full suite (about half an hour)
    python bench/run_all.py --quick    # every workload, scaled down
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

from common import RESULTS, commit, machine, progress

HERE = Path(__file__).resolve().parent

# name -> (script, full arguments, quick arguments)
WORKLOADS: dict[str, tuple[str, list[str], list[str]]] = {
    "send": ("send_wrk.py", ["--duration", "20"], ["--duration", "5"]),
    "core": ("core_lua.py", ["--messages", "20000"], ["--messages", "2000"]),
    "w1": ("w1_replica.py", [], ["--scale"]),
    "w1paced": ("w1_replica.py", ["--send-rate", "1000"], ["--scale", "--send-rate", "1000"]),
    # camellia's published send rate, single sendMsg; one SDK listener (defaults) per topic.
    "w1sdk": ("w1_replica.py", ["--send-rate", "2400", "--sdk", "--consumers", "1"],
              ["--scale", "--send-rate", "2400", "--sdk", "--consumers", "1"]),
    "w2": ("w2_herd.py", [], ["--messages", "5000"]),
    "w3": ("w3_immediate.py", ["--messages", "20000"], ["--messages", "3000"]),
    "w3batch": ("w3_immediate.py", ["--messages", "100000", "--batches", "100"],
                ["--messages", "10000", "--batches", "100"]),
    "w4": ("w4_longpoll.py", ["--polls", "2000"], ["--polls", "500", "--trickle", "100"]),
    "w5": ("w5_backlog.py", [], ["--backlog", "50000", "--sends", "3000"]),
    "w6": ("w6_precision.py", ["--duration", "180"], ["--duration", "15"]),
    # issue 29: the single-message plain path, full speed and paced at 200/s.
    "single": ("single_path.py", [], ["--quick"]),
    "peers": ("peers_compare.py", ["--workload", "all", "--duration", "60"],
              ["--workload", "all", "--duration", "10", "--per-topic", "100"]),
}


def _get(figures: dict, path: str) -> Any:
    value: Any = figures
    for part in path.split("/"):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


# (workload, label, figure path, bar text, check)
BARS: list[tuple[str, str, str, str, Callable[[Any], bool]]] = [
    ("send", "sendMsg throughput, wrk (msg/s)", "send_rate", ">= 3,000", lambda v: v >= 3000),
    ("send", "worker CPU per sendMsg (us)", "node_cpu_us_per_request", "<= 250",
     lambda v: v <= 250),
    ("send", "  the floor: a one-route Flask app, same load (us)", "floor_flask_cpu_us",
     "(reported)", lambda v: True),
    ("send", "sendMsgBatch, 100 a request (msg/s)", "batch_msg_rate", ">= 25,000",
     lambda v: v >= 25000),
    ("send", "sendMsgBatch / sendMsg rate, same run", "batch_ratio", ">= 5", lambda v: v >= 5),
    ("w1", "W1 send throughput (msg/s)", "send_rate", "(reported)", lambda v: True),
    ("w1", "W1 lag p50 (ms)", "lag_ms/p50", "<= 10", lambda v: v <= 10),
    ("w1", "W1 lag p90 (ms)", "lag_ms/p90", "(reported)", lambda v: True),
    ("w1", "W1 lag p99 (ms)", "lag_ms/p99", "<= 100", lambda v: v <= 100),
    ("w1", "W1 lag p99.9 (ms)", "lag_ms/p99.9", "(reported)", lambda v: True),
    ("w1", "W1 lag max (ms)", "lag_ms/max", "<= 400", lambda v: v <= 400),
    ("w1", "W1 early + duplicates + lost", "_w1_bad", "0", lambda v: v == 0),
    ("w1paced", "W1, sends paced at 1,000/s: send throughput", "send_rate", "(reported)",
     lambda v: True),
    ("w1paced", "W1, sends paced: lag p50 (ms)", "lag_ms/p50", "<= 10", lambda v: v <= 10),
    ("w1paced", "W1, sends paced: lag p99 (ms)", "lag_ms/p99", "<= 100", lambda v: v <= 100),
    ("w1paced", "W1, sends paced: lag max (ms)", "lag_ms/max", "<= 400", lambda v: v <= 400),
    ("w1paced", "W1, sends paced: early + duplicates + lost", "_w1_bad", "0",
     lambda v: v == 0),
    ("w1sdk", "W1 at 2,400 sends/s, SDK listeners: send rate", "send_rate", "(reported)",
     lambda v: True),
    ("w1sdk", "W1 at 2,400/s, SDK: lag p50 (ms)", "lag_ms/p50", "<= 10", lambda v: v <= 10),
    ("w1sdk", "W1 at 2,400/s, SDK: lag p99 (ms)", "lag_ms/p99", "<= 100", lambda v: v <= 100),
    ("w1sdk", "W1 at 2,400/s, SDK: lag max (ms)", "lag_ms/max", "<= 400", lambda v: v <= 400),
    ("w1sdk", "W1 at 2,400/s, SDK: early + duplicates + lost", "_w1_bad", "0",
     lambda v: v == 0),
    ("w2", "W2 drain rate (msg/s)", "drain_rate", ">= 20,000", lambda v: v >= 20000),
    ("w2", "W2 slowest Redis command (ms)", "_w2_slowest", "<= 50", lambda v: v <= 50),
    ("w3", "W3 end-to-end throughput (msg/s)", "throughput", "(ratio to peers below)",
     lambda v: True),
    ("w3batch", "W3 with batches of 100 (msg/s)", "throughput", "(ratio to BullMQ: peers)",
     lambda v: True),
    ("w4", "W4 long polls held on one node", "held", ">= 2,000", lambda v: v >= 2000),
    ("w4", "W4 wake-up p99 (ms)", "wake_ms/p99", "<= 20", lambda v: v <= 20),
    ("w4", "W4 memory per held poll (KiB)", "kib_per_held_poll", "(reported)", lambda v: True),
    ("w5", "W5 Redis bytes per waiting msg beyond body", "bytes_per_msg_beyond_body", "<= 250",
     lambda v: v <= 250),
    ("w5", "W5 sendMsg p99 with / without backlog", "send_p99_ratio", "<= 1.5",
     lambda v: v <= 1.5),
    ("w6", "W6 lag p99 (ms)", "lag_ms/p99", "<= 10", lambda v: v <= 10),
    ("single", "single path, full: node CPU per message (us)", "full/node_cpu_us",
     "(reported)", lambda v: True),
    ("single", "single path, full: node CPU / floor request", "full/node_cpu_ratio_to_floor",
     "<= 4.0", lambda v: v <= 4.0),
    ("single", "single path, paced 200/s: node CPU / floor", "paced/node_cpu_ratio_to_floor",
     "<= 5.0", lambda v: v <= 5.0),
    ("single", "single path, paced: empty pulls per message", "paced/empty_pulls", "<= 0.1",
     lambda v: v <= 0.1),
    ("single", "single path, paced: lag p99, triggerTime (ms)", "paced/lag_ms/p99",
     "(reported)", lambda v: True),
]


def derived(name: str, figures: dict) -> dict:
    figures = dict(figures)
    if name in ("w1", "w1paced", "w1sdk"):
        figures["_w1_bad"] = sum(figures.get(k, 0) for k in ("early", "duplicates", "lost"))
    if name == "w2":
        slowest = figures.get("slowest_commands") or []
        figures["_w2_slowest"] = slowest[0]["ms"] if slowest else 0.0
    return figures


def newest_result(prefix: str, since: float) -> dict | None:
    candidates = [p for p in RESULTS.glob(f"{prefix}-*.json") if p.stat().st_mtime >= since]
    if not candidates:
        return None
    return json.loads(max(candidates, key=lambda p: p.stat().st_mtime).read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated: " + ",".join(WORKLOADS))
    parser.add_argument("--quick", action="store_true", help="every workload scaled down")
    parser.add_argument("--summary", action="store_true",
                        help="run nothing: summarise the newest result of each workload")
    args = parser.parse_args(argv)
    chosen = [w.strip() for w in args.only.split(",") if w.strip()] or list(WORKLOADS)
    unknown = [w for w in chosen if w not in WORKLOADS]
    if unknown:
        parser.error(f"--only: unknown workload(s) {', '.join(unknown)}")
    results: dict[str, dict] = {}
    failed: list[str] = []
    for name in chosen:
        if args.summary:
            document = newest_result(name, 0.0)
            if document is not None:
                results[name] = derived(name, document["figures"])
            continue
        script, full, quick = WORKLOADS[name]
        command = [sys.executable, str(HERE / script), *(quick if args.quick else full)]
        progress(f"--- {name}: {' '.join(command[1:])}")
        started = time.time()
        code = subprocess.run(command).returncode
        document = newest_result(name, started)
        if document is None:
            failed.append(f"{name} (exit {code}, no result)")
            continue
        if code != 0:
            failed.append(f"{name} (exit {code})")
        results[name] = derived(name, document["figures"])

    print(f"\n== summary against the bars (commit {commit()}, {machine()['cpus']} CPUs"
          f"{', quick run' if args.quick else ''})")
    print(f"  {'figure':<46} {'measured':>12}  {'bar':<24} ok")
    for workload, label, path, bar, check in BARS:
        if workload not in results:
            continue
        value = _get(results[workload], path)
        if value is None:
            print(f"  {label:<46} {'-':>12}  {bar:<24} missing")
            continue
        verdict = "" if bar.startswith("(") else ("yes" if check(value) else "NO")
        text = f"{value:,.2f}" if isinstance(value, float) else f"{value:,}"
        print(f"  {label:<46} {text:>12}  {bar:<24} {verdict}")
    if "peers" in results:
        print("\n  peers: see the peers table above (ratios to ours)")
    if failed:
        print(f"\nworkloads that failed their own checks: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
