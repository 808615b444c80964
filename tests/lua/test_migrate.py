"""The storage migration's script, lua/migrate.lua: messages of the older format (a HASH per
message, keyed by msgId in the zsets) become records of the topic's msgs hash, in place.
(tests/core/test_storage_migration.py drives it through `migrate-storage`.)"""

from __future__ import annotations

import json

from delayqueue.core.scripts import Scripts

from support.lua import (
    END_LIFE,
    HOUR,
    T0,
    assert_one_place,
    ids_sharing_a_digest,
    read,
    send,
    slot_of,
    snapshot,
)

RECEIPT = f"{T0 + 5:x}.1"


def write_old(client, tk, msg_id, status, zsets, **fields):
    """One message as the per-message-hash format kept it: its hash and its zset entries."""
    old = {"m": "body", "p": T0, "t": T0, "e": T0 + HOUR, "r": 3, "n": 0, "s": status, **fields}
    client.hset(tk.legacy_msg_prefix + msg_id, mapping=old)
    for zset, score in zsets.items():
        client.zadd(getattr(tk, zset), {msg_id: score})
    return [None if old.get(name) is None else str(old[name]) for name in "mpternsacg"]


def test_an_old_hash_becomes_a_record_with_its_fields_and_its_zset_places(scripts, tk,
                                                                          redis_client):
    attributes = json.dumps({"k": "v"})
    fields = write_old(redis_client, tk, "c", 3, {"ack": T0 + 30_000, "expire": T0 + HOUR},
                       n=1, a=attributes, c=RECEIPT)
    assert scripts.migrate(tk, T0 + 10, ["c"]) == [1, 0]
    assert read(redis_client, tk, "c")[0] == fields           # the receipt survives too
    slot = slot_of(redis_client, tk, "c")
    assert redis_client.zscore(tk.ack, slot) == T0 + 30_000
    assert redis_client.zscore(tk.expire, slot) == T0 + HOUR
    assert_one_place(redis_client, tk, "c", 3)
    assert redis_client.exists(tk.legacy_msg_prefix + "c") == 0
    assert redis_client.zscore(tk.ack, "c") is None
    assert scripts.ack(tk, "c", T0 + 20, END_LIFE, RECEIPT)[0] == 1


def test_an_ended_message_keeps_the_rest_of_its_ttl_as_its_retention(scripts, tk,
                                                                     redis_client):
    write_old(redis_client, tk, "kept", 4, {}, n=1)
    redis_client.pexpire(tk.legacy_msg_prefix + "kept", 50_000)
    write_old(redis_client, tk, "no ttl", 5, {})
    write_old(redis_client, tk, "dead", 6, {"dead": T0 + 9}, n=1)
    redis_client.pexpire(tk.legacy_msg_prefix + "dead", 3_600_000)
    assert scripts.migrate(tk, T0 + 10, ["kept", "no ttl", "dead"]) == [3, 0]
    assert 0 < redis_client.zscore(tk.ended, slot_of(redis_client, tk, "kept")) - \
        (T0 + 10) <= 50_000
    assert redis_client.zscore(tk.ended, slot_of(redis_client, tk, "no ttl")) == T0 + 10
    dead = slot_of(redis_client, tk, "dead")                   # its death time stays
    assert redis_client.zscore(tk.dead, dead) == T0 + 9
    assert 0 < redis_client.zscore(tk.ended, dead) - (T0 + 10) <= 3_600_000


def test_ids_without_an_old_hash_are_skipped_and_a_rerun_changes_nothing(scripts, tk,
                                                                         redis_client):
    write_old(redis_client, tk, "w", 1, {"waiting": T0})
    send(scripts, tk, "new", T0, T0)
    assert scripts.migrate(tk, T0, ["w", "ghost", "new"]) == [1, 2]
    before = snapshot(redis_client)
    assert scripts.migrate(tk, T0 + 1, ["w", "ghost", "new"]) == [0, 3]
    assert snapshot(redis_client) == before
    assert_one_place(redis_client, tk, "w", 1)
    assert_one_place(redis_client, tk, "new", 2)


def test_an_old_message_whose_digest_slot_is_taken_gets_its_own_slot(redis_client, tk):
    scripts = Scripts(redis_client, slot_hex=1)
    taken, old = ids_sharing_a_digest(1, 2)
    send(scripts, tk, taken, T0, T0)
    fields = write_old(redis_client, tk, old, 2, {"ready": T0, "expire": T0 + HOUR})
    assert scripts.migrate(tk, T0, [old]) == [1, 0]
    assert slot_of(redis_client, tk, old, scripts) == "=" + old
    assert read(redis_client, tk, old, scripts)[0] == fields
    assert_one_place(redis_client, tk, old, 2, scripts)
    assert_one_place(redis_client, tk, taken, 2, scripts)
