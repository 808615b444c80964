"""Send throughput: single-message ``sendMsg`` requests from ``wrk`` (C, one thread).

wrk keeps ``--connections`` keep-alive connections busy for ``--duration`` seconds; a Lua
script gives every request its own msgId (so each one stores a new message) over 100 topics
with delays of 1 hour (nothing fires during the run). Afterwards the messages stored in Redis
are counted: every answered request must have stored one.

    python bench/send_wrk.py --duration 20 --connections 64
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess

from common import (
    node_workers_cpu,
    print_table,
    profile_summary,
    progress,
    stack,
    start_profile,
    write_result,
)

SCRIPT = r"""
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
local n = 0
local prefix = string.format("%08x", math.random(0, 0x7fffffff))
request = function()
  n = n + 1
  local body = "topic=wrk" .. (n % 100) .. "&msgId=" .. prefix .. "-" .. n ..
               "&msg=" .. string.rep("x", 64) .. "&delayMillis=3600000"
  return wrk.format(nil, nil, nil, body)
end
done = function(summary, latency, requests)
  io.write(string.format("DQ-LATENCY %.3f %.3f %.3f %.3f\n", latency:percentile(50) / 1000,
           latency:percentile(90) / 1000, latency:percentile(99) / 1000, latency.max / 1000))
  io.write(string.format("DQ-ERRORS %d %d\n", summary.errors.status,
           summary.errors.connect + summary.errors.read + summary.errors.write +
           summary.errors.timeout))
end
"""


def run(*, duration_s: int = 20, connections: int = 64, threads: int = 1,
        workers: int = 2, profile: bool = False) -> dict:
    wrk = shutil.which("wrk")
    if wrk is None:
        raise SystemExit("wrk not found: `apt-get install wrk` (make bench installs it)")
    with stack(workers=workers) as s:
        script = s.workdir / "send.lua"
        script.write_text(SCRIPT)
        url = s.base + "/camellia/delayQueue/sendMsg"
        progress(f"warm-up, then wrk -t{threads} -c{connections} -d{duration_s}s")
        subprocess.run([wrk, "-t1", "-c8", "-d2s", "-s", str(script), url], check=True,
                       capture_output=True)
        s.client.flushall()
        cpu0 = node_workers_cpu(s.node)
        spy = start_profile(s.node, duration_s - 2, s.workdir / "profile.txt") if profile \
            else None
        out = subprocess.run([wrk, f"-t{threads}", f"-c{connections}", f"-d{duration_s}s",
                              "-s", str(script), url], check=True, capture_output=True,
                             text=True).stdout
        cpu = node_workers_cpu(s.node) - cpu0
        hot = []
        if spy is not None:
            spy.wait(timeout=60)
            hot = profile_summary(s.workdir / "profile.txt")
        stored = sum(s.client.zcard(f"dq:{{default:wrk{i}}}:waiting") for i in range(100))
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p50, p90, p99, worst = map(float, re.search(r"DQ-LATENCY (\S+) (\S+) (\S+) (\S+)",
                                                 out).groups())
    status_errors, socket_errors = map(int, re.search(r"DQ-ERRORS (\d+) (\d+)", out).groups())
    return {"requests": requests, "send_rate": rate, "stored": stored,
            "latency_ms": {"p50": p50, "p90": p90, "p99": p99, "max": worst},
            "non_2xx": status_errors, "socket_errors": socket_errors,
            "node_cpu_us_per_request": round(cpu / max(requests, 1) * 1e6, 1),
            "profile": hot}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=20, help="seconds")
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1, help="wrk threads")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers of the node")
    parser.add_argument("--profile", action="store_true",
                        help="py-spy one worker and print its hottest functions")
    args = parser.parse_args(argv)
    settings = {"duration_s": args.duration, "connections": args.connections,
                "threads": args.threads, "workers": args.workers, "profile": args.profile}
    f = run(**settings)
    lat = f["latency_ms"]
    print_table("sendMsg throughput (wrk)", [
        ("requests", f["requests"]),
        ("throughput (msg/s)", f["send_rate"]),
        ("latency p50 / p90 / p99 / max (ms)",
         f"{lat['p50']} / {lat['p90']} / {lat['p99']} / {lat['max']}"),
        ("messages stored", f["stored"]),
        ("node worker CPU per request (us)", f["node_cpu_us_per_request"]),
        ("non-2xx / socket errors", f"{f['non_2xx']} / {f['socket_errors']}"),
    ])
    if f["profile"]:
        print_table("hottest functions of one worker (inclusive %)", f["profile"])
    write_result("send", f, settings)
    return 0 if f["non_2xx"] == 0 and f["stored"] >= f["requests"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
