"""A node's start, from real processes: one log format, no MonkeyPatchWarning, where the
console and the docs are, a port in use stops it at once, and a loud warning when it serves
every address with authentication off (delayqueue/server/startup.py, server/logs.py)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from delayqueue.server.startup import insecure_line, port_in_use, urls_line
from delayqueue.settings.config import load_settings

from support.node import REPO, ServerProcess
from support.ports import PORT_TAKEN, free_port, refused_port
from support.wait import wait_until

DELAYQUEUE = Path(sys.executable).parent / "delayqueue"
# LOG_FORMAT (delayqueue/server/logs.py): UTC time with milliseconds, pid, level, logger.
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \[(\d+)\] "
                      r"\[(DEBUG|INFO|WARNING|ERROR|CRITICAL)\] [\w.]+: .+$")
READ_FOR_S = 10.0
TOKENS = [{"name": "ops", "secret": "s" * 24, "roles": ["admin"]}]


def serve_env(**values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DELAYQUEUE_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update(values)
    return env


# What gunicorn's master runs of ours before it binds: the config module, then on_starting.
MASTER_START = "import delayqueue.gunicorn_conf as conf\nconf.on_starting(None)\n"


def master_env(redis_url: str, **values: str) -> dict[str, str]:
    """A master's environment on a loopback port free when asked (its own check is the
    port's: a port taken meanwhile fails the test with that line, not silently)."""
    return serve_env(DELAYQUEUE_REDIS_URL=redis_url, DELAYQUEUE_HOST="127.0.0.1",
                     DELAYQUEUE_PORT=str(free_port()), **values)


def listening_socket(host: str = "127.0.0.1") -> socket.socket:
    sock = socket.socket()
    sock.bind((host, 0))
    sock.listen()
    return sock


# -- the lines themselves ------------------------------------------------------------------
def test_the_urls_line_names_the_bound_address_or_loopback_for_every_address():
    assert urls_line("127.0.0.1", 8080) == (
        "console: http://127.0.0.1:8080/dashboard/  docs: http://127.0.0.1:8080/docs")
    assert urls_line("0.0.0.0", 8080) == (
        "console: http://127.0.0.1:8080/dashboard/  docs: http://127.0.0.1:8080/docs  "
        "(listening on 0.0.0.0: every address of this machine)")
    assert urls_line("::", 81).startswith("console: http://[::1]:81/dashboard/  docs: "
                                          "http://[::1]:81/docs  (listening on ::: ")
    assert urls_line("::1", 81) == "console: http://[::1]:81/dashboard/  docs: http://[::1]:81/docs"
    assert urls_line("10.1.2.3", 81) == (
        "console: http://10.1.2.3:81/dashboard/  docs: http://10.1.2.3:81/docs")


def test_the_warning_is_for_an_address_off_loopback_without_tokens_only():
    open_settings = load_settings(env={})
    with_tokens = load_settings(env={}, overrides={"auth-tokens": json.dumps(TOKENS)})
    for loopback in ("127.0.0.1", "::1", "127.0.0.2"):
        assert insecure_line([(loopback, 8080)], open_settings) is None
    for exposed in ("0.0.0.0", "::", "10.1.2.3"):
        line = insecure_line([(exposed, 8080)], open_settings)
        assert line.startswith(f"NO AUTHENTICATION: listening on {exposed}:8080 with no "
                               "auth-tokens set")
        assert insecure_line([(exposed, 8080)], with_tokens) is None


def test_port_in_use_sees_a_listener_and_not_a_free_port():
    with listening_socket() as taken:
        port = taken.getsockname()[1]
        assert port_in_use("127.0.0.1", port)
        assert port_in_use("0.0.0.0", port)       # every address includes the taken one
    assert not port_in_use("127.0.0.1", port)


# -- gunicorn's master ---------------------------------------------------------------------
def test_gunicorn_master_imports_no_redis_py(redis_url):
    """A worker forked from a master holding redis-py (which takes ssl.SSLContext by name in
    redis.asyncio) is monkey-patched by gevent too late: the MonkeyPatchWarning."""
    code = (f"import sys\n{MASTER_START}"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('redis', 'urllib3')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=master_env(redis_url), cwd=REPO, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", result.stdout


def test_a_storage_refusal_in_the_masters_check_still_stops_gunicorn(redis_url, redis_client):
    redis_client.set("dq:{default}:storage-format", "records-9")
    result = subprocess.run([sys.executable, "-c", MASTER_START], capture_output=True,
                            text=True, cwd=REPO, timeout=60, env=master_env(redis_url))
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("delayqueue: storage: namespace 'default'"), result.stderr


def test_an_unreachable_redis_in_the_masters_check_is_a_warning_and_gunicorn_starts():
    """The check's child exits 0 when it cannot reach Redis (a node starts whenever Redis is
    down): one warning line, in LOG_FORMAT, from the child, not the master."""
    code = f"import os\n{MASTER_START}print(os.getpid())"
    with refused_port() as port:
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                cwd=REPO, timeout=60,
                                env=master_env(f"redis://127.0.0.1:{port}"))
    assert result.returncode == 0, result.stderr
    [line] = result.stderr.splitlines()
    pid, level = LOG_LINE.match(line).groups()
    assert level == "WARNING" and pid != result.stdout.strip(), line
    assert "storage format not checked, Redis unreachable" in line, line


@pytest.mark.parametrize("inherited", [None, "GUNICORN_FD", "LISTEN_FDS"])
def test_the_masters_port_check_skips_sockets_handed_over(redis_url, inherited):
    """A USR2 re-exec or systemd hands the master its listening sockets (the port is in use
    by design): only a master binding its own port stops on a port in use."""
    code = f"{MASTER_START}print('started')"
    env = {inherited: "3"} if inherited else {}
    with listening_socket() as taken:
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60,
            env=serve_env(DELAYQUEUE_REDIS_URL=redis_url, DELAYQUEUE_HOST="127.0.0.1",
                          DELAYQUEUE_PORT=str(port), **env))
    if inherited:
        assert (result.returncode, result.stdout) == (0, "started\n"), result.stderr
    else:
        assert result.returncode == 2, result.stderr
        assert result.stderr == f"port {port} is in use; choose another with DELAYQUEUE_PORT\n"


def test_gunicorn_on_a_port_in_use_exits_at_once_with_one_line(redis_url):
    with listening_socket() as taken:
        port = taken.getsockname()[1]
        started = time.monotonic()
        result = subprocess.run(
            [sys.executable, "-m", "gunicorn", "-c", "python:delayqueue.gunicorn_conf",
             "delayqueue.wsgi:app"], capture_output=True, text=True, cwd=REPO, timeout=60,
            env=serve_env(DELAYQUEUE_REDIS_URL=redis_url, DELAYQUEUE_HOST="127.0.0.1",
                          DELAYQUEUE_PORT=str(port), DELAYQUEUE_LOG_LEVEL="warning"))
        took = time.monotonic() - started
    assert result.returncode == 2, result.stderr
    assert result.stderr == f"port {port} is in use; choose another with DELAYQUEUE_PORT\n"
    assert took < 3.0, f"took {took:.2f} s: gunicorn retried its bind"


def test_gunicorn_checks_the_port_before_the_storage_which_waits_on_redis():
    """A Redis that accepts and never answers holds the storage check for its socket timeout
    (10 s here); a port in use stops the master first, without asking Redis at all."""
    with listening_socket() as mute_redis, listening_socket() as taken:
        port = taken.getsockname()[1]
        started = time.monotonic()
        result = subprocess.run(
            [sys.executable, "-m", "gunicorn", "-c", "python:delayqueue.gunicorn_conf",
             "delayqueue.wsgi:app"], capture_output=True, text=True, cwd=REPO, timeout=60,
            env=serve_env(DELAYQUEUE_REDIS_URL=f"redis://127.0.0.1:{mute_redis.getsockname()[1]}",
                          DELAYQUEUE_REDIS_SOCKET_TIMEOUT_MILLIS="10000",
                          DELAYQUEUE_HOST="127.0.0.1", DELAYQUEUE_PORT=str(port),
                          DELAYQUEUE_LOG_LEVEL="warning"))
        took = time.monotonic() - started
    assert result.returncode == 2, result.stderr
    assert result.stderr == f"port {port} is in use; choose another with DELAYQUEUE_PORT\n"
    assert took < 5.0, f"took {took:.2f} s: the storage check waited on Redis first"


@pytest.mark.parametrize("tokens, warned", [(None, True), (TOKENS, False)])
def test_a_node_on_every_address_warns_once_from_its_master_without_tokens(
        redis_url, tmp_path, tokens, warned):
    settings = {"host": "0.0.0.0", "log-level": "info"}
    if tokens:
        settings["auth-tokens"] = json.dumps(tokens)
    log_path = tmp_path / "node.log"
    with ServerProcess(redis_url, workers=2, settings=settings, log_path=log_path) as node:
        master = node.process.pid
        wait_until(lambda: log_path.read_text().count("background loops started") == 2, 30,
                   message=log_path.read_text)
        lines = log_path.read_text().splitlines()
    warnings = [line for line in lines if "NO AUTHENTICATION" in line]
    if warned:
        assert len(warnings) == 1, warnings
        assert LOG_LINE.match(warnings[0]).groups() == (str(master), "WARNING"), warnings
    else:
        assert warnings == []
    shown = [line for line in lines if "console: " in line]
    assert len(shown) == 1 and shown[0].endswith(
        f"console: http://127.0.0.1:{node.port}/dashboard/  docs: "
        f"http://127.0.0.1:{node.port}/docs  (listening on 0.0.0.0: every address of this "
        "machine)"), shown


# -- delayqueue serve ----------------------------------------------------------------------
def test_serve_on_a_port_in_use_exits_at_once_before_starting_redis(tmp_path):
    data_dir = tmp_path / "data"
    # The control: the same command refused by its settings, which it reads first. The
    # port's check comes right after them: no bind retried, no Redis started.
    started = time.monotonic()
    control = subprocess.run([str(DELAYQUEUE), "serve", "--workers", "0"], capture_output=True,
                             text=True, env=serve_env(), timeout=60)
    control_s = time.monotonic() - started
    assert control.returncode == 2, control.stderr
    with listening_socket() as taken:
        port = taken.getsockname()[1]
        started = time.monotonic()
        result = subprocess.run(
            [str(DELAYQUEUE), "serve", "--host", "127.0.0.1", "--port", str(port),
             "--data-dir", str(data_dir)],
            capture_output=True, text=True, env=serve_env(), timeout=60)
        took = time.monotonic() - started
    assert result.returncode != 0
    assert result.stderr == f"port {port} is in use; choose another with --port\n"
    assert not data_dir.exists(), "the embedded Redis was started"
    assert took < max(3.0, control_s + 1.0), f"took {took:.2f} s (control {control_s:.2f} s)"


def test_serve_starts_in_one_log_format_without_a_monkey_patch_warning(tmp_path):
    """stderr of a real ``delayqueue serve`` (embedded Redis, two gevent workers), read for
    10 s: every line in LOG_FORMAT, from serve, gunicorn's master and both workers; the
    console's address once; no warning about the address (loopback)."""
    log_path = tmp_path / "serve.log"
    env = serve_env(DELAYQUEUE_LOG_LEVEL="info",
                    DELAYQUEUE_SNAPSHOT_DIR=str(tmp_path / "snapshots"))
    for _ in range(5):      # a free port may be taken before gunicorn binds it
        port = free_port()
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [str(DELAYQUEUE), "serve", "--host", "127.0.0.1", "--port", str(port),
                 "--workers", "2", "--data-dir", str(tmp_path / "data")],
                cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=log)
        started = time.monotonic()
        try:
            def read() -> str | None:
                text = log_path.read_text(errors="replace")
                if any(taken in text for taken in PORT_TAKEN):
                    return "taken"
                assert proc.poll() is None, text
                done = (text.count("background loops started") == 2
                        and time.monotonic() - started >= READ_FOR_S)
                return text if done else None

            text = wait_until(read, READ_FOR_S + 60, interval_s=0.2,
                              message=lambda: log_path.read_text(errors="replace"))
        finally:
            proc.send_signal(signal.SIGTERM)
            returncode = proc.wait(60)
        if text != "taken":
            break
    else:
        pytest.fail(f"no free port could be served:\n{log_path.read_text()}")
    assert returncode == 0, log_path.read_text()
    assert "MonkeyPatchWarning" not in text
    pids = set()
    for line in text.splitlines():
        match = LOG_LINE.match(line)
        assert match, f"not in LOG_FORMAT: {line!r}"
        pids.add(match.group(1))
    assert len(pids) >= 4, f"serve, master and two workers: {pids}"
    shown = [line for line in text.splitlines() if "console: " in line]
    assert len(shown) == 1 and shown[0].endswith(
        f"console: http://127.0.0.1:{port}/dashboard/  docs: http://127.0.0.1:{port}/docs")
    assert "NO AUTHENTICATION" not in text
