"""The Lua <-> Python contract: one outcome table, one field order, one key order, and a
loader that assembles every script or fails at load time."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from redis.crc import key_slot

from delayqueue.core.keys import NamespaceKeys
from delayqueue.core.message import MESSAGE_FIELDS, DelayMsg
from delayqueue.core.outcome import Outcome
from delayqueue.core.scripts import Scripts, ScriptSourceError, lua_source
from delayqueue.core.status import Status
from delayqueue.core.topic_config import effective, server_defaults, stored
from delayqueue.settings.config import Settings, load_settings
from delayqueue.settings.topic_setting import SCRIPT_SETTINGS, SETTINGS

LUA = Path(__file__).resolve().parents[2] / "lua"
TOPIC_SCRIPTS = ("send", "promote", "pull", "ack", "nack", "delete", "timeout", "expire",
                 "change_visibility", "reschedule", "dead_list", "dead_redrive", "dead_purge",
                 "dead_trim", "topic_config", "get", "migrate", "migrate_order",
                 "drop_sequence")


def test_lua_outcome_table_equals_the_python_enum():
    text = (LUA / "includes" / "outcome.lua").read_text()
    lua = {name: int(value) for name, value in re.findall(r"^local (\w+) = (-?\d+)$", text, re.M)}
    assert lua == {member.name: member.value for member in Outcome}


def test_lua_status_table_equals_the_python_enum(redis_client):
    """includes/status.lua mirrors status.py: the same names and numbers, and is_live agrees
    with Status.live on every status."""
    source = (LUA / "includes" / "status.lua").read_text()
    (table,) = re.findall(r"^local Status = \{(.*?)\}", source, re.M | re.S)
    lua = {name: int(value) for name, value in re.findall(r"(\w+) = (\d+)", table)}
    assert lua == {member.name: member.value for member in Status}
    live = redis_client.eval(source + "local live = {} for i = 1, 7 do "
                             "live[i] = is_live(tostring(i)) and 1 or 0 end return live", 0)
    assert live == [int(member.live) for member in Status]


def _lua_code(path: Path) -> str:
    """A Lua file without its comments."""
    return re.sub(r"--\[\[.*?\]\]|--[^\n]*", "", path.read_text(), flags=re.S)


def _status_assigned_a_number(line: str) -> bool:
    """`m[STATUS] = 2`, `m[X], m[STATUS] = x, 3`, `... = due_now and 2 or 1`."""
    if "=" not in line or "[STATUS]" not in line.split("=", 1)[0]:
        return False
    targets, values = (side.split(",") for side in line.split("=", 1))
    value = values[[i for i, t in enumerate(targets) if "[STATUS]" in t][0]]
    return re.search(r"(?<![\w.])[1-7](?![\w.])", value) is not None


def test_no_lua_file_names_a_status_by_its_number():
    """Statuses are named (includes/status.lua): `status > 3` hides which states it means."""
    bare = [r"(?i)status\]?\)?\s*(?:[<>]=?|[=~]=)\s*'?\d",      # status == 3, m[STATUS]) > 3
            r"end_message\([^)]*?,\s*\d+\s*,",                   # end_message(..., 5, ...)
            r"\breturn\s+[1-7]\s*,",                              # return 6, dead
            r"\}\)\[status\]"]                                   # ({waiting, ...})[status]
    for path in sorted(LUA.rglob("*.lua")):
        if path.name == "status.lua":
            continue
        code = _lua_code(path)
        found = [m.group(0) for pattern in bare for m in re.finditer(pattern, code)]
        found += [line.strip() for line in code.splitlines() if _status_assigned_a_number(line)]
        byte_reads = re.findall(r"string\.byte\(", code)    # the one in stored_status only
        found += byte_reads[1:] if path.name == "message.lua" else byte_reads
        assert found == [], f"{path.name}: statuses by number: {found}"


def test_scripts_return_named_outcomes_not_bare_numbers():
    """A script that reports an outcome says it by name (OK, NO_MESSAGE, ...)."""
    for name in Scripts.NAMES:
        source = (LUA / f"{name}.lua").read_text()
        bare = re.findall(r"return \{?(-?[1-9]\d*|-\d+)\s*[,}]", source)
        assert bare == [], f"{name}.lua returns bare outcome numbers {bare}"


def test_lua_setting_names_are_the_python_topic_settings_in_order():
    text = (LUA / "includes" / "settings.lua").read_text()
    (names,) = re.findall(r"SETTING_NAMES = \{(.*?)\}", text, re.S)
    assert tuple(re.findall(r"'(\w+)'", names)) == tuple(s.name for s in SCRIPT_SETTINGS)
    assert [s.name for s in SETTINGS if s not in SCRIPT_SETTINGS] == ["description"]


def test_lua_reads_a_topic_value_over_the_server_default_from_the_argv_tail(redis_client):
    """topic_settings() finds the defaults at the end of ARGV whatever comes before them,
    and a value set on the topic wins, as topic_config.effective() says."""
    server = Settings(ttl_millis=11, max_retry=12, ack_timeout_millis=13,
                      redelivery_delay_millis=14, redelivery_backoff_multiplier=1.5,
                      redelivery_max_delay_millis=16, dead_letter=False,
                      dead_letter_retention_millis=18, dead_letter_max_size=19,
                      delay_millis=20, max_backlog=21, dedup_window_millis=22,
                      default_subscription=False)
    own = {"maxRetry": "7", "deadLetter": "1", "redeliveryBackoffMultiplier": "2.5"}
    redis_client.hset("contract:config", mapping=own)
    probe = (LUA / "includes" / "settings.lua").read_text() + """
local s = topic_settings(KEYS[1])
local out = {}
for i, name in ipairs(SETTING_NAMES) do out[i] = tostring(s[name]) end
return out"""
    read = redis_client.eval(probe, 1, "contract:config", "other", "argv",
                             *server_defaults(server))
    values, _ = effective(own, server)
    assert [float(v) for v in read] == [float(stored(values[s.name])) for s in SCRIPT_SETTINGS]
    assert [float(v) for v in read] == [11, 7, 13, 14, 2.5, 16, 1, 18, 19, 20, 21, 22, 0]


def test_lua_message_fields_are_in_python_field_order(redis_client):
    """The record include's field indices are 1..9 in MESSAGE_FIELDS order, and a script's
    reply, decoded from a record, reads back as what was sent."""
    text = (LUA / "includes" / "message.lua").read_text()
    fields = re.findall(r"^local [A-Z_]+ = (\d+) +-- (\w) ", text, re.M)
    assert [int(index) for index, _ in fields] == list(range(1, len(MESSAGE_FIELDS) + 1))
    assert tuple(letter for _, letter in fields) == MESSAGE_FIELDS
    tk = NamespaceKeys("dq", "default").topic("t")
    defaults = server_defaults(load_settings(env={}))
    _, fields, _ = Scripts(redis_client).send(tk, "id", "B", 1, 2, 3, 4, '{"k":"v"}', "ch",
                                              defaults)
    message = DelayMsg.from_fields("t", "id", fields)
    assert (message.msg, message.produce_time, message.trigger_time, message.expire_time,
            message.max_retry, message.retry, message.status, message.attributes,
            message.receipt) == ("B", 1, 2, 5, 4, 0, 1, {"k": "v"}, None)


def test_no_lua_file_indexes_a_message_or_the_topic_keys_by_a_bare_number():
    """Fields are read by name (includes/message.lua's indices) and so are a topic's keys
    (tk.msgs): m[7] says "status", queues[6] "msgs", only to a reader who knows the order
    (and KEYS[6] is config)."""
    for path in sorted(LUA.rglob("*.lua")):
        bare = re.findall(r"\b(?:m|existing|own|queues|tk)\[\d+\]", path.read_text())
        assert bare == [], f"{path.name} indexes by number: {bare}"


def test_every_topic_script_takes_the_topic_keys_in_the_order_python_passes_them():
    """includes/keys.lua names KEYS[1..19] (its header and its tk table) in the order of
    TopicKeys.queues and SubscriptionKeys.queues, and every topic script says it takes them
    and includes it."""
    keys_lua = (LUA / "includes" / "keys.lua").read_text()
    header = keys_lua.split("]]", 1)[0]
    documented = [re.search(rf"KEYS\[{i}\]\s+(\w+)", header).group(1) for i in range(1, 20)]
    table = dict(re.findall(r"(\w+) = KEYS\[(\d+)\]", keys_lua))
    tk = NamespaceKeys("dq", "default").topic("t")
    in_python = [key.rsplit(":", 1)[1] for key in tk.queues]
    # KEYS[13..19] are the topic's whatever the subscription: its msgs are the bodies, its
    # config the settings a subscription's fall back to.
    shared_names = {"msgs": "bodies", "config": "topic"}
    in_lua = in_python[:12] + [shared_names.get(n, n) for n in in_python[12:]]
    assert documented == in_lua
    in_table = in_python[:12] + [{"config": "topic_config"}.get(n, shared_names.get(n, n))
                                 for n in in_python[12:]]
    assert sorted(table, key=lambda name: int(table[name])) == in_table
    assert [int(table[name]) for name in in_table] == list(range(1, 20))
    sk = tk.subscription("s1")
    assert [key.rsplit(":", 1)[1] for key in sk.queues] == in_python
    assert sk.queues[12:] == tk.queues[12:] and sk.queues[8] == tk.seq
    assert all(key.startswith("dq:{default:t}:s:s1:") for key in sk.queues[:12] if key != tk.seq)
    for name in TOPIC_SCRIPTS:
        text = (LUA / f"{name}.lua").read_text()
        assert "KEYS: the 19 keys (includes/keys.lua)" in text.split("]]", 1)[0], name
        assert "local tk = {" in lua_source(name), name
        assert not re.search(r"KEYS\[\d+\]", text), f"{name}.lua names a key by number"


def test_every_script_is_assembled_with_each_include_once():
    for name in Scripts.NAMES:
        source = lua_source(name)
        assert not re.search(r"^--@include", source, re.M), name
        # each helper is defined exactly once, however deep it was included
        for helper in ("find_message", "decode", "save_message", "due_at", "promote"):
            assert source.count(f"local function {helper}(") <= 1, (name, helper)
        assert source.count("local OK = 1") <= 1, name
        assert source.count("local Status = {") <= 1, name
    # ack includes group, which includes message, which includes outcome and status (of
    # each, only what ack reaches is pasted: lua_include.py)
    ack = lua_source("ack")
    assert ack.count("local function find_message(") == 1
    assert ack.count("local NO_MESSAGE = -1") == 1
    assert ack.count("local Status = {") == 1


def test_every_script_has_its_own_test_file():
    """tests/lua/test_<script>.py, or test_<script>_script.py where another test file has the
    plain name (basenames are unique across tests/)."""
    tests = Path(__file__).resolve().parents[1] / "lua"
    missing = [name for name in Scripts.NAMES
               if not any((tests / f"test_{name}{suffix}.py").is_file()
                          for suffix in ("", "_script"))]
    assert missing == []


def test_a_missing_include_fails_at_load_time(tmp_path):
    (tmp_path / "includes").mkdir()
    (tmp_path / "includes" / "a.lua").write_text("--@include nowhere\nlocal A = 1\n")
    (tmp_path / "s.lua").write_text("--@include a\nreturn A\n")
    with pytest.raises(ScriptSourceError, match="nowhere"):
        lua_source("s", tmp_path)


def test_a_call_with_the_wrong_number_of_keys_is_refused_before_redis(redis_client):
    scripts = Scripts(redis_client)
    assert all(scripts.key_counts[name] == 19 for name in TOPIC_SCRIPTS)
    assert scripts.key_counts["monitor_flush"] == 2 and scripts.key_counts["due_set"] == 1
    with pytest.raises(TypeError, match="pull.lua reads 19 keys; called with 3"):
        scripts._run("pull", ["a", "b", "c"], [])
    redis_client.config_resetstat()
    assert "cmdstat_evalsha" not in redis_client.info("commandstats")


@pytest.mark.parametrize("topic", ["orders", "orders:eu/1", "a b", "é", "x" * 256])
def test_every_key_of_a_topic_lives_in_one_cluster_slot(topic):
    """Every topic script touches one Redis Cluster slot; every namespace script another."""
    nk = NamespaceKeys("dq", "default")
    tk = nk.topic(topic)
    topic_keys = [*tk.queues, tk.legacy_msg_prefix + "m-1", tk.legacy_msg_prefix + "{id}"]
    assert tk.dead in topic_keys and tk.config in topic_keys and tk.msgs in topic_keys
    assert len({key_slot(key.encode()) for key in topic_keys}) == 1
    namespace_keys = [nk.topics, nk.due, nk.hint_channel, nk.lease("schedule"), nk.monitor(0),
                      nk.monitor_total, nk.snapshot_mark, nk.offline("node:8080"),
                      nk.storage_format]
    assert len({key_slot(key.encode()) for key in namespace_keys}) == 1
