"""listDeadLetters' script, lua/dead_list.lua: a page of the topic's dead letters, oldest
death first, with a cursor that survives the removal of its own entry. Read only."""

from __future__ import annotations

from support.lua import (
    DEFAULTS,
    T0,
    configure,
    drop_record,
    make_dead_letter,
    read,
    send,
    set_status_behind_the_scripts,
    slot_of,
    snapshot,
)


def test_list_pages_through_every_dead_letter_once_oldest_first(scripts, tk, redis_client):
    ids = [f"m{i:02d}" for i in range(25)]
    for i, msg_id in enumerate(ids):
        make_dead_letter(scripts, tk, msg_id, T0 + i // 10)    # ties at the same death time
    # oldest death first; entries dying in the same millisecond in the order of their slots
    order = sorted(ids, key=lambda m: (int(m[1:]) // 10, slot_of(redis_client, tk, m)))
    seen, cursor = [], ("", "")
    while True:
        entries, next_time, next_slot = scripts.dead_list(tk, T0 + 100, 7, *cursor, DEFAULTS)
        seen += [e[0] for e in entries]
        if next_time == -1:
            break
        cursor = (next_time, next_slot)
    assert seen == order
    # the cursor's own entry left the queue meanwhile: the page goes on after its place
    entries, next_time, next_slot = scripts.dead_list(tk, T0 + 100, 12, "", "", DEFAULTS)
    assert next_slot == slot_of(redis_client, tk, order[11])
    scripts.dead_purge(tk, order[11], 1)
    rest, _, _ = scripts.dead_list(tk, T0 + 100, 100, next_time, next_slot, DEFAULTS)
    assert [e[0] for e in entries] + [e[0] for e in rest] == order     # none skipped or twice

def test_an_entry_is_the_msg_id_its_death_time_and_its_fields(scripts, tk, redis_client):
    make_dead_letter(scripts, tk, "a", T0 + 3)
    entries, next_time, next_slot = scripts.dead_list(tk, T0 + 10, 100, None, "", DEFAULTS)
    assert entries == [["a", T0 + 3, *read(redis_client, tk, "a")[0]]]
    assert entries[0][2 + 6] == "6"
    assert (next_time, next_slot) == (-1, "")


def test_an_empty_queue_lists_nothing(scripts, tk):
    assert scripts.dead_list(tk, T0, 100, None, "", DEFAULTS) == [[], -1, ""]


def test_letters_past_retention_without_a_record_or_no_longer_dead_are_skipped(
        scripts, tk, redis_client):
    configure(scripts, tk, deadLetterRetentionMillis=1_000)
    for i, msg_id in enumerate(["old", "lost", "redriven", "kept"]):
        make_dead_letter(scripts, tk, msg_id, T0 + 100 * i)
    drop_record(redis_client, tk, "lost")
    set_status_behind_the_scripts(redis_client, tk, "redriven", 2)
    send(scripts, tk, "live", T0, T0)
    before = snapshot(redis_client)
    entries, next_time, _ = scripts.dead_list(tk, T0 + 1_001, 100, None, "", DEFAULTS)
    assert [e[0] for e in entries] == ["kept"] and next_time == -1   # "old" died at T0
    assert snapshot(redis_client) == before                          # read only


def test_a_full_page_with_nothing_after_it_ends_the_listing(scripts, tk, redis_client):
    for i in range(3):
        make_dead_letter(scripts, tk, f"m{i}", T0 + i)
    entries, next_time, next_slot = scripts.dead_list(tk, T0 + 10, 2, None, "", DEFAULTS)
    assert [e[0] for e in entries] == ["m0", "m1"]
    assert (next_time, next_slot) == (T0 + 1, slot_of(redis_client, tk, "m1"))
    entries, next_time, next_slot = scripts.dead_list(tk, T0 + 10, 1, next_time, next_slot,
                                                      DEFAULTS)
    assert [e[0] for e in entries] == ["m2"] and (next_time, next_slot) == (-1, "")
