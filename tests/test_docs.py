"""The documentation stays true to the code and stands alone.

The configuration table (docs/operations.md) against the settings and the role table
(docs/api.md) against the access rules; no file pointing at documents outside the repository
or at a docs page that does not exist; every relative link and anchor of the README,
CONTRIBUTING and docs/*.md resolving inside the repository; every test, endpoint and metric
the docs name existing, and every module path and document section the docs and the code's
comments name; the README short and linking every document; the curl walk-throughs and the
README's Python example run against a live node.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from delayqueue.http.endpoints import CAMELLIA, ENDPOINTS, FORM, HEALTH, PAGE
from delayqueue.http.param_rules import markdown_table
from delayqueue.settings.config import Settings

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
OPERATIONS = ROOT / "docs" / "operations.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
MARKDOWN = [README, ROOT / "CONTRIBUTING.md", *DOCS]

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


# -- reading the markdown --------------------------------------------------------------------
def section(path: Path, heading: str) -> str:
    """The text under ``heading`` (a whole heading line), up to the next heading of its level
    or higher."""
    text = path.read_text(encoding="utf-8")
    level = len(heading) - len(heading.lstrip("#"))
    lines, inside, fenced = [], False, False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        heading_here = not fenced and re.match(r"^(#{1,6}) ", line)
        if inside and heading_here and len(heading_here.group(1)) <= level:
            break
        if inside:
            lines.append(line)
        elif line == heading:
            inside = True
    assert inside, f"{path.name} has no heading {heading!r}"
    return "\n".join(lines)


def code_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.MULTILINE | re.DOTALL)


# -- the configuration table ---------------------------------------------------------------
def config_table() -> dict[str, str]:
    """The configuration table of docs/operations.md: key -> default, as written."""
    rows: dict[str, str] = {}
    for line in section(OPERATIONS, "## Configuration").splitlines():
        row = re.match(r"^\|\s*`([^`]+)`\s*\|([^|]*)\|", line)
        if row:
            key = row.group(1)
            assert key not in rows, f"{key} appears twice in the configuration table"
            rows[key] = row.group(2).strip()
    assert rows, "docs/operations.md's configuration table has no rows"
    return rows


def normalise(cell: str) -> str:
    cell = cell.strip().strip("`")
    return "" if cell in ("empty", '""') else cell


def rendered(value) -> str:
    """A default as the table writes it: true/false, 1 rather than 1.0, empty for None
    and for an empty list."""
    if value is None or (isinstance(value, (list, tuple)) and not value):
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def test_the_config_table_lists_every_setting_with_its_default():
    table = config_table()
    settings = {row["key"]: row["default"] for row in Settings().as_table()}
    missing = sorted(set(settings) - set(table))
    assert not missing, f"settings missing from the configuration table: {missing}"
    wrong = {key: (table[key], settings[key]) for key in settings
             if normalise(table[key]) != rendered(settings[key])}
    assert not wrong, f"the table's default differs from config.py (table, code): {wrong}"


def test_every_row_of_the_config_table_is_a_real_setting():
    settings = {row["key"] for row in Settings().as_table()}
    unknown = sorted(set(config_table()) - settings)
    assert not unknown, f"the configuration table lists non-settings: {unknown}"


def test_the_config_table_agrees_with_the_shipped_yaml():
    shipped = yaml.safe_load((ROOT / "config" / "delayqueue.yaml").read_text(encoding="utf-8"))
    table = config_table()
    assert set(shipped) == set(table), (
        f"only in the YAML: {sorted(set(shipped) - set(table))}; "
        f"only in the table: {sorted(set(table) - set(shipped))}")
    wrong = {key: (table[key], value) for key, value in shipped.items()
             if normalise(table[key]) != rendered(value)}
    assert not wrong, f"the table's default differs from config/delayqueue.yaml: {wrong}"


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


# -- module paths the docs and comments name -------------------------------------------------
# A path with at least one folder, as prose and comments name a module or a script:
# delayqueue/core/queue.py, lua/includes/message.lua, core/replies.py (inside the package),
# console/views.py (beside the file), gunicorn/http/message.py (another package's). Not a
# placeholder (lua/includes/NAME.lua, lua/<name>.lua, *.py) nor the tail of a longer path.
NAMED_PATH = re.compile(r"(?<![\w/.<>*-])((?:[\w.-]+/)+[\w-]+\.(?:py|lua))(?![\w/])")
PLACEHOLDER = re.compile(r"/[A-Z]+\.")
# Folders at the top of the repository: a path starting with one is read from the root.
TOP = ("delayqueue", "lua", "tests", "bench", "spark_jobs", "config", "deploy", "docs")


def path_exists(path: str, files: list[str]) -> bool:
    """A path from the root, else the tail of a repository file, else another package's."""
    if path.split("/", 1)[0] in TOP:
        return (ROOT / path).exists()
    if any(name.endswith("/" + path) for name in files):
        return True
    package = importlib.util.find_spec(path.split("/", 1)[0])
    return bool(package and package.origin and
                (Path(package.origin).parent.parent / path).exists())


def stale_paths(name: str, files: list[str]) -> list[str]:
    try:
        text = (ROOT / name).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return []  # not text
    return [f"{name}:{number}: {path}"
            for number, line in enumerate(text.splitlines(), 1)
            for path in NAMED_PATH.findall(line)
            if not PLACEHOLDER.search(path) and not path_exists(path, files)]


def test_every_module_path_the_docs_and_comments_name_exists():
    """Modules move (issue 22 moved them all); a doc or comment naming the old path would
    send a reader nowhere."""
    files = repo_files()
    found = [hit for name in files for hit in stale_paths(name, files)]
    assert not found, "paths that do not exist:\n" + "\n".join(found)


# A section named by its document and its heading (or the heading's start), in prose or a
# comment: docs/operations.md, "Security"; docs/design.md ("The house"); README "Quick start".
SECTION_REF = re.compile(r"\b(README|CONTRIBUTING|docs/[\w.-]+\.md)(?:\.md)?(?:'s)?,?\s*\(?"
                         r"\"([A-Z][^\"]*)\"")
# This file is skipped for its own examples of stale references.
SECTIONS_SKIPPED = ("tests/test_docs.py",)


def headings(path: Path) -> list[str]:
    return [re.sub(r"^#+\s*", "", line).strip().lower()
            for line in without_code(path.read_text(encoding="utf-8")).splitlines()
            if re.match(r"^#{1,6} ", line)]


def stale_sections(name: str, text: str) -> list[str]:
    found = []
    for ref in SECTION_REF.finditer(text):
        document, heading = ref.groups()
        heading = re.sub(r"\s*\n\s*(?:#+|--)?\s*", " ", heading).lower()   # over lines
        path = ROOT / (document if document.endswith(".md") else document + ".md")
        if not (path.is_file() and any(h.startswith(heading) for h in headings(path))):
            number = text.count("\n", 0, ref.start()) + 1
            found.append(f"{name}:{number}: {document}, {ref.group(2)!r}")
    return found


def test_every_section_the_docs_and_comments_name_is_a_heading_of_its_document():
    """The README's reference moved to docs/ in issue 22; a comment still sending a reader to
    a README section sends them nowhere."""
    found = []
    for name in repo_files():
        if name.endswith(".md") or not name.startswith(SECTIONS_SKIPPED):
            try:
                found += stale_sections(name, (ROOT / name).read_text(encoding="utf-8"))
            except UnicodeDecodeError:
                pass  # not text
    assert not found, "sections that are no heading of the document named:\n" + \
        "\n".join(found)


def test_the_section_check_reads_a_heading_named_over_two_lines():
    assert stale_sections("x", 'see docs/design.md ("The house") and docs/operations.md,\n'
                               '# "Security" and docs/api.md, "General\n  # rules"') == []
    assert stale_sections("x", 'the README "Security" section') == [
        "x:1: README, 'Security'"]                    # moved to docs/operations.md


def test_the_path_check_reads_each_form_a_path_is_named_in():
    # Stale paths built from pieces, so that this file does not name them itself.
    files = repo_files()
    assert path_exists("delayqueue/core/queue.py", files)
    assert not path_exists("delayqueue/" + "queue.py", files)     # before issue 22
    assert path_exists("core/replies.py", files) and path_exists("console/views.py", files)
    assert not path_exists("commands/" + "messages.py", files)
    assert path_exists("gunicorn/http/message.py", files)         # an installed package's
    line = "see `lua/includes/NAME.lua`, lua/<name>.lua and x/" + "y.py, not a/x/" + "y.pyc"
    assert [path for path in NAMED_PATH.findall(line) if not PLACEHOLDER.search(path)] == \
        ["x/" + "y.py"]


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
        if not resolved.is_relative_to(ROOT):
            broken.append(f"{target}: outside the repository")
        elif not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading with that anchor")
    assert not broken, f"{path.relative_to(ROOT)}: broken links: {broken}"


def test_readme_links_every_document():
    readme = README.read_text(encoding="utf-8")
    pages = [str(path.relative_to(ROOT)) for path in MARKDOWN if path != README]
    assert "docs/api.md" in pages and "docs/design.md" in pages
    unlinked = [page for page in pages if f"]({page}" not in readme]
    assert not unlinked, f"README.md does not link {unlinked}"


def test_readme_stays_a_page_a_newcomer_reads():
    """The reference lives in docs/; the README is what it is, a quick start and links."""
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines <= 250, f"README.md has {lines} lines; move the reference to docs/"


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



# -- the examples run ------------------------------------------------------------------------
# Shell walk-throughs run against a live node, every answer they show checked: (file, heading).
WALKTHROUGHS = [
    ("README.md", "### Walk-through with curl"),
    ("docs/api.md", "### Example: a poison message, end to end"),
    ("docs/api.md", "### Example: a group, end to end"),
    ("docs/api.md", "### Compressed bodies (ours)"),
    ("docs/api.md", "### Example: pause, look, purge"),
    ("docs/api.md", "### Example: debounce and the dedup window"),
]
DOCS_PORT = "localhost:8080"   # the address the examples use; replaced by the test node's
DOCS_URL = "http://127.0.0.1:8080"


def shell_steps(block: str) -> list[tuple[str, str | None]]:
    """(command, expected answer) pairs of a shell block. A command may continue over lines
    ending in a backslash; the comment lines right after it (no blank line between) are its
    answer as shown, where ``…`` stands for anything. Other comments are prose."""
    lines = block.splitlines()
    steps, i = [], 0
    while i < len(lines):
        if not lines[i].strip() or lines[i].lstrip().startswith("#"):
            i += 1
            continue
        command = [lines[i]]
        while command[-1].endswith("\\"):
            i += 1
            command.append(lines[i])
        i += 1
        shown = []
        while i < len(lines) and lines[i].startswith("#"):
            shown.append(lines[i][1:])
            i += 1
        steps.append(("\n".join(command), "".join(shown) if shown else None))
    return steps


def shown_matches(shown: str, answer: str) -> bool:
    """The answer is what the docs show, ``…`` matching anything; whitespace is ignored, since
    the docs wrap long answers over several comment lines."""
    def squeeze(text: str) -> str:
        return re.sub(r"\s+", "", text)
    pattern = ".*".join(re.escape(part) for part in squeeze(shown).split("…"))
    return re.fullmatch(pattern, squeeze(answer), re.DOTALL) is not None


def run_walkthrough(text: str, base_url: str, cwd: Path) -> list[tuple[str, str, str]]:
    """Run every shell block of ``text`` in one bash, against ``base_url``; returns
    (command, shown, answer) for each command whose answer the docs show."""
    steps = [step for block in code_blocks(text, "sh") for step in shell_steps(block)]
    assert steps, "no shell commands to run"
    script = ["set -e"]
    for number, (command, _) in enumerate(steps):
        script += [command.replace(DOCS_PORT, base_url), f"printf '\\n@@step {number}@@\\n'"]
    env = {**os.environ,
           "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}
    done = subprocess.run(["bash", "-c", "\n".join(script)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)
    answers = re.split(r"\n@@step \d+@@\n", done.stdout)
    assert done.returncode == 0 and len(answers) == len(steps) + 1, (
        f"the walk-through stopped (exit {done.returncode}) after "
        f"{len(answers) - 1} of {len(steps)} commands:\n{done.stdout[-2000:]}\n{done.stderr}")
    return [(command, shown, answer.strip())
            for (command, shown), answer in zip(steps, answers) if shown is not None]


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
@pytest.mark.parametrize("page, heading", WALKTHROUGHS,
                         ids=[f"{p}, {h.lstrip('#').strip()}" for p, h in WALKTHROUGHS])
def test_the_curl_walkthroughs_answer_what_the_docs_show(server, tmp_path, page, heading):
    base_url = server.url.removeprefix("http://")
    results = run_walkthrough(section(ROOT / page, heading), base_url, tmp_path)
    wrong = [f"{command}\n  shown:  {shown}\n  answer: {answer}"
             for command, shown, answer in results if not shown_matches(shown, answer)]
    assert not wrong, f"{page}, {heading}: answers differ from the docs:\n" + "\n".join(wrong)


def test_the_readme_python_example_consumes_the_message_it_sends(server, tmp_path):
    [example] = code_blocks(section(README, "### Python"), "python")
    assert DOCS_URL in example
    done = subprocess.run([sys.executable, "-c", example.replace(DOCS_URL, server.url)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    # limit=1: wait() returns only once the message it sent was handled and acked.
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert done.stdout.strip(), "the handler printed nothing"


def test_a_shown_answer_must_match_the_whole_answer():
    """The matcher itself: ``…`` spans anything, nothing else is loose."""
    assert shown_matches('{"code":200,…,"status":3}', '{"code":200,"msg":"x","status":3}')
    assert shown_matches('{"msg":"a b\n  c"}', '{"msg":"a b c"}')
    assert not shown_matches('{"code":200,…,"status":3}', '{"code":200,"status":2}')
    assert not shown_matches('{"code":200}', '{"code":200,"msg":"success"}')
    assert not shown_matches('{"x":2}', '{"x":2.0}')



# -- who may call what -----------------------------------------------------------------------
def documented_roles() -> dict[str, set[str]]:
    """api.md's role table: role -> the routes its row names (``/dashboard/`` for the
    console's)."""
    rows = {}
    for line in section(ROOT / "docs" / "api.md", "## Authentication (ours)").splitlines():
        row = re.match(r"^\| (produce|consume|admin|none needed) \|(.*)\|$", line)
        if row:
            rows[row.group(1)] = set(re.findall(r"`([^`]+)`", row.group(2)))
    assert set(rows) == {"produce", "consume", "admin", "none needed"}, rows
    return rows


def test_the_role_table_names_exactly_the_routes_each_role_may_call():
    def name(route: str) -> str:
        if route.startswith("/dashboard/"):
            return "/dashboard/"
        return route.removeprefix("/camellia/delayQueue/")
    actual: dict[str, set[str]] = {"produce": set(), "consume": set(), "admin": set(),
                                   "none needed": set()}
    for endpoint in ENDPOINTS:
        rule = endpoint.rule
        if rule.scope == "open":
            actual["none needed"].add(name(endpoint.path))
        for role in rule.roles:
            if role != "admin" or rule.roles == ("admin",):   # the admin row: admin alone
                actual[role].add(name(endpoint.path))
    documented = documented_roles()
    wrong = {role: {"missing": sorted(actual[role] - documented[role]),
                    "not so": sorted(documented[role] - actual[role])}
             for role in actual if actual[role] != documented[role]}
    assert not wrong, f"docs/api.md's role table differs from the access rules: {wrong}"


# -- parameter errors ------------------------------------------------------------------------
def test_the_parameter_error_table_is_the_servers():
    """api.md's table is param_rules.py's, which tests/http/test_param_rules.py holds every
    endpoint to; the endpoints it calls camellia's are the table's."""
    text = section(ROOT / "docs" / "api.md", "### Parameter errors")
    table = "\n".join(line for line in text.splitlines() if line.startswith("|"))
    assert table == markdown_table()
    named = text.split("|")[0].split("Every other endpoint")[0]
    camellias = {e.name for e in ENDPOINTS if e.origin == CAMELLIA and e.kind != HEALTH}
    assert set(re.findall(r"`(\w+)`", named)) == camellias
    health = sum(e.kind == HEALTH and e.origin == CAMELLIA for e in ENDPOINTS)
    assert health == 4 and "the four health endpoints" in " ".join(named.split())
