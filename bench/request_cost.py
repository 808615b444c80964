"""The request path's own CPU cost, compared between source trees in alternating rounds.

This drives the real Flask app in-process (the WSGI callable, as gunicorn's worker calls
it, without gunicorn's HTTP parsing) against a real redis-server and measures the process
CPU time of the request loop alone (Redis's work is in its own process and not counted).
On a shared machine a single figure moves with whatever else runs, so ``--tree`` takes
several source trees (say, a checkout of the commit before a change and this one): their
runs alternate, round after round (ABAB...), all seeing the same noise, and the summary
gives each tree's median and its ratio to the first. Each lean step of the request path
was measured this way (docs/benchmarks.md).

    python bench/request_cost.py                                  # this tree alone
    python bench/request_cost.py --tree /tmp/before --tree .      # before / after
    python bench/request_cost.py --only sendMsg --rounds 10 --requests 500
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests"), str(HERE.parent)]

BODY = "x" * 64
KINDS = ("sendMsg", "sendMsgBatch", "ackMsg")
BATCH = 100


def environ(path: str, body: bytes, content_type: str) -> dict:
    return {"REQUEST_METHOD": "POST", "PATH_INFO": f"/camellia/delayQueue/{path}",
            "QUERY_STRING": "", "SERVER_NAME": "bench", "SERVER_PORT": "80",
            "CONTENT_TYPE": content_type, "CONTENT_LENGTH": str(len(body)),
            "wsgi.input": io.BytesIO(body), "wsgi.url_scheme": "http",
            "SERVER_PROTOCOL": "HTTP/1.1", "wsgi.errors": sys.stderr}


def form(**values: object) -> bytes:
    return "&".join(f"{k}={v}" for k, v in values.items()).encode()


def inner(kind: str, count: int) -> float:
    """Run ``count`` requests of ``kind`` (after a warm-up) against a fresh redis-server."""
    from delayqueue.http.app import create_app

    from support.redis_server import RedisServer

    with tempfile.TemporaryDirectory(prefix="dq-cost-") as tmp:
        server = RedisServer(Path(tmp)).start()
        try:
            app = create_app({"redis_url": server.url, "snapshot_dir": ""})
            statuses: list[str] = []

            def call(path: str, body: bytes, content_type: str) -> bytes:
                out = b"".join(app(environ(path, body, content_type),
                                   lambda status, headers, exc=None: statuses.append(status)))
                return out

            def request(i: int) -> bytes:
                if kind == "sendMsg":
                    return call("sendMsg", form(topic=f"t{i % 100}", msgId=f"id{i}", msg=BODY,
                                                delayMillis=3_600_000),
                                "application/x-www-form-urlencoded")
                if kind == "sendMsgBatch":
                    body = json.dumps({"topic": f"t{i % 100}", "msgs": [
                        {"msgId": f"id{i}-{j}", "msg": BODY, "delayMillis": 3_600_000}
                        for j in range(BATCH)]}).encode()
                    return call("sendMsgBatch", body, "application/json")
                # ackMsg of a message delivered beforehand (its send and pull not counted)
                return call("ackMsg", form(topic="acks", msgId=f"id{i}"),
                            "application/x-www-form-urlencoded")

            if kind == "ackMsg":
                total = count + 20
                for i in range(total):
                    call("sendMsg", form(topic="acks", msgId=f"id{i}", msg=BODY),
                         "application/x-www-form-urlencoded")
                for _ in range(0, total, 1000):
                    call("pullMsg", form(topic="acks", batch=1000, ackTimeoutMillis=3_600_000),
                         "application/x-www-form-urlencoded")
            for i in range(20):           # warm-up, not measured
                request(10**7 + i)
            started = time.process_time()
            for i in range(count):
                answer = request(i)
            cpu = time.process_time() - started
            assert json.loads(answer)["code"] == 200, answer
            return cpu
        finally:
            server.stop()


def measure(tree: Path, kind: str, count: int) -> float:
    """CPU seconds of ``count`` requests of ``kind``, run from the source tree ``tree``."""
    out = subprocess.run([sys.executable, str(tree / "bench" / "request_cost.py"), "--inner",
                          kind, str(count)], check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default=",".join(KINDS))
    parser.add_argument("--requests", type=int, default=400,
                        help="requests per round (a tenth of them for sendMsgBatch)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--tree", action="append", type=Path,
                        help="a source tree to measure (repeat to compare; default: this one)")
    parser.add_argument("--inner", nargs=2, metavar=("KIND", "COUNT"))
    args = parser.parse_args()
    if args.inner:
        print(inner(args.inner[0], int(args.inner[1])))
        return 0
    trees = [t.resolve() for t in (args.tree or [HERE.parent])]
    for kind in args.only.split(","):
        count = max(2, args.requests // (10 if kind == "sendMsgBatch" else 1))
        per_message = BATCH if kind == "sendMsgBatch" else 1
        samples: dict[Path, list[float]] = {t: [] for t in trees}
        for r in range(args.rounds):
            for tree in (trees if r % 2 == 0 else trees[::-1]):
                samples[tree].append(measure(tree, kind, count) / count * 1e6)
            print(f"[{kind}] round {r + 1}/{args.rounds}: " + ", ".join(
                f"{samples[t][-1]:.0f}" for t in trees) + " us", file=sys.stderr, flush=True)
        base = statistics.median(samples[trees[0]])
        for tree in trees:
            med = statistics.median(samples[tree])
            print(f"{kind:<13} {str(tree):<40} {med:8.1f} us CPU per request, "
                  f"{med / per_message:7.1f} per message, x{med / base:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
