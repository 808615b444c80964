"""redriveDeadLetters' script, lua/dead_redrive.lua: dead letters back to ready at the tail,
with retry 0, triggerTime now and a fresh life; one by msgId or the oldest `limit`."""

from __future__ import annotations

from delayqueue.core.outcome import Outcome

from support.lua import (
    CHANNEL,
    DEAD_RETENTION,
    DEFAULTS,
    HOUR,
    T0,
    assert_one_place,
    drop_record,
    hints,
    make_dead_letter,
    pull,
    pulled_ids,
    read,
    retention_end,
    send,
    set_status_behind_the_scripts,
    settle_due,
    snapshot,
)


def redrive(scripts, tk, now, msg_id="", limit=1000):
    return scripts.dead_redrive(tk, now, msg_id, limit, CHANNEL, DEFAULTS)


def test_redrive_resets_retry_and_life_and_queues_at_the_tail(scripts, tk, redis_client):
    make_dead_letter(scripts, tk, "a", T0)
    make_dead_letter(scripts, tk, "b", T0 + 1)
    send(scripts, tk, "c", T0, T0 + 5)
    outcome, count, _ = scripts.dead_redrive(tk, T0 + 10, "a", 1000, CHANNEL, DEFAULTS)
    assert (outcome, count) == (Outcome.OK, 1)
    fields, _ = read(redis_client, tk, "a")
    assert [fields[5], fields[6], fields[2], fields[3], fields[8]] == \
        ["0", "2", str(T0 + 10), str(T0 + 10 + HOUR), None]      # no receipt: not delivered
    assert retention_end(redis_client, tk, "a") is None        # live again: no retention
    assert_one_place(redis_client, tk, "a", 2)
    assert_one_place(redis_client, tk, "b", 6)
    assert pulled_ids(pull(scripts, tk, T0 + 10, batch=5)) == ["c", "a"]
    assert scripts.dead_redrive(tk, T0, "a", 1000, CHANNEL, DEFAULTS)[0] == Outcome.NO_MESSAGE
    assert scripts.dead_redrive(tk, T0 + 20, "", 1000, CHANNEL, DEFAULTS)[:2] == [Outcome.OK, 1]
    assert_one_place(redis_client, tk, "b", 2)

def test_the_oldest_limit_are_redriven_with_one_hint_and_the_due_time_they_bring(
        scripts, tk, redis_client):
    for i in range(3):
        make_dead_letter(scripts, tk, f"m{i}", T0 + i)
    # before: the letters' retention ends (plus the purge slack) are the topic's due time
    settle_due(redis_client, tk)
    with hints(redis_client) as published:
        assert redrive(scripts, tk, T0 + 10, limit=2) == [Outcome.OK, 2, T0 + 10 + HOUR]
    assert published == ["2 topic-a"]
    for msg_id, status in (("m0", 2), ("m1", 2), ("m2", 6)):
        assert_one_place(redis_client, tk, msg_id, status)
    assert redrive(scripts, tk, T0 + 11, limit=2)[:2] == [Outcome.OK, 1]
    pulled = pulled_ids(pull(scripts, tk, T0 + 11, batch=5))
    assert sorted(pulled[:2]) == ["m0", "m1"] and pulled[2:] == ["m2"]   # ties: by slot


def test_a_message_that_is_not_a_dead_letter_is_refused_and_nothing_is_written(
        scripts, tk, redis_client):
    send(scripts, tk, "live", T0, T0)
    before = snapshot(redis_client)
    with hints(redis_client) as published:
        assert redrive(scripts, tk, T0, "live") == [Outcome.NO_MESSAGE, 0, -1]
        assert redrive(scripts, tk, T0, "ghost") == [Outcome.NO_MESSAGE, 0, -1]
        assert redrive(scripts, tk, T0) == [Outcome.OK, 0, -1]        # an empty queue
    assert published == []
    assert snapshot(redis_client) == before


def test_a_dead_entry_whose_record_is_gone_only_leaves_the_queue(scripts, tk, redis_client):
    make_dead_letter(scripts, tk, "lost", T0)
    make_dead_letter(scripts, tk, "kept", T0 + 1)
    drop_record(redis_client, tk, "lost")
    assert redrive(scripts, tk, T0 + 2)[:2] == [Outcome.OK, 1]
    assert redis_client.zcard(tk.dead) == 0
    assert_one_place(redis_client, tk, "kept", 2)


def test_an_entry_whose_record_is_not_a_dead_letter_leaves_the_queue_and_is_not_redriven(
        scripts, tk, redis_client):
    make_dead_letter(scripts, tk, "a", T0)
    slot = set_status_behind_the_scripts(redis_client, tk, "a", 2)
    records = redis_client.dump(tk.msgs)
    assert redrive(scripts, tk, T0 + 1) == [Outcome.OK, 0, -1]
    assert redis_client.zscore(tk.dead, slot) is None
    assert redis_client.dump(tk.msgs) == records                 # the record stays as it is
    assert redis_client.zcard(tk.ready) == 0


def test_a_redriven_message_is_live_again_without_its_dead_letter_retention(scripts, tk,
                                                                             redis_client):
    make_dead_letter(scripts, tk, "a", T0)
    assert retention_end(redis_client, tk, "a") == T0 + DEAD_RETENTION
    redrive(scripts, tk, T0 + 5, "a")
    assert retention_end(redis_client, tk, "a") is None
    assert read(redis_client, tk, "a")[0][5:7] == ["0", "2"]
