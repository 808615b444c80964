"""Pasting the Lua includes into a script: each include's top-level statements that the script
reaches, and nothing else (a "tree shake").

Redis runs a script's whole top level on every call, so an include pasted whole costs every
call the closures, tables and key names of helpers the script never calls. ``assemble``
pastes each ``--@include NAME`` as before (includes may include others, each pasted once,
where first needed), then keeps of the includes only the statements the script's own text
reaches, directly or through the statements it keeps, in their order.

The layout the shaker reads (``split_include``; an include line outside it fails at load time,
naming the file and line):

- a top-level statement starts at column 0: ``local function f(``, ``local x =``,
  ``local x, y =``, a forward declaration ``local f``, an assignment ``f = ...`` /
  ``t.field = ...`` / ``t[k] = ...``, or a ``for`` / ``if`` / ``while`` / ``do`` block;
- its continuation lines are indented, or a column-0 ``end`` / ``}`` / ``)`` that closes it;
  it ends at the next line at column 0 or the next blank line, with every block closed;
- comment lines (and blank lines) directly above a statement belong to it;
  ``--@include NAME`` lines stand alone.

What is kept (conservative: when in doubt, keep):

- a definition (``local ...``) when a kept text uses one of the names it defines;
- an assignment or block that sets a top-level name's value or fields (``tk.sub = ...``,
  ``find_delivery = function``, a ``for`` filling a table) whenever that name is kept;
- always: a statement that sets no top-level name (a guard such as keys.lua's
  ``NOSUBSCRIPTION``), one that calls Redis or returns, and a ``local x = ...`` whose value
  calls anything but Lua's pure string, math and conversion functions.

A name is "used" when it appears as an identifier outside comments and strings and not after
``.`` or ``:``; an identifier that only happens to be spelt like a top-level name (a local of
the same name, a table key) keeps that name too, which costs a little and never breaks a
script.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path


class ScriptSourceError(RuntimeError):
    """A script cannot be assembled: a missing file or include, or an include line outside
    the layout the shaker reads."""


INCLUDE = re.compile(r"^--@include (\w+)[ \t]*$")

_TOKEN = re.compile(
    r"""(?P<long>--\[(?P<lc>=*)\[|\[(?P<ls>=*)\[)   # long comment / long string: opening
      |(?P<comment>--[^\n]*)
      |(?P<string>'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*")
      |(?P<name>[A-Za-z_]\w*)
      |(?P<number>\d[\w.]*(?:[eE][-+]?\d+)?)
      |(?P<op>\.\.\.|\.\.|==|~=|<=|>=|\S)
      |(?P<space>\s+)""",
    re.VERBOSE,
)
_OPEN = {"function", "do", "if", "repeat", "(", "{", "["}
_CLOSE = {"end", "until", ")", "}", "]"}
# Globals a top-level value may call and still be dropped: pure, no state outside it.
_PURE_CALLS = {"string", "math", "tonumber", "tostring", "unpack", "type", "select", "ipairs",
               "pairs"}
_KEYWORDS = {"and", "or", "not", "in", "return", "local", "then", "do", "else", "elseif",
             "if", "while", "until", "for", "function", "end", "repeat"}
_LOCAL = re.compile(r"^local\s+(?:function\s+(\w+)\s*\(|(\w+(?:\s*,\s*\w+)*)\s*(=|$))")
_ASSIGN = re.compile(r"^(\w+)(?:\s*(?:\.\s*\w+|\[[^\]]*\]))*\s*=(?!=)")
_BLOCK = re.compile(r"^(?:for|if|while|do)\b")


@dataclass(frozen=True)
class Token:
    kind: str     # "name", "op", "string", "number", "comment"
    text: str
    start: int
    end: int


def tokens(source: str, where: str = "") -> list[Token]:
    """The Lua tokens of ``source``, comments and strings as single tokens."""
    out: list[Token] = []
    pos = 0
    while pos < len(source):
        match = _TOKEN.match(source, pos)
        if match is None:   # pragma: no cover - every character matches some alternative
            raise ScriptSourceError(f"{where}: cannot read Lua at offset {pos}")
        kind = match.lastgroup
        end = match.end()
        if match.group("long") is not None:
            level = match.group("lc") if match.group("lc") is not None else match.group("ls")
            close = source.find("]" + level + "]", end)
            if close < 0:
                raise ScriptSourceError(f"{where}: a long string or comment never closes")
            end = close + len(level) + 2
            kind = "comment" if source.startswith("--", pos) else "string"
        if kind != "space":
            out.append(Token(kind, source[pos:end], pos, end))
        pos = end
    return out


def used_names(code: list[Token]) -> set[str]:
    """The identifiers ``code`` reads or writes, not those after ``.`` or ``:``."""
    names: set[str] = set()
    previous = ""
    for token in code:
        if token.kind == "name" and previous not in (".", ":"):
            names.add(token.text)
        if token.kind != "comment":
            previous = token.text
    return names


@dataclass
class Statement:
    """One top-level statement of an include, with the comments above it."""
    where: str                 # "includes/NAME.lua:LINE"
    text: str
    defines: frozenset[str] = frozenset()
    targets: frozenset[str] = frozenset()   # top-level names it sets (assignments, blocks)
    uses: frozenset[str] = frozenset()
    always: bool = False


@dataclass
class Directive:
    """An ``--@include NAME`` line of an include, with the comments above it."""
    name: str
    lead: str


@dataclass
class Include:
    """An include split into its parts, in order, and what follows its last statement."""
    parts: list = field(default_factory=list)
    tail: str = ""


@lru_cache(maxsize=256)
def split_include(text: str, where: str) -> Include:
    """Split an include into top-level statements by the house's layout (module docstring);
    the parts joined again are ``text``. Raises ScriptSourceError at a line outside it.
    Cached by text: every script that pastes an include reuses its split (do not change
    the parts)."""
    lines = text.splitlines(keepends=True)
    starts, offset = [], 0
    for line in lines:
        starts.append(offset)
        offset += len(line)
    toks = tokens(text, where)
    long_spans = [(t.start, t.end) for t in toks
                  if t.kind in ("comment", "string") and "\n" in t.text]
    depth_at = _depths(toks, starts)
    result = Include()
    lead: list[str] = []
    body: list[str] = []
    body_line = 0

    def close(number: int) -> None:
        nonlocal body
        if not body:
            return
        if depth_at[number] != 0:
            raise ScriptSourceError(f"{where}:{body_line + 1}: the statement does not close "
                                    "before the next top-level line")
        result.parts.append(_statement(f"{where}:{body_line + 1}", "".join(lead), "".join(body)))
        lead.clear()
        body = []

    for number, line in enumerate(lines):
        inside = any(s < starts[number] < e for s, e in long_spans)
        stripped = line.strip()
        if inside:
            (body if body else lead).append(line)
        elif depth_at[number] > 0:
            if not body:
                raise ScriptSourceError(f"{where}:{number + 1}: inside a block that no "
                                        "top-level statement opened")
            if line[:1] not in (" ", "\t", "\n", "\r") and not re.match(r"^[})\]]|^end\b", line):
                raise ScriptSourceError(f"{where}:{number + 1}: a line at column 0 inside a "
                                        f"statement (indent it): {stripped!r}")
            body.append(line)
        elif not stripped or line.startswith("--"):
            close(number)
            match = INCLUDE.match(line.rstrip("\r\n"))
            if match:
                result.parts.append(Directive(match.group(1), "".join(lead)))
                lead.clear()
                continue
            lead.append(line)
        elif line[:1] in (" ", "\t") or re.match(r"^[})\]]|^end\b", line):
            if not body:
                raise ScriptSourceError(f"{where}:{number + 1}: a continuation line that "
                                        f"belongs to no statement: {stripped!r}")
            body.append(line)
        else:
            close(number)
            body, body_line = [line], number
    close(len(lines))
    result.tail = "".join(lead)
    return result


def _depths(toks: list[Token], starts: list[int]) -> list[int]:
    """The block and bracket depth at the start of each line (one entry more: the end)."""
    depths: list[int] = []
    depth, index = 0, 0
    code = [t for t in toks if t.kind in ("name", "op")]
    for start in [*starts, float("inf")]:
        while index < len(code) and code[index].start < start:
            text = code[index].text
            depth += (text in _OPEN) - (text in _CLOSE)
            index += 1
        depths.append(depth)
    return depths


def _statement(where: str, lead: str, body: str) -> Statement:
    toks = tokens(body, where)
    first = body.split("\n", 1)[0]
    comment = next((t.start for t in toks if t.kind == "comment" and t.start < len(first)),
                   len(first))
    first = first[:comment].rstrip()
    code = [t for t in toks if t.kind != "comment"]
    uses = used_names(code)
    texts = [t.text for t in code]
    calls_redis = any(texts[i:i + 3] in (["redis", ".", "call"], ["redis", ".", "pcall"])
                      for i in range(len(texts)))
    local = _LOCAL.match(first)
    if local:
        if local.group(1):
            return Statement(where, lead + body, frozenset([local.group(1)]), uses=uses)
        names = frozenset(n.strip() for n in local.group(2).split(","))
        return Statement(where, lead + body, names, uses=uses,
                         always=calls_redis or _impure_call(code))
    assign = _ASSIGN.match(first)
    if assign and not _BLOCK.match(first):
        targets = frozenset([assign.group(1)])
    elif _BLOCK.match(first):
        targets = frozenset(_assigned(code))
    else:
        raise ScriptSourceError(f"{where}: a top-level line the shaker cannot read (a local, "
                                f"an assignment or a for / if / while / do block): {first!r}")
    always = not targets or calls_redis or "return" in texts or _impure_call(code)
    return Statement(where, lead + body, targets=targets, uses=uses, always=always)


def _impure_call(code: list[Token]) -> bool:
    """Whether running the statement calls anything but the pure globals: the first name of
    each called expression (``string.sub(...)`` is pure; ``f(...)``, ``t.f(...)``, ``t[k]()``
    are not). A function's body is not run by its definition, so is not looked at."""
    skip_to, level = -1, 0
    for i, token in enumerate(code):
        if i <= skip_to:
            continue
        if token.text == "function":
            skip_to, level = i, 0
            for j in range(i, len(code)):
                level += (code[j].text in _OPEN) - (code[j].text in _CLOSE)
                if level == 0:
                    skip_to = j
                    break
            else:
                return True
            continue
        if i == 0 or not (token.text in ("(", "{") or token.kind == "string"):
            continue
        j = i - 1
        if code[j].text in (")", "]"):
            return True
        if code[j].kind != "name" or code[j].text in _KEYWORDS:
            continue
        while j > 1 and code[j - 1].text in (".", ":"):
            j -= 2
        if code[j].text not in _PURE_CALLS:
            return True
    return False


def _assigned(code: list[Token]) -> set[str]:
    """The names a block assigns to (``x = ``, ``x.f = ``, ``x[k] = ``)."""
    found: set[str] = set()
    for i, token in enumerate(code):
        if token.kind != "name" or (i and code[i - 1].text in (".", ":")):
            continue
        j, level = i + 1, 0
        while j < len(code):
            text = code[j].text
            if level == 0 and text == ".":
                j += 2
            elif text == "[":
                level, j = level + 1, j + 1
            elif text == "]" and level:
                level, j = level - 1, j + 1
            elif level:
                j += 1
            else:
                break
        if j < len(code) and code[j].text == "=":
            found.add(token.text)
    return found


def assemble_source(path: Path, directory: Path) -> str:
    """The script at ``path`` with its includes (from ``directory``/includes/) pasted and
    shaken: each include's statements the script reaches, in order."""
    if not path.is_file():
        raise ScriptSourceError(f"no Lua file {path}")
    pieces: list = []       # str (the script's own text, a marker) or Statement
    pasted: set[str] = set()

    def paste(part: str, by: str) -> None:
        if part in pasted:
            pieces.append(f"-- (includes/{part}.lua: pasted above)")
            return
        pasted.add(part)
        part_path = directory / "includes" / f"{part}.lua"
        if not part_path.is_file():
            raise ScriptSourceError(f"{by}: --@include {part}: no file {part_path}")
        split = split_include(part_path.read_text(), f"includes/{part}.lua")
        pieces.append(f"-- includes/{part}.lua (only what this script reaches)\n")
        for item in split.parts:
            if isinstance(item, Directive):
                pieces.append(item.lead)
                paste(item.name, part_path.name)
                pieces.append("\n")
            else:
                pieces.append(item)

    own = path.read_text()
    for line in own.splitlines(keepends=True):
        match = INCLUDE.match(line.rstrip("\r\n"))
        if match:
            paste(match.group(1), path.name)
            pieces.append(line[len(line.rstrip("\r\n")):])
        else:
            pieces.append(line)
    kept = _reached([p for p in pieces if isinstance(p, Statement)], _root_names(own, path.name))
    return "".join(p if isinstance(p, str) else p.text for p in pieces
                   if isinstance(p, str) or id(p) in kept)


@lru_cache(maxsize=256)
def _root_names(text: str, where: str) -> frozenset[str]:
    """The names a script's own text uses (cached: every process assembles every script)."""
    return frozenset(used_names([t for t in tokens(text, where) if t.kind != "comment"]))


def _reached(statements: list[Statement], root: frozenset[str]) -> set[int]:
    """The ids of the statements kept: those always kept, those defining or setting a name
    a kept text uses, until nothing more is reached."""
    names = set(root)
    defined = set().union(*(st.defines for st in statements))
    kept: set[int] = set()
    changed = True
    while changed:
        changed = False
        for st in statements:
            if id(st) in kept:
                continue
            if (st.always or st.defines & names or st.targets & names
                    or (st.targets and not st.targets & defined)):
                kept.add(id(st))
                names |= st.uses | st.defines
                changed = True
    return kept
