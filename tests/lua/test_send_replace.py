"""sendMsg onDuplicate=replace (debounce), lua/send.lua and lua/includes/accept.lua: a waiting
or ready namesake begins again in its slot with the new values, a new acceptance sequence and
no receipt; a consuming one, or another groupId, is refused with nothing written; an ended one
is an ordinary send. After each step the message's one place and the group structures are
checked on the raw keys.
"""

from __future__ import annotations

from delayqueue.core.message import MESSAGE_FIELDS
from delayqueue.core.outcome import Outcome
from delayqueue.core.scripts import SendArgs

from support.lua import (
    CHANNEL,
    DEFAULTS,
    END_LIFE,
    HOUR,
    T0,
    assert_groups,
    assert_one_place,
    nack,
    pull,
    pulled_ids,
    queue_member,
    read,
    ready_slots,
    receipt_of,
    send,
    slot_of,
    snapshot,
)

F = {name: i for i, name in enumerate(MESSAGE_FIELDS)}


def replace(scripts, tk, msg_id, now, trigger, **kwargs):
    return send(scripts, tk, msg_id, now, trigger, replace=True, **kwargs)


def test_a_waiting_message_is_replaced_with_new_values_and_a_new_acceptance(
        scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0 + 5000, ttl=HOUR, max_retry=4, body="first",
         attributes='{"k":"v"}')
    slot = slot_of(redis_client, tk, "a")
    old_member = queue_member(redis_client, tk, "waiting", slot)
    outcome, fields, lowered = replace(scripts, tk, "a", T0 + 10, T0 + 9000, ttl=2000,
                                       max_retry=-1, body="second")
    assert outcome == Outcome.REPLACED
    assert fields == ["second", str(T0 + 10), str(T0 + 9000), str(T0 + 11_000), "4", "0", "1",
                      None, None, None]        # maxRetry kept (not given), attributes gone
    assert lowered == -1                        # its old entry was earlier: not lowered
    assert slot_of(redis_client, tk, "a") == slot                     # the same record
    new_member = queue_member(redis_client, tk, "waiting", slot)
    assert new_member > old_member                                    # a new sequence
    assert redis_client.zscore(tk.waiting, new_member) == T0 + 9000
    assert redis_client.zcard(tk.waiting) == 1
    assert_one_place(redis_client, tk, "a", 1)
    # maxRetry given: taken.
    assert replace(scripts, tk, "a", T0 + 20, T0 + 20, max_retry=7)[1][F["r"]] == "7"


def test_a_replaced_ready_message_queues_behind_the_ones_accepted_before_it(
        scripts, tk, redis_client):
    for msg_id in ("a", "b", "c"):
        send(scripts, tk, msg_id, T0, T0)
    outcome, fields, lowered = replace(scripts, tk, "a", T0, T0, body="new")
    assert outcome == Outcome.REPLACED and fields[F["s"]] == "2" and fields[F["m"]] == "new"
    assert ready_slots(redis_client, tk) == [slot_of(redis_client, tk, m) for m in "bca"]
    assert pulled_ids(pull(scripts, tk, T0, batch=3)) == ["b", "c", "a"]
    # A ready message replaced to a later time waits again, out of the expiry index.
    send(scripts, tk, "d", T0, T0)
    assert replace(scripts, tk, "d", T0 + 1, T0 + 500)[0] == Outcome.REPLACED
    assert redis_client.zscore(tk.expire, slot_of(redis_client, tk, "d")) is None
    assert_one_place(redis_client, tk, "d", 1)


def test_a_replace_lowers_the_due_time_when_it_comes_earlier(scripts, tk):
    send(scripts, tk, "a", T0, T0 + 9000)
    assert replace(scripts, tk, "a", T0, T0 + 3000)[2] == T0 + 3000


def test_a_message_ready_after_a_nack_begins_again_and_its_old_receipt_is_stale(
        scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0)
    receipt = receipt_of(pull(scripts, tk, T0))
    assert nack(scripts, tk, "a", T0 + 1, receipt, 0)[1][F["s"]] == "2"   # ready, retry 1
    outcome, fields, _ = replace(scripts, tk, "a", T0 + 2, T0 + 2, body="fresh")
    assert outcome == Outcome.REPLACED
    assert (fields[F["n"]], fields[F["c"]], fields[F["s"]]) == ("0", None, "2")
    assert_one_place(redis_client, tk, "a", 2)
    before = snapshot(redis_client)
    assert scripts.ack(tk, "a", T0 + 3, END_LIFE, receipt)[0] == Outcome.STALE_RECEIPT
    assert nack(scripts, tk, "a", T0 + 3, receipt)[0] == Outcome.NOT_CONSUMING
    assert snapshot(redis_client) == before
    # Its new delivery has a new receipt, which acks it.
    new_receipt = receipt_of(pull(scripts, tk, T0 + 4))
    assert new_receipt != receipt
    assert scripts.ack(tk, "a", T0 + 5, END_LIFE, new_receipt)[0] == Outcome.OK


def test_a_consuming_message_is_refused_and_nothing_changes(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0, body="first")
    pull(scripts, tk, T0)
    before = snapshot(redis_client)
    outcome, fields, lowered = replace(scripts, tk, "a", T0 + 1, T0 + 1, body="second")
    assert (outcome, lowered) == (Outcome.CONSUMING, -1)
    assert fields[F["m"]] == "first" and fields[F["s"]] == "3"
    assert snapshot(redis_client) == before
    assert_one_place(redis_client, tk, "a", 3)


def test_a_replace_that_changes_the_group_id_is_refused_and_nothing_changes(
        scripts, tk, redis_client):
    send(scripts, tk, "g", T0, T0 + 100, group="g1")
    send(scripts, tk, "plain", T0, T0 + 100)
    before = snapshot(redis_client)
    for msg_id, group in (("g", "g2"), ("g", ""), ("plain", "g1")):
        outcome, fields, _ = replace(scripts, tk, msg_id, T0 + 1, T0 + 1, group=group)
        assert outcome == Outcome.OTHER_GROUP and fields[F["m"]] == "body"
    assert snapshot(redis_client) == before


def test_an_ended_namesake_is_an_ordinary_send(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0)
    pull(scripts, tk, T0)
    assert scripts.ack(tk, "a", T0, END_LIFE)[0] == Outcome.OK
    outcome, fields, _ = replace(scripts, tk, "a", T0 + 1, T0 + 1, body="again")
    assert outcome == Outcome.OK and fields[F["m"]] == "again" and fields[F["s"]] == "2"
    assert_one_place(redis_client, tk, "a", 2)
    # No namesake at all: an ordinary send too.
    assert replace(scripts, tk, "new", T0 + 1, T0 + 1)[0] == Outcome.OK


def test_a_blocked_member_takes_a_new_place_in_its_group(scripts, tk, redis_client):
    send(scripts, tk, "head", T0, T0, group="g")
    send(scripts, tk, "x", T0, T0 + 100, group="g")
    send(scripts, tk, "y", T0, T0 + 200, group="g")
    pull(scripts, tk, T0)                                        # head: delivered
    assert replace(scripts, tk, "x", T0 + 1, T0 + 300, body="x2", group="g")[0] == Outcome.REPLACED
    assert_groups(redis_client, tk)
    assert_one_place(redis_client, tk, "x", 1)                   # still blocked, now after y
    assert scripts.ack(tk, "head", T0 + 400, END_LIFE)[0] == Outcome.OK
    assert pulled_ids(pull(scripts, tk, T0 + 400)) == ["y"]
    assert_groups(redis_client, tk)


def test_a_blocked_member_that_now_comes_first_becomes_front(scripts, tk, redis_client):
    """The front was never delivered: it steps back behind the replaced message."""
    send(scripts, tk, "front", T0, T0 + 500, group="g")
    send(scripts, tk, "x", T0, T0 + 900, group="g")
    assert replace(scripts, tk, "x", T0 + 1, T0 + 100, group="g")[0] == Outcome.REPLACED
    assert redis_client.hget(tk.groups, "g") == slot_of(redis_client, tk, "x")
    assert_groups(redis_client, tk)
    assert_one_place(redis_client, tk, "x", 1)
    assert_one_place(redis_client, tk, "front", 1)               # blocked behind x
    assert pulled_ids(pull(scripts, tk, T0 + 100)) == ["x"]


def test_a_group_front_replaced_to_a_later_time_hands_the_front_on(scripts, tk, redis_client):
    send(scripts, tk, "front", T0, T0, group="g")
    send(scripts, tk, "next", T0, T0 + 50, group="g")
    outcome, fields, lowered = replace(scripts, tk, "front", T0 + 1, T0 + 1000, group="g")
    assert outcome == Outcome.REPLACED and fields[F["s"]] == "1"
    assert lowered == T0 + 50                   # the new front waits: the due time comes first
    assert redis_client.hget(tk.groups, "g") == slot_of(redis_client, tk, "next")
    assert_groups(redis_client, tk)
    assert_one_place(redis_client, tk, "front", 1)               # blocked now
    assert_one_place(redis_client, tk, "next", 1)                # front, waiting
    assert pulled_ids(pull(scripts, tk, T0 + 50)) == ["next"]
    # Replaced to a time still first, it stays front (in a new acceptance).
    send(scripts, tk, "solo", T0, T0, group="h")
    send(scripts, tk, "later", T0, T0 + 800, group="h")
    assert replace(scripts, tk, "solo", T0 + 1, T0 + 1, group="h")[0] == Outcome.REPLACED
    assert redis_client.hget(tk.groups, "h") == slot_of(redis_client, tk, "solo")
    assert_groups(redis_client, tk)


def test_a_front_given_back_by_a_nack_is_replaced_as_a_new_send(scripts, tk, redis_client):
    """A delivered head holds its group; replaced, it is fresh (retry 0), so the group's next
    message that now comes first takes the front."""
    send(scripts, tk, "head", T0, T0, group="g")
    send(scripts, tk, "next", T0, T0 + 10, group="g")
    nack(scripts, tk, "head", T0, receipt_of(pull(scripts, tk, T0)), 0)
    assert replace(scripts, tk, "head", T0 + 20, T0 + 20, group="g")[0] == Outcome.REPLACED
    assert redis_client.hget(tk.groups, "g") == slot_of(redis_client, tk, "next")
    assert_groups(redis_client, tk)
    assert pulled_ids(pull(scripts, tk, T0 + 20, batch=2)) == ["next"]


def test_a_replace_takes_no_room_of_the_backlog(scripts, tk, redis_client):
    redis_client.hset(tk.config, "maxBacklog", 1)
    send(scripts, tk, "a", T0, T0)
    assert replace(scripts, tk, "a", T0 + 1, T0 + 1)[0] == Outcome.REPLACED
    assert send(scripts, tk, "b", T0 + 1, T0 + 1)[0] == Outcome.BACKLOG


def entry(msg_id, group="", replace_=1, body="b"):
    return SendArgs(msg_id, body, T0 + 1, HOUR, 1, "", group, replace_)


def test_an_atomic_call_with_a_consuming_replace_writes_nothing(scripts, tk, redis_client):
    send(scripts, tk, "busy", T0, T0)
    pull(scripts, tk, T0)
    send(scripts, tk, "live", T0, T0 + 100)
    before = snapshot(redis_client)
    replies = scripts.send_many(tk, T0 + 1, CHANNEL, DEFAULTS,
                                [entry("new"), entry("live"), entry("busy")], atomic=True)
    assert [r[0] for r in replies] == [Outcome.NOT_WRITTEN, Outcome.NOT_WRITTEN,
                                       Outcome.CONSUMING]
    assert snapshot(redis_client) == before
    replies = scripts.send_many(tk, T0 + 1, CHANNEL, DEFAULTS,
                                [entry("new"), entry("live", group="g")], atomic=True)
    assert [r[0] for r in replies] == [Outcome.NOT_WRITTEN, Outcome.OTHER_GROUP]
    assert snapshot(redis_client) == before


def test_an_atomic_call_counts_its_own_entries(scripts, tk, redis_client):
    """A msgId an earlier entry writes is live in that entry's group: a later replace of it
    with the same group replaces it, with another is refused; a keep is a duplicate."""
    send(scripts, tk, "live", T0, T0 + 100)
    replies = scripts.send_many(tk, T0 + 1, CHANNEL, DEFAULTS, [
        entry("n", "g", body="1"), entry("n", "g", body="2"), entry("n", "g", 0, body="3"),
        entry("live", replace_=0), entry("live")], atomic=True)
    assert [r[0] for r in replies] == [Outcome.OK, Outcome.REPLACED, Outcome.DUPLICATE,
                                       Outcome.DUPLICATE, Outcome.REPLACED]
    assert read(redis_client, tk, "n")[0][F["m"]] == "2"
    assert_groups(redis_client, tk)
    before = snapshot(redis_client)
    replies = scripts.send_many(tk, T0 + 2, CHANNEL, DEFAULTS, [
        entry("m", "g"), entry("m", "other")], atomic=True)
    assert [r[0] for r in replies] == [Outcome.NOT_WRITTEN, Outcome.OTHER_GROUP]
    assert snapshot(redis_client) == before


def test_one_by_one_a_refused_replace_leaves_the_other_entries_standing(scripts, tk,
                                                                      redis_client):
    send(scripts, tk, "busy", T0, T0)
    pull(scripts, tk, T0)
    replies = scripts.send_many(tk, T0 + 1, CHANNEL, DEFAULTS,
                                [entry("busy"), entry("fresh")])
    assert [r[0] for r in replies] == [Outcome.CONSUMING, Outcome.OK]
    assert_one_place(redis_client, tk, "busy", 3)
    assert_one_place(redis_client, tk, "fresh", 2)
