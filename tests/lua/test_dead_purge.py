"""purgeDeadLetters' script, lua/dead_purge.lua: dead letters removed for good, one by msgId
or the oldest `limit`."""

from __future__ import annotations

from delayqueue.core.outcome import Outcome

from support.lua import (
    T0,
    assert_one_place,
    make_dead_letter,
    read,
    send,
    set_status_behind_the_scripts,
    slot_of,
    snapshot,
)


def test_purge_removes_dead_letters_in_slices(scripts, tk, redis_client):
    for i in range(5):
        make_dead_letter(scripts, tk, f"m{i}", T0 + i)
    slots = {m: slot_of(redis_client, tk, m) for m in ("m2", "m3", "m4")}
    assert scripts.dead_purge(tk, "", 2) == [Outcome.OK, 2]
    assert redis_client.zrange(tk.dead, 0, -1) == [slots["m2"], slots["m3"], slots["m4"]]
    assert read(redis_client, tk, "m0") == read(redis_client, tk, "m1") == (None, None)
    assert redis_client.zcard(tk.ended) == 3
    assert scripts.dead_purge(tk, "m3", 2) == [Outcome.OK, 1]
    assert scripts.dead_purge(tk, "m3", 2)[0] == Outcome.NO_MESSAGE
    assert scripts.dead_purge(tk, "", 1000) == [Outcome.OK, 2]
    assert redis_client.exists(tk.dead, tk.ended, tk.msgs) == 0

def test_a_message_that_is_not_a_dead_letter_is_refused_and_nothing_is_written(
        scripts, tk, redis_client):
    make_dead_letter(scripts, tk, "dead", T0)
    send(scripts, tk, "live", T0, T0)
    before = snapshot(redis_client)
    assert scripts.dead_purge(tk, "live", 1000) == [Outcome.NO_MESSAGE, 0]
    assert scripts.dead_purge(tk, "ghost", 1000) == [Outcome.NO_MESSAGE, 0]
    assert snapshot(redis_client) == before
    assert_one_place(redis_client, tk, "live", 2)


def test_an_entry_whose_record_is_not_a_dead_letter_leaves_the_queue_but_keeps_its_record(
        scripts, tk, redis_client):
    make_dead_letter(scripts, tk, "a", T0)
    slot = set_status_behind_the_scripts(redis_client, tk, "a", 2)
    assert scripts.dead_purge(tk, "", 1000) == [Outcome.OK, 1]    # counted: it left the queue
    assert redis_client.zscore(tk.dead, slot) is None
    assert read(redis_client, tk, "a")[1] == slot                  # the record stays


def test_purging_an_empty_queue_or_the_same_letter_twice_writes_nothing(scripts, tk,
                                                                       redis_client):
    assert scripts.dead_purge(tk, "", 1000) == [Outcome.OK, 0]
    make_dead_letter(scripts, tk, "a", T0)
    slot = slot_of(redis_client, tk, "a")
    assert scripts.dead_purge(tk, "a", 1000) == [Outcome.OK, 1]
    assert redis_client.hexists(tk.msgs, slot) == 0
    before = snapshot(redis_client)
    assert scripts.dead_purge(tk, "a", 1000) == [Outcome.NO_MESSAGE, 0]
    assert scripts.dead_purge(tk, "", 1000) == [Outcome.OK, 0]
    assert snapshot(redis_client) == before
