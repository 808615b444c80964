"""The HTTP floor: what gunicorn and Flask cost per request before delayqueue does anything.

Serves two stand-in applications with the node's own gunicorn settings (its worker class,
``OneSendGeventWorker``, and the same number of workers) and drives each with the very
``sendMsg`` load of ``send_wrk.py`` (the same wrk script, connections and duration), counting
the workers' CPU per request exactly as ``send_wrk.py`` does for the node:

- ``wsgi``: a bare WSGI callable that reads the body and answers a fixed JSON line;
- ``flask``: a Flask app with one route that reads the form and answers ``jsonify``.

A single ``sendMsg`` cannot cost the node less than the ``flask`` figure while it is served by
Flask on gunicorn; ``send_wrk.py`` prints these beside its own figure (the bar of 250 us per
request is below this floor on the 2-core machine of docs/benchmarks.md).

    python bench/http_floor.py --duration 10
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import requests

HERE = Path(__file__).resolve().parent

APPS = r'''
from flask import Flask, jsonify, request

flask_app = Flask(__name__)


@flask_app.post("/camellia/delayQueue/sendMsg")
def send_msg():
    form = request.form
    return jsonify(code=200, msg="success", topic=form.get("topic"), msgId=form.get("msgId"))


def wsgi_app(environ, start_response):
    environ["wsgi.input"].read()
    body = b'{"code":200,"msg":"success"}\n'
    start_response("200 OK", [("Content-Type", "application/json"),
                              ("Content-Length", str(len(body)))])
    return [body]
'''


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _workers_cpu(master: psutil.Process) -> float:
    total = 0.0
    for child in master.children():
        try:
            times = child.cpu_times()
            total += times.user + times.system
        except psutil.Error:
            pass
    return total


def measure(app: str, wrk_run, *, workers: int = 2) -> dict:
    """Serve ``app`` (``wsgi_app`` or ``flask_app``) with the node's gunicorn settings and run
    ``wrk_run(url)`` (send_wrk's wrk call: it returns wrk's figures) against it."""
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="dq-floor-") as tmp:
        Path(tmp, "floor_apps.py").write_text(APPS)
        gunicorn = str(Path(sys.executable).with_name("gunicorn"))
        process = subprocess.Popen(
            [gunicorn, "--chdir", tmp, "-w", str(workers), "--worker-connections", "1000",
             "-k", "delayqueue.server.gunicorn_workers.OneSendGeventWorker", "--keep-alive", "5",
             "-b", f"127.0.0.1:{port}", "--log-level", "warning", f"floor_apps:{app}"])
        try:
            url = f"http://127.0.0.1:{port}/camellia/delayQueue/sendMsg"
            deadline = time.monotonic() + 30
            while True:
                try:
                    requests.post(url, data={"topic": "t"}, timeout=2)
                    break
                except requests.ConnectionError:
                    if time.monotonic() > deadline:
                        raise SystemExit(f"gunicorn serving {app} did not start") from None
                    time.sleep(0.2)
            master = psutil.Process(process.pid)
            wrk_run(url, warm_up=True)
            cpu0 = _workers_cpu(master)
            figures = wrk_run(url)
            cpu = _workers_cpu(master) - cpu0
        finally:
            process.terminate()
            process.wait(timeout=30)
    return {"request_rate": figures["request_rate"],
            "cpu_us_per_request": round(cpu / max(figures["requests"], 1) * 1e6, 1)}


def floor(wrk_run, *, workers: int = 2) -> dict:
    return {app: measure(f"{app}_app", wrk_run, workers=workers) for app in ("wsgi", "flask")}


def main() -> int:
    from send_wrk import DONE, SCRIPT, _wrk
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--connections", type=int, default=64)
    args = parser.parse_args()
    wrk = shutil.which("wrk")
    if wrk is None:
        raise SystemExit("wrk not found: `apt-get install wrk` (make bench installs it)")
    with tempfile.TemporaryDirectory(prefix="dq-floor-") as tmp:
        script = Path(tmp, "send.lua")
        script.write_text(SCRIPT + DONE)

        def run(url: str, warm_up: bool = False) -> dict:
            return _wrk(wrk, script, url, 1, 8 if warm_up else args.connections,
                        2 if warm_up else args.duration)

        for app, f in floor(run).items():
            print(f"{app:<6} {f['request_rate']:>10,.0f} requests/s  "
                  f"{f['cpu_us_per_request']:>7.1f} us worker CPU per request")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
