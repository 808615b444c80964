"""What ``redis-wait-replicas`` costs a send: sequential sends through ``DelayQueue`` on a
Sentinel topology (1 master, 2 replicas) with 0, 1 and 2 replicas waited for.

    .venv/bin/python bench/wait_cost.py [--sends 2000]

Prints the median and 99th percentile of one send (the script, its bookkeeping and, when
waited, WAIT on the same connection), in ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from delayqueue.background.runtime import Runtime  # noqa: E402
from delayqueue.settings.config import Settings  # noqa: E402

from support.topologies import SentinelTopology, unique_namespace  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sends", type=int, default=2000)
    args = parser.parse_args()
    topology = SentinelTopology(Path(tempfile.mkdtemp(prefix="dq-wait-"))).start()
    try:
        results = {}
        for wait in (0, 1, 2, 0, 1, 2):  # twice, interleaved: the machine's noise shows
            runtime = Runtime(Settings(redis_url=topology.url, namespace=unique_namespace(),
                                       snapshot_dir="", redis_wait_replicas=wait))
            took = []
            for i in range(args.sends):
                started = time.perf_counter()
                runtime.queue.send(f"t{i % 10}", "x" * 100)
                took.append((time.perf_counter() - started) * 1000)
            runtime.client.close()
            took.sort()
            results.setdefault(f"redis-wait-replicas={wait}", []).append({
                "median_ms": round(statistics.median(took), 3),
                "p99_ms": round(took[int(len(took) * 0.99)], 3)})
        print(json.dumps(results, indent=1))
    finally:
        topology.stop()


if __name__ == "__main__":
    main()
