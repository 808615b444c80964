"""A node whose wall clock is a minute ahead, or a minute behind, still agrees with the fleet
(Redis time).

The skewed node runs under libfaketime (Debian package ``faketime``). The test fails, never
skips, when it is missing: skipping would hide exactly the bug it exists to catch.

A node that read its wall clock would be off by the skew: a message handed out a minute
early (caught exactly: nothing before its triggerTime) or a minute late (caught by the held
poll's timeout, or the pull's wait). How late a delivery comes on a busy machine is not the
skew's doing, so lateness is bounded against a control measured in the same run: the same
delivery between normal nodes only.
"""

from __future__ import annotations

import email.utils
import shutil
import time

import pytest
import requests

from support import wait_until
from support.fleet import hold_long_poll, now_ms, wait_until_held
from support.node import ServerProcess

pytestmark = pytest.mark.timeout(90)

SKEW_S = 60
# Held polls re-check only every 10 s here (1 s by default): a waiter that slept toward the
# skewed clock would be woken by that re-check after its 5 s poll had answered empty, never
# within a margin below.
SAFETY_MS = 10_000
# How much later than the control a delivery may come: a stall of a busy 2-core machine
# (seen: 135 ms late at load 5-9, against a bound of 65 ms then), never the 60 000 ms of
# the skew nor the 10 s re-check. produceTime may lie this far outside the request too (the
# node's clock is a lower bound of Redis time, late by a round trip; seen: 9.9 ms).
MARGIN_MS = 1000


def node_clock_offset_s(node: ServerProcess) -> float:
    """The node's wall clock minus ours, read from its HTTP Date header (1 s resolution)."""
    before = time.time()
    response = requests.get(node.url + "/camellia/health/check", timeout=5)
    after = time.time()
    stamp = email.utils.parsedate_to_datetime(response.headers["Date"]).timestamp()
    return stamp - (before + after) / 2


@pytest.fixture(scope="module", params=[SKEW_S, -SKEW_S], ids=["ahead", "behind"])
def nodes(request, redis_server):
    """(skewed, normal): two nodes on one Redis database, one of them with a skewed clock."""
    if shutil.which("faketime") is None:
        pytest.fail("faketime is not installed: install Debian's faketime package "
                    "(apt-get install -y faketime) to run the clock-skew test")
    skew = request.param
    settings = {"long-polling-safety-millis": SAFETY_MS}
    with redis_server.leased_db_url() as url:
        skewed = ServerProcess(url, workers=2, settings=settings,
                               wrapper=["faketime", "-f", f"{skew:+d}s"])
        normal = ServerProcess(url, workers=2, settings=settings)
        with skewed, normal:
            offset = node_clock_offset_s(skewed)
            assert skew - 2 <= offset <= skew + 2, \
                f"faketime did not skew the node's clock (offset {offset:.1f}s)"
            assert abs(node_clock_offset_s(normal)) <= 2
            yield skewed, normal


def send_and_long_poll(sender: ServerProcess, receiver: ServerProcess, topic: str) -> float:
    """Send with delayMillis=1000 via ``sender`` while ``receiver`` holds a long poll; returns
    how long after triggerTime the poll was answered (ms), never before it."""
    thread, result = hold_long_poll(receiver, topic)
    wait_until_held(receiver.redis_url, topic, thread, result)
    before = now_ms()
    sent = sender.call("sendMsg", topic=topic, msg="x", delayMillis=1000)["delayMsg"]
    after = now_ms()
    trigger, produced = sent["triggerTime"], sent["produceTime"]
    print(f"\n{topic}: produceTime - request start {produced - before:+.1f} ms, "
          f"- request end {produced - after:+.1f} ms", end="")
    # Real now + 1000: stamped during the request, on the Redis clock (= ours, same machine).
    assert trigger == produced + 1000, sent
    assert before - MARGIN_MS <= produced <= after + MARGIN_MS, \
        f"produceTime {produced - before:+.0f} ms off the send time ({after - before:.0f} ms)"
    thread.join(15)
    messages = result["answer"]["delayMsgList"]
    assert [m["msgId"] for m in messages] == [sent["msgId"]], result
    lag = result["at"] - trigger
    print(f", delivered {lag:.1f} ms after triggerTime", end="")
    assert lag >= 0, f"delivered {-lag:.0f} ms before triggerTime"
    return lag


def long_polls_against_control(sender: ServerProcess, receiver: ServerProcess,
                               normal: ServerProcess, topic: str) -> None:
    """Three deliveries sender -> receiver, each after one normal -> normal (the control):
    none later than the control's latest plus MARGIN_MS."""
    lags: dict[str, list[float]] = {"measured": [], "control": []}
    for i in range(3):
        lags["control"].append(send_and_long_poll(normal, normal, f"{topic}-control-{i}"))
        lags["measured"].append(send_and_long_poll(sender, receiver, f"{topic}-{i}"))
    assert max(lags["measured"]) <= max(lags["control"]) + MARGIN_MS, lags


def test_send_via_skewed_node_is_due_on_real_time_for_the_normal_node(nodes, request):
    skewed, normal = nodes
    long_polls_against_control(skewed, normal, normal,
                               f"skew-to-normal-{request.node.callspec.id}")


def pull_when_due(sender: ServerProcess, puller: ServerProcess, topic: str) -> float:
    """Send a message due in 1 s via ``sender`` and pull it from ``puller`` every 10 ms;
    returns how long after triggerTime it was handed out (ms), never before it."""
    sent = sender.call("sendMsg", topic=topic, msg="x", delayMillis=1000)["delayMsg"]

    def handed_out() -> tuple[list, float] | None:
        messages = puller.call("pullMsg", topic=topic)["delayMsgList"]
        return (messages, now_ms()) if messages else None

    # One loop from the send on: a pull that a stall delays past the due time takes the
    # message, and is the one measured.
    pulled, received = wait_until(handed_out, (sent["triggerTime"] + 5000 - now_ms()) / 1000,
                                  interval_s=0.01, message=f"{topic}: never handed out")
    late = received - sent["triggerTime"]
    print(f"\n{topic}: pulled {late:.1f} ms after triggerTime", end="")
    assert [m["msgId"] for m in pulled] == [sent["msgId"]]
    assert late >= 0, f"handed out {-late:.0f} ms before triggerTime"
    return late


def test_send_via_normal_node_is_on_time_on_the_skewed_node(nodes, request):
    skewed, normal = nodes
    name = request.node.callspec.id
    long_polls_against_control(normal, skewed, normal, f"normal-to-skew-{name}")
    # A message due in 1 s is handed out by the skewed node neither before its time (its
    # wall clock, if ahead, says it is 59 s overdue) nor long after it (if behind, 61 s early).
    control = pull_when_due(normal, normal, f"skew-pull-{name}-control")
    late = pull_when_due(normal, skewed, f"skew-pull-{name}")
    assert late <= control + MARGIN_MS, (late, control)
