"""The Lua scripts driven directly (no HTTP): every transition, its edge cases and races.

A ManualClock supplies now_ms, so every time comparison is exact. After each transition the
"one place per message" invariant is checked against the raw keys.
"""

from __future__ import annotations

import threading

import pytest

from delayqueue.clock import ManualClock
from delayqueue.keys import NamespaceKeys, TopicKeys
from delayqueue.monitor import Monitor
from delayqueue.outcome import Outcome
from delayqueue.queue import DelayQueue
from delayqueue.config import load_settings
from delayqueue.scripts import Scripts
from delayqueue.topic_config import server_defaults

NS = NamespaceKeys("dq", "default")
CHANNEL = NS.hint_channel
END_LIFE = 60_000
HOUR = 3_600_000
T0 = 1_700_000_000_000

ZSET_OF_STATUS = {1: "waiting", 2: "ready", 3: "ack"}


@pytest.fixture
def scripts(redis_client):
    return Scripts(redis_client)


@pytest.fixture
def tk():
    return NS.topic("topic-a")


@pytest.fixture
def clock():
    return ManualClock(T0)


def status_of(client, tk: TopicKeys, msg_id: str) -> int | None:
    value = client.hget(tk.msg(msg_id), "s")
    return None if value is None else int(value)


def assert_one_place(client, tk: TopicKeys, msg_id: str, expected_status: int | None) -> None:
    """The id is in exactly the zset its status names, and in the expiry index iff it is
    ready or consuming (a waiting message enters the index when promoted)."""
    status = status_of(client, tk, msg_id)
    assert status == expected_status
    places = {name for name in ("waiting", "ready", "ack", "dead")
              if client.zscore(getattr(tk, name), msg_id) is not None}
    in_expire = client.zscore(tk.expire, msg_id) is not None
    if status in ZSET_OF_STATUS:
        assert places == {ZSET_OF_STATUS[status]}
        assert in_expire == (status != 1)   # waiting messages are not in the index
    elif status == 6 and places:            # a dead letter: its own place, its own retention
        assert places == {"dead"} and not in_expire
        assert 0 < client.pttl(tk.msg(msg_id)) <= DEAD_RETENTION
        return
    else:
        assert places == set()
        assert not in_expire
    if status is not None and status >= 4:
        ttl = client.pttl(tk.msg(msg_id))
        assert 0 < ttl <= END_LIFE


DEFAULTS = server_defaults(load_settings(env={}))
DEAD_RETENTION = load_settings(env={}).dead_letter_retention_millis


def send(scripts, tk, msg_id, now, trigger, ttl=HOUR, max_retry=10, body="body"):
    return scripts.send(tk, msg_id, body, now, trigger, ttl, max_retry, "", CHANNEL, DEFAULTS)


def pull(scripts, tk, now, batch=1, ack_timeout=30_000):
    return scripts.pull(tk, now, batch, ack_timeout, END_LIFE, 1000, CHANNEL, DEFAULTS)


def pulled_ids(result) -> list[str]:
    return [m[0] for m in result[0]]


# -- send ------------------------------------------------------------------------------
def test_send_of_future_message_waits_and_reports_its_trigger_as_lowered_due(scripts, tk,
                                                                           redis_client):
    outcome, fields, lowered_due = send(scripts, tk, "a", T0, T0 + 5000)
    assert outcome == Outcome.OK
    assert fields == ["body", str(T0), str(T0 + 5000), str(T0 + 5000 + HOUR), "10", "0", "1",
                      None, None]
    assert lowered_due == T0 + 5000
    assert_one_place(redis_client, tk, "a", 1)
    assert redis_client.zscore(tk.expire, "a") is None      # enters the index when promoted
    scripts.promote(tk, T0 + 5000, 1000, CHANNEL)
    assert redis_client.zscore(tk.expire, "a") == T0 + 5000 + HOUR


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


def test_send_replaces_an_ended_message(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0)
    pull(scripts, tk, T0)
    assert scripts.ack(tk, "a", END_LIFE)[0] == Outcome.OK
    outcome, fields, _ = send(scripts, tk, "a", T0 + 10, T0 + 10, body="again")
    assert outcome == Outcome.OK and fields[0] == "again" and fields[5] == "0" and fields[6] == "2"
    assert redis_client.pttl(tk.msg("a")) == -1   # a live message carries no TTL
    assert_one_place(redis_client, tk, "a", 2)


# -- promote ---------------------------------------------------------------------------
def test_promote_moves_only_due_messages_and_reports_gaps(scripts, tk, redis_client):
    send(scripts, tk, "due", T0, T0 + 100)
    send(scripts, tk, "later", T0, T0 + 200)
    moved, gaps, due = scripts.promote(tk, T0 + 150, 1000, CHANNEL)
    assert moved == 1 and gaps == [50]
    assert due == T0 + 200
    assert_one_place(redis_client, tk, "due", 2)
    assert_one_place(redis_client, tk, "later", 1)
    assert redis_client.zscore(tk.ready, "due") == T0 + 100   # FIFO by triggerTime


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


# -- pull ------------------------------------------------------------------------------
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
    assert redis_client.zscore(tk.ack, "a") == T0 + 1000 + 5000
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
    redis_client.zadd(tk.ready, {"never": T0 + 1})       # make "once" first in line
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
    redis_client.zrem(tk.ack, "a")
    redis_client.zadd(tk.ready, {"a": T0})
    redis_client.hset(tk.msg("a"), "s", 2)
    result = pull(scripts, tk, T0 + 20)
    assert result[0] == [] and result[3] == 1
    assert_one_place(redis_client, tk, "a", 6)


def test_pull_drops_ids_whose_hash_is_gone(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0)
    redis_client.delete(tk.msg("a"))
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


# -- ack -------------------------------------------------------------------------------
def test_ack_of_consuming_message_ends_it_acked(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0)
    pull(scripts, tk, T0)
    outcome, fields = scripts.ack(tk, "a", END_LIFE)
    assert outcome == 1 and fields[6] == "4"
    assert_one_place(redis_client, tk, "a", 4)
    assert scripts.ack(tk, "a", END_LIFE)[0] == Outcome.ALREADY_ACKED       # idempotent
    assert_one_place(redis_client, tk, "a", 4)


def test_ack_of_missing_id_creates_nothing(scripts, tk, redis_client):
    assert scripts.ack(tk, "ghost", END_LIFE) == [Outcome.NO_MESSAGE, []]
    assert redis_client.exists(tk.msg("ghost")) == 0
    assert redis_client.keys("*ghost*") == []


def test_ack_of_waiting_or_never_delivered_ready_message_is_refused(scripts, tk,
                                                                  redis_client):
    send(scripts, tk, "w", T0, T0 + 100)
    send(scripts, tk, "r", T0, T0)
    assert scripts.ack(tk, "w", END_LIFE)[0] == Outcome.NOT_DELIVERED
    assert scripts.ack(tk, "r", END_LIFE)[0] == Outcome.NOT_DELIVERED
    assert_one_place(redis_client, tk, "w", 1)
    assert_one_place(redis_client, tk, "r", 2)


def test_late_ack_after_timeout_ends_it_acked_and_stops_redelivery(scripts, tk,
                                                                   redis_client):
    send(scripts, tk, "a", T0, T0)
    pull(scripts, tk, T0, ack_timeout=10)
    assert scripts.timeout(tk, T0 + 10, 1000, END_LIFE, CHANNEL, DEFAULTS)[0] == 1
    assert_one_place(redis_client, tk, "a", 2)
    assert scripts.ack(tk, "a", END_LIFE)[0] == Outcome.ACKED_LATE
    assert_one_place(redis_client, tk, "a", 4)
    assert pull(scripts, tk, T0 + 20)[0] == []


def test_ack_of_otherwise_ended_message_is_not_found(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0)
    scripts.delete(tk, "a", END_LIFE, False)
    assert scripts.ack(tk, "a", END_LIFE)[0] == Outcome.NO_MESSAGE
    assert_one_place(redis_client, tk, "a", 7)


# -- nack ------------------------------------------------------------------------------
def test_nack_returns_consuming_message_to_the_tail_of_ready_keeping_its_trigger_time(
        scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0 + 5)
    pull(scripts, tk, T0 + 5)
    send(scripts, tk, "older", T0, T0 + 10)              # ready before the nack
    outcome, fields, _, _ = scripts.nack(tk, "a", T0 + 20, END_LIFE, CHANNEL, DEFAULTS)
    assert outcome == Outcome.OK and fields[6] == "2" and fields[5] == "1"
    assert fields[2] == str(T0 + 5)                       # triggerTime unchanged
    assert redis_client.zscore(tk.ready, "a") == T0 + 20  # queued behind, as of the nack
    assert_one_place(redis_client, tk, "a", 2)
    assert pulled_ids(pull(scripts, tk, T0 + 21, batch=2)) == ["older", "a"]


def test_double_nack_answers_not_consuming_and_queues_the_id_once(scripts, tk,
                                                                  redis_client):
    send(scripts, tk, "a", T0, T0)
    pull(scripts, tk, T0)
    assert scripts.nack(tk, "a", T0, END_LIFE, CHANNEL, DEFAULTS)[:1] == [Outcome.OK]
    assert scripts.nack(tk, "a", T0, END_LIFE, CHANNEL, DEFAULTS)[0] == Outcome.NOT_CONSUMING
    assert redis_client.zrange(tk.ready, 0, -1) == ["a"]
    assert_one_place(redis_client, tk, "a", 2)


def test_nack_of_last_delivery_ends_it_retry_exhausted(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0, max_retry=0)
    pull(scripts, tk, T0)
    assert scripts.nack(tk, "a", T0, END_LIFE, CHANNEL, DEFAULTS)[1][6] == "6"
    assert_one_place(redis_client, tk, "a", 6)


def test_nack_past_expire_time_ends_it_retry_exhausted(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0, ttl=100)
    pull(scripts, tk, T0)
    assert scripts.nack(tk, "a", T0 + 100, END_LIFE, CHANNEL, DEFAULTS)[1][6] == "6"
    assert_one_place(redis_client, tk, "a", 6)


def test_nack_of_missing_or_waiting_message_changes_nothing(scripts, tk, redis_client):
    send(scripts, tk, "w", T0, T0 + 100)
    assert scripts.nack(tk, "ghost", T0, END_LIFE, CHANNEL, DEFAULTS)[:2] == [Outcome.NO_MESSAGE, []]
    assert redis_client.exists(tk.msg("ghost")) == 0
    assert scripts.nack(tk, "w", T0, END_LIFE, CHANNEL, DEFAULTS)[0] == Outcome.NOT_CONSUMING
    assert_one_place(redis_client, tk, "w", 1)


# -- timeout ---------------------------------------------------------------------------
def test_timeout_requeues_at_the_tail_of_ready_keeping_its_trigger_time(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0 + 7)
    pull(scripts, tk, T0 + 7, ack_timeout=100)
    assert scripts.timeout(tk, T0 + 106, 1000, END_LIFE, CHANNEL, DEFAULTS)[:2] == [0, 0]
    assert_one_place(redis_client, tk, "a", 3)
    requeued, ended, _, _ = scripts.timeout(tk, T0 + 107, 1000, END_LIFE, CHANNEL, DEFAULTS)
    assert (requeued, ended) == (1, 0)
    assert redis_client.zscore(tk.ready, "a") == T0 + 107    # the tail, as of the timeout
    assert redis_client.hget(tk.msg("a"), "t") == str(T0 + 7)   # triggerTime unchanged
    assert_one_place(redis_client, tk, "a", 2)
    again = pull(scripts, tk, T0 + 200)
    assert pulled_ids(again) == ["a"] and again[0][0][6] == "2"


def test_timeout_ends_message_when_deliveries_are_used_up(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0, max_retry=1)
    pull(scripts, tk, T0, ack_timeout=10)
    assert scripts.timeout(tk, T0 + 10, 1000, END_LIFE, CHANNEL, DEFAULTS)[:2] == [1, 0]
    pull(scripts, tk, T0 + 10, ack_timeout=10)
    assert scripts.timeout(tk, T0 + 20, 1000, END_LIFE, CHANNEL, DEFAULTS)[:2] == [0, 1]
    assert_one_place(redis_client, tk, "a", 6)
    assert redis_client.hget(tk.msg("a"), "n") == "2"


def test_timeout_ends_message_past_its_expire_time(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0, ttl=50)
    pull(scripts, tk, T0, ack_timeout=60)
    assert scripts.timeout(tk, T0 + 60, 1000, END_LIFE, CHANNEL, DEFAULTS)[:2] == [0, 1]
    assert_one_place(redis_client, tk, "a", 6)


# -- expire ----------------------------------------------------------------------------
def test_expire_ends_waiting_and_ready_messages(scripts, tk, redis_client):
    send(scripts, tk, "waiting", T0, T0 + 1000, ttl=10)     # expires before it is due
    send(scripts, tk, "ready", T0, T0, ttl=1010)
    send(scripts, tk, "redelivered", T0, T0, ttl=1010)
    send(scripts, tk, "alive", T0, T0, ttl=5000)
    redis_client.zadd(tk.ready, {"ready": T0 + 1, "alive": T0 + 1})   # "redelivered" first
    assert pulled_ids(pull(scripts, tk, T0, ack_timeout=5)) == ["redelivered"]
    scripts.timeout(tk, T0 + 5, 1000, END_LIFE, CHANNEL, DEFAULTS)
    # The scheduler's round: promote (puts "waiting" in the expiry index), then expire.
    scripts.promote(tk, T0 + 1010, 1000, CHANNEL)
    expired, exhausted, scanned, due, _ = scripts.expire(tk, T0 + 1010, 1000, END_LIFE, DEFAULTS)
    assert (expired, exhausted, scanned) == (2, 1, 3)
    assert_one_place(redis_client, tk, "waiting", 5)
    assert_one_place(redis_client, tk, "ready", 5)
    assert_one_place(redis_client, tk, "redelivered", 6)
    assert_one_place(redis_client, tk, "alive", 2)
    assert due == T0 + 5000


def test_expire_of_consuming_message_only_leaves_the_index(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0, ttl=100)
    pull(scripts, tk, T0, ack_timeout=1000)
    assert scripts.expire(tk, T0 + 100, 1000, END_LIFE, DEFAULTS)[:3] == [0, 0, 1]
    assert status_of(redis_client, tk, "a") == 3
    assert redis_client.zscore(tk.ack, "a") is not None
    assert redis_client.zscore(tk.expire, "a") is None
    # Its consumer may still ack it ...
    assert scripts.ack(tk, "a", END_LIFE)[0] == Outcome.OK
    assert_one_place(redis_client, tk, "a", 4)


def test_expired_consuming_message_times_out_to_retry_exhausted(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0, ttl=100)
    pull(scripts, tk, T0, ack_timeout=1000)
    scripts.expire(tk, T0 + 100, 1000, END_LIFE, DEFAULTS)
    assert scripts.timeout(tk, T0 + 1000, 1000, END_LIFE, CHANNEL, DEFAULTS)[:2] == [0, 1]
    assert_one_place(redis_client, tk, "a", 6)


# -- delete ----------------------------------------------------------------------------
@pytest.mark.parametrize("state", [1, 2, 3])
def test_delete_of_live_message_ends_it_deleted_from_every_state(scripts, tk, redis_client,
                                                                  state):
    send(scripts, tk, "a", T0, T0 if state > 1 else T0 + 100)
    if state == 3:
        pull(scripts, tk, T0)
    assert_one_place(redis_client, tk, "a", state)
    outcome, fields = scripts.delete(tk, "a", END_LIFE, False)
    assert outcome == 1 and fields[6] == "7"
    assert_one_place(redis_client, tk, "a", 7)
    assert scripts.ack(tk, "a", END_LIFE)[0] == Outcome.NO_MESSAGE
    assert pull(scripts, tk, T0 + 1000)[0] == []


def test_delete_with_release_removes_the_body(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0)
    assert scripts.delete(tk, "a", END_LIFE, True)[0] == Outcome.OK
    assert_one_place(redis_client, tk, "a", None)
    assert redis_client.exists(tk.msg("a")) == 0


def test_delete_of_ended_message_is_not_found_but_release_drops_its_body(scripts, tk,
                                                                         redis_client):
    send(scripts, tk, "a", T0, T0)
    pull(scripts, tk, T0)
    scripts.ack(tk, "a", END_LIFE)
    assert scripts.delete(tk, "a", END_LIFE, False) == [Outcome.NO_MESSAGE, []]
    assert_one_place(redis_client, tk, "a", 4)
    assert scripts.delete(tk, "a", END_LIFE, True) == [Outcome.NO_MESSAGE, []]
    assert redis_client.exists(tk.msg("a")) == 0
    assert scripts.delete(tk, "ghost", END_LIFE, False) == [Outcome.NO_MESSAGE, []]


# -- namespace bookkeeping -------------------------------------------------------------
def test_due_set_replaces_the_score_the_tick_read(scripts, redis_client):
    redis_client.zadd(NS.due, {"t": 100})
    assert scripts.due_set(NS, "t", 100, 500) == 1
    assert redis_client.zscore(NS.due, "t") == 500
    assert scripts.due_set(NS, "t", 500, -1) == Outcome.OK
    assert redis_client.zscore(NS.due, "t") is None


def test_due_set_keeps_a_lower_score_written_meanwhile(scripts, redis_client):
    redis_client.zadd(NS.due, {"t": 50})      # a send lowered it after the tick read 100
    assert scripts.due_set(NS, "t", 100, 500) == 0
    assert redis_client.zscore(NS.due, "t") == 50
    assert scripts.due_set(NS, "t", 100, -1) == Outcome.KEPT          # nothing live: still kept
    assert redis_client.zscore(NS.due, "t") == 50
    assert scripts.due_set(NS, "t", 100, 20) == 0           # an even earlier answer wins
    assert redis_client.zscore(NS.due, "t") == 20


def test_due_set_of_missing_topic_writes_the_answer(scripts, redis_client):
    assert scripts.due_set(NS, "t", 100, 700) == 1
    assert redis_client.zscore(NS.due, "t") == 700


def test_recycle_forgets_topic_only_if_unused_since_read(scripts, redis_client):
    redis_client.zadd(NS.topics, {"t": 100, "u": 100})
    redis_client.zadd(NS.due, {"t": 1000, "u": 1000})
    redis_client.zadd(NS.topics, {"u": 200})                # used meanwhile
    assert scripts.recycle(NS, "u", 100) == 0
    assert redis_client.zscore(NS.topics, "u") == 200
    assert redis_client.zscore(NS.due, "u") == 1000
    assert scripts.recycle(NS, "t", 100) == 1
    assert redis_client.zscore(NS.topics, "t") is None
    assert redis_client.zscore(NS.due, "t") is None
    assert scripts.recycle(NS, "gone", 100) == 0


# -- topic info (service level, exact clock) --------------------------------------------
def test_topic_info_buckets_are_half_open_at_their_edges(redis_client, scripts, clock):
    monitor = Monitor(redis_client, NS, clock, 60, scripts)
    queue = DelayQueue(redis_client, scripts, clock, monitor, load_settings(env={}))
    minute = 60_000
    edges = {"a": minute - 1, "b": minute, "c": 10 * minute - 1, "d": 10 * minute,
             "e": 30 * 24 * 60 * minute, "f": 30 * 24 * 60 * minute - 1, "g": 1}
    for msg_id, delay in edges.items():
        queue.send("edges", "x", msg_id=msg_id, delay_ms=delay)
    info = queue.topic_info("edges")["waitingQueueInfo"]
    assert info["sizeOf0To1min"] == 2              # g, a
    assert info["sizeOf1minTo10min"] == 2          # b, c
    assert info["sizeOf10minTo30min"] == 1         # d
    assert info["sizeOf7dayTo30day"] == 1          # f
    assert info["sizeOf30dayToInfinite"] == 1      # e
    assert sum(info.values()) == len(edges)
    clock.advance(2)                               # g is overdue now: still first bucket
    assert queue.topic_info("edges")["waitingQueueInfo"]["sizeOf0To1min"] == 3


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
    assert {redis_client.hget(tk.msg(f"m{i}"), "n") for i in range(n)} == {"1"}


@pytest.mark.parametrize("ending", ["acked", "expired", "exhausted", "deleted"])
def test_send_replaces_a_message_in_every_ended_status(scripts, tk, redis_client, ending):
    send(scripts, tk, "a", T0, T0, ttl=100, max_retry=0)
    if ending == "acked":
        pull(scripts, tk, T0)
        scripts.ack(tk, "a", END_LIFE)
    elif ending == "expired":
        scripts.expire(tk, T0 + 100, 1000, END_LIFE, DEFAULTS)
    elif ending == "exhausted":
        pull(scripts, tk, T0)
        scripts.nack(tk, "a", T0, END_LIFE, CHANNEL, DEFAULTS)
    else:
        scripts.delete(tk, "a", END_LIFE, False)
    expected = {"acked": 4, "expired": 5, "exhausted": 6, "deleted": 7}[ending]
    assert_one_place(redis_client, tk, "a", expected)
    outcome, fields, _ = send(scripts, tk, "a", T0 + 200, T0 + 300, body="new")
    assert outcome == Outcome.OK and fields[0] == "new" and fields[6] == "1"
    assert_one_place(redis_client, tk, "a", 1)
    assert redis_client.pttl(tk.msg("a")) == -1
