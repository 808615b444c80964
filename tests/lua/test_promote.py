"""The scheduler's promotion, lua/promote.lua (and lua/includes/promote.lua, which pull.lua
shares).
"""

from __future__ import annotations

import threading

from support.lua import CHANNEL, HOUR, T0, assert_one_place, drop_record, ready_score, send, slot_of


def test_promote_moves_only_due_messages_and_reports_gaps(scripts, tk, redis_client):
    send(scripts, tk, "due", T0, T0 + 100)
    send(scripts, tk, "later", T0, T0 + 200)
    moved, gaps, due = scripts.promote(tk, T0 + 150, 1000, CHANNEL)
    assert moved == 1 and gaps == [50]
    assert due == T0 + 200
    assert_one_place(redis_client, tk, "due", 2)
    assert_one_place(redis_client, tk, "later", 1)
    # FIFO by triggerTime
    assert ready_score(redis_client, tk, slot_of(redis_client, tk, "due")) == T0 + 100


def test_two_promote_calls_move_each_message_once(scripts, tk, redis_client):
    for i in range(5):
        send(scripts, tk, f"m{i}", T0, T0 + 10)
    first = scripts.promote(tk, T0 + 10, 1000, CHANNEL)
    second = scripts.promote(tk, T0 + 10, 1000, CHANNEL)
    assert (first[0], second[0]) == (5, 0)
    assert redis_client.zcard(tk.ready) == 5
    for i in range(5):
        assert_one_place(redis_client, tk, f"m{i}", 2)


def test_concurrent_promoters_move_every_id_exactly_once(scripts, tk, redis_client):
    n = 600
    for i in range(n):
        send(scripts, tk, f"m{i}", T0, T0 + 1 + i % 50)   # all waiting
    now = T0 + 100
    totals: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(4)

    def promoter():
        start.wait()
        local = 0
        for _ in range(20):
            local += scripts.promote(tk, now, 37, CHANNEL)[0]   # small limit: many rounds
        with lock:
            totals.append(local)

    threads = [threading.Thread(target=promoter) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(totals) == n          # the sum of triggerMsgReady counts
    ready = redis_client.zrange(tk.ready, 0, -1)
    assert len(ready) == len(set(ready)) == n
    assert redis_client.zcard(tk.waiting) == 0
    for i in range(0, n, 37):
        assert_one_place(redis_client, tk, f"m{i}", 2)


def test_promote_limit_bounds_one_call(scripts, tk):
    for i in range(10):
        send(scripts, tk, f"m{i}", T0, T0 + 1)
    assert scripts.promote(tk, T0 + 1, 4, CHANNEL)[0] == 4
    assert scripts.promote(tk, T0 + 1, 4, CHANNEL)[0] == 4
    assert scripts.promote(tk, T0 + 1, 4, CHANNEL)[0] == 2


def test_promote_drops_a_waiting_id_whose_hash_is_gone(scripts, tk, redis_client):
    """A waiting id without its message (the hash deleted behind the scripts' back) leaves
    waiting, and enters neither ready nor the expiry index; the live one beside it moves."""
    send(scripts, tk, "gone", T0, T0 + 10)
    send(scripts, tk, "kept", T0, T0 + 10)
    gone = drop_record(redis_client, tk, "gone")
    moved, gaps, due = scripts.promote(tk, T0 + 10, 1000, CHANNEL)
    assert (moved, gaps) == (1, [0])
    for key in (tk.waiting, tk.ready, tk.expire):
        assert redis_client.zscore(key, gone) is None, key
    assert redis_client.hexists(tk.msgs, gone) == 0
    assert_one_place(redis_client, tk, "kept", 2)
    assert due == T0 + 10 + HOUR                 # kept's expiry; nothing for "gone"
