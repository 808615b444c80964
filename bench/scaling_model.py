"""The scaling model (docs/scaling.md): from measured costs per message, how many node cores
and Redis masters a rate needs, and where the ceilings are.

    .venv/bin/python bench/scaling_model.py                  # the latest results, below
    .venv/bin/python bench/scaling_model.py --set redis_batch_us=97 --rates 10000 100000

Every input is a figure a bench printed and wrote under ``bench/results/``: the latest file of
each workload is read, and the table says which file each input came from. An input with no
result yet must be given with ``--set name=value`` (the model refuses to guess):

  node_single_us, redis_single_us     w3       (bench/w3_immediate.py: node worker CPU and
                                                 Redis CPU per message, single messages)
  node_batch_us, redis_batch_us       w3batch  (bench/w3_immediate.py --batches 100)
  hint_publish_us, hint_spublish_us   given    (bench/cluster_cpu.py prints them: Redis CPU
                                                 per hint summed over a 3+3 Cluster, classic
                                                 PUBLISH and sharded SPUBLISH)
  report_lines_per_s                  given    (bench/spark_report_bench.py: the PySpark
                                                 report's lines per second at 10M lines)
  cluster_factor                      given    (bench/cluster_scale.py: a 3-master Cluster's
                                                 Redis CPU per message over one standalone
                                                 redis-server's, same load; the larger of two
                                                 runs)
  snapshot_line_bytes                 measured here: a topic's snapshot line as the writer
                                                 formats it, with its histograms filled

The model: a Redis master is one core (its command thread) and a node core is one gevent
worker; either is planned at ``--utilisation`` (0.7) of a core. A message's Redis work runs on
the master of its topic's slot, so one topic's rate is capped by one master: the hot-topic
ceiling. Everything here is linear in the rate: measured per message, multiplied.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"

# name -> (workload of the result file, key in its figures)
SOURCES = {
    "node_single_us": ("w3", "node_cpu_us_per_message"),
    "redis_single_us": ("w3", "redis_cpu_us_per_message"),
    "node_batch_us": ("w3batch", "node_cpu_us_per_message"),
    "redis_batch_us": ("w3batch", "redis_cpu_us_per_message"),
}
# Printed by the benches named above and recorded in docs/benchmarks.md (2 cores): give
# newer figures with --set.
GIVEN = {"hint_publish_us": 28.2, "hint_spublish_us": 5.7, "report_lines_per_s": 131_507.0,
         "cluster_factor": 1.30}

MINUTES_PER_YEAR = 365 * 24 * 60


def latest(workload: str) -> tuple[dict, str] | None:
    files = sorted(RESULTS.glob(f"{workload}-*.json"))
    if not files:
        return None
    document = json.loads(files[-1].read_text())
    return document.get("figures", {}), files[-1].name


def snapshot_line_bytes() -> float:
    """Bytes of one topic's snapshot line (and its newline), every histogram bucket set."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from delayqueue.core.monitor_hash import empty_topic_stats
    from delayqueue.monitoring.snapshot import snapshot_line

    stats = empty_topic_stats()
    for name, value in stats.items():
        if isinstance(value, dict):
            value.update(count=12345, sum=678901.0, max=4321.0,
                         counts=[100 + i for i in range(len(value["counts"]))])
        else:
            stats[name] = 12345
    info = {"waitingQueueSize": 1234, "readyQueueSize": 56, "ackQueueSize": 78}
    line = snapshot_line("production", "orders-eu-west", 1_764_000_000_000,
                         1_764_000_060_000, stats, info)
    return float(len(json.dumps(line, separators=(",", ":"))) + 1)


def inputs(overrides: dict[str, float]) -> tuple[dict[str, float], dict[str, str]]:
    values: dict[str, float] = dict(GIVEN)
    origin = {name: "given (docs/benchmarks.md)" for name in GIVEN}
    values["snapshot_line_bytes"] = snapshot_line_bytes()
    origin["snapshot_line_bytes"] = "measured here"
    for name, (workload, key) in SOURCES.items():
        found = latest(workload)
        if found and found[0].get(key) is not None:
            values[name], origin[name] = float(found[0][key]), found[1]
    for name, value in overrides.items():
        values[name], origin[name] = value, "--set"
    missing = sorted(set(SOURCES) - set(values))
    if missing:
        raise SystemExit(f"no result for {', '.join(missing)}: run its bench or give "
                         f"--set name=value (see --help)")
    return values, origin


def plan(rate: float, node_us: float, redis_us: float, utilisation: float,
         cluster_factor: float) -> dict:
    budget = utilisation * 1e6   # µs of CPU a planned core gives per second
    masters = rate * redis_us / budget
    return {
        "node_cores": math.ceil(rate * node_us / budget),
        # one Redis while it fits a core; past that a Cluster, which costs cluster_factor more
        "redis_masters": math.ceil(masters if masters <= 1 else masters * cluster_factor),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", type=float, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--utilisation", type=float, default=0.7)
    parser.add_argument("--topics", type=int, default=100_000,
                        help="topics in the fleet, for the snapshot and report lines")
    parser.add_argument("--interval-s", type=int, default=60, help="monitor-interval-seconds")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args(argv)
    overrides = {}
    for item in args.set:
        name, _, value = item.partition("=")
        if name not in SOURCES and name not in GIVEN and name != "snapshot_line_bytes":
            parser.error(f"--set {item}: unknown input {name!r}")
        overrides[name] = float(value)
    v, origin = inputs(overrides)

    print("inputs (µs of CPU per message unless named otherwise):")
    for name in [*SOURCES, *GIVEN, "snapshot_line_bytes"]:
        print(f"  {name:22} {v[name]:>12,.1f}   from {origin[name]}")

    u = args.utilisation
    print(f"\nplanned at {u:.0%} of a core; a Redis master = one core")
    print(f"{'rate (msg/s)':>14} | {'single: node cores':>18} {'masters':>8} | "
          f"{'batches of 100: node cores':>26} {'masters':>8}")
    for rate in args.rates:
        single = plan(rate, v["node_single_us"], v["redis_single_us"], u, v["cluster_factor"])
        batch = plan(rate, v["node_batch_us"], v["redis_batch_us"], u, v["cluster_factor"])
        print(f"{rate:>14,.0f} | {single['node_cores']:>18,} {single['redis_masters']:>8,} | "
              f"{batch['node_cores']:>26,} {batch['redis_masters']:>8,}")

    budget = u * 1e6
    print("\nceilings")
    print(f"  one topic (one slot, one master): {budget / v['redis_single_us']:,.0f} msg/s single,"
          f" {budget / v['redis_batch_us']:,.0f} msg/s in batches of 100")
    for rate in args.rates:
        classic = rate * v["hint_publish_us"] / 1e6
        sharded = rate * v["hint_spublish_us"] / 1e6
        print(f"  hints at {rate:,.0f} msg/s, single path (one per message; a batch call: one "
              f"per 100), 3+3 Cluster: classic PUBLISH {classic:,.2f} cores (grows with the "
              f"nodes), sharded {sharded:,.2f}")
    lines_per_year = args.topics * MINUTES_PER_YEAR * 60 / args.interval_s
    report_days = lines_per_year / v["report_lines_per_s"] / 86400
    print(f"  snapshots, {args.topics:,} topics each with a line per {args.interval_s} s: "
          f"{lines_per_year:,.0f} lines a year, "
          f"{lines_per_year * v['snapshot_line_bytes'] / 1e12:,.2f} TB; the report over a year "
          f"on one 2-core machine: {report_days:,.1f} days")
    return 0


if __name__ == "__main__":
    sys.exit(main())
