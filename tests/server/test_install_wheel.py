"""A plain install serves: the wheel alone, no extras, in a fresh venv, against a real Redis.

This is what the Dockerfile and a user of the wheel do (``pip install .`` / the wheel), and
what ``make run`` / ``make test`` cannot show: their venv has the dev and report extras, which
once hid a dependency the server needs (gunicorn 27's gevent worker imports `packaging`).

The venv is made without pip (``python -m venv --without-pip``) and the dev venv's pip
installs into it (``pip --python``): the same packages land in it, seconds faster. The
dependencies come from PyPI through pip's cache.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import requests
from test_wheel import build_wheel

from support import wait_until
from support.ports import free_port

pytestmark = pytest.mark.slow

START_TIMEOUT_S = 60


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


@pytest.fixture(scope="module")
def plain_venv(tmp_path_factory) -> Path:
    """A fresh venv holding the wheel and its runtime dependencies only (no extras)."""
    wheel = build_wheel(tmp_path_factory)
    venv = tmp_path_factory.mktemp("plain") / "venv"
    python = venv / "bin" / "python"
    env = _clean_env()
    if _pip_can_target_other_python():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)],
                       check=True, timeout=120)
        pip = [sys.executable, "-m", "pip", "--python", str(python)]
    else:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
        pip = [str(python), "-m", "pip"]
    result = subprocess.run([*pip, "install", "-q", "--no-compile", str(wheel)],
                            capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, f"pip install of the wheel failed:\n{result.stderr}"
    return venv


def test_plain_install_has_only_runtime_dependencies(plain_venv, tmp_path):
    probe = ("import importlib.util as u, delayqueue, gunicorn, packaging\n"
             "print(delayqueue.__file__)\n"
             "print(u.find_spec('pytest') is None, u.find_spec('pyspark') is None)\n")
    result = subprocess.run([str(plain_venv / "bin" / "python"), "-c", probe], cwd=tmp_path,
                            env=_clean_env(), capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    where, no_extras = result.stdout.splitlines()
    assert Path(where).is_relative_to(plain_venv), where  # not the checkout
    assert no_extras == "True True"  # the extras really are absent


def test_plain_install_serves_send_and_pull(plain_venv, redis_url, tmp_path):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    stderr_path = tmp_path / "serve.stderr"
    # cwd: an empty directory, so neither ./config nor the checkout's files are found.
    with open(stderr_path, "wb") as stderr:
        proc = subprocess.Popen(
            [str(plain_venv / "bin" / "delayqueue"), "serve", "--redis-url", redis_url,
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
