"""The package's layout: folders by role, imports that only point down, a thin ground floor.

docs/design.md ("The house") draws the floors; this test is what keeps the drawing true.
Every ``import`` of every module is read, function-level ones included.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "delayqueue"

# Lowest first: a module may import its own floor and the floors below it, never above.
FLOORS = ("settings", "core", "monitoring", "background", "http", "server", "cli")
# The ground floor: only the names deployments and users import by their full path.
GROUND = {"__init__", "wsgi", "gunicorn_conf", "testing"}
# The SDK (client/, and aio/, its asyncio client) is installed and imported alone: besides
# itself, only the message and its states, the parser of values and the table of topic
# settings.
SDK = ("client", "aio")
SDK_PACKAGES = tuple(f"delayqueue.{folder}" for folder in SDK)
SDK_MAY_IMPORT = {"delayqueue.core.message", "delayqueue.core.status", "delayqueue.core.signature",
                  "delayqueue.settings.value", "delayqueue.settings.topic_setting"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """The delayqueue modules a file imports, resolved to absolute names."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            found.add(base)
            # "from delayqueue.x import y" may name a module y: count it too.
            found.update(f"{base}.{alias.name}" for alias in node.names
                         if _is_module(f"{base}.{alias.name}"))
    return {n for n in found if n == "delayqueue" or n.startswith("delayqueue.")}


def _is_module(name: str) -> bool:
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def floor(name: str) -> int | None:
    """The floor of a module (None for the ground floor, the SDK and the package itself)."""
    parts = name.split(".")
    if len(parts) > 1 and parts[1] in FLOORS:
        return FLOORS.index(parts[1])
    return None


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_the_ground_floor_holds_only_the_public_entry_points():
    ground = {p.stem for p in PACKAGE.glob("*.py")}
    assert ground == GROUND
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == set(FLOORS) | set(SDK)


def test_every_import_points_down_or_level():
    upward = []
    for path in modules():
        source = module_name(path)
        mine = floor(source)
        if mine is None:
            continue
        for target in imports_of(path):
            theirs = floor(target)
            if target.startswith(SDK_PACKAGES):
                if FLOORS[mine] != "cli":      # the CLI is the SDK's one user inside
                    upward.append(f"{source} -> {target} (the SDK is not part of the server)")
            elif theirs is None and target != "delayqueue":
                upward.append(f"{source} -> {target} (the ground floor is the top)")
            elif theirs is not None and theirs > mine:
                upward.append(f"{source} ({FLOORS[mine]}) -> {target} ({FLOORS[theirs]})")
    assert upward == []


def test_the_sdk_imports_only_itself_and_the_few_modules_it_shares():
    outside = []
    for path in sorted(p for folder in SDK for p in (PACKAGE / folder).rglob("*.py")):
        for target in imports_of(path):
            if not target.startswith(SDK_PACKAGES) and target not in SDK_MAY_IMPORT:
                outside.append(f"{module_name(path)} -> {target}")
    # ... nor through them: what they import is in the list too.
    for shared in SDK_MAY_IMPORT:
        path = PACKAGE.parent.joinpath(*shared.split(".")).with_suffix(".py")
        outside.extend(f"{shared} -> {target}" for target in imports_of(path)
                       if target not in SDK_MAY_IMPORT)
    assert outside == []


def test_the_checker_sees_relative_and_function_level_imports():
    # The rules above are only as good as imports_of: it must resolve these forms.
    queue = imports_of(PACKAGE / "core" / "queue.py")
    assert "delayqueue.core.scripts" in queue           # relative, same floor
    assert "delayqueue.settings.config" in queue        # absolute, the floor below
    app = imports_of(PACKAGE / "http" / "app.py")
    assert "delayqueue.http.console.views" in app       # inside a function
    send = imports_of(PACKAGE / "cli" / "send.py")
    assert "delayqueue.cli.bulk" in send                # "from . import bulk" names a module
