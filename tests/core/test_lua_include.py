"""The includes' tree shake (delayqueue/core/lua_include.py): every include fits the layout
the shaker reads, every shaken script compiles in Redis and reads no global Redis lacks, and
the shaker keeps what a script reaches (and the side effects on what it keeps), in order,
and nothing else."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest
from lupa import lua51

from delayqueue.core.lua_include import Directive, Statement, split_include
from delayqueue.core.scripts import Scripts, ScriptSourceError, lua_dir, lua_source

INCLUDES = sorted((lua_dir() / "includes").glob("*.lua"))

# What a script may read as a global in Redis 7: Lua 5.1's base functions and libraries that
# Redis loads, and Redis's own. Anything else is a local the shaker dropped (or a typo):
# Redis refuses it at run time ("Script attempted to access nonexistent global variable").
REDIS_GLOBALS = {
    "redis", "KEYS", "ARGV", "cjson", "struct", "cmsgpack", "bit", "string", "table", "math",
    "tonumber", "tostring", "type", "ipairs", "pairs", "pcall", "error", "unpack", "select",
    "next", "assert", "rawget", "rawset", "rawequal", "setmetatable", "getmetatable", "xpcall",
}


@pytest.mark.parametrize("path", INCLUDES, ids=lambda p: p.name)
def test_every_include_fits_the_layout_and_splits_back_into_itself(path):
    text = path.read_text()
    split = split_include(text, path.name)
    joined = "".join(p.lead if isinstance(p, Directive) else p.text for p in split.parts)
    directives = [p for p in split.parts if isinstance(p, Directive)]
    statements = [p for p in split.parts if isinstance(p, Statement)]
    # the directive lines themselves are the only text the parts do not carry
    assert joined + split.tail == re.sub(r"^--@include \w+\n", "", text, flags=re.M)
    assert [d.name for d in directives] == re.findall(r"^--@include (\w+)$", text, re.M)
    assert statements and all(s.defines or s.targets or s.always for s in statements)


@pytest.mark.parametrize("bad, why", [
    ("local function f()\nreturn 1\nend\n", "column 0 inside a statement"),
    ("local x = 1\n\n  + 2\n", "belongs to no statement"),
    ("redis.call('DEL', KEYS[1])\n", "cannot read"),
    ("local t = {\n  a = 1,\n\nlocal y = 2\n", "column 0 inside a statement"),
    ("local function f()\n  return 1\n", "does not close"),
])
def test_an_include_line_outside_the_layout_fails_at_load_time_naming_it(tmp_path, bad, why):
    (tmp_path / "includes").mkdir()
    (tmp_path / "includes" / "bad.lua").write_text("-- a helper\n" + bad)
    (tmp_path / "s.lua").write_text("--@include bad\nreturn 1\n")
    with pytest.raises(ScriptSourceError, match=why) as error:
        lua_source("s", tmp_path)
    assert "includes/" + "bad.lua:" in str(error.value)   # (split: not a path of the repo)


def test_every_shaken_script_compiles_in_redis(redis_client):
    for name in Scripts.NAMES:
        sha = redis_client.script_load(lua_source(name))
        assert redis_client.script_exists(sha) == [True], name


def test_no_shaken_script_reads_a_global_redis_lacks_or_writes_one():
    for name in Scripts.NAMES:
        reads, writes = _globals(_dump(lua_source(name)))
        assert reads <= REDIS_GLOBALS, (name, sorted(reads - REDIS_GLOBALS))
        assert writes == set(), name


def test_the_globals_check_sees_a_dropped_local():
    reads, writes = _globals(_dump("local a = 1\nlocal function f() return b + a end\n"
                                   "c = f()\nreturn string.len('x')"))
    assert reads == {"b", "string"} and writes == {"c"}


def _dump(source: str) -> bytes:
    """The Lua 5.1 bytecode of ``source`` (Redis runs Lua 5.1), compiled by lupa."""
    lua = lua51.LuaRuntime(encoding=None)
    dump = lua.eval(b"function(src) local f, err = loadstring(src); "
                    b"if not f then error(err) end; return string.dump(f) end")
    return dump(source.encode())


def _shake(tmp_path: Path, include: str, script: str) -> str:
    (tmp_path / "includes").mkdir(exist_ok=True)
    (tmp_path / "includes" / "inc.lua").write_text(include)
    (tmp_path / "s.lua").write_text("--@include inc\n" + script)
    return lua_source("s", tmp_path)


def test_the_shaker_keeps_what_the_script_reaches_in_order_and_drops_the_rest(tmp_path):
    source = _shake(tmp_path, (
        "--[[ header ]]\n"
        "local A = 1\n"
        "-- unused, and its comment with it\n"
        "local function unused() return A end\n"
        "\n"
        "-- B uses A\n"
        "local function b(x)\n"
        "  return x + A\n"
        "end\n"
        "local function c() return b(2) end\n"
        "local UNUSED_TABLE = {1, 2,\n"
        "  3}\n"), "return c()\n")
    assert "local A = 1" in source and "local function b(" in source
    assert "-- B uses A" in source and "local function c()" in source
    assert source.index("local A") < source.index("local function b(") < source.index(
        "local function c(")
    assert "unused" not in source and "UNUSED_TABLE" not in source


def test_the_shaker_keeps_the_side_effects_on_what_it_keeps(tmp_path):
    include = (
        "local t = {a = KEYS[1]}\n"
        "t.b = KEYS[2]\n"
        "local NAMES = {'x', 'y'}\n"
        "local FIELDS = {}\n"
        "for _, n in ipairs(NAMES) do FIELDS[#FIELDS + 1] = n end\n"
        "local g\n"
        "local function f() return g() end\n"
        "g = function()\n"
        "  return t.b\n"
        "end\n"
        "if t.a == 'refuse' then\n"
        "  return redis.error_reply('REFUSED')\n"
        "end\n"
        "local stamp = redis.call('INCR', 'counter')\n"
        "local n = count_something()\n")
    kept = _shake(tmp_path, include, "return f()\n")
    assert "t.b = KEYS[2]" in kept and "g = function()" in kept and "local g\n" in kept
    assert "FIELDS" not in kept and "NAMES" not in kept      # their loop with them
    assert "return redis.error_reply('REFUSED')" in kept       # a guard: always
    assert "redis.call('INCR'" in kept                          # calls Redis: always
    assert "local n = count_something()" in kept                # calls a function: always
    fields = _shake(tmp_path, include, "return FIELDS\n")
    assert "for _, n in ipairs(NAMES)" in fields and "local NAMES" in fields


def test_a_name_only_a_comment_or_a_field_mentions_keeps_nothing(tmp_path):
    source = _shake(tmp_path, "local function helper() return 1 end\n",
                    "-- helper() is not called here\nlocal t = {}\nreturn t.helper\n")
    assert "local function helper" not in source


def test_the_shaken_scripts_drop_what_they_never_call():
    assert "local function decode(" not in lua_source("due_set")
    assert "local function trim_dead(" not in lua_source("send")
    assert "local function promote(" not in lua_source("ack")
    assert "local function promote(" in lua_source("pull")


# -- Lua 5.1 bytecode (string.dump): the globals a chunk reads and writes -------------------
_GETGLOBAL, _SETGLOBAL = 5, 7


def _globals(dump: bytes) -> tuple[set[str], set[str]]:
    assert dump[:5] == b"\x1bLua\x51", "not a Lua 5.1 chunk"
    int_size, size_t, ins_size, num_size = dump[7], dump[8], dump[9], dump[10]
    assert dump[6] == 1 and ins_size == 4, "little-endian, 4-byte instructions"
    reader = _Reader(dump, 12, int_size, size_t, num_size)
    reads: set[str] = set()
    writes: set[str] = set()
    reader.function(reads, writes)
    return reads, writes


class _Reader:
    def __init__(self, data: bytes, pos: int, int_size: int, size_t: int, num_size: int):
        self.data, self.pos = data, pos
        self.int_fmt = {4: "<i", 8: "<q"}[int_size]
        self.size_fmt = {4: "<I", 8: "<Q"}[size_t]
        self.num_size = num_size

    def take(self, fmt: str):
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def string(self) -> str | None:
        size = self.take(self.size_fmt)
        if size == 0:
            return None
        text = self.data[self.pos:self.pos + size - 1].decode("latin-1")
        self.pos += size
        return text

    def function(self, reads: set[str], writes: set[str]) -> None:
        self.string()                          # source
        self.take(self.int_fmt)                # linedefined
        self.take(self.int_fmt)                # lastlinedefined
        self.pos += 4                          # nups, numparams, is_vararg, maxstacksize
        code = [self.take("<I") for _ in range(self.take(self.int_fmt))]
        constants: list = []
        for _ in range(self.take(self.int_fmt)):
            kind = self.data[self.pos]
            self.pos += 1
            if kind == 1:
                self.pos += 1
                constants.append(None)
            elif kind == 3:
                self.pos += self.num_size
                constants.append(None)
            elif kind == 4:
                constants.append(self.string())
            else:
                constants.append(None)
        for instruction in code:
            op, bx = instruction & 0x3F, instruction >> 14
            if op == _GETGLOBAL:
                reads.add(constants[bx])
            elif op == _SETGLOBAL:
                writes.add(constants[bx])
        for _ in range(self.take(self.int_fmt)):     # nested functions
            self.function(reads, writes)
        lines = self.take(self.int_fmt)              # lineinfo
        self.pos += lines * struct.calcsize(self.int_fmt)
        for _ in range(self.take(self.int_fmt)):     # locals
            self.string()
            self.take(self.int_fmt)
            self.take(self.int_fmt)
        for _ in range(self.take(self.int_fmt)):     # upvalue names
            self.string()
