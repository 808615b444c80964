"""The topic's dedupWindowMillis, through the scripts: every ending (ack, delete, expiry, retry
exhausted with and without dead letters, purge) notes when the message ended and keeps its
record for max(its retention, the window); a re-send of its msgId (keep or replace) inside
the window answers DUPLICATE with the ended record and writes nothing; after it, an ordinary
send. A dead letter trimmed inside the window keeps its record out of the dead queue.
"""

from __future__ import annotations

import pytest

from delayqueue.core.message import MESSAGE_FIELDS
from delayqueue.core.outcome import Outcome

from support.lua import (
    CHANNEL,
    DEAD_RETENTION,
    DEFAULTS,
    END_LIFE,
    T0,
    assert_one_place,
    configure,
    make_dead_letter,
    nack,
    pull,
    read,
    retention_end,
    send,
    slot_of,
    snapshot,
)

F = {name: i for i, name in enumerate(MESSAGE_FIELDS)}
WINDOW = 10 * END_LIFE          # longer than the ended retention: the window keeps the record


def end_by(scripts, tk, how, now):
    """Send 'a' (due now, ttl 100 ms, one delivery) and end it at ``now`` by ``how``."""
    send(scripts, tk, "a", now, now, ttl=100, max_retry=0, body="original")
    if how == "ack":
        pull(scripts, tk, now)
        assert scripts.ack(tk, "a", now, END_LIFE)[0] == Outcome.OK
    elif how == "delete":
        assert scripts.delete(tk, "a", now, END_LIFE, False)[0] == Outcome.OK
    elif how == "expiry":
        scripts.expire(tk, now, 1000, END_LIFE, DEFAULTS)    # sent earlier: see below
    elif how == "exhausted":
        pull(scripts, tk, now)
        assert nack(scripts, tk, "a", now)[1][F["s"]] == "6"
    elif how == "purge":
        assert scripts.purge(tk, now, END_LIFE, -1, "0", 100, CHANNEL, 1000).ended == 1
    return {"ack": 4, "delete": 7, "expiry": 5, "exhausted": 6, "purge": 7}[how]


@pytest.mark.parametrize("how", ["ack", "delete", "expiry", "exhausted", "dead letter",
                                 "purge"])
@pytest.mark.parametrize("replace", [False, True])
def test_a_resend_inside_the_window_is_a_duplicate_of_the_ended_message(
        scripts, tk, redis_client, how, replace):
    configure(scripts, tk, dedupWindowMillis=WINDOW, deadLetter=int(how == "dead letter"))
    if how == "dead letter":
        make_dead_letter(scripts, tk, "a", T0)
        status, ended_at = 6, T0
    elif how == "expiry":
        send(scripts, tk, "a", T0 - 100, T0 - 100, ttl=100, body="original")
        scripts.expire(tk, T0, 1000, END_LIFE, DEFAULTS)
        status, ended_at = 5, T0
    else:
        status, ended_at = end_by(scripts, tk, how, T0), T0
    assert_one_place(redis_client, tk, "a", status)
    retention = DEAD_RETENTION if how == "dead letter" else END_LIFE
    assert retention_end(redis_client, tk, "a") == ended_at + max(retention, WINDOW)
    before = snapshot(redis_client)
    last = ended_at + WINDOW - 1
    outcome, fields, lowered = send(scripts, tk, "a", last, last, body="again", replace=replace)
    assert (outcome, lowered) == (Outcome.DUPLICATE, -1)
    assert fields[F["m"]] in ("original", "body") and fields[F["s"]] == str(status)
    assert snapshot(redis_client) == before            # nothing enqueued, nothing changed
    assert scripts.get(tk, "a", last).fields[F["s"]] == str(status)   # getMsg shows it


@pytest.mark.parametrize("replace", [False, True])
def test_once_the_window_has_passed_a_resend_is_an_ordinary_send(scripts, tk, redis_client,
                                                                 replace):
    configure(scripts, tk, dedupWindowMillis=WINDOW)
    end_by(scripts, tk, "ack", T0)
    outcome, fields, _ = send(scripts, tk, "a", T0 + WINDOW, T0 + WINDOW, body="again",
                              replace=replace)
    assert outcome == Outcome.OK and fields[F["m"]] == "again" and fields[F["s"]] == "2"
    assert_one_place(redis_client, tk, "a", 2)


def test_without_a_window_an_ended_namesake_is_replaced_as_before(scripts, tk, redis_client):
    end_by(scripts, tk, "ack", T0)
    assert retention_end(redis_client, tk, "a") == T0 + END_LIFE
    assert send(scripts, tk, "a", T0 + 1, T0 + 1, body="again")[0] == Outcome.OK


def test_a_window_shorter_than_the_retention_keeps_the_retention(scripts, tk, redis_client):
    configure(scripts, tk, dedupWindowMillis=1000)
    end_by(scripts, tk, "delete", T0)
    assert retention_end(redis_client, tk, "a") == T0 + END_LIFE
    assert send(scripts, tk, "a", T0 + 999, T0 + 999)[0] == Outcome.DUPLICATE
    assert send(scripts, tk, "a", T0 + 1000, T0 + 1000)[0] == Outcome.OK   # still retained


def test_the_expiry_purge_drops_the_record_only_after_the_window(scripts, tk, redis_client):
    configure(scripts, tk, dedupWindowMillis=WINDOW)
    end_by(scripts, tk, "ack", T0)
    scripts.expire(tk, T0 + END_LIFE + 60_000, 1000, END_LIFE, DEFAULTS)
    assert read(redis_client, tk, "a")[0] is not None                 # still inside
    scripts.expire(tk, T0 + WINDOW, 1000, END_LIFE, DEFAULTS)
    assert read(redis_client, tk, "a") == (None, None)


def test_a_dead_letter_trimmed_inside_the_window_keeps_its_record(scripts, tk, redis_client):
    configure(scripts, tk, dedupWindowMillis=WINDOW, deadLetterMaxSize=1)
    make_dead_letter(scripts, tk, "a", T0)
    make_dead_letter(scripts, tk, "b", T0 + 1)                        # trims a: over size
    slot = slot_of(redis_client, tk, "a")
    assert redis_client.zscore(tk.dead, slot) is None
    assert redis_client.zscore(tk.ended, slot) == T0 + max(DEAD_RETENTION, WINDOW)
    assert_one_place(redis_client, tk, "a", 6)        # status 6, in `ended` only
    assert send(scripts, tk, "a", T0 + 2, T0 + 2)[0] == Outcome.DUPLICATE
    # Past the window a trim drops it as before.
    configure(scripts, tk, dedupWindowMillis=0)
    make_dead_letter(scripts, tk, "c", T0 + 3)
    assert read(redis_client, tk, "b") == (None, None)


def test_a_redriven_dead_letter_is_live_again_and_a_resend_of_it_a_live_duplicate(
        scripts, tk, redis_client):
    configure(scripts, tk, dedupWindowMillis=WINDOW)
    make_dead_letter(scripts, tk, "a", T0)
    assert scripts.dead_redrive(tk, T0 + 1, "a", 1, CHANNEL, DEFAULTS)[0] == Outcome.OK
    assert_one_place(redis_client, tk, "a", 2)
    outcome, fields, _ = send(scripts, tk, "a", T0 + 2, T0 + 2)
    assert outcome == Outcome.DUPLICATE and fields[F["s"]] == "2"
    # Ended again, its window counts from the new end.
    pull(scripts, tk, T0 + 3)
    assert scripts.ack(tk, "a", T0 + 4, END_LIFE)[0] == Outcome.OK
    assert retention_end(redis_client, tk, "a") == T0 + 4 + WINDOW


def test_an_ended_record_keeps_its_body_and_fields_with_its_end_time(scripts, tk,
                                                                     redis_client):
    configure(scripts, tk, dedupWindowMillis=WINDOW)
    send(scripts, tk, "a", T0, T0, body="x" * 300, attributes='{"k":"v"}', group="g")
    pulled = pull(scripts, tk, T0)
    before = pulled[0][0][1:]
    assert scripts.ack(tk, "a", T0 + 5, END_LIFE)[0] == Outcome.OK
    fields, _ = read(redis_client, tk, "a")
    assert fields[:F["s"]] == before[:F["s"]] and fields[F["s"]] == "4"
    assert fields[F["s"] + 1:] == before[F["s"] + 1:]   # attributes, receipt, group
