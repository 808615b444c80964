"""purgeTopic's script, lua/purge.lua: one HSCAN slice of the topic's records; every live
message accepted at or before the cutoff ends with status 7 wherever it sits, later ones and
ended ones are left alone."""

from __future__ import annotations

from support.lua import (
    CHANNEL,
    END_LIFE,
    T0,
    assert_groups,
    assert_one_place,
    make_dead_letter,
    pull,
    pulled_ids,
    retention_end,
    send,
    status_of,
)


def purge_all(scripts, tk, now, count=200, budget=10_000, cutoff=-1):
    """Slices until the scan ends: (ended in all, the cutoff used, the last reply)."""
    total, cursor = 0, "0"
    for _ in range(10_000):
        reply = scripts.purge(tk, now, END_LIFE, cutoff, cursor, count, CHANNEL, budget)
        total, cutoff, cursor = total + reply.ended, reply.cutoff, reply.next_cursor
        if cursor == "0":
            return total, cutoff, reply
    raise AssertionError("the scan did not end")


def test_every_live_message_ends_deleted_wherever_it_sits(scripts, tk, redis_client):
    send(scripts, tk, "acked", T0, T0)
    assert pulled_ids(pull(scripts, tk, T0)) == ["acked"]
    assert scripts.ack(tk, "acked", T0, END_LIFE)[0] == 1
    send(scripts, tk, "consuming", T0, T0)
    assert pulled_ids(pull(scripts, tk, T0)) == ["consuming"]
    send(scripts, tk, "waiting", T0, T0 + 60_000)
    send(scripts, tk, "ready", T0, T0)
    send(scripts, tk, "front", T0, T0, group="g")
    send(scripts, tk, "blocked", T0, T0, group="g")
    make_dead_letter(scripts, tk, "dead", T0)
    total, cutoff, last = purge_all(scripts, tk, T0 + 5)
    assert total == 5 and cutoff == 7 and last.live == 0
    for msg_id in ("consuming", "waiting", "ready", "front", "blocked"):
        assert_one_place(redis_client, tk, msg_id, 7)
        assert retention_end(redis_client, tk, msg_id) == T0 + 5 + END_LIFE
    assert_one_place(redis_client, tk, "acked", 4)             # ended ones stay as they are
    assert_one_place(redis_client, tk, "dead", 6)              # dead letters too
    assert redis_client.hlen(tk.groups) == 0
    assert_groups(redis_client, tk)
    assert redis_client.zcard(tk.waiting) + redis_client.zcard(tk.expire) == 0


def test_messages_accepted_after_the_cutoff_are_left_alone(scripts, tk, redis_client):
    for i in range(5):
        send(scripts, tk, f"old{i}", T0, T0)
    first = scripts.purge(tk, T0, END_LIFE, -1, "0", 2, CHANNEL, 1)   # budget 1: stops early
    assert (first.ended, first.cutoff) == (1, 5)
    for i in range(3):
        send(scripts, tk, f"new{i}", T0, T0)                   # sent during the purge
    total, _, last = purge_all(scripts, tk, T0 + 1, count=2, cutoff=first.cutoff)
    assert total == 4 and last.live == 3
    assert [status_of(redis_client, tk, f"old{i}") for i in range(5)] == [7] * 5
    assert [status_of(redis_client, tk, f"new{i}") for i in range(3)] == [2] * 3


def test_a_slice_stops_at_its_budget(scripts, tk):
    for i in range(10):
        send(scripts, tk, f"m{i}", T0, T0)
    reply = scripts.purge(tk, T0, END_LIFE, -1, "0", 100, CHANNEL, 4)
    assert reply.ended == 4 and reply.live == 6


def test_messages_moving_between_slices_are_still_found(scripts, tk, redis_client):
    """A scan over a hash larger than its compact encoding, with pulls, acks and promotions
    between its slices: every message accepted before the cutoff that is still live ends."""
    for i in range(600):
        send(scripts, tk, f"m{i:03d}", T0, T0 + (i % 3) * 10)
    cursor, cutoff, total, acked = "0", -1, 0, 0
    now = T0
    for step in range(10_000):
        reply = scripts.purge(tk, now, END_LIFE, cutoff, cursor, 50, CHANNEL, 10_000)
        total, cutoff, cursor = total + reply.ended, reply.cutoff, reply.next_cursor
        if cursor == "0":
            break
        now += 5                                                # promotes some
        for message in pull(scripts, tk, now, batch=7)[0]:
            if step % 2:
                assert scripts.ack(tk, message[0], now, END_LIFE)[0] == 1
                acked += 1
    assert total + acked == 600
    assert redis_client.zcard(tk.waiting) + redis_client.zcard(tk.expire) == 0
    statuses = {status_of(redis_client, tk, f"m{i:03d}") for i in range(600)}
    assert statuses <= {4, 7}


def test_purging_a_group_front_readies_nothing_that_is_purged_later_by_mistake(
        scripts, tk, redis_client):
    """The front's release makes its next message front (ready); it was accepted before the
    cutoff, so the scan ends it too, and the group is gone."""
    for i in range(4):
        send(scripts, tk, f"g{i}", T0, T0, group="g")
    total, _, _ = purge_all(scripts, tk, T0, count=1)
    assert total == 4
    assert redis_client.hlen(tk.groups) == 0 and redis_client.zcard(tk.blocked) == 0
    assert_groups(redis_client, tk)


def test_an_empty_topic_purges_nothing(scripts, tk):
    reply = scripts.purge(tk, T0, END_LIFE, -1, "0", 200, CHANNEL, 10)
    assert list(reply) == [0, "0", 0, -1, 0]
