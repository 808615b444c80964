"""Acceptance order and message groups (lua/includes/group.lua), through every script that
moves a message: ties leave in send order; a group delivers one message at a time, in order of
(triggerTime, acceptance); every ending of a head releases its group; a pull never looks at a
blocked message. After each step the structures are checked against the records
(``assert_groups``) and each message's one place (``assert_one_place``)."""

from __future__ import annotations

import pytest

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
    configure,
    hints,
    nack,
    pull,
    pulled_ids,
    read,
    send,
)


def get_status(scripts, tk, msg_id, now):
    """The status getMsg shows at ``now`` (a due blocked message shows 2)."""
    return int(scripts.get(tk, msg_id, now).fields[6])


def check(redis_client, tk, places: dict[str, int]) -> None:
    assert_groups(redis_client, tk)
    for msg_id, status in places.items():
        assert_one_place(redis_client, tk, msg_id, status)


# -- acceptance order --------------------------------------------------------------------
def test_equal_trigger_times_leave_in_send_order_single_and_batched(scripts, tk):
    ids = [f"seq-{i:02d}" for i in range(20)]
    for msg_id in ids[:8]:
        send(scripts, tk, msg_id, T0, T0 + 100)
    scripts.send_many(tk, T0, CHANNEL, DEFAULTS,
                      [SendArgs(msg_id, "b", T0 + 100, HOUR, 3, "") for msg_id in ids[8:]])
    assert pulled_ids(pull(scripts, tk, T0 + 100, batch=1000)) == ids


def test_a_batch_of_a_thousand_with_one_trigger_time_is_delivered_in_entry_order(scripts, tk):
    ids = [f"m{(i * 7919) % 1000}" for i in range(1000)]     # ids in no sorted order
    for start in range(0, 1000, 100):
        scripts.send_many(tk, T0, CHANNEL, DEFAULTS,
                          [SendArgs(m, "b", T0, HOUR, 3, "") for m in ids[start:start + 100]])
    delivered = []
    for _ in range(10):
        delivered += pulled_ids(pull(scripts, tk, T0, batch=100))
    assert delivered == ids


def test_redeliveries_queue_at_the_tail_by_their_ready_time(scripts, tk):
    for msg_id in ("a", "b", "c"):
        send(scripts, tk, msg_id, T0, T0)
    assert pulled_ids(pull(scripts, tk, T0)) == ["a"]
    nack(scripts, tk, "a", T0 + 5, delay=0)           # ready again at T0 + 5: behind b, c
    send(scripts, tk, "d", T0 + 5, T0 + 5)            # accepted after the nack, same time
    assert pulled_ids(pull(scripts, tk, T0 + 5, batch=10)) == ["b", "c", "a", "d"]


# -- groups: one at a time, in order -----------------------------------------------------
def test_a_pull_hands_out_one_message_per_group_and_the_next_only_after_the_ack(
        scripts, tk, redis_client):
    for i in range(3):
        send(scripts, tk, f"o1-{i}", T0, T0, group="order-1")
        send(scripts, tk, f"o2-{i}", T0, T0, group="order-2")
    send(scripts, tk, "free", T0, T0)
    assert pulled_ids(pull(scripts, tk, T0, batch=100)) == ["o1-0", "o2-0", "free"]
    check(redis_client, tk, {"o1-0": 3, "o1-1": 1, "o1-2": 1, "o2-0": 3})
    assert get_status(scripts, tk, "o1-1", T0) == 2            # due, waiting behind its head
    assert pull(scripts, tk, T0, batch=100)[0] == []
    assert scripts.ack(tk, "o1-0", T0 + 1, END_LIFE, channel=CHANNEL)[0] == Outcome.OK
    check(redis_client, tk, {"o1-0": 4, "o1-1": 2, "o1-2": 1})
    assert pulled_ids(pull(scripts, tk, T0 + 1, batch=100)) == ["o1-1"]


def test_a_group_delivers_by_trigger_time_then_acceptance_whatever_the_send_order(
        scripts, tk, redis_client):
    send(scripts, tk, "late", T0, T0 + 300, group="g")
    send(scripts, tk, "early", T0, T0 + 100, group="g")        # the waiting front steps back
    send(scripts, tk, "early-too", T0, T0 + 100, group="g")
    check(redis_client, tk, {"early": 1, "late": 1, "early-too": 1})
    assert redis_client.hget(tk.groups, "g") == read(redis_client, tk, "early")[1]
    order = []
    now = T0 + 300
    for _ in range(3):
        (msg_id,) = pulled_ids(pull(scripts, tk, now, batch=10))
        order.append(msg_id)
        scripts.ack(tk, msg_id, now, END_LIFE)
        check(redis_client, tk, {})
    assert order == ["early", "early-too", "late"]


def test_a_delivered_head_keeps_its_group_waiting_through_nack_timeout_and_visibility_zero(
        scripts, tk, redis_client):
    configure(scripts, tk, redeliveryDelayMillis=50)
    send(scripts, tk, "step-1", T0, T0, group="g")
    send(scripts, tk, "step-2", T0, T0, group="g")
    assert pulled_ids(pull(scripts, tk, T0, batch=10)) == ["step-1"]
    nack(scripts, tk, "step-1", T0 + 1)                         # backoff: waiting till T0 + 51
    check(redis_client, tk, {"step-1": 1, "step-2": 1})
    assert pull(scripts, tk, T0 + 50, batch=10)[0] == []       # step-2 waits behind it
    assert pulled_ids(pull(scripts, tk, T0 + 51, batch=10)) == ["step-1"]
    scripts.timeout(tk, T0 + 51 + 30_000, 1000, END_LIFE, CHANNEL, DEFAULTS)
    check(redis_client, tk, {"step-1": 1, "step-2": 1})
    assert pulled_ids(pull(scripts, tk, T0 + 40_000, batch=10)) == ["step-1"]
    scripts.change_visibility(tk, "step-1", T0 + 40_001, 0, END_LIFE, CHANNEL, DEFAULTS)
    check(redis_client, tk, {"step-1": 2, "step-2": 1})
    assert pulled_ids(pull(scripts, tk, T0 + 40_002, batch=10)) == ["step-1"]
    scripts.ack(tk, "step-1", T0 + 40_003, END_LIFE)
    assert pulled_ids(pull(scripts, tk, T0 + 40_003, batch=10)) == ["step-2"]


def head_ending(scripts, tk, how: str, now: int) -> None:
    """End the consuming head "h" (maxRetry 0, ttl 1000) one way."""
    if how == "ack":
        scripts.ack(tk, "h", now, END_LIFE, channel=CHANNEL)
    elif how == "nack exhausted":
        nack(scripts, tk, "h", now)
    elif how == "timeout exhausted":
        scripts.timeout(tk, now + 30_000, 1000, END_LIFE, CHANNEL, DEFAULTS)
    elif how == "delete":
        scripts.delete(tk, "h", now, END_LIFE, False, channel=CHANNEL)


@pytest.mark.parametrize("how", ["ack", "nack exhausted", "timeout exhausted", "delete"])
def test_every_ending_of_a_consuming_head_releases_its_group(scripts, tk, redis_client, how):
    configure(scripts, tk, deadLetter=1)
    send(scripts, tk, "h", T0, T0, max_retry=0, group="g")
    send(scripts, tk, "next", T0, T0, group="g")
    assert pulled_ids(pull(scripts, tk, T0)) == ["h"]
    with hints(redis_client) as seen:
        head_ending(scripts, tk, how, T0 + 1)
    assert any(hint.endswith(" topic-a") and int(hint.split()[0]) >= 1 for hint in seen)
    check(redis_client, tk, {"next": 2})
    assert pulled_ids(pull(scripts, tk, T0 + 40_000, batch=10)) == ["next"]
    check(redis_client, tk, {"next": 3})


def test_expiry_of_a_ready_head_releases_its_group_and_a_blocked_message_expires_in_place(
        scripts, tk, redis_client):
    send(scripts, tk, "head", T0, T0, ttl=100, group="g")
    send(scripts, tk, "short", T0, T0, ttl=50, group="g")
    send(scripts, tk, "next", T0, T0, ttl=HOUR, group="g")
    scripts.expire(tk, T0 + 50, 1000, END_LIFE, DEFAULTS, channel=CHANNEL)
    check(redis_client, tk, {"head": 2, "short": 5, "next": 1})
    with hints(redis_client) as seen:
        scripts.expire(tk, T0 + 100, 1000, END_LIFE, DEFAULTS, channel=CHANNEL)
    assert seen == ["1 topic-a"]                                # "next" became ready
    check(redis_client, tk, {"head": 5, "next": 2})
    assert pulled_ids(pull(scripts, tk, T0 + 100, batch=10)) == ["next"]


def test_a_pull_that_ends_an_expired_head_hands_out_the_groups_next(scripts, tk, redis_client):
    send(scripts, tk, "head", T0, T0, ttl=10, group="g")
    send(scripts, tk, "next", T0, T0, group="g")
    result = pull(scripts, tk, T0 + 10, batch=10)
    assert pulled_ids(result) == ["next"] and result[3] == 1
    check(redis_client, tk, {"head": 5, "next": 3})


def test_a_release_into_the_future_waits_and_lowers_the_due_time(scripts, tk, redis_client):
    send(scripts, tk, "now", T0, T0, group="g")
    send(scripts, tk, "later", T0, T0 + 5000, group="g")
    pull(scripts, tk, T0)
    outcome, _, lowered = scripts.ack(tk, "now", T0 + 1, END_LIFE)
    assert outcome == Outcome.OK and lowered == T0 + 5000
    check(redis_client, tk, {"later": 1})
    assert pull(scripts, tk, T0 + 4999)[0] == []
    assert pulled_ids(pull(scripts, tk, T0 + 5000)) == ["later"]


def test_deleting_a_blocked_message_leaves_the_head_alone(scripts, tk, redis_client):
    for msg_id in ("a", "b", "c"):
        send(scripts, tk, msg_id, T0, T0, group="g")
    pull(scripts, tk, T0)
    assert scripts.delete(tk, "b", T0, END_LIFE, True, channel=CHANNEL)[0] == Outcome.OK
    check(redis_client, tk, {"a": 3, "b": None, "c": 1})
    scripts.ack(tk, "a", T0, END_LIFE)
    assert pulled_ids(pull(scripts, tk, T0)) == ["c"]


def test_reschedule_reorders_a_waiting_group_and_a_delivered_head_stays_head(
        scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0 + 100, group="g")
    send(scripts, tk, "b", T0, T0 + 200, group="g")
    send(scripts, tk, "c", T0, T0 + 300, group="g")
    scripts.reschedule(tk, "c", T0, T0 + 50, CHANNEL)        # blocked c moves to the front
    check(redis_client, tk, {"a": 1, "b": 1, "c": 1})
    assert redis_client.hget(tk.groups, "g") == read(redis_client, tk, "c")[1]
    scripts.reschedule(tk, "c", T0, T0 + 250, CHANNEL)       # front c steps behind a and b
    check(redis_client, tk, {"a": 1, "b": 1, "c": 1})
    assert redis_client.hget(tk.groups, "g") == read(redis_client, tk, "a")[1]
    assert pulled_ids(pull(scripts, tk, T0 + 300, batch=10)) == ["a"]
    nack(scripts, tk, "a", T0 + 300, delay=1000)
    scripts.reschedule(tk, "a", T0 + 300, T0 + 900, CHANNEL)   # delivered: stays head
    assert redis_client.hget(tk.groups, "g") == read(redis_client, tk, "a")[1]
    assert pull(scripts, tk, T0 + 899, batch=10)[0] == []
    assert pulled_ids(pull(scripts, tk, T0 + 900, batch=10)) == ["a"]
    scripts.ack(tk, "a", T0 + 900, END_LIFE)
    assert pulled_ids(pull(scripts, tk, T0 + 900, batch=10)) == ["b"]


def test_a_redriven_dead_letter_rejoins_its_group_as_a_new_send(scripts, tk, redis_client):
    configure(scripts, tk, deadLetter=1)
    send(scripts, tk, "dead", T0, T0, max_retry=0, group="g")
    send(scripts, tk, "x", T0, T0, group="g")
    pull(scripts, tk, T0)
    nack(scripts, tk, "dead", T0)                             # dead; x is the group's front
    assert pulled_ids(pull(scripts, tk, T0)) == ["x"]
    assert scripts.dead_redrive(tk, T0 + 1, "dead", 10, CHANNEL, DEFAULTS)[0] == Outcome.OK
    check(redis_client, tk, {"dead": 1, "x": 3})              # behind the consuming x
    scripts.ack(tk, "x", T0 + 2, END_LIFE)
    assert pulled_ids(pull(scripts, tk, T0 + 2)) == ["dead"]


def test_a_duplicate_send_leaves_the_group_as_it_was(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0, group="g")
    send(scripts, tk, "b", T0, T0, group="g")
    assert send(scripts, tk, "b", T0, T0, group="g")[0] == Outcome.DUPLICATE
    assert redis_client.zcard(tk.blocked) == 1
    check(redis_client, tk, {"a": 2, "b": 1})


def test_the_group_structures_are_empty_when_every_message_ended(scripts, tk, redis_client):
    for i in range(5):
        send(scripts, tk, f"m{i}", T0, T0 + i, group=f"g{i % 2}")
    for _ in range(5):
        for msg_id in pulled_ids(pull(scripts, tk, T0 + 10, batch=10)):
            scripts.ack(tk, msg_id, T0 + 10, END_LIFE)
    assert redis_client.exists(tk.groups, tk.blocked, tk.held) == 0


def test_a_pull_does_not_read_blocked_messages(scripts, tk, redis_client):
    """The cost promise: with 200 groups each holding a consuming head and 10 blocked
    messages behind it, a pull runs the same Redis commands as on a topic without them."""
    for prefix in "gh":
        scripts.send_many(tk, T0, CHANNEL, DEFAULTS, [
            SendArgs(f"{prefix}{g}-{i}", "b", T0, HOUR, 3, "", f"{prefix}{g}")
            for g in range(100) for i in range(11)])
    assert len(pull(scripts, tk, T0, batch=1000)[0]) == 200
    send(scripts, tk, "plain", T0, T0)

    def commands_of_one_pull(topic_keys) -> int:
        # not in the due index: each pull writes its ack deadline there the same way
        redis_client.zrem(topic_keys.namespace_due, topic_keys.topic)
        redis_client.config_resetstat()
        assert pulled_ids(pull(scripts, topic_keys, T0 + 1)) == ["plain"]
        stats = redis_client.info("commandstats")
        return sum(v["calls"] for k, v in stats.items()
                   if k not in ("cmdstat_evalsha", "cmdstat_config", "cmdstat_info"))
    plain_topic = type(tk)(tk.prefix, tk.namespace, "plain-topic")
    send(scripts, plain_topic, "plain", T0, T0)
    assert commands_of_one_pull(tk) == commands_of_one_pull(plain_topic)


def test_more_equal_trigger_times_than_one_promotion_moves_still_leave_in_send_order(
        scripts, tk):
    """2,500 messages due at one millisecond: promotion moves at most 1,000 a call, and a pull
    between two calls must still find the earliest accepted ones in `ready`."""
    ids = [f"m{(i * 7919) % 2500}" for i in range(2500)]
    for start in range(0, 2500, 100):
        scripts.send_many(tk, T0, CHANNEL, DEFAULTS,
                          [SendArgs(m, "b", T0 + 10, HOUR, 3, "") for m in ids[start:start + 100]])
    delivered = []
    for _ in range(25):
        delivered += pulled_ids(scripts.pull(tk, T0 + 10, 100, 30_000, END_LIFE, 1000, CHANNEL,
                                             DEFAULTS))
    assert delivered == ids
