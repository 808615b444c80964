"""Helpers of the CLI tests (tests/cli): the installed ``delayqueue`` command run as a
subprocess against a server URL, and the check of a one-line failure."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The real entry point: the `delayqueue` console script pyproject.toml installs into the venv
# that runs the tests ([project.scripts] delayqueue = "delayqueue.cli:main").
DELAYQUEUE = Path(sys.executable).parent / "delayqueue"


def env_for(url: str) -> dict[str, str]:
    """The environment of a command: $DELAYQUEUE_URL, and this tree's code first."""
    env = dict(os.environ, DELAYQUEUE_URL=url)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def popen(url: str, *argv: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([str(DELAYQUEUE), *argv], env=env_for(url),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


def run(url: str, *argv: str, stdin: str | None = None,
        timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([str(DELAYQUEUE), *argv], env=env_for(url),
                          input=stdin, capture_output=True, text=True, timeout=timeout)


def assert_one_line_error(result: subprocess.CompletedProcess, code: int) -> None:
    """The command failed as every client command fails: exit ``code`` and one line."""
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stderr.startswith("delayqueue: error:")
