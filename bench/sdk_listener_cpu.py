"""SDK listener cost: client CPU and context switches per message of one ``listen()``.

One node; per round, ``--messages`` messages due now on a fresh topic, then one SDK listener
(``client.listen(topic, handler, limit=N)``: one pull thread, one consume thread, the
defaults) in a separate process, acking each. That process reports its own CPU time (user +
system) and context switches (voluntary and not) from ``getrusage(RUSAGE_SELF)``, which
counts every thread of it, over the listening alone (from ``listen`` until ``wait()``
returned: every ack answered), not its start-up.

"before" runs the SDK of a git ref (``--before-ref``, default main, exported with git
archive); "after" runs this checkout's. Rounds alternate before/after on the same node, so
both meet the same machine load; the figures are per message.

    python bench/sdk_listener_cpu.py --messages 5000 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import common
from common import REPO, print_table, progress, stack, write_result

sys.path.insert(0, str(REPO))
from delayqueue.client import DelayQueueClient  # noqa: E402

ROUND_TIMEOUT_S = 180.0   # a listener that has not finished by then is killed

LISTENER = r"""
import json, resource, sys, time
from delayqueue.client import DelayQueueClient

url, topic, count, timeout_s = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])

def usage():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime, u.ru_nvcsw, u.ru_nivcsw

with DelayQueueClient(url) as client:
    client.topic_info(topic)                 # imports done, one connection open
    cpu0, vol0, invol0 = usage()
    started = time.monotonic()
    consumer = client.listen(topic, lambda msg: True, limit=count)
    finished = consumer.wait(timeout_s)
    wall = time.monotonic() - started
    cpu1, vol1, invol1 = usage()
    acked = consumer.acked
    consumer.stop(grace_s=1)
print(json.dumps({"finished": finished, "acked": acked, "wall_s": wall, "cpu_s": cpu1 - cpu0,
                  "voluntary": vol1 - vol0, "involuntary": invol1 - invol0}))
"""


def export(ref: str, into: Path) -> Path:
    """The ``delayqueue`` package of git ``ref`` under ``into`` (its PYTHONPATH root)."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref, "delayqueue"],
                             check=True, capture_output=True, timeout=60).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True, timeout=60)
    return into


def one_round(base: str, source: Path, topic: str, count: int) -> dict[str, float]:
    with DelayQueueClient(base) as client:
        for start in range(0, count, 1000):
            results = client.send_batch(topic, [f"m{i}" for i in range(start,
                                                                        min(count, start + 1000))])
            assert all(r.code == 200 for r in results), results[:3]
    env = {**os.environ, "PYTHONPATH": str(source)}
    done = subprocess.run([sys.executable, "-c", LISTENER, base, topic, str(count),
                           str(ROUND_TIMEOUT_S - 30)], env=env, cwd=tempfile.gettempdir(),
                          capture_output=True, text=True, timeout=ROUND_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"listener failed: {done.stderr[-2000:]}")
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    if not figures["finished"] or figures["acked"] != count:
        raise RuntimeError(f"listener did not ack every message: {figures}")
    return {"cpu_us": round(figures["cpu_s"] / count * 1e6, 1),
            "voluntary": round(figures["voluntary"] / count, 2),
            "involuntary": round(figures["involuntary"] / count, 2),
            "msgs_per_s": round(count / figures["wall_s"], 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--before-ref", default="main")
    args = parser.parse_args(argv)
    if not Path(common.SERVER_PYTHON).exists():   # a worktree without its own .venv
        common.SERVER_PYTHON = sys.executable
    rows: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory(prefix="dq-sdk-before-") as tmp, stack() as s:
        sources = {"before": export(args.before_ref, Path(tmp)), "after": REPO}
        for i in range(args.rounds):
            for name in ("before", "after"):
                topic = f"sdk-cpu-{name}-{i}-{int(time.time())}"
                rows[name].append(one_round(s.base, sources[name], topic, args.messages))
                progress(f"round {i} {name}: {rows[name][-1]}")
    table = []
    for key, label in (("cpu_us", "listener CPU per message (us)"),
                       ("voluntary", "voluntary context switches per message"),
                       ("involuntary", "involuntary context switches per message"),
                       ("msgs_per_s", "messages per second")):
        for name in ("before", "after"):
            table.append((f"{label}, {name}", " / ".join(str(r[key]) for r in rows[name])))
    ratios = [round(a["cpu_us"] / b["cpu_us"], 2) for a, b in zip(rows["after"], rows["before"])]
    table.append(("CPU after / before, each round", " / ".join(map(str, ratios))))
    print_table(f"SDK listener, {args.messages} messages a round "
                f"(before: {args.before_ref}, after: this checkout)", table)
    write_result("sdk_listener_cpu", rows, {"messages": args.messages, "rounds": args.rounds,
                                            "before_ref": args.before_ref})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
