"""lua/migrate_order.lua: a topic of storage format records-1 (bare slots in `waiting` and
`ready`, records without a sequence) becomes records-2 in place.
(tests/core/test_storage_migration.py drives it through `migrate-storage`.)"""

from __future__ import annotations

from support.lua import (
    T0,
    as_records_1,
    assert_one_place,
    pull,
    pulled_ids,
    ready_slots,
    send,
    slot_of,
    snapshot,
    waiting_slots,
)


def test_bare_ready_slots_get_a_sequence_and_keep_their_score(scripts, tk, redis_client):
    for msg_id in ("a", "b", "c"):
        send(scripts, tk, msg_id, T0, T0)
    send(scripts, tk, "later", T0, T0 + 50)
    bare = as_records_1(redis_client, tk)
    assert sorted(bare) == sorted(slot_of(redis_client, tk, m) for m in "abc")
    assert scripts.migrate_order(tk, "ready", bare) == [3, 0]
    assert scripts.migrate_order(tk, "waiting", redis_client.zrange(tk.waiting, 0, -1)) == [1, 0]
    assert waiting_slots(redis_client, tk) == [slot_of(redis_client, tk, "later")]
    assert sorted(ready_slots(redis_client, tk)) == sorted(bare)
    assert {score for _, score in redis_client.zrange(tk.ready, 0, -1, withscores=True)} == {T0}
    for msg_id in "abc":
        assert_one_place(redis_client, tk, msg_id, 2)
    assert_one_place(redis_client, tk, "later", 1)
    before = snapshot(redis_client)
    members = redis_client.zrange(tk.ready, 0, -1)
    assert scripts.migrate_order(tk, "ready", members + bare) == [0, 6]   # a re-run: nothing
    assert snapshot(redis_client) == before
    assert sorted(pulled_ids(pull(scripts, tk, T0 + 50, batch=10))[:3]) == ["a", "b", "c"]
    send(scripts, tk, "new", T0 + 60, T0 + 60)                       # after the migration
    assert pulled_ids(pull(scripts, tk, T0 + 60, batch=10)) == ["new"]
