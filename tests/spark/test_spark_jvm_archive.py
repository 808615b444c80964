"""The JVM class archive (spark_jobs/jvm_archive.py builds it): built by a report run, checked
before it is put in place, named after what it depends on (spark_jobs/jvm_options.py), and
used by the sessions the job starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from spark_jobs import jvm_archive, jvm_options

pytestmark = pytest.mark.spark


def test_build_writes_an_archive_that_sessions_then_use(tmp_path, monkeypatch):
    from spark_jobs.session import ensure_java

    ensure_java()
    monkeypatch.setenv(jvm_options.DIR_ENV, str(tmp_path))
    assert jvm_options.archive_options() == ""  # none built yet: the job runs without
    done = subprocess.run(
        [sys.executable, "-m", "spark_jobs.jvm_archive"],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    archive = jvm_options.archive_path()
    assert archive is not None and archive.parent == tmp_path and archive.is_file()
    assert "jvm archive: wrote" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [archive.name]  # no temporary left
    assert jvm_options.archive_options().startswith(f"-XX:SharedArchiveFile={archive} ")
    jvm_archive._check(archive)

    # A damaged archive would crash every JVM that maps it: the check refuses it.
    damaged = tmp_path / "damaged.jsa"
    with archive.open("rb") as source, damaged.open("wb") as target:
        target.write(source.read(archive.stat().st_size // 3))
    with pytest.raises(RuntimeError, match="cannot use the archive"):
        jvm_archive._check(damaged)

    again = subprocess.run(
        [sys.executable, "-m", "spark_jobs.jvm_archive"], capture_output=True, text=True
    )
    assert again.returncode == 0 and "is up to date" in again.stderr


def test_archive_name_follows_the_java_runtime(tmp_path, monkeypatch):
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    monkeypatch.setenv(jvm_options.DIR_ENV, str(tmp_path / "cache"))
    first = jvm_options.archive_path()
    assert first is not None and first.parent == tmp_path / "cache"
    os.utime(java, ns=(1_000_000_000, 1_000_000_000))
    second = jvm_options.archive_path()
    assert second != first  # another runtime (or the same one upgraded in place)
    assert second.name.split("-")[:3] == first.name.split("-")[:3]  # same pyspark prefix
    assert Path(str(second)).suffix == ".jsa"


def test_archive_lives_in_the_checkouts_build_folder_unless_installed(tmp_path, monkeypatch):
    # Run from the checkout: its build/ folder, which make clean removes (not ~/.cache, where
    # each checkout left its own 150 MB archive behind).
    monkeypatch.delenv(jvm_options.DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    repo = Path(jvm_options.__file__).resolve().parents[1]
    assert jvm_options.archive_dir() == repo / "build" / "jvm-archive"
    # Installed from the wheel (no checkout around the package): the user's cache folder.
    installed = tmp_path / "site-packages" / "spark_jobs"
    installed.mkdir(parents=True)
    assert jvm_options.archive_dir(installed) == tmp_path / "cache" / "delayqueue"
    # The variable wins over both.
    monkeypatch.setenv(jvm_options.DIR_ENV, str(tmp_path / "chosen"))
    assert jvm_options.archive_dir() == tmp_path / "chosen"
