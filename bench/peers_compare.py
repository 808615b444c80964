"""Peers, measured like us: W1 scaled, W3 immediate and W6 idle precision, for delayqueue and
for BullMQ (the ``bullmq`` Python package), Dramatiq (Redis broker) and arq (default and tuned
``poll_delay``), each system on its own fresh redis-server, in one run.

For each workload ours runs first (``w1_replica``, ``w3_immediate``, ``w6_precision``: a node on
its redis-server, driven over HTTP), then each peer (``bench/peers/``: the library's own
producer and worker processes). Prints one table per workload, rows = systems, with the
ratios peer/ours, and writes ``bench/results/peers-*.json``. W3 also gives each system's
Redis work per message (common.RedisMeter: the redis-server's CPU from /proc, its commands
from INFO commandstats, the scripts' own included), single-message and with batches. The
peers are installed in the benchmark venv only.

    cd bench && ../.venv-bench/bin/python peers_compare.py --workload all
    cd bench && ../.venv-bench/bin/python peers_compare.py --workload w6 --duration 180
    cd bench && ../.venv-bench/bin/python peers_compare.py --workload w1 --topics 2 \\
        --per-topic 100 --peers bullmq,arq --without-ours          # development
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import math
import signal
import sys
import time
import traceback
from typing import Any, Callable

from peers import arq_peer, bullmq_peer, dramatiq_peer

import common

PEERS = {peer.name: peer for peer in (bullmq_peer.PEER, bullmq_peer.STOCK, dramatiq_peer.PEER,
                                      arq_peer.PEER, arq_peer.TUNED)}
DEFAULT_PEERS = "bullmq,dramatiq,arq,arq-tuned"
OURS = {"w1": "w1_replica", "w3": "w3_immediate", "w6": "w6_precision"}
WORKLOADS = ("w1", "w3", "w6")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=[*WORKLOADS, "all"], default="all")
    parser.add_argument("--peers", default=DEFAULT_PEERS,
                        help=f"comma-separated, of {', '.join(PEERS)}")
    parser.add_argument("--without-ours", action="store_true",
                        help="development only: run the peers alone (no ratios)")
    w1 = parser.add_argument_group("W1 scaled")
    w1.add_argument("--topics", type=int, default=10)
    w1.add_argument("--per-topic", type=int, default=1000)
    w1.add_argument("--delay-min", type=float, default=2.0, help="seconds")
    w1.add_argument("--delay-max", type=float, default=10.0, help="seconds")
    w1.add_argument("--consumers", type=int, default=2, help="consumers per topic")
    w3 = parser.add_argument_group("W3 immediate")
    w3.add_argument("--messages", type=int, default=20_000)
    w3.add_argument("--w3-consumers", type=int, default=8, help="in all, spread over topics")
    w3.add_argument("--w3-topics", type=int, default=4)
    w3.add_argument("--w3-batches", type=int, default=100,
                    help="ours again with send, pull and ack in batches of this many (0: not)")
    w6 = parser.add_argument_group("W6 idle precision")
    w6.add_argument("--duration", type=float, default=60.0, help="seconds")
    w6.add_argument("--delay", type=float, default=5.0, help="seconds")
    w6.add_argument("--rate", type=float, default=1.0, help="messages per second")
    args = parser.parse_args(argv)
    args.peer_names = [name.strip() for name in args.peers.split(",") if name.strip()]
    unknown = [name for name in args.peer_names if name not in PEERS]
    if unknown:
        parser.error(f"unknown peers {unknown}; known: {', '.join(PEERS)}")
    args.workloads = list(WORKLOADS) if args.workload == "all" else [args.workload]
    return args


def workload_params(args: argparse.Namespace, workload: str) -> dict[str, Any]:
    if workload == "w1":
        return {"topics": args.topics, "per_topic": args.per_topic,
                "delay_min_s": args.delay_min, "delay_max_s": args.delay_max,
                "consumers": args.consumers}
    if workload == "w3":
        return {"messages": args.messages, "consumers": args.w3_consumers,
                "topics": args.w3_topics}
    return {"duration_s": args.duration, "delay_s": args.delay, "rate": args.rate}


def import_ours(workloads: list[str]) -> dict[str, Callable[..., dict]]:
    """Our workload modules' ``run`` functions; exits 2 naming what is missing."""
    runs, missing = {}, []
    for workload in workloads:
        try:
            runs[workload] = importlib.import_module(OURS[workload]).run
        except (ImportError, AttributeError) as error:
            missing.append(f"  {workload}: bench/{OURS[workload]}.py with run(**params): {error}")
    if missing:
        print("cannot compare: our side of these workloads is not available\n"
              + "\n".join(missing)
              + "\n(use --without-ours to measure the peers alone)", file=sys.stderr)
        sys.exit(2)
    return runs


def run_ours(run: Callable[..., dict], params: dict[str, Any]) -> dict[str, Any]:
    """A ``run`` that takes ``stack`` gets a node on a fresh redis-server from us; otherwise it
    starts its own (the same ``common.stack(with_node=True)``)."""
    if "stack" in inspect.signature(run).parameters:
        with common.stack(with_node=True) as stack:
            return run(stack=stack, **params)
    return run(**params)


def run_peer(name: str, workload: str, params: dict[str, Any]) -> dict[str, Any]:
    with common.stack(with_node=False) as stack:
        return getattr(PEERS[name], workload)(stack.redis.url, **params)


def measure(label: str, call: Callable[[], dict]) -> dict[str, Any]:
    common.progress(f"{label}: running")
    started = time.monotonic()
    try:
        figures = call()
    except Exception as error:  # noqa: BLE001 - one failed system must not sink the run
        traceback.print_exc()
        return {"failed": repr(error)}
    common.progress(f"{label}: done in {time.monotonic() - started:.1f} s")
    return figures


# -- the table -------------------------------------------------------------------------------

def lag(key: str) -> Callable[[dict], Any]:
    return lambda f: f.get("lag_ms", {}).get(key)


def plain(key: str) -> Callable[[dict], Any]:
    return lambda f: f.get(key)


COLUMNS: dict[str, list[tuple[str, Callable[[dict], Any]]]] = {
    "w1": [("send/s", plain("send_rate")), ("lag p50", lag("p50")), ("p99", lag("p99")),
           ("max", lag("max")), ("early", plain("early")), ("dup", plain("duplicates")),
           ("lost", plain("lost"))],
    "w3": [("msg/s", plain("throughput")), ("messages", plain("messages")),
           ("seconds", plain("seconds")), ("dup", plain("duplicates")), ("lost", plain("lost")),
           ("redis us/msg", plain("redis_cpu_us_per_message")),
           ("cmds/msg", plain("redis_commands_per_message"))],
    "w6": [("lag p50", lag("p50")), ("p99", lag("p99")), ("max", lag("max")),
           ("early", plain("early")), ("lost", plain("lost"))],
}
# peer/ours ratios: (column, figure, which way is better)
RATIOS: dict[str, list[tuple[str, Callable[[dict], Any], str]]] = {
    "w1": [("send x", plain("send_rate"), "higher"), ("p50 x", lag("p50"), "lower"),
           ("p99 x", lag("p99"), "lower")],
    "w3": [("msg/s x", plain("throughput"), "higher")],
    "w6": [("p50 x", lag("p50"), "lower"), ("p99 x", lag("p99"), "lower")],
}


def ratio(peer: Any, ours: Any) -> float | None:
    if not isinstance(peer, (int, float)) or not isinstance(ours, (int, float)) or not ours:
        return None
    return peer / ours


def fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:,.1f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def ratios_of(workload: str, results: dict[str, dict]) -> dict[str, dict[str, float | None]]:
    ours = results.get("ours")
    ratios: dict[str, dict[str, float | None]] = {}
    for name, figures in results.items():
        if name != "ours":
            values = {label: ratio(get(figures), get(ours)) if ours else None
                      for label, get, _ in RATIOS[workload]}
            ratios[name] = {k: None if v is None else round(v, 3) for k, v in values.items()}
    return ratios


def print_workload(workload: str, params: dict, results: dict[str, dict],
                   ratios: dict[str, dict]) -> None:
    headers = ["system", *(h for h, _ in COLUMNS[workload]), *(h for h, _, _ in RATIOS[workload])]
    rows = []
    for name, figures in results.items():
        if "failed" in figures:
            rows.append([name, f"failed: {figures['failed']}"])
            continue
        rows.append([name, *(fmt(get(figures)) for _, get in COLUMNS[workload]),
                     *(fmt(ratios.get(name, {}).get(label)) if name != "ours" else ""
                       for label, _, _ in RATIOS[workload])])
    widths = [max(len(str(row[i])) for row in [headers] + rows if i < len(row))
              for i in range(len(headers))]
    print(f"\n== peers {workload} {params}")
    for row in [headers] + rows:
        print("  " + "  ".join(str(cell).rjust(widths[i]) if i else str(cell).ljust(widths[i])
                               for i, cell in enumerate(row)))
    print("  lag in ms; \"x\" columns = peer / ours: "
          + "; ".join(f"{label.strip(' x')} {better} is better" + (
              " (>1: peer worse)" if better == "lower" else " (<1: peer slower)")
                      for label, _, better in RATIOS[workload]))
    sys.stdout.flush()


def bars(results: dict[str, dict]) -> list[str]:
    """The issue's bars on lag p99: no worse than BullMQ's, >= 10x better than arq's default."""
    lines = []
    for name, least in (("bullmq", 1.0), ("arq", 10.0)):
        r = ratio(lag("p99")(results.get(name, {})), lag("p99")(results.get("ours", {})))
        if r is not None:
            lines.append(f"{name} p99 / ours p99 = {r:.2f}, bar >= {least:g}: "
                         + ("met" if r >= least else "NOT met"))
    return lines


def print_redis_commands(results: dict[str, dict], top: int = 8) -> None:
    """Each system's Redis commands per message by name (W3), the most frequent first."""
    print("  Redis commands per message by name (INFO commandstats, scripts' own included):")
    for name, figures in results.items():
        by_name = figures.get("redis_commands_by_name") or {}
        print(f"    {name}: " + ", ".join(f"{command} {count:g}" for command, count in
                                         list(by_name.items())[:top]))


# issue 32: Redis CPU per message, ours against Dramatiq's (single path) and at most 30 µs
# with batches of 100.
BATCH_REDIS_US_BAR = 30.0


def w3_redis_bars(results: dict[str, dict]) -> list[str]:
    cpu = plain("redis_cpu_us_per_message")
    lines = []
    ours, dramatiq = cpu(results.get("ours", {})), cpu(results.get("dramatiq", {}))
    if ours is not None and dramatiq is not None:
        lines.append(f"ours single-message Redis CPU {ours:g} us/msg, dramatiq {dramatiq:g}, "
                     f"bar <= dramatiq: {'met' if ours <= dramatiq else 'NOT met'}")
    batch = cpu(results.get("ours-batch", {}))
    if batch is not None:
        verdict = "met" if batch <= BATCH_REDIS_US_BAR else "NOT met"
        lines.append(f"ours with batches Redis CPU {batch:g} us/msg, bar <= "
                     f"{BATCH_REDIS_US_BAR:g}: {verdict}")
    return lines


def w3_bars(results: dict[str, dict]) -> list[str]:
    """W3 with batches against BullMQ in the same run (bar: ratio >= 1.0), single sends beside;
    then the Redis CPU bars (w3_redis_bars)."""
    lines = []
    bullmq = plain("throughput")(results.get("bullmq", {}))
    for name, label in (("ours-batch", "ours with batches"), ("ours", "ours single-message")):
        r = ratio(plain("throughput")(results.get(name, {})), bullmq)
        if r is not None:
            lines.append(f"{label} / bullmq throughput = {r:.2f}"
                         + (f", bar >= 1: {'met' if r >= 1.0 else 'NOT met'}"
                            if name == "ours-batch" else ""))
    return lines + w3_redis_bars(results)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # On SIGTERM unwind normally, so every redis-server, node and consumer process is stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ours_runs = {} if args.without_ours else import_ours(args.workloads)
    figures: dict[str, Any] = {}
    for workload in args.workloads:
        params = workload_params(args, workload)
        results: dict[str, dict] = {}
        if workload in ours_runs:
            results["ours"] = measure(f"{workload} ours",
                                      lambda: run_ours(ours_runs[workload], params))
            if workload == "w3" and args.w3_batches:
                results["ours-batch"] = measure(
                    f"{workload} ours, batches of {args.w3_batches}",
                    lambda: run_ours(ours_runs[workload], {**params,
                                                           "batches": args.w3_batches}))
        for name in args.peer_names:
            results[name] = measure(f"{workload} {name}",
                                    lambda: run_peer(name, workload, params))
        ratios = ratios_of(workload, results)
        print_workload(workload, params, results, ratios)
        figures[workload] = {"params": params, "systems": results, "peer_over_ours": ratios}
        if workload == "w3":
            print_redis_commands(results)
            figures[workload]["bars"] = w3_bars(results)
            for line in figures[workload]["bars"]:
                print(f"  bar: {line}")
        if workload in ("w1", "w6"):
            figures[workload]["bars"] = bars(results)
            for line in figures[workload]["bars"]:
                print(f"  bar: {line}")
    common.write_result("peers", figures, {**{k: v for k, v in vars(args).items()
                                              if k not in ("peer_names", "workloads")},
                                           "peer_versions": peer_versions()})
    return 0


def peer_versions() -> dict[str, str]:
    from importlib.metadata import version  # noqa: PLC0415
    return {package: version(package) for package in ("bullmq", "dramatiq", "arq", "redis")}


if __name__ == "__main__":
    sys.exit(main())
