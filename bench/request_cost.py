"""The request path's own cost, in CPU instructions: repeatable on a busy machine.

Wall-clock and CPU-time figures move with whatever else the 2 cores are doing; the number of
instructions a process executes does not. This drives the real Flask app in-process (the
WSGI callable, as gunicorn's worker calls it, without gunicorn's HTTP parsing) against a real
redis-server, under ``valgrind --tool=callgrind``, twice: with ``--requests`` and with
``--requests * 6`` (a tenth of those for sendMsgBatch, 100 messages each). The difference over the extra requests is the instructions per request
of our code, Flask, Werkzeug and redis-py (Redis's own work is in another process and not
counted). Each lean step of the request path was measured with it before and after.

    python bench/request_cost.py                       # sendMsg, sendMsgBatch, ackMsg
    python bench/request_cost.py --only sendMsg --requests 200
    python bench/request_cost.py --inner sendMsg 100   # one run, no valgrind (used inside)
"""

from __future__ import annotations

import argparse
import io
import json
import re
import subprocess
import sys
import tempfile
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


def inner(kind: str, count: int) -> None:
    """Run ``count`` requests of ``kind`` (after a warm-up) against a fresh redis-server."""
    from delayqueue.app import create_app

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
                call("pullMsg", form(topic="acks", batch=total, ackTimeoutMillis=3_600_000),
                     "application/x-www-form-urlencoded")
            for i in range(count + 20):   # 20 warm-up requests are in both runs: they cancel
                answer = request(i)
            assert json.loads(answer)["code"] == 200, answer
        finally:
            server.stop()


def instructions(kind: str, count: int) -> int:
    with tempfile.TemporaryDirectory(prefix="dq-cg-") as tmp:
        out = Path(tmp) / "callgrind.out"
        subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                        sys.executable, __file__, "--inner", kind, str(count)],
                       check=True, capture_output=True, text=True)
        summary = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.MULTILINE)
        return int(summary.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default=",".join(KINDS))
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--inner", nargs=2, metavar=("KIND", "COUNT"))
    args = parser.parse_args()
    if args.inner:
        inner(args.inner[0], int(args.inner[1]))
        return 0
    for kind in args.only.split(","):
        small = max(2, args.requests // (10 if kind == "sendMsgBatch" else 1))
        large = small * 6
        print(f"[{kind}] callgrind: {small} and {large} requests ...", file=sys.stderr,
              flush=True)
        per_request = (instructions(kind, large) - instructions(kind, small)) / (large - small)
        per_message = per_request / (BATCH if kind == "sendMsgBatch" else 1)
        print(f"{kind:<14} {per_request / 1e6:8.3f} M instructions per request, "
              f"{per_message / 1e3:8.1f} k per message", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
