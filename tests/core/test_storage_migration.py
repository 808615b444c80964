"""The storage format: ``delayqueue migrate-storage`` converts a namespace written with a
hash per message, or with records-1 (no acceptance order), or records-2 (no end time), into
records-4, and a node refuses to start on an unconverted namespace."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from delayqueue.core.clock import ManualClock
from delayqueue.core.keys import NamespaceKeys
from delayqueue.core.outcome import Outcome
from delayqueue.core.scripts import Scripts
from delayqueue.core.storage import STORAGE_FORMAT, StorageFormatError, check_format, migrate

from support.lua import (
    CHANNEL,
    DEFAULTS,
    END_LIFE,
    HOUR,
    T0,
    as_records_1,
    as_records_2,
    assert_one_place,
    configure,
    read,
    send,
    slot_of,
)
from support.node import ServerProcess

NS = NamespaceKeys("dq", "default")
REPO = Path(__file__).resolve().parents[2]
DELAYQUEUE = Path(sys.executable).parent / "delayqueue"
RECEIPT = f"{T0 + 5:x}.1"


def write_old_format(client, topic: str) -> dict[str, list]:
    """One message in each place, as the per-message-hash format kept them; returns each
    message's fields as its scripts replied with them."""
    tk = NS.topic(topic)
    prefix = tk.legacy_msg_prefix
    attributes = json.dumps({"k": "v"})
    messages = {
        "w": ({"m": "waiting", "p": T0, "t": T0 + HOUR, "e": T0 + 2 * HOUR, "r": 3, "n": 0,
               "s": 1, "a": attributes}, {tk.waiting: T0 + HOUR}, None),
        "r": ({"m": "ready", "p": T0, "t": T0, "e": T0 + HOUR, "r": 3, "n": 0, "s": 2},
              {tk.ready: T0, tk.expire: T0 + HOUR}, None),
        "c": ({"m": "consuming", "p": T0, "t": T0, "e": T0 + HOUR, "r": 3, "n": 1, "s": 3,
               "c": RECEIPT}, {tk.ack: T0 + 30_000, tk.expire: T0 + HOUR}, None),
        "a": ({"m": "acked", "p": T0, "t": T0, "e": T0 + HOUR, "r": 3, "n": 1, "s": 4,
               "c": RECEIPT}, {}, 50_000),
        "d": ({"m": "dead", "p": T0, "t": T0, "e": T0 + HOUR, "r": 0, "n": 1, "s": 6,
               "c": RECEIPT}, {tk.dead: T0 + 9}, 3_600_000),
    }
    expected = {}
    for msg_id, (fields, zsets, ttl) in messages.items():
        client.hset(prefix + msg_id, mapping=fields)
        if ttl:
            client.pexpire(prefix + msg_id, ttl)
        for zset, score in zsets.items():
            client.zadd(zset, {msg_id: score})
        expected[msg_id] = [None if fields.get(f) is None else str(fields[f])
                            for f in "mpternsacg"]
    client.zadd(NS.topics, {topic: T0})
    return expected


def test_migration_converts_every_message_and_is_safe_to_rerun(redis_client):
    expected = {topic: write_old_format(redis_client, topic) for topic in ("t1", "t 2")}
    clock = ManualClock(T0 + 10)
    lines: list[str] = []
    assert migrate(redis_client, NS, clock.now_ms, lines.append) == 10
    assert redis_client.get(NS.storage_format) == STORAGE_FORMAT
    assert lines[-1].startswith("migrate-storage: done, 10 messages converted")
    assert redis_client.keys("*:msg:*") == []
    for topic, messages in expected.items():
        tk = NS.topic(topic)
        for msg_id, fields in messages.items():
            assert read(redis_client, tk, msg_id)[0] == fields, (topic, msg_id)
        for msg_id, status in (("w", 1), ("r", 2), ("c", 3), ("a", 4)):
            assert_one_place(redis_client, tk, msg_id, status)
        dead = slot_of(redis_client, tk, "d")       # its retention: the rest of its TTL
        assert redis_client.zrange(tk.dead, 0, -1, withscores=True) == [(dead, T0 + 9)]
        assert 0 < redis_client.zscore(tk.ended, dead) - (T0 + 10) <= 3_600_000
        # an ended message keeps the rest of its retention (its TTL) as its `ended` score
        assert 0 < redis_client.zscore(tk.ended, slot_of(redis_client, tk, "a")) - \
            (T0 + 10) <= 50_000
    before = {key: redis_client.dump(key) for key in redis_client.keys("dq:*")}
    assert migrate(redis_client, NS, clock.now_ms) == 0           # a re-run changes nothing
    assert {key: redis_client.dump(key) for key in redis_client.keys("dq:*")} == before
    # The converted messages work: the receipt of the delivery survives, the ready one pulls.
    scripts, tk = Scripts(redis_client), NS.topic("t1")
    assert scripts.ack(tk, "c", T0 + 20, END_LIFE, RECEIPT)[0] == 1
    pulled = scripts.pull(tk, T0 + 20, 5, 1000, END_LIFE, 1000, CHANNEL, DEFAULTS)[0]
    assert [m[0] for m in pulled] == ["r"]
    assert scripts.dead_redrive(tk, T0 + 30, "d", 10, CHANNEL, DEFAULTS)[:2] == [1, 1]


def test_the_cli_migrates_and_a_node_refuses_an_unconverted_namespace(redis_client, redis_url):
    write_old_format(redis_client, "t1")
    node = ServerProcess(redis_url)
    try:
        node.start(timeout_s=20)
        raise AssertionError("a node started on an unconverted namespace")
    except RuntimeError as exc:
        refusal = str(exc)
    assert "exited with 2" in refusal
    assert "run `delayqueue migrate-storage` first" in refusal
    done = subprocess.run([str(DELAYQUEUE), "migrate-storage", "--redis-url", redis_url],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert "topic 1/1 't1': 5 converted" in done.stderr
    with ServerProcess(redis_url) as node:
        message = node.call("getMsg", topic="t1", msgId="w")["delayMsg"]
        assert message["msg"] == "waiting" and message["attributes"] == {"k": "v"}


def test_the_start_check_marks_a_namespace_of_records_and_refuses_the_old_format(
        redis_client):
    check_format(redis_client, NS)                       # a new namespace: marked
    assert redis_client.get(NS.storage_format) == STORAGE_FORMAT
    # Redis lost the mark (restarted empty) while nodes kept writing records: marked again.
    redis_client.delete(NS.storage_format)
    send(Scripts(redis_client), NS.topic("new"), "m", T0, T0 + 10)
    redis_client.zadd(NS.topics, {"new": T0})
    check_format(redis_client, NS)
    assert redis_client.get(NS.storage_format) == STORAGE_FORMAT
    # Old-format messages and no mark: refused, nothing marked.
    redis_client.delete(NS.storage_format)
    write_old_format(redis_client, "old")
    try:
        check_format(redis_client, NS)
        raise AssertionError("the old format was not noticed")
    except StorageFormatError as exc:
        assert "delayqueue migrate-storage" in str(exc)
    assert redis_client.get(NS.storage_format) is None


def test_a_records_1_namespace_is_refused_then_migrated_to_send_order(redis_client):
    scripts, tk = Scripts(redis_client), NS.topic("orders")
    for msg_id in ("a", "b", "c"):
        send(scripts, tk, msg_id, T0, T0)
    send(scripts, tk, "w", T0, T0 + HOUR)
    redis_client.zadd(NS.topics, {"orders": T0})
    as_records_1(redis_client, tk)
    redis_client.set(NS.storage_format, "records-1")
    try:
        check_format(redis_client, NS)
        raise AssertionError("a records-1 namespace was not refused")
    except StorageFormatError as exc:
        assert "marked 'records-1'" in str(exc) and "delayqueue migrate-storage" in str(exc)
    lines: list[str] = []
    assert migrate(redis_client, NS, ManualClock(T0).now_ms, lines.append) == 4
    assert redis_client.get(NS.storage_format) == STORAGE_FORMAT
    check_format(redis_client, NS)
    for msg_id, status in (("a", 2), ("b", 2), ("c", 2), ("w", 1)):
        assert_one_place(redis_client, tk, msg_id, status)
    assert migrate(redis_client, NS, ManualClock(T0).now_ms) == 0        # a re-run: nothing
    # Messages sent after the migration queue behind the converted ones, in send order.
    for msg_id in ("d", "e"):
        send(scripts, tk, msg_id, T0 + 1, T0)
    pulled = scripts.pull(tk, T0 + 1, 10, 1000, END_LIFE, 1000, CHANNEL, DEFAULTS)[0]
    assert sorted(m[0] for m in pulled[:3]) == ["a", "b", "c"]
    assert [m[0] for m in pulled[3:]] == ["d", "e"]


def test_an_unmarked_records_1_namespace_and_an_unknown_mark_are_refused(redis_client):
    scripts, tk = Scripts(redis_client), NS.topic("orders")
    send(scripts, tk, "a", T0, T0)
    redis_client.zadd(NS.topics, {"orders": T0})
    as_records_1(redis_client, tk)                    # records-1, its mark lost
    for mark in (None, "records-9"):
        if mark:
            redis_client.set(NS.storage_format, mark)
        try:
            check_format(redis_client, NS)
            raise AssertionError(f"mark {mark!r} was not refused")
        except StorageFormatError as exc:
            assert "storage: namespace 'default'" in str(exc)
        assert redis_client.get(NS.storage_format) == mark


def test_a_records_2_namespace_is_refused_then_marked_and_its_records_read_as_they_are(
        redis_client):
    """records-2 records have no end time: they read as they are, outside any dedup window,
    so the migration converts nothing and sets the mark (which keeps records-2 nodes out)."""
    scripts, tk = Scripts(redis_client), NS.topic("orders")
    send(scripts, tk, "acked", T0, T0, body="kept")
    scripts.pull(tk, T0, 1, 1000, END_LIFE, 1000, CHANNEL, DEFAULTS)
    scripts.ack(tk, "acked", T0, END_LIFE)
    send(scripts, tk, "w", T0, T0 + HOUR)
    redis_client.zadd(NS.topics, {"orders": T0})
    as_records_2(redis_client, tk)
    redis_client.set(NS.storage_format, "records-2")
    try:
        check_format(redis_client, NS)
        raise AssertionError("a records-2 namespace was not refused")
    except StorageFormatError as exc:
        assert "marked 'records-2'" in str(exc) and "delayqueue migrate-storage" in str(exc)
    assert migrate(redis_client, NS, ManualClock(T0).now_ms) == 0
    assert redis_client.get(NS.storage_format) == STORAGE_FORMAT == "records-4"
    check_format(redis_client, NS)
    assert read(redis_client, tk, "acked")[0][0] == "kept"
    assert_one_place(redis_client, tk, "acked", 4)
    assert_one_place(redis_client, tk, "w", 1)
    # No end time: outside a window however long, so a re-send is an ordinary send.
    configure(scripts, tk, dedupWindowMillis=HOUR)
    assert send(scripts, tk, "acked", T0 + 1, T0 + 1)[0] == Outcome.OK


def test_a_records_3_namespace_is_refused_and_its_migration_is_the_mark(redis_client):
    """records-3 records read as they are under records-4 (no subscription holds them): the
    migration converts nothing and sets the mark, which keeps records-3 nodes out (they know
    no fan-out and would deliver a detached message in the default subscription)."""
    scripts, tk = Scripts(redis_client), NS.topic("orders")
    send(scripts, tk, "w", T0, T0 + HOUR, body="kept")
    redis_client.zadd(NS.topics, {"orders": T0})
    redis_client.set(NS.storage_format, "records-3")
    try:
        check_format(redis_client, NS)
        raise AssertionError("a records-3 namespace was not refused")
    except StorageFormatError as exc:
        assert "marked 'records-3'" in str(exc) and "delayqueue migrate-storage" in str(exc)
    assert migrate(redis_client, NS, ManualClock(T0).now_ms) == 0
    assert redis_client.get(NS.storage_format) == "records-4"
    assert read(redis_client, tk, "w")[0][0] == "kept"
    assert_one_place(redis_client, tk, "w", 1)
