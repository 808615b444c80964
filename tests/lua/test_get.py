"""getMsg's script, lua/get.lua: one message's fields and its slot, or nothing. Read only."""

from __future__ import annotations

import hashlib

import pytest

from support.lua import CHANNEL, DEFAULTS, END_LIFE, HOUR, T0, pull, send, snapshot


def test_a_message_reads_as_its_fields_then_its_slot(scripts, tk):
    _, sent, _ = scripts.send(tk, "a", "body", T0, T0 + 5, HOUR, 3, '{"k":"v"}', CHANNEL,
                              DEFAULTS)
    # Then its ack deadline and its death time: -1, it has neither; no named subscription
    # holds it.
    assert scripts.get(tk, "a", T0) == [*sent, hashlib.sha1(b"a").hexdigest()[:14], -1, -1, []]


def test_a_consuming_message_reads_with_its_ack_deadline_and_a_dead_letter_with_its_death(
        scripts, tk):
    send(scripts, tk, "a", T0, T0, max_retry=0)
    scripts.pull(tk, T0, 1, 700, END_LIFE, 1000, CHANNEL, DEFAULTS)
    consuming = scripts.get(tk, "a", T0 + 1)
    assert (consuming.fields[6], consuming.ack_deadline, consuming.dead_time) == \
        ("3", T0 + 700, -1)
    scripts.timeout(tk, T0 + 700, 100, END_LIFE, CHANNEL, DEFAULTS)   # out of deliveries
    dead = scripts.get(tk, "a", T0 + 701)
    assert (dead.fields[6], dead.ack_deadline, dead.dead_time) == ("6", -1, T0 + 700)


def test_an_unknown_message_reads_as_nothing_and_nothing_is_written(scripts, tk,
                                                                   redis_client):
    send(scripts, tk, "a", T0, T0)
    before = snapshot(redis_client)
    assert scripts.get(tk, "ghost", T0) == []
    assert scripts.get(tk, "ghost", None) == []
    assert scripts.get(tk, "a", T0)[6] == "2"
    assert snapshot(redis_client) == before


@pytest.mark.parametrize("now, found", [(T0 + END_LIFE - 1, True), (T0 + END_LIFE, False),
                                        (None, True)])
def test_an_ended_message_reads_until_its_retention_ends_or_always_without_a_time(
        scripts, tk, now, found):
    send(scripts, tk, "a", T0, T0)
    pull(scripts, tk, T0)
    scripts.ack(tk, "a", T0, END_LIFE)
    reply = scripts.get(tk, "a", now)
    assert (reply[6] if reply else None) == ("4" if found else None)
