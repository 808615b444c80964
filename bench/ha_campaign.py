"""The failover campaign (``make ha``): real failovers of real topologies under a steady load.

    .venv/bin/python bench/ha_campaign.py [--rounds 10] [--only cluster,sentinel,kill,reshard]

Starts its own topologies (tests/support/topologies.py) and one node (gunicorn) per run, puts
a paced load with a checker on it (tests/support/failover.py: every send retried with its
msgId until answered, consumers long-poll and ack) and, meanwhile:

- cluster:  ``CLUSTER FAILOVER`` (graceful) of each master in turn, ``--rounds`` times;
- sentinel: ``SENTINEL FAILOVER``, ``--rounds`` times;
- kill:     ``kill -9`` of the Sentinel master, ``--rounds`` times, without and with
            ``redis-wait-replicas=1``;
- reshard:  ``redis-cli --cluster reshard`` of 1000 slots between two masters.

Prints one line per failover and a summary per run: accepted sends, lost (accepted, never
delivered), early deliveries, failed requests, the longest send (retries included) and the
longest gap between two answered sends (the unavailability the clients saw).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from redis.cluster import key_slot  # noqa: E402

from delayqueue.core.keys import NamespaceKeys  # noqa: E402

from support.failover import Checker, run_under_load  # noqa: E402
from support.node import ServerProcess  # noqa: E402
from support.topologies import (  # noqa: E402
    ClusterTopology,
    SentinelTopology,
    unique_namespace,
)


def one_run(name: str, url: str, action, settings: dict | None = None,
            delivery_timeout_s: float = 60, topics: int = 4) -> Checker:
    started = time.monotonic()
    with ServerProcess(url, settings={"namespace": unique_namespace(), **(settings or {})},
                       workers=2) as node:
        checker = run_under_load(node.url, action, warmup_sends=50, cooldown_sends=50,
                                 delivery_timeout_s=delivery_timeout_s, topics=topics)
    line = {"run": name, **checker.summary(), "seconds": round(time.monotonic() - started)}
    print(json.dumps(line), flush=True)
    return checker


def summary(name: str, checkers: list[Checker]) -> dict:
    result = {
        "run": name,
        "accepted": sum(c.accepted for c in checkers),
        "lost": sum(len(c.lost) for c in checkers),
        "early": sum(c.early for c in checkers),
        "failed_requests": sum(c.failed_requests for c in checkers),
        "longest_send_ms_max": max(round(c.longest_send_ms) for c in checkers),
        "longest_gap_ms_median": round(statistics.median(c.longest_gap_ms for c in checkers)),
        "longest_gap_ms_max": max(round(c.longest_gap_ms) for c in checkers),
    }
    print("SUMMARY", json.dumps(result), flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--only", default="cluster,sentinel,kill,reshard")
    args = parser.parse_args()
    runs = set(args.only.split(","))
    work = Path(tempfile.mkdtemp(prefix="dq-ha-"))
    results = []
    if runs & {"cluster", "reshard"}:
        cluster = ClusterTopology(work / "cluster").start()
        try:
            if "cluster" in runs:
                # One failover per run, each checked on its own: a run's window is its own.
                checkers = []
                for i in range(args.rounds):
                    cluster.wait_healthy()
                    master = cluster.masters()[i % 3]
                    checkers.append(one_run(f"cluster-failover-{i + 1}", cluster.url,
                                            lambda m=master: cluster.failover(m)))
                results.append(summary("cluster CLUSTER FAILOVER", checkers))
            if "reshard" in runs:
                cluster.wait_healthy()
                source, destination = cluster.masters()[:2]
                # 96 topics: ~32 per master, so ~6 of the source's live in the slots that
                # move (their keys migrate under load: ASK, TRYAGAIN, then MOVED). Then the
                # same slots back with redis-wait-replicas=1: the script + WAIT pipeline
                # follows ASK and MOVED itself.
                for wait, (src, dst) in ((0, (source, destination)),
                                         (1, (destination, source))):
                    cluster.wait_healthy()
                    namespace = unique_namespace()
                    checker = one_run(f"cluster-reshard-1000-slots-wait{wait}", cluster.url,
                                      lambda s=src, d=dst: cluster.reshard(s, d, 1000),
                                      settings={"namespace": namespace,
                                                "redis-wait-replicas": wait}, topics=96)
                    keys = NamespaceKeys("dq", namespace)
                    owners = Counter(
                        cluster.master_of_slot(key_slot(keys.topic(t).base.encode()))
                        for t in checker.topics)
                    results.append({**summary(f"cluster reshard 1000 slots, "
                                              f"redis-wait-replicas={wait}", [checker]),
                                    "topics_per_master_after": dict(owners)})
        finally:
            cluster.stop()
    if runs & {"sentinel", "kill"}:
        sentinel = SentinelTopology(work / "sentinel").start()
        try:
            if "sentinel" in runs:
                checkers = []
                for i in range(args.rounds):
                    sentinel.wait_healthy()
                    checkers.append(one_run(f"sentinel-failover-{i + 1}", sentinel.url,
                                            sentinel.failover))
                results.append(summary("sentinel SENTINEL FAILOVER", checkers))
            if "kill" in runs:
                for wait in (0, 1):
                    checkers = []
                    for i in range(args.rounds):
                        sentinel.wait_healthy(60)
                        checkers.append(one_run(
                            f"sentinel-kill9-wait{wait}-{i + 1}", sentinel.url,
                            sentinel.kill_master, {"redis-wait-replicas": wait},
                            delivery_timeout_s=20))
                    results.append(summary(f"sentinel kill -9 master, redis-wait-replicas="
                                           f"{wait}", checkers))
        finally:
            sentinel.stop()
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
