"""The dead-letter limits, lua/dead_trim.lua (run after a topic's limits were lowered) and
the trim every new dead letter runs (includes/dead_letter.lua): at most `limit` dropped a
call, oldest first, past the retention or beyond the max size."""

from __future__ import annotations

from support.lua import (
    DEFAULTS,
    T0,
    configure,
    make_dead_letter,
    read,
    set_status_behind_the_scripts,
    slot_of,
    snapshot,
)


def test_max_size_and_retention_drop_the_oldest(scripts, tk, redis_client):
    configure(scripts, tk, deadLetterMaxSize=3, deadLetterRetentionMillis=1000)
    for i in range(5):
        make_dead_letter(scripts, tk, f"m{i}", T0 + i)
    slots = {m: slot_of(redis_client, tk, m) for m in ("m2", "m3", "m4")}
    assert redis_client.zrange(tk.dead, 0, -1) == [slots["m2"], slots["m3"], slots["m4"]]
    assert read(redis_client, tk, "m0") == read(redis_client, tk, "m1") == (None, None)
    make_dead_letter(scripts, tk, "late", T0 + 1003)              # m0..m2 past retention
    slots["late"] = slot_of(redis_client, tk, "late")
    assert redis_client.zrange(tk.dead, 0, -1) == [slots["m3"], slots["m4"], slots["late"]]
    assert redis_client.zcard(tk.ended) == 3 == redis_client.hlen(tk.msgs)
    configure(scripts, tk, deadLetterMaxSize=1)
    assert scripts.dead_trim(tk, T0 + 1003, 1000, DEFAULTS) == 2
    assert redis_client.zrange(tk.dead, 0, -1) == [slots["late"]]

def test_a_trim_drops_at_most_its_limit_and_the_caller_repeats(scripts, tk, redis_client):
    for i in range(5):
        make_dead_letter(scripts, tk, f"m{i}", T0 + i)
    configure(scripts, tk, deadLetterMaxSize=0)
    assert scripts.dead_trim(tk, T0 + 10, 2, DEFAULTS) == 2
    assert [read(redis_client, tk, f"m{i}")[0] is None for i in range(5)] == \
        [True, True, False, False, False]                         # the oldest first
    assert scripts.dead_trim(tk, T0 + 10, 2, DEFAULTS) == 2
    assert scripts.dead_trim(tk, T0 + 10, 2, DEFAULTS) == 1
    assert redis_client.exists(tk.dead, tk.ended, tk.msgs) == 0


def test_a_trim_within_the_limits_writes_nothing_however_often_it_runs(scripts, tk,
                                                                       redis_client):
    for i in range(3):
        make_dead_letter(scripts, tk, f"m{i}", T0 + i)
    before = snapshot(redis_client)
    assert scripts.dead_trim(tk, T0 + 10, 1000, DEFAULTS) == 0
    assert scripts.dead_trim(tk, T0 + 10, 1000, DEFAULTS) == 0
    assert snapshot(redis_client) == before


def test_an_entry_whose_record_is_not_a_dead_letter_leaves_the_queue_but_keeps_its_record(
        scripts, tk, redis_client):
    make_dead_letter(scripts, tk, "a", T0)
    slot = set_status_behind_the_scripts(redis_client, tk, "a", 2)
    configure(scripts, tk, deadLetterMaxSize=0)
    assert scripts.dead_trim(tk, T0 + 1, 1000, DEFAULTS) == 1
    assert redis_client.zscore(tk.dead, slot) is None
    assert read(redis_client, tk, "a")[1] == slot == slot_of(redis_client, tk, "a")
