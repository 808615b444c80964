"""Where each key family lives on a Cluster, the Redis CPU of each master under load, and
the cost of a long-poll hint sent with classic PUBLISH against sharded SPUBLISH.

    .venv/bin/python bench/cluster_cpu.py [--topics 60] [--seconds 30] [--hints 20000]

Under the load the server sends its hints as it does on a Cluster >= 7 (SPUBLISH on the
topic's channel, background/shard_hints.py); the bench counts them (INFO commandstats,
summed over the nodes) and prices them both ways with the per-hint CPU it measures after
the load (all nodes, one subscriber): "after" as sent, "before" as the same number of
classic PUBLISHes the cluster bus would have carried to every node.

Starts its own 3 masters + 3 replicas (tests/support/topologies.py) and one node (2 gevent
workers). The load is the failover checker's (tests/support/failover.py): a paced producer
(sends due 0..300 ms later) and one long-polling consumer per topic, acking. Redis CPU is
``used_cpu_sys + used_cpu_user`` from INFO, before and after, per node.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import redis  # noqa: E402
from redis.cluster import key_slot  # noqa: E402

from delayqueue.core.bookkeeping import registered_topics, shard_count  # noqa: E402
from delayqueue.core.keys import NamespaceKeys  # noqa: E402

from support.failover import run_under_load  # noqa: E402
from support.node import ServerProcess  # noqa: E402
from support.topologies import ClusterTopology, unique_namespace  # noqa: E402


def cpu(port: int) -> float:
    info = redis.Redis(port=port).info("cpu")
    return info["used_cpu_sys"] + info["used_cpu_user"]


def cpu_all(cluster: ClusterTopology) -> dict[int, float]:
    return {s.port: cpu(s.port) for s in cluster.servers}


def publish_stats(cluster: ClusterTopology) -> dict[str, dict]:
    """calls and usec of PUBLISH and SPUBLISH summed over the nodes (INFO commandstats)."""
    totals = {name: {"calls": 0, "usec": 0} for name in ("publish", "spublish")}
    for s in cluster.servers:
        stats = redis.Redis(port=s.port).info("commandstats")
        for name, total in totals.items():
            for field in total:
                total[field] += stats.get(f"cmdstat_{name}", {}).get(field, 0)
    return totals


def placement(cluster: ClusterTopology, namespace: str) -> dict:
    """Which master holds each key family (the topics: those the load registered)."""
    keys = NamespaceKeys("dq", namespace, shard_count(0, cluster=True))
    topics = registered_topics(cluster.client(), keys)
    per_master = Counter(cluster.master_of_slot(key_slot(keys.topic(t).base.encode()))
                         for t in topics)
    shards = Counter(cluster.master_of_slot(key_slot(key.encode())) for key in keys.registries)
    return {
        "namespace keys {ns} (monitor counters, leases, node registry, offline)":
            cluster.master_of_slot(key_slot(keys.base.encode())),
        f"registry and due index: {keys.shards} shards, per master": dict(shards),
        f"topic keys {{ns:topic}} of {len(topics)} topics, per master": dict(per_master),
        "hint channels": "each topic's own, in its slot (SPUBLISH: its master only); "
                         "control messages: the namespace channel, every node (PUBLISH)",
    }


def measure_hints(cluster: ClusterTopology, count: int) -> dict:
    """CPU per node for ``count`` hints with one subscriber, PUBLISH against SPUBLISH."""
    client = cluster.client()
    results = {}
    for command, subscribe in (("PUBLISH", "subscribe"), ("SPUBLISH", "ssubscribe")):
        channel = "dq:{bench}:hint"
        pubsub = client.pubsub()
        getattr(pubsub, subscribe)(channel)
        received = [0]
        stop = threading.Event()

        def drain(ps=pubsub, kind=subscribe) -> None:
            reader = ps.get_sharded_message if kind == "ssubscribe" else ps.get_message
            while not stop.is_set():
                message = reader(timeout=0.1)
                if message and message["type"] in ("message", "smessage"):
                    received[0] += 1

        thread = threading.Thread(target=drain, daemon=True)
        thread.start()
        time.sleep(0.5)  # the subscription settles (a bench, not a test)
        before = cpu_all(cluster)
        node = client.get_node_from_key(channel)
        direct = redis.Redis(host=node.host, port=node.port)
        pipe = direct.pipeline(transaction=False)
        started = time.monotonic()
        for i in range(count):
            pipe.execute_command(command, channel, f"1 topic-{i % 50}")
            if i % 500 == 499:
                pipe.execute()
        pipe.execute()
        elapsed = time.monotonic() - started
        deadline = time.monotonic() + 10
        while received[0] < count and time.monotonic() < deadline:
            time.sleep(0.05)
        after = cpu_all(cluster)
        stop.set()
        thread.join(2)
        pubsub.close()
        spent = {port: round((after[port] - before[port]) * 1e6 / count, 2) for port in after}
        results[command] = {"received": received[0], "seconds": round(elapsed, 2),
                            "cpu_us_per_hint_by_node": spent,
                            "cpu_us_per_hint_total": round(sum(spent.values()), 2)}
    return results


def load_run(cluster: ClusterTopology, args) -> dict:
    """The load on a fresh namespace, with the hint commands it sent."""
    namespace = unique_namespace()
    for s in cluster.servers:
        redis.Redis(port=s.port).config_resetstat()
    with ServerProcess(cluster.url, settings={"namespace": namespace}, workers=2) as node:
        before = cpu_all(cluster)
        started = time.monotonic()
        checker = run_under_load(node.url, lambda: time.sleep(args.seconds),
                                 topics=args.topics)
        elapsed = time.monotonic() - started
        after = cpu_all(cluster)
    roles = cluster.roles()
    return {
        "load": checker.summary(), "seconds": round(elapsed, 1),
        "redis_cpu_percent_by_node": {
            f"{port} ({roles.get(port)})": round((after[port] - before[port]) / elapsed
                                                 * 100, 1) for port in after},
        "hint_commands": publish_stats(cluster),
        "placement": placement(cluster, namespace),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--topics", type=int, default=60)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--hints", type=int, default=20000)
    args = parser.parse_args()
    cluster = ClusterTopology(Path(tempfile.mkdtemp(prefix="dq-cpu-"))).start()
    try:
        masters = cluster.masters()
        run = load_run(cluster, args)
        hints = measure_hints(cluster, args.hints)
        sent = sum(h["calls"] for h in run["hint_commands"].values())
        run["hint_cpu_under_load_ms_per_s"] = {
            label: round(sent * hints[command]["cpu_us_per_hint_total"] / 1000
                         / run["seconds"], 2)
            for label, command in (("before (classic PUBLISH)", "PUBLISH"),
                                   ("after (sharded SPUBLISH)", "SPUBLISH"))}
        print(json.dumps({"masters": masters, **run}, indent=1))
        print(json.dumps({"hints": hints}, indent=1))
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
