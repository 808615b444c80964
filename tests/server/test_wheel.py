"""The built wheel ships the Lua scripts and the default config, and uses them when installed."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from delayqueue.core.scripts import Scripts, lua_source

REPO = Path(__file__).resolve().parents[2]

_BUILT: dict[str, Path] = {}


def build_wheel(tmp_path_factory) -> Path:
    """The project's wheel, built once per test session (test_install_wheel.py uses it too)."""
    if "wheel" in _BUILT and _BUILT["wheel"].exists():
        return _BUILT["wheel"]
    out = tmp_path_factory.mktemp("wheel")
    # Without hatchling in this environment pip builds in an isolated one (fetches it).
    isolation = [] if importlib.util.find_spec("hatchling") is None \
        else ["--no-build-isolation"]
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", *isolation,
                             "-q", "-w", str(out), str(REPO)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    wheels = list(out.glob("delayqueue-*.whl"))
    assert len(wheels) == 1, wheels
    _BUILT["wheel"] = wheels[0]
    return wheels[0]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return build_wheel(tmp_path_factory)


def test_wheel_contains_every_lua_script_and_the_default_config(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    lua = sorted(p.relative_to(REPO / "lua").as_posix() for p in (REPO / "lua").rglob("*.lua"))
    assert any(name.startswith("includes/") for name in lua)
    for name in lua:
        assert f"delayqueue/lua/{name}" in names
    assert "delayqueue/default_config.yaml" in names
    packaged = zipfile.ZipFile(wheel).read("delayqueue/default_config.yaml")
    assert packaged == (REPO / "config" / "delayqueue.yaml").read_bytes()


def test_wheel_contains_the_console_templates_and_the_pytest_plugin(wheel):
    archive = zipfile.ZipFile(wheel)
    names = set(archive.namelist())
    templates = REPO / "delayqueue" / "http" / "console" / "templates"
    for path in templates.rglob("*.html"):
        relative = path.relative_to(templates).as_posix()
        assert f"delayqueue/http/console/templates/{relative}" in names
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "[pytest11]\ndelayqueue = delayqueue.testing" in archive.read(entry_points).decode()


def test_wheel_ships_the_docs_pages_renderer_byte_for_byte(wheel):
    # hatchling ships every file of the package, so /docs works from an installed wheel.
    archive = zipfile.ZipFile(wheel)
    assets = REPO / "delayqueue" / "http" / "docs_assets"
    for name in ("swagger-ui-bundle.js", "swagger-ui.css", "LICENSE", "NOTICE", "README.md"):
        assert archive.read(f"delayqueue/http/docs_assets/{name}") == (assets / name).read_bytes()


def test_installed_wheel_loads_its_own_scripts(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    probe = (
        "import json, re, delayqueue, delayqueue.core.scripts as s\n"
        "d = s.lua_dir()\n"
        "sources = {n: s.lua_source(n) for n in s.Scripts.NAMES}\n"
        "print(json.dumps({'pkg': delayqueue.__file__, 'dir': str(d),\n"
        "  'includes_left': [n for n, t in sources.items()\n"
        "                    if re.search(r'^--@include', t, re.M)],\n"
        "  'sources': sources}))\n"
    )
    # Run from an empty directory so the checkout's lua/ cannot be picked up.
    env = {**os.environ, "PYTHONPATH": str(site)}
    result = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=60, check=True)
    info = json.loads(result.stdout)
    assert Path(info["pkg"]).is_relative_to(site)
    assert Path(info["dir"]) == site / "delayqueue" / "lua"
    assert info["includes_left"] == []
    assert set(info["sources"]) == set(Scripts.NAMES)
    for name in Scripts.NAMES:
        assert info["sources"][name] == lua_source(name, REPO / "lua")


def test_installed_wheel_reads_its_packaged_default_config(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    probe = ("from delayqueue.settings.config import load_settings\n"
             "s = load_settings(env={})\n"
             "print(s.ttl_millis, s.max_retry)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DELAYQUEUE_")}
    env["PYTHONPATH"] = str(site)
    result = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["3600000", "10"]


def test_wheel_bounds_every_runtime_requirement(wheel):
    """Each requirement of the client (no extra) and of the server (the `server` extra) has an
    upper bound, and gunicorn comes with its gevent extra (what its gevent worker imports:
    gevent, and `packaging` since gunicorn 27)."""
    from packaging.requirements import Requirement

    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(next(n for n in archive.namelist()
                                     if n.endswith(".dist-info/METADATA"))).decode()
    runtime = [Requirement(line.split(":", 1)[1].strip())
               for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    client = [req for req in runtime if req.marker is None or "extra" not in str(req.marker)]
    server = [req for req in runtime if req.marker is not None
              and req.marker.evaluate({"extra": "server"}) and not req.marker.evaluate()]
    assert {req.name.lower() for req in client} == {"urllib3", "certifi", "httpx"}
    runtime = client + server
    names = {req.name.lower(): req for req in runtime}
    assert "gevent" in names["gunicorn"].extras
    for req in runtime:
        assert any(spec.operator in ("<", "<=", "==", "~=") for spec in req.specifier), \
            f"{req} has no upper bound"
