"""pauseTopic and resumeTopic (ours): a paused topic hands nothing out, everything else goes
on, a resume wakes the long polls held meanwhile, and neither call creates a topic."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from support import conformance as api
from support import wait_until

pytestmark = pytest.mark.every_topology

LONG_POLL_MS = 20_000


def test_a_paused_topic_hands_nothing_out_though_messages_are_ready(node, topic):
    api.send(node, topic, msgId="a")
    api.send(node, topic, msgId="b")
    assert api.call(node, "pauseTopic", topic=topic) == {
        "code": 200, "msg": "success", "paused": True, "changed": True}
    assert api.info(node, topic)["paused"] is True
    assert api.pull(node, topic, batch=10) == []
    reply = api.call(node, "longPollingMsg", topic=topic, longPollingTimeoutMillis=1)
    assert reply == {"code": 200, "msg": "success", "delayMsgList": []}
    data = api.info(node, topic)
    assert (data["readyQueueSize"], data["ackQueueSize"]) == (2, 0)
    assert [api.status(node, topic, m) for m in ("a", "b")] == [2, 2]
    # A second pause changes nothing and says so.
    assert api.pause(node, topic)["changed"] is False
    assert api.call(node, "resumeTopic", topic=topic) == {
        "code": 200, "msg": "success", "paused": False, "changed": True}
    assert api.info(node, topic)["paused"] is False
    assert api.resume(node, topic)["changed"] is False
    assert api.ids(api.pull(node, topic, batch=10)) == ["a", "b"]


def test_sends_promotion_ack_timeouts_and_expiry_go_on_while_paused(node, topic):
    api.send(node, topic, msgId="timeout")
    api.pull_one(node, topic, "timeout", ackTimeoutMillis=500)
    api.pause(node, topic)
    assert api.send(node, topic, msgId="sent")["status"] == 2
    assert api.send(node, topic, msgId="delayed", delayMillis=300)["status"] == 1
    api.send(node, topic, msgId="short", ttlMillis=400)       # ready, never delivered
    # Promotion (delayed 1 -> 2), the ack timeout (timeout 3 -> 2) and expiry (short -> 5).
    wait_until(lambda: [api.status(node, topic, m) for m in
                        ("sent", "delayed", "timeout", "short")] == [2, 2, 2, 5], 15,
               interval_s=0.05)
    data = api.info(node, topic)
    assert (data["waitingQueueSize"], data["readyQueueSize"], data["ackQueueSize"]) == \
        (0, 3, 0)
    assert data["paused"] is True
    assert api.pull(node, topic, batch=10) == []
    api.resume(node, topic)
    got = api.pull(node, topic, batch=10)
    assert sorted(api.ids(got)) == ["delayed", "sent", "timeout"]
    assert {m["msgId"]: m["retry"] for m in got} == {"delayed": 1, "sent": 1, "timeout": 2}


def test_a_long_poll_held_while_paused_answers_right_after_resume(hint_node, topic):
    # hint_node re-checks held polls only every 30 s: an answer well within the poll's own
    # 20 s timeout comes from the resume's hint.
    api.send(hint_node, topic, msgId="m")
    api.pause(hint_node, topic)
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(hint_node.call, "longPollingMsg", timeout=30, topic=topic,
                             longPollingTimeoutMillis=LONG_POLL_MS)
        # No event tells that the poll is held (its topic is registered already): give it
        # half a second; if it were not held yet, the resume below would still be answered
        # at once, so the sleep cannot make the test fail, only make it test less.
        time.sleep(0.5)
        assert not future.done(), "a paused topic's long poll answered"
        resumed_at = time.monotonic()
        api.resume(hint_node, topic)
        reply = future.result(timeout=30)
        elapsed = time.monotonic() - resumed_at
    assert api.ids(reply["delayMsgList"]) == ["m"]
    assert reply["delayMsgList"][0]["status"] == 3
    assert elapsed < LONG_POLL_MS / 1000 / 2, elapsed


def test_a_long_poll_on_a_paused_topic_answers_empty_at_its_timeout(node, topic):
    api.send(node, topic, msgId="m")
    api.pause(node, topic)
    started = time.monotonic()
    reply = api.call(node, "longPollingMsg", topic=topic, longPollingTimeoutMillis=800)
    elapsed = time.monotonic() - started
    assert reply == {"code": 200, "msg": "success", "delayMsgList": []}
    assert 0.75 <= elapsed < 8, elapsed
    assert api.status(node, topic, "m") == 2


@pytest.mark.parametrize("endpoint", ["pauseTopic", "resumeTopic", "purgeTopic"])
def test_an_unknown_topic_answers_404_and_is_not_created(node, topic, raw_redis, endpoint):
    status_code, reply = api.post(node, endpoint, topic=topic)
    assert status_code == 200
    assert reply == {"code": 404, "msg": f"topic: no topic '{topic}': it holds no message "
                                         "and has no settings"}
    listed = api.call(node, "getTopicInfoList")
    assert listed["code"] == 200 and topic not in {t["topic"] for t in listed["data"]}
    api.assert_nothing_written(raw_redis, topic)


def test_a_topic_known_only_by_its_settings_can_be_paused(node, topic):
    api.set_config(node, topic, maxRetry=3)
    assert api.pause(node, topic)["changed"] is True
    assert api.info(node, topic)["paused"] is True


@pytest.mark.parametrize("endpoint", ["pauseTopic", "resumeTopic", "purgeTopic"])
def test_a_bad_topic_is_refused_naming_it(node, topic, raw_redis, endpoint):
    status_code, reply = api.post(node, endpoint, topic=topic + "{x}")
    assert (status_code, reply["code"]) == (200, 400) and reply["msg"].startswith("topic:")
    status_code, reply = api.post(node, endpoint)
    assert (status_code, reply["code"]) == (400, 400)
    assert reply["msg"] == "topic: required parameter is missing or empty"
    api.assert_nothing_written(raw_redis, topic)


def test_a_settings_reset_keeps_the_pause(node, topic):
    api.send(node, topic, msgId="m")
    api.set_config(node, topic, maxRetry=3)
    api.pause(node, topic)
    api.set_config(node, topic, reset="true")
    assert api.get_config(node, topic)["data"]["maxRetry"] == 10
    assert api.info(node, topic)["paused"] is True
    assert api.pull(node, topic) == []
    api.resume(node, topic)
    api.pull_one(node, topic, "m")
