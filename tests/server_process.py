"""A real server node for tests: one gunicorn master (the deployed command) on a free port."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Mapping, Sequence

import psutil
import requests

from redis_support import free_port

REPO = Path(__file__).resolve().parent.parent
GUNICORN = ["-m", "gunicorn", "-c", "python:delayqueue.gunicorn_conf",
            "delayqueue.wsgi:app"]


def _group_alive(group: int) -> bool:
    """True while any process of the group is still running (zombies do not count)."""
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(proc.pid) == group and proc.status() != psutil.STATUS_ZOMBIE:
                return True
        except (ProcessLookupError, psutil.Error):
            continue
    return False


class ServerProcess:
    """Start with ``start()``; ``url`` is the base URL; ``stop()`` ends it gracefully.

    ``wrapper`` prefixes the command (e.g. ``["faketime", "+60s"]`` for a skewed clock).
    ``settings`` are delayqueue settings passed as DELAYQUEUE_* environment variables;
    ``python`` is the interpreter that runs gunicorn (benchmarks use the project's venv).
    """

    def __init__(self, redis_url: str, *, workers: int = 1, worker_class: str = "gevent",
                 settings: Mapping[str, object] | None = None,
                 wrapper: Sequence[str] = (), log_path: Path | None = None,
                 port: int | None = None, python: str = sys.executable) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ)
        values = {
            "redis-url": redis_url, "host": "127.0.0.1", "port": self.port,
            "workers": workers, "worker-class": worker_class, "snapshot-dir": "",
            "log-level": "warning", **(settings or {}),
        }
        for key, value in values.items():
            env["DELAYQUEUE_" + key.upper().replace("-", "_")] = str(value)
        env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
        self.env = env
        self.command = [*wrapper, python, *GUNICORN]
        self.log_path = log_path
        self.process: subprocess.Popen | None = None

    def start(self, timeout_s: float = 30.0) -> "ServerProcess":
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        # Its own process group: stop() signals the group, so a wrapper (faketime) that does
        # not forward signals cannot leave an orphaned gunicorn holding the leases.
        self.process = subprocess.Popen(self.command, env=self.env, cwd=REPO,
                                        stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}")
            try:
                if requests.get(self.url + "/camellia/health/check", timeout=1).ok:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("server did not answer within %.0fs" % timeout_s)

    def workers(self) -> list[psutil.Process]:
        return psutil.Process(self.process.pid).children()

    def kill_worker(self) -> int:
        """``kill -9`` one worker (gunicorn's master starts a new one); returns its pid."""
        victim = self.workers()[0]
        victim.send_signal(signal.SIGKILL)
        return victim.pid

    def stop(self) -> None:
        """SIGTERM the whole process group (graceful), SIGKILL whatever is left after 15 s."""
        if not self.process:
            return
        group = self.process.pid
        try:
            os.killpg(group, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and _group_alive(group):
            time.sleep(0.05)
        try:
            os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()

    def __enter__(self) -> "ServerProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def call(self, endpoint: str, timeout: float = 15.0, **params) -> dict:
        """POST a form to /camellia/delayQueue/<endpoint> and return the JSON envelope."""
        response = requests.post(f"{self.url}/camellia/delayQueue/{endpoint}", data=params,
                                 timeout=timeout)
        return response.json()
