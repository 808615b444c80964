"""The documentation stays true to the code and stands alone.

README's configuration table against the settings; no file pointing at documents outside
the repository or at a docs page that does not exist; every relative link and anchor in
README.md and docs/*.md resolving; every test, endpoint and metric the docs name existing.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from delayqueue.http.endpoints import ENDPOINTS, FORM, PAGE
from delayqueue.settings.config import Settings

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
MARKDOWN = [README, *DOCS]

# Built from pieces so that this file does not match its own patterns.
OUTSIDE_POINTERS = [
    re.compile(r"\.\./" + "shared" + r"\b"),
    re.compile(r"/work/" + "shared" + r"\b"),
    re.compile("shared" + r"/[A-Z]+\.md"),
    re.compile(r"\b" + "DESIGN" + r"\.md\b"),
    re.compile(r"\b" + "API" + r"\.md\b"),
    re.compile(r"\b" + "STYLE" + r"\.md\b"),
]
DOCS_PAGE = re.compile(r"\b" + "docs" + r"/([\w.-]+\.md)\b")
# -- the configuration table ---------------------------------------------------------------
def config_table() -> dict[str, str]:
    """README's configuration table: key -> default, as written."""
    text = README.read_text(encoding="utf-8")
    match = re.search(r"^## Configuration\n(.*?)(?=^## )", text, re.MULTILINE | re.DOTALL)
    assert match, "README.md has no '## Configuration' section"
    rows: dict[str, str] = {}
    for line in match.group(1).splitlines():
        row = re.match(r"^\|\s*`([^`]+)`\s*\|([^|]*)\|", line)
        if row:
            key = row.group(1)
            assert key not in rows, f"{key} appears twice in README's configuration table"
            rows[key] = row.group(2).strip()
    assert rows, "README's configuration table has no rows"
    return rows


def normalise(cell: str) -> str:
    cell = cell.strip().strip("`")
    return "" if cell in ("empty", '""') else cell


def rendered(value) -> str:
    """A default as the README writes it: true/false, 1 rather than 1.0, empty for None
    and for an empty list."""
    if value is None or (isinstance(value, (list, tuple)) and not value):
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def test_readme_config_table_lists_every_setting_with_its_default():
    table = config_table()
    settings = {row["key"]: row["default"] for row in Settings().as_table()}
    missing = sorted(set(settings) - set(table))
    assert not missing, f"settings missing from README's configuration table: {missing}"
    wrong = {key: (table[key], settings[key]) for key in settings
             if normalise(table[key]) != rendered(settings[key])}
    assert not wrong, f"README default differs from config.py (README, code): {wrong}"


def test_every_row_of_the_readme_config_table_is_a_real_setting():
    settings = {row["key"] for row in Settings().as_table()}
    unknown = sorted(set(config_table()) - settings)
    assert not unknown, f"README's configuration table lists non-settings: {unknown}"


def test_readme_config_table_agrees_with_the_shipped_yaml():
    shipped = yaml.safe_load((ROOT / "config" / "delayqueue.yaml").read_text(encoding="utf-8"))
    table = config_table()
    assert set(shipped) == set(table), (
        f"only in the YAML: {sorted(set(shipped) - set(table))}; "
        f"only in README: {sorted(set(table) - set(shipped))}")
    wrong = {key: (table[key], value) for key, value in shipped.items()
             if normalise(table[key]) != rendered(value)}
    assert not wrong, f"README default differs from config/delayqueue.yaml: {wrong}"


# -- pointers out of the repository ----------------------------------------------------------
def repo_files() -> list[str]:
    """Tracked files, and new ones not ignored, that exist in the working tree."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT, capture_output=True, check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"not a git checkout ({exc})")
    names = sorted({name for name in listed.decode().split("\0") if name})
    return [name for name in names if (ROOT / name).is_file()]


def bad_pointers(name: str) -> list[str]:
    """What in this file points outside the repo, or at a docs page that does not exist."""
    try:
        text = (ROOT / name).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return []  # not text
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for pattern in OUTSIDE_POINTERS:
            for match in pattern.finditer(line):
                found.append(f"{name}:{number}: {match.group(0)}")
        for match in DOCS_PAGE.finditer(line):
            if not (ROOT / "docs" / match.group(1)).is_file():
                found.append(f"{name}:{number}: {match.group(0)} does not exist")
    return found


def test_no_file_points_outside_the_repo_or_at_a_missing_docs_page():
    found = [hit for name in repo_files()
             for hit in bad_pointers(name)]
    assert not found, "pointers to documents that are not in the repository:\n" + \
        "\n".join(found)


# -- links, anchors and names in the docs ----------------------------------------------------
def without_code(text: str) -> str:
    """The markdown with fenced blocks and inline code removed."""
    text = re.sub(r"^```.*?^```[^\n]*$", "", text, flags=re.MULTILINE | re.DOTALL)
    return re.sub(r"`[^`\n]*`", "", text)


def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors of a markdown file."""
    seen: dict[str, int] = {}
    result = set()
    for line in without_code(path.read_text(encoding="utf-8")).splitlines():
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not heading:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        result.add(slug if count == 0 else f"{slug}-{count}")
    return result


def links(path: Path) -> list[str]:
    text = without_code(path.read_text(encoding="utf-8"))
    return re.findall(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", text)


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path):
    broken = []
    for target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading with that anchor")
    assert not broken, f"{path.relative_to(ROOT)}: broken links: {broken}"


def test_the_docs_exist_and_readme_links_them():
    readme = README.read_text(encoding="utf-8")
    for page in ("docs/api.md", "docs/design.md"):
        assert (ROOT / page).is_file(), page
        assert f"]({page}" in readme, f"README.md does not link {page}"


def test_every_test_the_docs_name_exists():
    missing = []
    for path in MARKDOWN:
        for file, name in re.findall(r"\btests/([\w/]+\.py)(?:::(\w+))?",
                                     path.read_text(encoding="utf-8")):
            test_file = ROOT / "tests" / file
            if not test_file.is_file():
                missing.append(f"{path.name}: tests/{file}")
            elif name and not re.search(rf"^\s*def {name}\(", test_file.read_text(),
                                        re.MULTILINE):
                missing.append(f"{path.name}: tests/{file}::{name}")
    assert not missing, f"the docs name tests that do not exist: {missing}"


def test_api_doc_covers_every_route():
    """Every endpoint of the table but the console's pages and forms."""
    api = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    headings = anchors(ROOT / "docs" / "api.md")
    missing = []
    for endpoint in ENDPOINTS:
        if endpoint.kind in (PAGE, FORM):
            continue
        if endpoint.path.startswith("/camellia/delayQueue/"):
            if endpoint.name.lower() not in headings:
                missing.append(endpoint.path)
        elif endpoint.path not in api:
            missing.append(endpoint.path)
    assert not missing, f"docs/api.md does not document: {missing}"


def test_api_doc_names_exactly_the_metrics_the_server_exports():
    source = (ROOT / "delayqueue" / "monitoring" / "metrics.py").read_text(encoding="utf-8")
    exported = set(re.findall(r"\"(delayqueue_[a-z0-9_]+)\"", source))
    assert exported, "no metric names found in delayqueue/monitoring/metrics.py"
    documented = set(re.findall(r"\bdelayqueue_[a-z0-9_]+",
                                (ROOT / "docs" / "api.md").read_text(encoding="utf-8")))
    bare = {name.removesuffix("_total") for name in exported}
    undocumented = sorted(name for name in bare
                          if not any(d.removesuffix("_total") == name for d in documented))
    unknown = sorted(d for d in documented if d.removesuffix("_total") not in bare)
    assert not undocumented, f"metrics missing from docs/api.md: {undocumented}"
    assert not unknown, f"docs/api.md names metrics the server does not export: {unknown}"
