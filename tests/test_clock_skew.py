"""A node whose wall clock is a minute ahead still agrees with the fleet (Redis time).

The skewed node runs under libfaketime (Debian package ``faketime``). The test fails, never
skips, when it is missing: skipping would hide exactly the bug it exists to catch.
"""

from __future__ import annotations

import email.utils
import shutil
import time

import pytest
import requests

from fleet_support import hold_long_poll, now_ms
from server_process import ServerProcess

pytestmark = pytest.mark.timeout(90)

SKEW_S = 60


def node_clock_offset_s(node: ServerProcess) -> float:
    """The node's wall clock minus ours, read from its HTTP Date header (1 s resolution)."""
    before = time.time()
    response = requests.get(node.url + "/camellia/health/check", timeout=5)
    after = time.time()
    stamp = email.utils.parsedate_to_datetime(response.headers["Date"]).timestamp()
    return stamp - (before + after) / 2


@pytest.fixture
def nodes(redis_url):
    if shutil.which("faketime") is None:
        pytest.fail("faketime is not installed: install Debian's faketime package "
                    "(apt-get install -y faketime) to run the clock-skew test")
    skewed = ServerProcess(redis_url, workers=2, wrapper=["faketime", "-f", f"+{SKEW_S}s"])
    normal = ServerProcess(redis_url, workers=2)
    with skewed, normal:
        offset = node_clock_offset_s(skewed)
        assert SKEW_S - 2 <= offset <= SKEW_S + 2, \
            f"faketime did not skew the node's clock (offset {offset:.1f}s)"
        assert abs(node_clock_offset_s(normal)) <= 2
        yield skewed, normal


def send_and_long_poll(sender: ServerProcess, receiver: ServerProcess, topic: str) -> None:
    """Send with delayMillis=1000 via ``sender`` while ``receiver`` holds a long poll."""
    thread, result = hold_long_poll(receiver, topic)
    time.sleep(0.3)
    before = now_ms()
    sent = sender.call("sendMsg", topic=topic, msg="x", delayMillis=1000)["delayMsg"]
    after = now_ms()
    trigger = sent["triggerTime"]
    # Real now + 1000 (the node reads Redis time, a lower bound, so allow a little below).
    assert before + 1000 - 50 <= trigger <= after + 1000 + 50, \
        f"triggerTime {trigger - before - 1000:+.0f} ms off real now + 1000"
    assert abs(sent["produceTime"] - (before + after) / 2) < 500, sent
    thread.join(15)
    messages = result["answer"]["delayMsgList"]
    assert [m["msgId"] for m in messages] == [sent["msgId"]], result
    lag = result["at"] - trigger
    assert lag >= 0, f"delivered {-lag:.0f} ms before triggerTime"
    assert lag < 500, f"delivered {lag:.0f} ms after triggerTime"
    print(f"\n{topic}: triggerTime - (send time + 1000) {trigger - before - 1000:+.0f} ms, "
          f"delivered {lag:.0f} ms after triggerTime")


def test_send_via_skewed_node_is_due_on_real_time_for_the_normal_node(nodes):
    skewed, normal = nodes
    for i in range(3):
        send_and_long_poll(skewed, normal, f"skew-to-normal-{i}")


def test_send_via_normal_node_is_not_early_on_the_skewed_node(nodes):
    skewed, normal = nodes
    for i in range(3):
        send_and_long_poll(normal, skewed, f"normal-to-skew-{i}")
    # A message due in 1 s is not handed out by the skewed node (whose wall clock says it is
    # 59 s overdue) before its time.
    sent = normal.call("sendMsg", topic="skew-pull", msg="x", delayMillis=1000)["delayMsg"]
    while now_ms() < sent["triggerTime"] - 50:
        answer = skewed.call("pullMsg", topic="skew-pull")
        assert answer["delayMsgList"] == [] or now_ms() >= sent["triggerTime"], answer
        time.sleep(0.05)
