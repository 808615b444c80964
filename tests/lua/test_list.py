"""listMsg's script, lua/list.lua: a page of one queue's messages in its order, after a cursor
that is the last entry of the previous page, whether that entry is still there or not."""

from __future__ import annotations

from delayqueue.core.message import MESSAGE_FIELDS

from support.lua import T0, drop_record, pull, pulled_ids, send, snapshot

BIG = 1 << 30


def page(scripts, tk, view, limit=100, cursor=None, now=T0, max_bytes=BIG):
    return scripts.list(tk, now, view, limit, max_bytes, cursor)


def ids(reply) -> list[str]:
    return [e.msg_id for e in reply.entries]


def walk(scripts, tk, view, limit, now=T0, between=lambda: None) -> list[str]:
    """Every page of the view, in order, calling ``between`` after each page."""
    seen, cursor = [], None
    for _ in range(1000):
        reply = page(scripts, tk, view, limit, cursor, now)
        seen += ids(reply)
        between()
        if reply.next_score == -1:
            return seen
        cursor = (int(reply.next_score), reply.next_member)
    raise AssertionError("no last page")


def test_waiting_is_listed_by_trigger_time_then_send_order(scripts, tk, redis_client):
    for msg_id, trigger in (("c", 30), ("a", 10), ("b2", 20), ("b1", 20), ("d", 40)):
        send(scripts, tk, msg_id, T0, T0 + trigger)
    before = snapshot(redis_client)
    reply = page(scripts, tk, "waiting")
    assert ids(reply) == ["a", "b2", "b1", "c", "d"]            # b2 was accepted first
    assert [int(e.score) for e in reply.entries] == [T0 + 10, T0 + 20, T0 + 20, T0 + 30, T0 + 40]
    assert reply.next_score == -1 and reply.next_member == ""
    assert snapshot(redis_client) == before                     # read only


def test_pages_list_every_message_once(scripts, tk):
    for i in range(50):
        send(scripts, tk, f"m{i:02d}", T0, T0 + 100 + i % 4)   # many ties
    expected = ids(page(scripts, tk, "waiting", limit=1000))
    assert sorted(expected) == [f"m{i:02d}" for i in range(50)]
    assert walk(scripts, tk, "waiting", 7) == expected


def test_a_page_continues_after_its_cursor_when_the_cursor_entry_has_left(scripts, tk):
    for i in range(10):
        send(scripts, tk, f"m{i}", T0, T0 + 100 + i // 3)     # ties of three
    first = page(scripts, tk, "waiting", limit=4)
    assert ids(first) == ["m0", "m1", "m2", "m3"]
    # m3 (the cursor) and m4 (the next) are promoted away between the pages.
    scripts.reschedule(tk, "m3", T0, T0, "")
    scripts.reschedule(tk, "m4", T0, T0, "")
    rest = page(scripts, tk, "waiting", cursor=(int(first.next_score), first.next_member))
    assert ids(rest) == ["m5", "m6", "m7", "m8", "m9"]


def test_ready_in_delivery_order_and_consuming_by_deadline_with_receipts(scripts, tk):
    for i in range(4):
        send(scripts, tk, f"r{i}", T0, T0)
    assert pulled_ids(pull(scripts, tk, T0, batch=1, ack_timeout=500)) == ["r0"]
    assert pulled_ids(pull(scripts, tk, T0, batch=1, ack_timeout=200)) == ["r1"]
    assert ids(page(scripts, tk, "ready")) == ["r2", "r3"]
    consuming = page(scripts, tk, "ack")
    assert ids(consuming) == ["r1", "r0"]
    assert [int(e.score) for e in consuming.entries] == [T0 + 200, T0 + 500]
    receipt = consuming.entries[0].fields[MESSAGE_FIELDS.index("c")]
    assert receipt and consuming.entries[0].fields[MESSAGE_FIELDS.index("s")] == "3"


def test_blocked_messages_are_listed_in_each_groups_order(scripts, tk):
    for msg_id, group, trigger in (("a1", "a", 0), ("b1", "b", 0), ("a3", "a", 9),
                                   ("a2", "a", 5), ("b2", "b", 1)):
        send(scripts, tk, msg_id, T0, T0 + trigger, group=group)
    assert walk(scripts, tk, "blocked", 1, now=T0 + 2) == ["a2", "a3", "b2"]
    statuses = [e.fields[MESSAGE_FIELDS.index("s")]
                for e in page(scripts, tk, "blocked", now=T0 + 2).entries]
    assert statuses == ["1", "1", "2"]                           # b2 is due: shown ready


def test_a_page_stops_at_its_bytes_but_always_holds_one(scripts, tk):
    for i in range(5):
        send(scripts, tk, f"m{i}", T0, T0 + 1 + i, body="x" * 1000)
    one = page(scripts, tk, "waiting", max_bytes=10)
    assert ids(one) == ["m0"] and one.next_score != -1
    two = page(scripts, tk, "waiting", max_bytes=1500)
    assert ids(two) == ["m0", "m1"]
    assert ids(page(scripts, tk, "waiting", cursor=(int(two.next_score), two.next_member))) == \
        ["m2", "m3", "m4"]


def test_an_entry_without_its_record_is_skipped_and_paging_goes_on(scripts, tk, redis_client):
    for i in range(4):
        send(scripts, tk, f"m{i}", T0, T0 + 10 + i)
    drop_record(redis_client, tk, "m1")
    first = page(scripts, tk, "waiting", limit=2)
    assert ids(first) == ["m0", "m2"] and first.next_score != -1   # read 3, one had none
    assert ids(page(scripts, tk, "waiting", cursor=(int(first.next_score), first.next_member))
               ) == ["m3"]
