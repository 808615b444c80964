"""Each nemesis, briefly, under load on two nodes and a Redis with AOF: nothing acked is lost,
nothing is early, nothing comes back after a 200 ack, no HTTP 5xx, no hangs, a message group
never has two deliveries outstanding nor delivers out of order, a recurring schedule delivers
every fire time once and none off its grid, a paused topic hands nothing out, each of two named
subscriptions gets every acked send and holds all of the above on its own, nothing is left
in a queue or a group structure once drained, and the fleet serves again after the fault.
Beside it, a push subscription to a receiver flapping between 200, 500, slow and down
(faults/push.py): every acked send answered 2xx or a dead letter after exactly maxRetry + 1
deliveries, never pushed more often, early, unsigned, nor again after a 2xx without a fault
between. The long campaign is ``make chaos`` (tests/faults/chaos.py)."""

from __future__ import annotations

import pytest

from faults.campaign import run
from faults.nemesis import (
    ClientPause,
    LeaseHolderStop,
    NodeKill,
    OverMaxmemory,
    PubsubKill,
    RedisKill,
    ScriptFlush,
    TopicPause,
)
from faults.workload import SUBSCRIPTIONS
from faults.world import World

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    with World(tmp_path_factory.mktemp("faults")) as w:
        yield w


def assert_clean(result) -> None:
    v = result.verdict
    print(f"{result.nemesis}: {result.notes[:2]} {v.summary()}")
    assert result.cycles > 0
    assert not v.violations, v.summary()
    assert result.drained, f"not drained: left {result.left}, {v.summary()}"
    assert v.sends.get("ok", 0) > 0 and v.delivered > 0 and v.grouped > 0, v.summary()
    assert v.occurrences > 0, f"no occurrence of the run's schedule delivered: {v.summary()}"
    assert sorted(v.subscriptions) == sorted(SUBSCRIPTIONS), v.summary()
    assert all(sv.delivered > 0 for sv in v.subscriptions.values()), v.summary()
    assert result.sent_after_last_fault > 0, f"no send succeeded after the heal: {v.summary()}"
    p = result.push
    print(p.summary())
    assert not p.violations, p.summary()
    assert p.sends.get("ok", 0) > 0 and p.answered_2xx > 0, p.summary()
    # The receiver failed pushes: answered 500 or slow, or was down long enough to make a
    # dead letter (a POST to a closed port never reaches it, so it is not in posts).
    assert p.posts.get("error", 0) + p.posts.get("slow", 0) + p.dead > 0, \
        f"the receiver never failed a push: {p.summary()}"


@pytest.mark.parametrize("nemesis, cycles, period_s", [
    (NodeKill, 2, 1.5),
    (RedisKill, 2, 1.5),
    (ScriptFlush, 6, 0.5),
    (PubsubKill, 4, 0.75),
    (LeaseHolderStop, 1, 1.0),
    (ClientPause, 2, 1.0),
])
def test_nemesis_loses_nothing_and_nothing_comes_early_or_after_its_ack(
        world, nemesis, cycles, period_s):
    fault = nemesis(world)
    assert_clean(run(world, fault, cycles=cycles, period_s=period_s))
    if isinstance(fault, LeaseHolderStop):
        assert fault.takeovers == fault.cycles, "another worker never took the lease over"


def test_a_paused_topic_hands_nothing_out_and_delivers_what_it_held_after_the_resume(world):
    result = run(world, TopicPause(world), cycles=2, period_s=4.0, topics=4)
    assert_clean(result)    # "delivered while paused" is among the violations; nothing lost
    v = result.verdict
    assert v.pauses == 2 * 4, f"not every topic's pause answered 200: {result.notes}"
    assert v.pulls_in_pause > 0, f"no pull was sent while a topic was paused: {v.summary()}"


def test_over_maxmemory_refuses_sends_and_loses_nothing_acked(world):
    result = run(world, OverMaxmemory(world), cycles=1, period_s=1.5)
    assert_clean(result)
    assert result.verdict.sends.get("fail", 0) > 0, result.verdict.summary()
