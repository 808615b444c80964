"""The message record (lua/includes/message.lua): slots and their collisions, the record's
round trip, and the purge of ended records after their retention (lua/expire.lua)."""

from __future__ import annotations

import hashlib
import json

import pytest

from delayqueue.core.outcome import Outcome
from delayqueue.core.scripts import Scripts

from support.lua import (
    CHANNEL,
    DEAD_RETENTION,
    DEFAULTS,
    END_LIFE,
    HOUR,
    T0,
    assert_one_place,
    ids_sharing_a_digest,
    nack,
    pull,
    pulled_ids,
    read,
    retention_end,
    send,
    slot_of,
    waiting_slots,
)

PURGE_SLACK = 60_000   # includes/message.lua PURGE_SLACK_MS


def test_a_slot_is_the_digest_of_the_msg_id(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0 + 10)
    assert slot_of(redis_client, tk, "a") == hashlib.sha1(b"a").hexdigest()[:14]
    assert waiting_slots(redis_client, tk) == [slot_of(redis_client, tk, "a")]


def test_colliding_msg_ids_never_share_a_record(redis_client, tk):
    """With a 1-hex-char digest (16 slots) three ids share a digest slot: the first takes it,
    the others their "=" slot; each is found, moved and ended on its own, and a freed digest
    slot goes to the next new id while the others stay where they are."""
    scripts = Scripts(redis_client, slot_hex=1)
    first, second, third = ids_sharing_a_digest(1, 3)
    digest = hashlib.sha1(first.encode()).hexdigest()[:1]
    for msg_id in (first, second):
        send(scripts, tk, msg_id, T0, T0, body=f"body of {msg_id}")
    assert slot_of(redis_client, tk, first, scripts) == digest
    assert slot_of(redis_client, tk, second, scripts) == "=" + second
    assert read(redis_client, tk, third, scripts) == (None, None)          # a miss: both slots read
    assert sorted(m[0] for m in pull(scripts, tk, T0, batch=2)[0]) == sorted([first, second])
    outcome, fields, _ = scripts.ack(tk, second, T0, END_LIFE)
    assert outcome == Outcome.OK and fields[0] == f"body of {second}"
    assert_one_place(redis_client, tk, first, 3, scripts)
    assert_one_place(redis_client, tk, second, 4, scripts)
    # The digest slot is freed; the id in its "=" slot is still found there.
    assert scripts.delete(tk, first, T0, END_LIFE, True)[0] == Outcome.OK
    assert read(redis_client, tk, second, scripts)[0][0] == f"body of {second}"
    send(scripts, tk, third, T0 + 1, T0 + 1, body="third")
    assert slot_of(redis_client, tk, third, scripts) == digest
    assert scripts.ack(tk, second, T0, END_LIFE)[0] == Outcome.ALREADY_ACKED
    # A re-send of the ended id replaces it in its own slot; a duplicate is refused.
    assert send(scripts, tk, second, T0 + 2, T0 + 2, body="again")[0] == Outcome.OK
    assert slot_of(redis_client, tk, second, scripts) == "=" + second
    assert send(scripts, tk, third, T0 + 2, T0 + 2)[0] == Outcome.DUPLICATE
    assert redis_client.hlen(tk.msgs) == 2
    assert_one_place(redis_client, tk, second, 2, scripts)
    assert_one_place(redis_client, tk, third, 2, scripts)


def test_the_record_gives_back_every_field_as_sent_and_delivered(scripts, tk, redis_client):
    attributes = json.dumps({"k": "v", "ключ": "значение"}, ensure_ascii=False)
    body = "héllo \u0000 wörld " + "x" * 300
    _, sent, _ = scripts.send(tk, "a", body, T0, T0, HOUR, 7, attributes, CHANNEL, DEFAULTS)
    assert read(redis_client, tk, "a")[0] == sent
    assert sent == [body, str(T0), str(T0), str(T0 + HOUR), "7", "0", "2", attributes, None,
                    None]
    (delivered,) = pull(scripts, tk, T0 + 5)[0]
    assert delivered[0] == "a"
    assert delivered[1:] == [body, str(T0), str(T0), str(T0 + HOUR), "7", "1", "3", attributes,
                             f"{T0 + 5:x}.1", None]
    assert read(redis_client, tk, "a")[0] == delivered[1:]


def test_an_ended_record_is_purged_after_its_retention(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0)
    pull(scripts, tk, T0)
    scripts.ack(tk, "a", T0 + 1, END_LIFE)
    assert retention_end(redis_client, tk, "a") == T0 + 1 + END_LIFE
    # the topic's due time is the end of the retention, plus the purge slack
    assert scripts.promote(tk, T0 + 2, 1000, CHANNEL)[2] == T0 + 1 + END_LIFE + PURGE_SLACK
    assert scripts.expire(tk, T0 + END_LIFE, 1000, END_LIFE, DEFAULTS)[5] == 0
    assert read(redis_client, tk, "a")[0][6] == "4"
    result = scripts.expire(tk, T0 + 1 + END_LIFE, 1000, END_LIFE, DEFAULTS)
    assert result[3:] == [-1, 0, 1]                               # nothing left: due -1
    assert read(redis_client, tk, "a") == (None, None)
    assert redis_client.exists(*tk.holdings) == 0   # its sequence stays until it is recycled


def test_a_dead_letter_is_purged_with_its_retention(scripts, tk, redis_client):
    send(scripts, tk, "d", T0, T0, max_retry=0)
    pull(scripts, tk, T0)
    assert nack(scripts, tk, "d", T0 + 3)[3] == 1
    assert_one_place(redis_client, tk, "d", 6)
    assert retention_end(redis_client, tk, "d") == T0 + 3 + DEAD_RETENTION
    assert scripts.expire(tk, T0 + 2 + DEAD_RETENTION, 1000, END_LIFE, DEFAULTS)[5] == 0
    assert scripts.expire(tk, T0 + 3 + DEAD_RETENTION, 1000, END_LIFE, DEFAULTS)[5] == 1
    assert redis_client.exists(tk.dead, tk.msgs, tk.ended) == 0


@pytest.mark.parametrize("limit", [2, 1000])
def test_the_purge_is_bounded_by_the_limit(scripts, tk, redis_client, limit):
    for i in range(5):
        send(scripts, tk, f"m{i}", T0, T0)
        scripts.delete(tk, f"m{i}", T0, END_LIFE, False)
    purged = scripts.expire(tk, T0 + END_LIFE, limit, END_LIFE, DEFAULTS)[5]
    assert purged == min(limit, 5)
    assert redis_client.hlen(tk.msgs) == redis_client.zcard(tk.ended) == 5 - purged


def test_a_redriven_dead_letter_is_not_purged(scripts, tk, redis_client):
    send(scripts, tk, "d", T0, T0, max_retry=0)
    pull(scripts, tk, T0)
    nack(scripts, tk, "d", T0)
    scripts.dead_redrive(tk, T0 + 1, "d", 1000, CHANNEL, DEFAULTS)
    assert retention_end(redis_client, tk, "d") is None
    assert_one_place(redis_client, tk, "d", 2)
    assert pulled_ids(pull(scripts, tk, T0 + 2)) == ["d"]
    assert scripts.ack(tk, "d", T0 + 3, END_LIFE)[0] == Outcome.OK
    # its old dead-letter retention is gone: only the ack's retention counts
    assert retention_end(redis_client, tk, "d") == T0 + 3 + END_LIFE


def test_past_its_retention_an_unpurged_record_is_gone_for_every_request(scripts, tk,
                                                                         redis_client):
    send(scripts, tk, "a", T0, T0)
    pull(scripts, tk, T0)
    scripts.ack(tk, "a", T0, END_LIFE)
    assert scripts.get(tk, "a", T0 + END_LIFE - 1)[6] == "4"
    assert scripts.get(tk, "a", T0 + END_LIFE) == []              # not yet purged, but gone
    assert scripts.ack(tk, "a", T0 + END_LIFE, END_LIFE)[0] == Outcome.NO_MESSAGE
    assert redis_client.hlen(tk.msgs) == 1
    send(scripts, tk, "d", T0, T0, max_retry=0)
    pull(scripts, tk, T0)
    nack(scripts, tk, "d", T0)
    after = T0 + DEAD_RETENTION
    assert scripts.dead_redrive(tk, after, "d", 10, CHANNEL, DEFAULTS)[:2] == \
        [Outcome.NO_MESSAGE, 0]
    assert read(redis_client, tk, "d") == (None, None)          # removed, not redriven
