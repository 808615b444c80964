"""A node whose wall clock is a minute ahead, or a minute behind, still agrees with the fleet
(Redis time).

The skewed node runs under libfaketime (Debian package ``faketime``). The test fails, never
skips, when it is missing: skipping would hide exactly the bug it exists to catch.
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
# Bounds, each 3x the worst seen over 9 runs of this module (36 sends, 18 pulls):
# how far produceTime may lie outside the client's clock around the request (in ms; the
# node reads Redis time as a lower bound, in whole ms; seen: 9.9 ms before the request);
STAMP_TOLERANCE_MS = 30
# a held long poll's answer after triggerTime (seen: 21 ms);
LAG_BOUND_MS = 65
# the skewed node's pullMsg answer after triggerTime, polled every 10 ms (seen: 25 ms).
PULL_LATE_BOUND_MS = 80


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
    with redis_server.leased_db_url() as url:
        skewed = ServerProcess(url, workers=2, wrapper=["faketime", "-f", f"{skew:+d}s"])
        normal = ServerProcess(url, workers=2)
        with skewed, normal:
            offset = node_clock_offset_s(skewed)
            assert skew - 2 <= offset <= skew + 2, \
                f"faketime did not skew the node's clock (offset {offset:.1f}s)"
            assert abs(node_clock_offset_s(normal)) <= 2
            yield skewed, normal


def send_and_long_poll(sender: ServerProcess, receiver: ServerProcess, topic: str) -> None:
    """Send with delayMillis=1000 via ``sender`` while ``receiver`` holds a long poll."""
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
    assert before - STAMP_TOLERANCE_MS <= produced <= after + STAMP_TOLERANCE_MS, \
        f"produceTime {produced - before:+.0f} ms off the send time ({after - before:.0f} ms)"
    thread.join(15)
    messages = result["answer"]["delayMsgList"]
    assert [m["msgId"] for m in messages] == [sent["msgId"]], result
    lag = result["at"] - trigger
    print(f", delivered {lag:.1f} ms after triggerTime", end="")
    assert lag >= 0, f"delivered {-lag:.0f} ms before triggerTime"
    assert lag < LAG_BOUND_MS, f"delivered {lag:.0f} ms after triggerTime"


def test_send_via_skewed_node_is_due_on_real_time_for_the_normal_node(nodes, request):
    skewed, normal = nodes
    for i in range(3):
        send_and_long_poll(skewed, normal, f"skew-to-normal-{request.node.callspec.id}-{i}")


def test_send_via_normal_node_is_on_time_on_the_skewed_node(nodes, request):
    skewed, normal = nodes
    name = request.node.callspec.id
    for i in range(3):
        send_and_long_poll(normal, skewed, f"normal-to-skew-{name}-{i}")
    # A message due in 1 s is handed out by the skewed node neither before its time (its
    # wall clock, if ahead, says it is 59 s overdue) nor long after it (if behind, 61 s early).
    topic = f"skew-pull-{name}"
    sent = normal.call("sendMsg", topic=topic, msg="x", delayMillis=1000)["delayMsg"]
    while now_ms() < sent["triggerTime"] - 50:
        answer = skewed.call("pullMsg", topic=topic)
        assert answer["delayMsgList"] == [] or now_ms() >= sent["triggerTime"], answer
        time.sleep(0.05)
    pulled = wait_until(lambda: skewed.call("pullMsg", topic=topic)["delayMsgList"], 5,
                        interval_s=0.01, message="the skewed node never handed it out")
    late = now_ms() - sent["triggerTime"]
    print(f"\n{topic}: pulled from the skewed node {late:.1f} ms after triggerTime")
    assert [m["msgId"] for m in pulled] == [sent["msgId"]]
    assert 0 <= late < PULL_LATE_BOUND_MS, late
