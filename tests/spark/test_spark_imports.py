"""The Spark wing's imports: it imports nothing from the server (the snapshot format is the only
contract), its modules import one another one way only, even through an import inside a
function, and each imports alone."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "spark_jobs"


def _imported(path: Path) -> set[str]:
    """Every module an import anywhere in ``path`` names (``from spark_jobs import x`` names
    ``spark_jobs.x``)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            if node.module == "spark_jobs":
                names.update(f"spark_jobs.{alias.name}" for alias in node.names)
    return names


def _modules() -> dict[str, set[str]]:
    """Module name -> the modules of the package it imports."""
    graph = {}
    for path in sorted(PACKAGE.glob("*.py")):
        if path.stem != "__init__":
            graph[path.stem] = {
                name.split(".")[1] for name in _imported(path) if name.startswith("spark_jobs.")
            }
    return graph


def _loop(graph: dict[str, set[str]]) -> list[str] | None:
    """A chain of imports leading back to where it started, or None."""
    done: set[str] = set()

    def visit(name: str, chain: list[str]) -> list[str] | None:
        if name in chain:
            return chain[chain.index(name) :] + [name]
        if name in done:
            return None
        for child in sorted(graph[name]):
            found = visit(child, chain + [name])
            if found:
                return found
        done.add(name)
        return None

    for name in graph:
        found = visit(name, [])
        if found:
            return found
    return None


def test_spark_jobs_imports_nothing_from_the_server():
    for path in PACKAGE.glob("*.py"):
        server = {n for n in _imported(path) if n == "delayqueue" or n.startswith("delayqueue.")}
        assert not server, (path.name, server)


def test_no_module_imports_one_that_imports_it_back():
    graph = _modules()
    assert {"monitor_report", "session", "jvm_options", "jvm_archive"} <= set(graph)
    assert _loop(graph) is None, " -> ".join(_loop(graph))
    assert not graph["jvm_options"]  # a leaf: session and jvm_archive both read it


def test_each_module_imports_alone():
    script = (
        "import importlib, sys\n"
        f"for name in {sorted(_modules())!r}:\n"
        "    for key in [k for k in sys.modules if k.split('.')[0] == 'spark_jobs']:\n"
        "        del sys.modules[key]\n"
        "    importlib.import_module('spark_jobs.' + name)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=PACKAGE.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
