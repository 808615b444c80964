"""sendMsg's script, lua/send.lua: accept, wait or ready at once, duplicates, replacing an
ended message.
"""

from __future__ import annotations

import pytest
import redis

from delayqueue.core.outcome import Outcome
from delayqueue.core.scripts import SendArgs

from support.lua import (
    CHANNEL,
    DEFAULTS,
    END_LIFE,
    HOUR,
    T0,
    assert_one_place,
    configure,
    make_dead_letter,
    pull,
    pulled_ids,
    ready_member,
    ready_slots,
    retention_end,
    send,
    slot_of,
    snapshot,
)


def test_send_of_future_message_waits_and_reports_its_trigger_as_lowered_due(scripts, tk,
                                                                           redis_client):
    outcome, fields, lowered_due = send(scripts, tk, "a", T0, T0 + 5000)
    assert outcome == Outcome.OK
    assert fields == ["body", str(T0), str(T0 + 5000), str(T0 + 5000 + HOUR), "10", "0", "1",
                      None, None, None]
    assert lowered_due == T0 + 5000
    assert_one_place(redis_client, tk, "a", 1)
    # enters the index when promoted
    assert redis_client.zscore(tk.expire, slot_of(redis_client, tk, "a")) is None
    scripts.promote(tk, T0 + 5000, 1000, CHANNEL)
    assert redis_client.zscore(tk.expire, slot_of(redis_client, tk, "a")) == T0 + 5000 + HOUR


def test_send_lowered_due_is_minus_one_when_it_does_not_lower_the_due_time(scripts, tk):
    send(scripts, tk, "early", T0, T0 + 1000)
    assert send(scripts, tk, "late", T0, T0 + 9000)[2] == -1
    assert send(scripts, tk, "earlier", T0, T0 + 500)[2] == T0 + 500


def test_send_of_due_message_is_ready_at_once(scripts, tk, redis_client):
    outcome, fields, _ = send(scripts, tk, "a", T0, T0)
    assert outcome == Outcome.OK and fields[6] == "2"
    assert_one_place(redis_client, tk, "a", 2)


def test_send_of_live_msg_id_returns_stored_message_and_writes_nothing(scripts, tk,
                                                                      redis_client):
    send(scripts, tk, "a", T0, T0 + 5000, body="first")
    outcome, fields, lowered_due = send(scripts, tk, "a", T0 + 1, T0 + 1, body="second")
    assert outcome == Outcome.DUPLICATE and lowered_due == -1
    assert fields[0] == "first" and fields[6] == "1"
    assert redis_client.zcard(tk.ready) == 0
    assert_one_place(redis_client, tk, "a", 1)


@pytest.mark.parametrize("state", [1, 2, 3])
def test_send_of_a_live_msg_id_in_any_live_status_is_a_duplicate(scripts, tk, redis_client,
                                                                  state):
    """Waiting (1), ready (2) and consuming (3) are all live: a re-send changes nothing."""
    send(scripts, tk, "a", T0, T0 if state > 1 else T0 + 5000, body="first")
    if state == 3:
        pull(scripts, tk, T0)
    before = {key: redis_client.dump(key) for key in redis_client.keys("*")}
    outcome, fields, lowered_due = send(scripts, tk, "a", T0 + 1, T0 + 1, body="second")
    assert outcome == Outcome.DUPLICATE and lowered_due == -1
    assert fields[0] == "first" and fields[6] == str(state)
    assert {key: redis_client.dump(key) for key in redis_client.keys("*")} == before
    assert_one_place(redis_client, tk, "a", state)


def test_send_replaces_an_ended_message(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0)
    pull(scripts, tk, T0)
    assert scripts.ack(tk, "a", T0, END_LIFE)[0] == Outcome.OK
    outcome, fields, _ = send(scripts, tk, "a", T0 + 10, T0 + 10, body="again")
    assert outcome == Outcome.OK and fields[0] == "again" and fields[5] == "0" and fields[6] == "2"
    assert retention_end(redis_client, tk, "a") is None   # a live message carries no TTL
    assert_one_place(redis_client, tk, "a", 2)


@pytest.mark.parametrize("ending", ["acked", "expired", "exhausted", "deleted"])
def test_send_replaces_a_message_in_every_ended_status(scripts, tk, redis_client, ending):
    send(scripts, tk, "a", T0, T0, ttl=100, max_retry=0)
    if ending == "acked":
        pull(scripts, tk, T0)
        scripts.ack(tk, "a", T0, END_LIFE)
    elif ending == "expired":
        scripts.expire(tk, T0 + 100, 1000, END_LIFE, DEFAULTS)
    elif ending == "exhausted":
        pull(scripts, tk, T0)
        scripts.nack(tk, "a", T0, END_LIFE, CHANNEL, DEFAULTS)
    else:
        scripts.delete(tk, "a", T0, END_LIFE, False)
    expected = {"acked": 4, "expired": 5, "exhausted": 6, "deleted": 7}[ending]
    assert_one_place(redis_client, tk, "a", expected)
    outcome, fields, _ = send(scripts, tk, "a", T0 + 200, T0 + 300, body="new")
    assert outcome == Outcome.OK and fields[0] == "new" and fields[6] == "1"
    assert_one_place(redis_client, tk, "a", 1)
    assert retention_end(redis_client, tk, "a") is None


def test_a_message_whose_redis_call_fails_answers_that_error_and_the_others_stand(
        scripts, tk, redis_client):
    """Each message of a call runs under pcall (includes/outcome.lua each_on_its_own): one
    whose own redis.call fails (here: replacing an ended message, it leaves a `dead` key that
    is not a zset) answers Redis's own error text in its place, as its own call would."""
    send(scripts, tk, "ended", T0, T0)
    pull(scripts, tk, T0)
    scripts.ack(tk, "ended", T0, END_LIFE)
    redis_client.set(tk.dead, "not a zset")
    first, failed, last = scripts.send_many(tk, T0, CHANNEL, DEFAULTS, [
        SendArgs("first", "b", T0, HOUR, 1, ""), SendArgs("ended", "b", T0, HOUR, 1, ""),
        SendArgs("last", "b", T0 + 5, HOUR, 1, "")])
    assert isinstance(failed, redis.ResponseError)
    assert str(failed).startswith("WRONGTYPE Operation against a key holding the wrong kind")
    assert (first[0], last[0]) == (Outcome.OK, Outcome.OK)
    redis_client.delete(tk.dead)                     # so the places can be read again
    assert_one_place(redis_client, tk, "first", 2)
    assert_one_place(redis_client, tk, "last", 1)


def test_a_send_replacing_a_dead_letter_takes_it_out_of_the_queue(scripts, tk, redis_client):
    make_dead_letter(scripts, tk, "a", T0)
    outcome, fields, _ = send(scripts, tk, "a", T0 + 1, T0 + 1)
    assert outcome == Outcome.OK and fields[8] is None          # no receipt carried over
    assert_one_place(redis_client, tk, "a", 2)


def test_a_send_without_a_time_is_delayed_by_the_topics_delay(scripts, tk, redis_client):
    configure(scripts, tk, delayMillis=7000)
    outcome, fields, lowered = send(scripts, tk, "a", T0, -1)
    assert outcome == Outcome.OK and fields[2] == str(T0 + 7000) and lowered == T0 + 7000
    assert fields[3] == str(T0 + 7000 + HOUR)                   # its life starts then
    assert send(scripts, tk, "b", T0, T0)[1][2] == str(T0)      # an explicit time is kept
    assert_one_place(redis_client, tk, "a", 1)
    assert_one_place(redis_client, tk, "b", 2)


def live(redis_client, tk) -> int:
    return redis_client.zcard(tk.waiting) + redis_client.zcard(tk.expire)


def test_sends_over_the_backlog_are_refused_and_write_nothing(scripts, tk, redis_client):
    configure(scripts, tk, maxBacklog=3)
    send(scripts, tk, "waiting", T0, T0 + 60_000)
    send(scripts, tk, "g1", T0, T0, group="g")
    send(scripts, tk, "g2", T0, T0, group="g")                  # blocked: counts
    before = snapshot(redis_client)
    assert send(scripts, tk, "over", T0, T0) == [Outcome.BACKLOG, [], -1]
    assert snapshot(redis_client) == before
    # A live duplicate is not a new message: answered as ever.
    assert send(scripts, tk, "waiting", T0, T0)[0] == Outcome.DUPLICATE
    # An ended message makes room.
    assert pulled_ids(pull(scripts, tk, T0)) == ["g1"]
    assert scripts.ack(tk, "g1", T0, END_LIFE)[0] == Outcome.OK
    replies = scripts.send_many(tk, T0, CHANNEL, DEFAULTS, [
        SendArgs("in", "b", T0, HOUR, 1, ""), SendArgs("out", "b", T0, HOUR, 1, "")])
    assert [r[0] for r in replies] == [Outcome.OK, Outcome.BACKLOG]
    assert live(redis_client, tk) == 3


def test_an_atomic_call_writes_every_message_or_none(scripts, tk, redis_client):
    configure(scripts, tk, maxBacklog=4)
    send(scripts, tk, "old", T0, T0)
    entries = [SendArgs(f"m{i}", "b", T0, HOUR, 1, "") for i in range(4)]
    before = snapshot(redis_client)
    replies = scripts.send_many(tk, T0, CHANNEL, DEFAULTS, entries, atomic=True)
    assert replies == [[Outcome.NOT_WRITTEN, [], -1]] * 3 + [[Outcome.BACKLOG, [], -1]]
    assert snapshot(redis_client) == before
    # A live duplicate (and a msgId given twice) takes no room and is not a refusal.
    entries = [SendArgs("old", "b", T0, HOUR, 1, ""), SendArgs("m0", "b", T0, HOUR, 1, ""),
               SendArgs("m0", "b", T0, HOUR, 1, ""), SendArgs("m1", "b", T0, HOUR, 1, ""),
               SendArgs("m2", "b", T0 + 5, HOUR, 1, "")]
    replies = scripts.send_many(tk, T0, CHANNEL, DEFAULTS, entries, atomic=True)
    assert [r[0] for r in replies] == [Outcome.DUPLICATE, Outcome.OK, Outcome.DUPLICATE,
                                       Outcome.OK, Outcome.OK]
    assert live(redis_client, tk) == 4
    for msg_id, status in (("m0", 2), ("m1", 2), ("m2", 1)):
        assert_one_place(redis_client, tk, msg_id, status)


def test_an_atomic_call_without_a_backlog_limit_is_a_plain_send(scripts, tk, redis_client):
    entries = [SendArgs(f"m{i}", "b", T0, HOUR, 1, "") for i in range(100)]
    replies = scripts.send_many(tk, T0, CHANNEL, DEFAULTS, entries, atomic=True)
    assert {r[0] for r in replies} == {Outcome.OK}
    assert ready_slots(redis_client, tk) == [slot_of(redis_client, tk, f"m{i}")
                                             for i in range(100)]


def test_a_send_call_gives_each_accepted_message_the_next_sequence_and_leaves_the_counter_there(
        scripts, tk, redis_client):
    """A call takes its sequences in one INCRBY and gives the unused back: duplicates take
    none, so the accepted ones are numbered as one INCR each would number them, and the
    topic's counter ends at the last one given."""
    send(scripts, tk, "a", T0, T0)
    send(scripts, tk, "b", T0, T0)
    scripts.send_many(tk, T0, CHANNEL, DEFAULTS, [
        SendArgs(m, "b", T0, HOUR, 1, "") for m in ("a", "c", "b", "d")])
    seqs = {m: int(ready_member(redis_client, tk, slot_of(redis_client, tk, m))[:12], 16)
            for m in "abcd"}
    assert seqs == {"a": 1, "b": 2, "c": 3, "d": 4}
    assert redis_client.get(tk.seq) == "4"
    send(scripts, tk, "e", T0, T0)
    assert int(ready_member(redis_client, tk, slot_of(redis_client, tk, "e"))[:12], 16) == 5
