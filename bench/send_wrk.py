"""Send throughput from ``wrk`` (C, one thread): single-message ``sendMsg``, then
``sendMsgBatch`` with ``--batch-size`` messages a request, on the same node in the same run.

wrk keeps ``--connections`` keep-alive connections busy for ``--duration`` seconds per phase;
a Lua script gives every message its own msgId (so each one stores a new message) over 100
topics with delays of 1 hour (nothing fires during the run). Afterwards the messages stored
in Redis are counted: every answered request must have stored its messages. The batch phase
uses ``--batch-connections`` (a batch request is a hundred times the work of one send).

    python bench/send_wrk.py --duration 20 --connections 64
    python bench/send_wrk.py --batch-size 0          # sendMsg alone

A last phase measures the HTTP floor (``http_floor.py``): the same load on a bare WSGI app and
on a one-route Flask app under the same gunicorn settings, printed beside the node's figure.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
from pathlib import Path

import http_floor

from common import (
    node_workers_cpu,
    print_table,
    profile_summary,
    progress,
    stack,
    start_profile,
    write_result,
)

DONE = r"""
done = function(summary, latency, requests)
  io.write(string.format("DQ-LATENCY %.3f %.3f %.3f %.3f\n", latency:percentile(50) / 1000,
           latency:percentile(90) / 1000, latency:percentile(99) / 1000, latency.max / 1000))
  io.write(string.format("DQ-ERRORS %d %d\n", summary.errors.status,
           summary.errors.connect + summary.errors.read + summary.errors.write +
           summary.errors.timeout))
end
"""

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
"""


BATCH_SCRIPT = r"""
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local n = 0
local prefix = string.format("%08x", math.random(0, 0x7fffffff))
local body = string.rep("x", 64)
request = function()
  n = n + 1
  local parts = {}
  for j = 1, BATCH do
    parts[j] = '{"msgId":"' .. prefix .. "-" .. n .. "-" .. j .. '","msg":"' .. body ..
               '","delayMillis":3600000}'
  end
  return wrk.format(nil, nil, nil, '{"topic":"wrk' .. (n % 100) .. '","msgs":[' ..
                    table.concat(parts, ",") .. "]}")
end
"""


def _wrk(wrk: str, script: Path, url: str, threads: int, connections: int,
         duration_s: int) -> dict:
    out = subprocess.run([wrk, f"-t{threads}", f"-c{connections}", f"-d{duration_s}s",
                          "-s", str(script), url], check=True, capture_output=True,
                         text=True).stdout
    p50, p90, p99, worst = map(float, re.search(r"DQ-LATENCY (\S+) (\S+) (\S+) (\S+)",
                                                 out).groups())
    status_errors, socket_errors = map(int, re.search(r"DQ-ERRORS (\d+) (\d+)", out).groups())
    return {"requests": int(re.search(r"(\d+) requests in", out).group(1)),
            "request_rate": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
            "latency_ms": {"p50": p50, "p90": p90, "p99": p99, "max": worst},
            "non_2xx": status_errors, "socket_errors": socket_errors}


def stored_messages(client) -> int:
    return sum(client.zcard(f"dq:{{default:wrk{i}}}:waiting") for i in range(100))


def run_batch(s, wrk: str, *, duration_s: int, connections: int, threads: int,
              batch_size: int) -> dict:
    """The sendMsgBatch phase, on the running stack, after the single-send phase."""
    script = s.workdir / "batch.lua"
    script.write_text(BATCH_SCRIPT.replace("BATCH", str(batch_size)) + DONE)
    url = s.base + "/camellia/delayQueue/sendMsgBatch"
    subprocess.run([wrk, "-t1", "-c4", "-d2s", "-s", str(script), url], check=True,
                   capture_output=True)
    s.client.flushall()
    cpu0 = node_workers_cpu(s.node)
    f = _wrk(wrk, script, url, threads, connections, duration_s)
    cpu = node_workers_cpu(s.node) - cpu0
    messages = f["requests"] * batch_size
    f.update({"batch_size": batch_size, "msg_rate": round(f["request_rate"] * batch_size, 1),
              "stored": stored_messages(s.client),
              "node_cpu_us_per_message": round(cpu / max(messages, 1) * 1e6, 1)})
    return f


def run(*, duration_s: int = 20, connections: int = 64, threads: int = 1,
        workers: int = 2, profile: bool = False, batch_size: int = 100,
        batch_connections: int = 8, floor: bool = True) -> dict:
    wrk = shutil.which("wrk")
    if wrk is None:
        raise SystemExit("wrk not found: `apt-get install wrk` (make bench installs it)")
    with stack(workers=workers) as s:
        script = s.workdir / "send.lua"
        script.write_text(SCRIPT + DONE)
        url = s.base + "/camellia/delayQueue/sendMsg"
        progress(f"warm-up, then wrk -t{threads} -c{connections} -d{duration_s}s")
        subprocess.run([wrk, "-t1", "-c8", "-d2s", "-s", str(script), url], check=True,
                       capture_output=True)
        s.client.flushall()
        cpu0 = node_workers_cpu(s.node)
        spy = start_profile(s.node, duration_s - 2, s.workdir / "profile.txt") if profile \
            else None
        f = _wrk(wrk, script, url, threads, connections, duration_s)
        cpu = node_workers_cpu(s.node) - cpu0
        hot = []
        if spy is not None:
            spy.wait(timeout=60)
            hot = profile_summary(s.workdir / "profile.txt")
        f.update({"send_rate": f["request_rate"], "stored": stored_messages(s.client),
                  "node_cpu_us_per_request": round(cpu / max(f["requests"], 1) * 1e6, 1),
                  "profile": hot})
        if batch_size:
            progress(f"sendMsgBatch: {batch_size} messages a request, wrk -t{threads} "
                     f"-c{batch_connections} -d{duration_s}s")
            f["batch"] = run_batch(s, wrk, duration_s=duration_s,
                                   connections=batch_connections, threads=threads,
                                   batch_size=batch_size)
            f["batch_msg_rate"] = f["batch"]["msg_rate"]
            f["batch_ratio"] = round(f["batch"]["msg_rate"] / max(f["send_rate"], 1e-9), 2)
        if floor:
            progress("the HTTP floor: the same sendMsg load on a bare WSGI app and on a "
                     "one-route Flask app, same gunicorn settings")

            def wrk_run(url: str, warm_up: bool = False) -> dict:
                return _wrk(wrk, script, url, threads, 8 if warm_up else connections,
                            2 if warm_up else duration_s)

            f["floor"] = http_floor.floor(wrk_run, workers=workers)
            f["floor_flask_cpu_us"] = f["floor"]["flask"]["cpu_us_per_request"]
    return f


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=20, help="seconds")
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1, help="wrk threads")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers of the node")
    parser.add_argument("--profile", action="store_true",
                        help="py-spy one worker and print its hottest functions")
    parser.add_argument("--batch-size", type=int, default=100,
                        help="messages per sendMsgBatch request (0: no batch phase)")
    parser.add_argument("--batch-connections", type=int, default=8)
    parser.add_argument("--no-floor", dest="floor", action="store_false",
                        help="skip the HTTP floor phase (bench/http_floor.py)")
    args = parser.parse_args(argv)
    settings = {"duration_s": args.duration, "connections": args.connections,
                "threads": args.threads, "workers": args.workers, "profile": args.profile,
                "batch_size": args.batch_size, "batch_connections": args.batch_connections,
                "floor": args.floor}
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
    ok = f["non_2xx"] == 0 and f["stored"] >= f["requests"]
    if "batch" in f:
        b = f["batch"]
        lat = b["latency_ms"]
        print_table(f"sendMsgBatch throughput (wrk, {b['batch_size']} a request)", [
            ("requests", b["requests"]),
            ("throughput (msg/s)", b["msg_rate"]),
            ("ratio to single sendMsg", f["batch_ratio"]),
            ("latency p50 / p90 / p99 / max (ms)",
             f"{lat['p50']} / {lat['p90']} / {lat['p99']} / {lat['max']}"),
            ("messages stored", b["stored"]),
            ("node worker CPU per message (us)", b["node_cpu_us_per_message"]),
            ("non-2xx / socket errors", f"{b['non_2xx']} / {b['socket_errors']}"),
        ])
        ok = ok and b["non_2xx"] == 0 and b["stored"] >= b["requests"] * b["batch_size"]
    if "floor" in f:
        print_table("the HTTP floor, same load and gunicorn settings (worker CPU per request)", [
            ("bare WSGI app (us)", f["floor"]["wsgi"]["cpu_us_per_request"]),
            ("one-route Flask app, form in, jsonify out (us)", f["floor_flask_cpu_us"]),
            ("sendMsg, the node (us)", f["node_cpu_us_per_request"]),
        ])
    if f["profile"]:
        print_table("hottest functions of one worker (inclusive %)", f["profile"])
    write_result("send", f, settings)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
