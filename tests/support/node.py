"""A real server node for tests: one gunicorn master (the deployed command) on a free port."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Mapping, Sequence

import psutil
import requests

from support.ports import (
    PORT_TAKEN,
    PortTaken,
    free_port,
    listening_pids,
    start_on_a_free_port,
)
from support.wait import wait_until

REPO = Path(__file__).resolve().parent.parent.parent
GUNICORN = ["-m", "gunicorn", "-c", "python:delayqueue.gunicorn_conf",
            "delayqueue.wsgi:app"]
# Set by tests/settings/test_redis_acl.py for a suite run under a Redis ACL: "user:password"
# the nodes log in with, and the ACL file the session's redis-server loads (tests/conftest.py).
USER_ENV_VAR = "DQTEST_REDIS_USER"
ACLFILE_ENV_VAR = "DQTEST_REDIS_ACLFILE"


def as_test_user(url: str) -> str:
    """``url`` with $DQTEST_REDIS_USER's credentials, when a suite runs under an ACL."""
    user = os.environ.get(USER_ENV_VAR)
    if not user or "@" in url or not url.startswith("redis://"):
        return url
    return "redis://" + user + "@" + url[len("redis://"):]


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
    Without ``port`` it takes a free one, and starts again on another if a different process
    turns out to hold it (the node must be the one listening, not merely something answering).
    """

    def __init__(self, redis_url: str, *, workers: int = 1, worker_class: str = "gevent",
                 settings: Mapping[str, object] | None = None,
                 wrapper: Sequence[str] = (), log_path: Path | None = None,
                 port: int | None = None, python: str = sys.executable) -> None:
        self.redis_url = redis_url
        self.fixed_port = port is not None
        self.port = port or free_port()
        self._values = {
            "redis-url": as_test_user(redis_url), "host": "127.0.0.1",
            "workers": workers, "worker-class": worker_class, "snapshot-dir": "",
            "log-level": "warning", **(settings or {}),
        }
        self.command = [*wrapper, python, *GUNICORN]
        self.log_path = log_path
        self._own_log = log_path is None
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        for key, value in {**self._values, "port": self.port}.items():
            if value is not None:  # None: not set here (e.g. redis-url read from a file)
                env["DELAYQUEUE_" + key.upper().replace("-", "_")] = str(value)
        env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
        return env

    def start(self, timeout_s: float = 30.0) -> "ServerProcess":
        if self.log_path is None:
            handle, name = tempfile.mkstemp(prefix="dq-node-", suffix=".log")
            os.close(handle)
            self.log_path = Path(name)
        self.log_path.touch()    # a log path given by the caller may not exist yet
        try:
            start_on_a_free_port(self, lambda: self._start_once(timeout_s))
        except BaseException:
            self.stop()  # nothing left running; the error carries the log's tail
            raise
        return self

    def _start_once(self, timeout_s: float) -> "ServerProcess":
        offset = self.log_path.stat().st_size
        with open(self.log_path, "ab") as log:
            # Its own process group: stop() signals the group, so a wrapper (faketime) that
            # does not forward signals cannot leave an orphaned gunicorn holding the leases.
            self.process = subprocess.Popen(self.command, env=self.env, cwd=REPO,
                                            stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            output = self._log_since(offset)
            if any(text in output for text in PORT_TAKEN):
                # Still retrying its bind, gunicorn defers SIGTERM: nothing to shut down gently.
                self._terminate(graceful=False)
                raise PortTaken(f"port {self.port} is taken:\n{output[-2000:]}")
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}:\n"
                                   f"{output[-4000:]}")
            try:
                if requests.get(self.url + "/camellia/health/check", timeout=1).ok:
                    if not listening_pids(self._pids(), self.port):
                        self._terminate(graceful=False)
                        raise PortTaken(f"port {self.port} is answered by another process")
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.05)
        output = self._log_since(offset)
        self._terminate()
        raise RuntimeError(f"server did not answer within {timeout_s:.0f}s:\n{output[-4000:]}")

    def _log_since(self, offset: int) -> str:
        with open(self.log_path, "rb") as log:
            log.seek(offset)
            return log.read().decode(errors="replace")

    def _pids(self) -> list[int]:
        try:
            root = psutil.Process(self.process.pid)
            return [root.pid, *(child.pid for child in root.children(recursive=True))]
        except psutil.Error:
            return []

    def workers(self) -> list[psutil.Process]:
        return psutil.Process(self.process.pid).children()

    def kill_worker(self) -> int:
        """``kill -9`` one worker (gunicorn's master starts a new one); returns its pid."""
        victim = self.workers()[0]
        victim.send_signal(signal.SIGKILL)
        return victim.pid

    def stop(self) -> None:
        """SIGTERM the whole process group (graceful), SIGKILL whatever is left after 15 s."""
        self._terminate()
        if self._own_log and self.log_path is not None:
            self.log_path.unlink(missing_ok=True)
            self.log_path = None

    def _terminate(self, graceful: bool = True) -> None:
        if not self.process:
            return
        group = self.process.pid
        if graceful:
            try:
                os.killpg(group, signal.SIGTERM)
            except ProcessLookupError:
                self.process.wait()
                return
            try:
                wait_until(lambda: not _group_alive(group), 15, interval_s=0.05)
            except AssertionError:
                pass  # still running: SIGKILL
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
