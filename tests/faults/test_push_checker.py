"""The push scenario's verdicts (faults/push.py ``push_verdict``) on sends and POSTs written by
hand: each violation it must find, and each history it must not blame (a dead letter after
exactly maxRetry + 1 deliveries, a redelivery after a 2xx whose ack a fault may have lost,
an unknown send delivered)."""

from __future__ import annotations

from faults.history import FAIL, OK, UNKNOWN, Op
from faults.push import ACKED, DEAD, PUSH_MAX_RETRY, Post, push_verdict

TOPIC = "p"


def sent(msg_id, trigger, outcome=OK, start=0) -> Op:
    return Op("send", TOPIC, msg_id, start, start + 5, outcome, 200, "", None,
              trigger if outcome == OK else None)


def post(msg_id, received, mode="ok", retry=1, trigger=0, signed=True, took=3) -> Post:
    """A POST received at ``received``, signed 1 ms before, answered ``took`` ms later."""
    return Post(msg_id, retry, trigger, received, received + took, mode, signed, received - 1)


def verdict(sends, posts, faults=(), dead=None):
    dead = dead or {}
    return push_verdict(list(sends), list(posts), list(faults),
                        lambda msg_id: dead.get(msg_id, (3, 1)))


def test_a_clean_history_has_no_violation():
    v = verdict([sent("a", 10), sent("b", 20), sent("c", 0, UNKNOWN)],
                [post("a", 10, "error"), post("a", 300, "ok", 2), post("b", 25),
                 post("c", 40)])
    assert v.violations == {} and v.answered_2xx == 2, v.summary()


def test_an_acked_send_never_answered_2xx_is_missing_unless_a_full_dead_letter():
    failing = [post("a", 10 + i, "error", i + 1) for i in range(PUSH_MAX_RETRY + 1)]
    v = verdict([sent("a", 10), sent("b", 10), sent("c", 10)], failing,
                dead={"a": (DEAD, PUSH_MAX_RETRY + 1), "b": (DEAD, PUSH_MAX_RETRY)})
    assert v.dead == 1
    assert [m[0] for m in v.missing] == ["b", "c"], v.summary()


def test_more_than_max_retry_plus_one_posts_is_too_many():
    posts = [post("a", 10 + i, "error", i + 1) for i in range(PUSH_MAX_RETRY + 2)]
    v = verdict([sent("a", 10)], posts, dead={"a": (DEAD, PUSH_MAX_RETRY + 1)})
    assert v.too_many == [("a", PUSH_MAX_RETRY + 2)]


def test_early_unexpected_and_unsigned_posts():
    v = verdict([sent("a", 100), sent("r", 0, FAIL)],
                [post("a", 99), post("a", 150, "ok", 2, signed=False), post("r", 10),
                 post("x", 10)])
    assert v.early == [("a", 99, 100)]
    assert sorted(v.unexpected) == ["r", "x"]
    assert v.bad_signature == ["a"]


def test_again_after_a_2xx_is_a_violation_without_a_fault_between_and_counted_with_one():
    posts = [post("a", 10), post("a", 2_500, "ok", 2)]
    v = verdict([sent("a", 0)], posts)
    assert v.again_after_2xx == [("a", 13, 2_500)] and not v.again_after_2xx_in_fault
    v = verdict([sent("a", 0)], posts, faults=[(100, 1_600, "kill -9 of a node")])
    assert not v.again_after_2xx and v.again_after_2xx_in_fault == [("a", 13, 2_500)]
    # a fault long over before the 2xx answer explains nothing
    v = verdict([sent("a", 0)], [post("a", 5_000), post("a", 8_000, "ok", 2)],
                faults=[(100, 1_600, "kill -9 of a node")])
    assert v.again_after_2xx == [("a", 5_003, 8_000)]


def test_a_slow_answer_is_no_2xx_for_again_after_and_answers_only_a_message_acked():
    """The receiver answered 200 after the push timeout: mostly the push timed out and was
    nacked, so a later POST is no duplicate; a stalled pusher may still have read it, so a
    message acked (and only one acked) whose only 200s were slow is not missing."""
    slow = [post("a", 10, "slow"), post("a", 2_000, "slow", 2)]
    v = verdict([sent("a", 0)], slow)
    assert not v.again_after_2xx and [m[0] for m in v.missing] == ["a"]
    v = verdict([sent("a", 0)], slow, dead={"a": (ACKED, 2)})
    assert v.violations == {} and v.answered_late == 1, v.summary()
    v = verdict([sent("a", 0)], [post("a", 10, "error")], dead={"a": (ACKED, 1)})
    assert [m[0] for m in v.missing] == ["a"], "acked without any 200: missing"


def test_again_after_a_late_200_is_counted_apart():
    """A 200 answered long after the POST was signed (the receiver's thread starved) may have
    come after its pusher timed out and nacked: the next POST is no violation."""
    v = verdict([sent("a", 0)], [post("a", 10, took=600), post("a", 900, "ok", 2)])
    assert not v.again_after_2xx and v.again_after_late_2xx == [("a", 610, 900)]
