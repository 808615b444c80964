"""The Dockerfile, checked without Docker (no engine where this project is developed).

What a ``docker build`` would show is checked here from the file itself: the base image is
pinned to one Python release, the dependencies are installed in a layer of their own that no
source change invalidates, the build context (after .dockerignore) still builds the same
wheel, the CMD is the one ``delayqueue serve`` runs — and the HEALTHCHECK's own command is
run against a live node: exit 0 while /camellia/health/status answers 200, non-zero once the
node is taken offline (HTTP 500) or is gone.
"""

from __future__ import annotations

import fnmatch
import importlib.metadata
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from test_wheel import build_wheel

from delayqueue.cli.serve import GUNICORN_ARGS

from support.node import ServerProcess

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"
BASE_IMAGE = re.compile(r"^python:(3\.11\.\d+)-slim-bookworm(@sha256:[0-9a-f]{64})?$")
HEALTH_PATH = "/camellia/health/status"


# -- a small Dockerfile reader --------------------------------------------------------------
@dataclass
class Instruction:
    keyword: str   # upper case: FROM, RUN, COPY, ...
    args: str      # the rest, continuation lines joined
    line: int      # where it starts (1-based)

    def words(self) -> list[str]:
        return self.args.split()

    def flags(self) -> dict[str, str]:
        """Leading --name=value / --name options (COPY --from=..., HEALTHCHECK --timeout=...)."""
        found = {}
        for word in self.words():
            if not word.startswith("--"):
                break
            name, _, value = word[2:].partition("=")
            found[name] = value
        return found

    def operands(self) -> list[str]:
        return [w for w in self.words() if not w.startswith("--")]


def read_dockerfile(path: Path = DOCKERFILE) -> list[Instruction]:
    """Instructions in order: comments dropped, ``\\`` continuations joined (Docker's rules for
    the default escape character)."""
    instructions: list[Instruction] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue  # a comment inside a continued instruction is dropped
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending.append(stripped[:-1])
            continue
        pending.append(stripped)
        text = " ".join(part.strip() for part in pending if part.strip())
        keyword, _, args = text.partition(" ")
        instructions.append(Instruction(keyword.upper(), args.strip(), start))
        pending = []
    assert not pending, "the Dockerfile ends inside a continued instruction"
    return instructions


def stages(instructions: list[Instruction]) -> list[list[Instruction]]:
    """Each build stage's instructions, FROM first."""
    result: list[list[Instruction]] = []
    for instruction in instructions:
        if instruction.keyword == "FROM":
            result.append([])
        if result:
            result[-1].append(instruction)
    return result


def global_args(instructions: list[Instruction]) -> dict[str, str]:
    """ARG defaults declared before the first FROM (the ones FROM may use)."""
    values = {}
    for instruction in instructions:
        if instruction.keyword == "FROM":
            break
        if instruction.keyword == "ARG":
            name, _, default = instruction.args.partition("=")
            values[name.strip()] = default.strip().strip('"')
    return values


def expand(text: str, values: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: values[m.group(1) or m.group(2)], text)


def exec_form(instruction: Instruction, prefix: str = "") -> list[str]:
    """The JSON-array form of CMD (or HEALTHCHECK CMD after its options)."""
    text = instruction.args
    if prefix:
        text = text[text.index(prefix) + len(prefix):]
    value = json.loads(text)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), text
    return value


def is_dependency_install(instruction: Instruction) -> bool:
    """A RUN that lets pip resolve and install dependencies (not one with --no-deps)."""
    return (instruction.keyword == "RUN" and re.search(r"\bpip\b.*\binstall\b", instruction.args)
            is not None and "--no-deps" not in instruction.args)


def copies_whole_context(instruction: Instruction) -> bool:
    if instruction.keyword not in ("COPY", "ADD") or "from" in instruction.flags():
        return False
    sources = instruction.operands()[:-1]
    return any(source in (".", "./", "*") for source in sources)


@pytest.fixture(scope="module")
def dockerfile() -> list[Instruction]:
    return read_dockerfile()


@pytest.fixture(scope="module")
def final_stage(dockerfile) -> list[Instruction]:
    return stages(dockerfile)[-1]


# -- static checks --------------------------------------------------------------------------
def test_base_image_is_pinned_to_a_python_release(dockerfile):
    values = global_args(dockerfile)
    bases = [expand(stage[0].operands()[0], values) for stage in stages(dockerfile)]
    assert bases, "no FROM"
    versions = set()
    for base in bases:
        match = BASE_IMAGE.match(base)
        assert match, f"FROM {base}: not a pinned python:3.11.N-slim-bookworm image"
        versions.add(match.group(1))
    assert len(versions) == 1, f"stages on different Python releases: {versions}"
    # The release is also stated in words, for whoever bumps it.
    (version,) = versions
    comments = [line for line in DOCKERFILE.read_text().splitlines() if line.startswith("#")]
    assert any(version in line for line in comments), f"no comment states Python {version}"


def test_dependencies_are_installed_before_the_project_is_copied(final_stage, dockerfile):
    installs = [i for i in final_stage if is_dependency_install(i)]
    assert installs, "the final stage installs no dependencies"
    deps = installs[0]
    assert "-r " in deps.args, "the dependency layer should install a requirements list"
    assert re.search(r"\s-c\s+\S*constraints\.txt", deps.args), \
        "the dependency layer should install at constraints.txt's versions (-c)"
    before = final_stage[:final_stage.index(deps)]
    for instruction in before:
        if instruction.keyword in ("COPY", "ADD"):
            # Only the files the dependency list comes from: pyproject.toml (and README.md),
            # and the versions it is installed at: constraints.txt.
            sources = instruction.operands()[:-1]
            assert "from" not in instruction.flags(), instruction
            assert sources and set(sources) <= {"pyproject.toml", "README.md",
                                                "constraints.txt"}, \
                f"line {instruction.line}: {instruction.keyword} {instruction.args} comes " \
                "before the dependency install, so every change to it reinstalls everything"
    after = final_stage[final_stage.index(deps) + 1:]
    # The project comes after, installed without touching the dependencies.
    project = [i for i in after if i.keyword == "RUN" and "--no-deps" in i.args
               and re.search(r"\bpip\b.*\binstall\b", i.args)]
    assert project, "no `pip install --no-deps` of the project after the dependency layer"
    assert "pip check" in project[0].args
    # In no stage does a dependency install follow a copy of the whole build context.
    for stage in stages(dockerfile):
        copied = False
        for instruction in stage:
            copied = copied or copies_whole_context(instruction)
            assert not (copied and is_dependency_install(instruction)), \
                f"line {instruction.line}: dependencies installed after `COPY .`"


def _dependency_script(final_stage) -> tuple[str, str]:
    """The dependency layer's `python -c` script and the pyproject path it reads."""
    deps = next(i for i in final_stage if is_dependency_install(i))
    words = shlex.split(deps.args.split("&&")[0])
    assert words[:2] == ["python", "-c"], words
    script = words[2]
    copy = next(i for i in final_stage if i.keyword == "COPY" and
                i.operands()[0] == "pyproject.toml")
    return script, copy.operands()[-1]


@pytest.mark.parametrize("extras", ["", "[report]", "[server,report]"])
def test_dependency_layer_installs_what_the_wheel_requires(final_stage, tmp_path_factory,
                                                           extras):
    """The list the dependency layer installs is exactly the wheel's requirements with the
    server extra's (and the EXTRAS build argument's), so `pip install --no-deps` of the wheel
    then lacks nothing the node needs."""
    script, pyproject_in_image = _dependency_script(final_stage)
    script = script.replace(pyproject_in_image, str(REPO / "pyproject.toml"))
    result = subprocess.run([sys.executable, "-c", script, extras], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    listed = {str(Requirement(line)) for line in result.stdout.splitlines() if line.strip()}

    wheel = build_wheel(tmp_path_factory)
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(next(n for n in archive.namelist()
                                     if n.endswith(".dist-info/METADATA"))).decode()
    wanted_extras = {"server", *re.findall(r"[A-Za-z0-9_-]+", extras)}
    required = set()
    for line in metadata.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        req = Requirement(line.split(":", 1)[1].strip())
        extra = re.search(r"extra == ['\"]([^'\"]+)['\"]", str(req.marker or ""))
        if extra and extra.group(1) not in wanted_extras:
            continue
        if extra:  # drop the `extra == ...` part of the marker to compare with the list
            marker = re.sub(r"\s*(and\s+)?extra == ['\"][^'\"]+['\"]", "", str(req.marker))
            marker = marker.strip().removeprefix("(").removesuffix(")")
            line = f"{req.name}{'[' + ','.join(sorted(req.extras)) + ']' if req.extras else ''}" \
                   f"{req.specifier}" + (f"; {marker}" if marker else "")
            req = Requirement(line)
        required.add(str(req))
    assert listed == required


def read_constraints(path: Path = REPO / "constraints.txt") -> dict[str, str]:
    """constraints.txt's pins: normalized name -> version; every line must be ``name==version``."""
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        req = Requirement(line)
        (spec,) = req.specifier
        assert spec.operator == "==" and not req.marker and not req.extras, \
            f"constraints.txt: {line!r} is not an exact pin (make constraints writes them)"
        pins[canonicalize_name(req.name)] = spec.version
    return pins


def dependency_closure(extras: set[str]) -> dict[str, list[Requirement]]:
    """Every distribution `pip install 'delayqueue[<extras>]'` installs here, by normalized
    name, with the requirements that bring it: pyproject.toml's, then each installed
    dependency's own (markers evaluated for this machine, a requirement's extras followed)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    roots = list(project["dependencies"])
    for extra in extras:
        roots += project["optional-dependencies"][extra]
    wanted: dict[str, list[Requirement]] = {}
    todo = [(Requirement(text), "") for text in roots]
    seen_extras: set[tuple[str, str]] = set()
    while todo:
        req, parent_extra = todo.pop()
        if req.marker and not req.marker.evaluate({"extra": parent_extra}):
            continue
        name = canonicalize_name(req.name)
        wanted.setdefault(name, []).append(req)
        try:
            dist = importlib.metadata.distribution(req.name)
        except importlib.metadata.PackageNotFoundError:
            continue  # not installed here: pip's resolution in test_install_wheel.py covers it
        for extra in ("", *req.extras):
            if (name, extra) in seen_extras:
                continue
            seen_extras.add((name, extra))
            todo += [(Requirement(text), extra) for text in dist.requires or []]
    return wanted


def test_constraints_pin_every_package_of_the_server_image():
    """Every package the node's image (and the report job's) installs is pinned, at a version
    its requirements accept: the image builds the same packages until constraints.txt
    changes. (test_install_wheel.py installs `.[server]` with it into a fresh venv.)"""
    pins = read_constraints()
    closure = dependency_closure({"server", "report"})
    closure.pop("delayqueue", None)
    missing = sorted(set(closure) - set(pins))
    assert not missing, f"not pinned in constraints.txt (run make constraints): {missing}"
    for name, reqs in closure.items():
        for req in reqs:
            assert req.specifier.contains(pins[name], prereleases=True), \
                f"constraints.txt pins {name}=={pins[name]}, outside {req} (make constraints)"


def test_cmd_is_what_delayqueue_serve_runs(final_stage):
    cmd = exec_form(next(i for i in reversed(final_stage) if i.keyword == "CMD"))
    assert cmd == ["python", *GUNICORN_ARGS]
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    assert compose["x-delayqueue"]["command"] == cmd


def test_image_runs_as_a_numeric_non_root_user(final_stage):
    user = [i for i in final_stage if i.keyword == "USER"]
    assert user and user[-1].args.split(":")[0].isdigit() and user[-1].args.split(":")[0] != "0"


# -- the HEALTHCHECK ------------------------------------------------------------------------
def healthcheck_command(final_stage) -> tuple[list[str], dict[str, str]]:
    checks = [i for i in final_stage if i.keyword == "HEALTHCHECK"]
    assert len(checks) == 1, "the image needs one HEALTHCHECK"
    check = checks[0]
    assert check.args.split()[0] != "NONE"
    command = exec_form(check, prefix="CMD ")
    return command, check.flags()


def test_healthcheck_is_a_python_one_liner_on_health_status(final_stage):
    command, options = healthcheck_command(final_stage)
    assert command[:2] == ["python", "-c"] and len(command) == 3, command
    assert HEALTH_PATH in command[2]
    assert not re.search(r"\b(curl|wget)\b", command[2])  # not in the slim image
    for option in ("interval", "timeout", "start-period"):
        assert option in options, f"HEALTHCHECK without --{option}"


def run_healthcheck(command: list[str], port: int, timeout_s: float) -> tuple[int, float]:
    """Run the HEALTHCHECK's command as Docker would inside the image (where `python` is the
    image's interpreter and DELAYQUEUE_PORT the node's port): (exit code, seconds)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DELAYQUEUE_")}
    env["DELAYQUEUE_PORT"] = str(port)
    started = time.monotonic()
    result = subprocess.run([sys.executable, *command[1:]], env=env, capture_output=True,
                            text=True, timeout=timeout_s + 5)
    return result.returncode, time.monotonic() - started


def _seconds(value: str) -> float:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)", value)
    assert match, value
    number, unit = float(match.group(1)), match.group(2)
    return number / 1000 if unit == "ms" else number * 60 if unit == "m" else number


@pytest.mark.slow
def test_healthcheck_passes_on_a_healthy_node_and_fails_offline(final_stage, redis_url):
    command, options = healthcheck_command(final_stage)
    timeout_s = _seconds(options["timeout"])
    with ServerProcess(redis_url) as node:
        status = f"{node.url}{HEALTH_PATH}"
        assert requests.get(status, timeout=5).status_code == 200
        code, took = run_healthcheck(command, node.port, timeout_s)
        assert code == 0 and took < timeout_s, (code, took)

        requests.post(f"{node.url}/camellia/health/offline", timeout=5).raise_for_status()
        assert requests.get(status, timeout=5).status_code == 500
        code, took = run_healthcheck(command, node.port, timeout_s)
        assert code != 0 and took < timeout_s, (code, took)

        requests.post(f"{node.url}/camellia/health/online", timeout=5).raise_for_status()
        code, _ = run_healthcheck(command, node.port, timeout_s)
        assert code == 0
        port = node.port
    code, took = run_healthcheck(command, port, timeout_s)  # the node is gone
    assert code != 0 and took < timeout_s, (code, took)


# -- the build context ----------------------------------------------------------------------
def _ignored(relative: str, patterns: list[str]) -> bool:
    """Whether .dockerignore leaves this path out (the subset of its syntax used here:
    plain names and globs, `**/` for any depth, no `!` exceptions). A path is out when it or
    any directory above it matches."""
    parts = relative.split("/")
    for depth in range(1, len(parts) + 1):
        candidate = "/".join(parts[:depth])
        for pattern in patterns:
            if pattern.startswith("**/"):
                if fnmatch.fnmatchcase(parts[depth - 1], pattern[3:]):
                    return True
            elif fnmatch.fnmatchcase(candidate, pattern.strip("/")):
                return True
    return False


@pytest.mark.slow
def test_build_context_builds_the_same_wheel(tmp_path, tmp_path_factory):
    """The wheel stage sees only what .dockerignore lets through: it must be enough."""
    patterns = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.strip().startswith("#")]
    assert not any(p.startswith("!") for p in patterns), "exceptions: extend _ignored()"
    context = tmp_path / "context"
    for path in sorted(REPO.rglob("*")):
        relative = path.relative_to(REPO).as_posix()
        if path.is_dir() or _ignored(relative, patterns):
            continue
        target = context / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    assert not (context / "tests").exists() and (context / "lua").is_dir()
    assert (context / "constraints.txt").is_file()  # the dependency layer's pins

    out = tmp_path / "dist"
    isolation = ["--no-build-isolation"] if _have("hatchling") else []
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", *isolation,
                             "-q", "-w", str(out), str(context)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    (from_context,) = out.glob("delayqueue-*.whl")
    reference = build_wheel(tmp_path_factory)
    with zipfile.ZipFile(from_context) as a, zipfile.ZipFile(reference) as b:
        assert sorted(a.namelist()) == sorted(b.namelist())
        for name in a.namelist():
            assert a.read(name) == b.read(name), name


def _have(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None
