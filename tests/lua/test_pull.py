"""pullMsg's script, lua/pull.lua: never early, oldest first, ends what it must not hand out."""

from __future__ import annotations

import threading

from support.lua import (
    CHANNEL,
    DEFAULTS,
    END_LIFE,
    HOUR,
    T0,
    assert_one_place,
    drop_record,
    field,
    pull,
    pulled_ids,
    ready_member,
    send,
    set_status_behind_the_scripts,
    slot_of,
)


def test_pull_never_returns_a_message_before_its_trigger_time(scripts, tk, redis_client,
                                                             clock):
    send(scripts, tk, "a", clock.now_ms(), T0 + 1000)
    clock.advance(999)
    result = pull(scripts, tk, clock.now_ms())
    assert result[0] == [] and result[4] == T0 + 1000   # next_trigger
    assert_one_place(redis_client, tk, "a", 1)
    clock.advance(1)
    result = pull(scripts, tk, clock.now_ms(), ack_timeout=5000)
    assert pulled_ids(result) == ["a"]
    assert result[1] == 1 and result[2] == [0]          # promoted by the pull itself, gap 0
    msg = result[0][0]
    assert msg[6] == "1" and msg[7] == "3"              # delivery counted, consuming
    assert redis_client.zscore(tk.ack, slot_of(redis_client, tk, "a")) == T0 + 1000 + 5000
    assert_one_place(redis_client, tk, "a", 3)


def test_pull_hands_out_oldest_trigger_time_first_in_batches(scripts, tk, redis_client):
    for i, delay in enumerate([50, 40, 30, 20, 10]):
        send(scripts, tk, f"m{i}", T0, T0 + delay)
    first = pull(scripts, tk, T0 + 100, batch=3)
    second = pull(scripts, tk, T0 + 100, batch=3)
    assert pulled_ids(first) == ["m4", "m3", "m2"]
    assert pulled_ids(second) == ["m1", "m0"]
    assert first[5] == 2 and second[5] == 0             # ready_left


def test_pull_skips_expired_messages_and_ends_them(scripts, tk, redis_client):
    send(scripts, tk, "never", T0, T0, ttl=100)
    send(scripts, tk, "once", T0, T0, ttl=100)
    send(scripts, tk, "fresh", T0, T0 + 50)
    # Deliver "once", let its ack time out back to ready.
    # make "once" first in line
    never = ready_member(redis_client, tk, slot_of(redis_client, tk, "never"))
    redis_client.zadd(tk.ready, {never: T0 + 1})
    assert pulled_ids(pull(scripts, tk, T0, ack_timeout=10)) == ["once"]
    assert scripts.timeout(tk, T0 + 10, 1000, END_LIFE, CHANNEL, DEFAULTS)[0] == 1
    result = pull(scripts, tk, T0 + 100, batch=10)
    assert pulled_ids(result) == ["fresh"]
    assert result[3] == 2                               # ended instead of handed out
    assert_one_place(redis_client, tk, "never", 5)
    assert_one_place(redis_client, tk, "once", 6)


def test_pull_ends_message_whose_deliveries_are_used_up(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0, max_retry=0)
    assert pulled_ids(pull(scripts, tk, T0, ack_timeout=10)) == ["a"]
    # Force it back into ready behind the scripts' back, as a stale copy would be.
    slot = set_status_behind_the_scripts(redis_client, tk, "a", 2)
    redis_client.zrem(tk.ack, slot)
    redis_client.zadd(tk.ready, {"0" * 12 + slot: T0})   # a ready member: sequence, slot
    result = pull(scripts, tk, T0 + 20)
    assert result[0] == [] and result[3] == 1
    assert_one_place(redis_client, tk, "a", 6)


def test_pull_drops_ids_whose_hash_is_gone(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0)
    drop_record(redis_client, tk, "a")
    assert pull(scripts, tk, T0)[0] == []
    assert redis_client.zcard(tk.ready) == 0 and redis_client.zcard(tk.expire) == 0


def test_pull_lowered_due_reports_a_lowered_due_time_only(scripts, tk):
    send(scripts, tk, "a", T0, T0 + 100, ttl=HOUR)
    send(scripts, tk, "b", T0, T0 + 100000, ttl=HOUR)
    # Before: waiting head T0+100. After delivering "a" with a 10 ms ack timeout the
    # earliest is its ack deadline T0+110 (later): not lowered.
    assert pull(scripts, tk, T0 + 100, ack_timeout=10)[6] == -1
    # Ack deadline T0+110 earliest; delivering nothing keeps it.
    assert pull(scripts, tk, T0 + 105)[6] == -1


def test_pull_lowered_due_reports_new_ack_deadline_when_it_is_earliest(scripts, tk):
    send(scripts, tk, "a", T0, T0, ttl=HOUR)
    # Before: only the expiry index (T0 + HOUR). The ack deadline T0 + 50 lowers it.
    assert pull(scripts, tk, T0, ack_timeout=50)[6] == T0 + 50


def test_concurrent_pulls_deliver_every_id_exactly_once(scripts, tk, redis_client):
    n = 300
    for i in range(n):
        send(scripts, tk, f"m{i}", T0, T0 + i % 7)
    got: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(4)

    def consumer():
        start.wait()
        mine = []
        while True:
            ids = pulled_ids(pull(scripts, tk, T0 + 10, batch=7))
            if not ids:
                break
            mine += ids
        with lock:
            got.extend(mine)

    threads = [threading.Thread(target=consumer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == sorted(f"m{i}" for i in range(n))
    assert redis_client.zcard(tk.ack) == n and redis_client.zcard(tk.ready) == 0
    assert {field(redis_client, tk, f"m{i}", "n") for i in range(n)} == {"1"}


def test_a_batch_whose_group_head_ends_hands_out_the_released_next_before_later_ones(
        scripts, tk, redis_client):
    """pull pops its batch in one ZPOPMIN; an entry that ends there (here a group's head,
    expired) may release its group's next message, due earlier than the rest of the batch:
    the rest go back and the pop runs again, so the batch comes in the order of one pop per
    entry: the released message first."""
    send(scripts, tk, "g1", T0, T0, ttl=100, group="G")
    send(scripts, tk, "g2", T0, T0 + 1, group="G")     # blocked behind g1
    send(scripts, tk, "u1", T0, T0 + 50)
    send(scripts, tk, "u2", T0, T0 + 60)
    result = pull(scripts, tk, T0 + 200, batch=3)
    assert pulled_ids(result) == ["g2", "u1", "u2"]
    assert result[3] == 1                               # g1 ended instead of handed out
    assert_one_place(redis_client, tk, "g1", 5)
    assert redis_client.zcard(tk.ready) == 0
