"""TopicControls (core/topic_controls.py): what Python adds around pause.lua, purge.lua and
list.lua — the purge's slices and limit, its refusal of an unknown topic, the list's opaque
cursor and its cut at PAGE_BYTES of JSON, getMsg's place of a message."""

from __future__ import annotations

import pytest
from test_bounded_work import make_runtime

from delayqueue.core import topic_controls
from delayqueue.core.clock import ManualClock
from delayqueue.core.errors import BadRequest, NotFound
from delayqueue.core.requests import SendRequest
from delayqueue.core.status import Status
from delayqueue.core.topic_controls import decode_cursor, encode_cursor

from support.lua import T0


@pytest.fixture
def rt(redis_url):
    return make_runtime(redis_url, ManualClock(T0))


def test_a_purge_runs_in_slices_up_to_its_limit_and_says_what_remains(rt):
    rt.queue.send_batch("t", [SendRequest("b", f"m{i}") for i in range(700)])
    first = rt.controls.purge("t", limit=450)
    assert (first.count, first.remaining) == (450, 250)
    second = rt.controls.purge("t")
    assert (second.count, second.remaining) == (250, 0)
    assert {rt.queue.get("t", f"m{i}").status for i in range(700)} == {Status.DELETED}
    rt.monitor.flush()
    assert int(rt.client.hget(rt.keys.monitor_total, "t\tpurged")) == 700


def test_an_unknown_topic_is_not_created_by_a_purge_or_a_pause(rt):
    keys = set(rt.client.keys("*"))
    for call in (rt.controls.purge, rt.controls.pause, rt.controls.resume):
        with pytest.raises(NotFound) as refused:
            call("ghost")
        assert refused.value.msg.startswith("topic: no topic 'ghost'")
    assert set(rt.client.keys("*")) == keys


def test_a_registered_topic_holding_nothing_can_be_paused(rt):
    rt.queue.pull("quiet")                                      # registers it
    assert rt.controls.pause("quiet") is True
    assert rt.queue.topic_info("quiet")["paused"] is True
    assert rt.controls.purge("quiet").count == 0


def test_cursors_round_trip_and_garbage_is_refused_naming_the_parameter():
    member = "00000000002a=odd:id\0with \u00e9"
    assert decode_cursor(encode_cursor(1_700_000_000_123, member)) == \
        (1_700_000_000_123, member)
    for garbage in ("", "!!", encode_cursor(1, "x")[:-3], "WzEsMl0"):   # [1,2]: not a member
        with pytest.raises(BadRequest) as refused:
            decode_cursor(garbage)
        assert refused.value.msg.startswith("cursor: ")


def test_a_page_is_cut_at_its_bytes_of_json_and_the_next_page_goes_on(rt, monkeypatch):
    monkeypatch.setattr(topic_controls, "PAGE_BYTES", 2500)
    rt.queue.send_batch("t", [SendRequest("x" * 1000, f"m{i}", delay_ms=1 + i)
                              for i in range(5)])
    seen, cursor = [], None
    for _ in range(10):
        page = rt.controls.list("t", "waiting", 100, cursor)
        assert 1 <= len(page.messages) <= 2
        seen += [m.msg_id for m in page.messages]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == [f"m{i}" for i in range(5)]


def test_get_shows_a_consuming_messages_receipt_and_deadline_and_a_waiting_one_neither(rt):
    rt.queue.send("t", "b", msg_id="c")
    rt.queue.send("t", "b", msg_id="w", delay_ms=5000)
    [delivered] = rt.queue.pull("t", 1, 700).messages
    consuming = rt.queue.get("t", "c")
    assert (consuming.receipt, consuming.ack_deadline) == (delivered.receipt, T0 + 700)
    assert consuming.to_json()["ackDeadline"] == T0 + 700
    waiting = rt.queue.get("t", "w").to_json()
    assert "receipt" not in waiting and "ackDeadline" not in waiting
    rt.queue.ack("t", "c", delivered.receipt)
    assert rt.queue.get("t", "c").receipt is None               # ended: no receipt shown


def test_a_small_topic_purged_past_its_limit_says_messages_remain(rt):
    """A small topic is one HSCAN slice: the scan ends in the slice that hit the limit, and
    what remains must still be said."""
    rt.queue.send_batch("t", [SendRequest("b", f"m{i}") for i in range(5)])
    assert rt.controls.purge("t", limit=2) == topic_controls.PurgeResult(2, 3)
    assert rt.controls.purge("t", limit=3) == topic_controls.PurgeResult(3, 0)
    assert rt.controls.purge("t") == topic_controls.PurgeResult(0, 0)
