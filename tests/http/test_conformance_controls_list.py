"""listMsg (ours) and what getMsg shows of a delivery: each view lists exactly its messages in
its own order, pages neither repeat nor skip the messages that stayed in place, a page is at
most 4 MiB, and every bad parameter is named."""

from __future__ import annotations

import pytest

from support import conformance as api
from support import wait_until

pytestmark = pytest.mark.every_topology

DELIVERY = {"receipt", "ackDeadline"}


def send_batch(node, topic, entries):
    reply = api.post_json(node, "sendMsgBatch", {"topic": topic, "msgs": entries})[1]
    assert [r["code"] for r in reply["results"]] == [200] * len(entries), reply
    return [r["delayMsg"] for r in reply["results"]]


def pull_timed(node, raw_redis, topic, ack_timeout_ms):
    """One message pulled, with the Redis times around the pull."""
    before = api.redis_now_ms(raw_redis)
    (m,) = api.pull(node, topic, ackTimeoutMillis=ack_timeout_ms)
    return m, before, api.redis_now_ms(raw_redis)


def test_waiting_messages_are_listed_by_trigger_time_then_send_order(node, topic, raw_redis):
    t = api.redis_now_ms(raw_redis) + api.HOUR
    for msg_id, at in [("w1", t + 2000), ("w2", t), ("w3", t + 1000), ("w4", t),
                       ("w5", t + 1000)]:
        api.send(node, topic, msgId=msg_id, triggerTime=at)
    api.send(node, topic, msgId="ready")
    listed = api.list_all(node, topic, status=1)
    assert api.ids(listed) == ["w2", "w4", "w3", "w5", "w1"]
    assert [m["triggerTime"] for m in listed] == [t, t, t + 1000, t + 1000, t + 2000]
    assert all(m["status"] == 1 and not DELIVERY & set(m) for m in listed)
    assert listed[0] == api.get_msg(node, topic, "w2")


def test_ready_messages_are_listed_in_delivery_order(node, topic):
    for msg_id in ("r1", "r2", "r3"):
        api.send(node, topic, msgId=msg_id)
    api.pull_one(node, topic, "r1")
    assert api.nack(node, topic, "r1")["code"] == 200        # back, behind r2 and r3
    listed = api.list_all(node, topic, status=2)
    assert api.ids(listed) == ["r2", "r3", "r1"]
    assert [(m["status"], m["retry"]) for m in listed] == [(2, 0), (2, 0), (2, 1)]
    assert all(not DELIVERY & set(m) for m in listed)
    assert api.ids(api.pull(node, topic, batch=10)) == ["r2", "r3", "r1"]


def test_consuming_messages_are_listed_by_ack_deadline_with_receipt_and_deadline(
        node, topic, raw_redis):
    for msg_id in ("c1", "c2", "c3"):
        api.send(node, topic, msgId=msg_id)
    pulls = {}
    for timeout_ms in (90_000, 30_000, 60_000):
        m, before, after = pull_timed(node, raw_redis, topic, timeout_ms)
        pulls[m["msgId"]] = (m["receipt"], before + timeout_ms, after + timeout_ms)
    listed = api.list_all(node, topic, status=3)
    assert api.ids(listed) == ["c2", "c3", "c1"]
    for m in listed:
        receipt, low, high = pulls[m["msgId"]]
        assert m["status"] == 3 and m["receipt"] == receipt
        assert low - api.CLOCK_SLACK <= m["ackDeadline"] <= high
        assert m["ackDeadline"] == api.ack_deadline(raw_redis, topic, m["msgId"])
        assert api.get_msg(node, topic, m["msgId"]) == m


def test_group_blocked_messages_are_listed_in_group_order(node, topic):
    api.send(node, topic, msgId="b1", groupId="b")                  # b's head
    api.send(node, topic, msgId="b2", groupId="b", delayMillis=2 * api.HOUR)
    api.send(node, topic, msgId="b3", groupId="b", delayMillis=api.HOUR)
    api.send(node, topic, msgId="a1", groupId="a")                  # a's head
    api.send(node, topic, msgId="a2", groupId="a")
    api.send(node, topic, msgId="solo")
    status_code, reply = api.post(node, "listMsg", topic=topic, groupBlocked="true")
    assert status_code == 200 and reply["code"] == 200 and "nextCursor" not in reply
    # Groups by groupId; in a group by (triggerTime, acceptance).
    assert api.ids(reply["delayMsgList"]) == ["a2", "b3", "b2"]
    assert [m["groupId"] for m in reply["delayMsgList"]] == ["a", "b", "b"]
    assert api.ids(api.list_all(node, topic, status=2)) == ["b1", "a1", "solo"]
    assert api.ids(api.list_all(node, topic, groupBlocked="true", limit=1)) == \
        ["a2", "b3", "b2"]


def test_pages_of_7_over_50_messages_list_each_once_in_order(node, topic):
    sent = send_batch(node, topic, [{"msg": f"body {i}", "msgId": f"m{i:02d}"}
                                    for i in range(50)])
    pages, cursor = [], None
    for _ in range(20):
        page, cursor = api.list_page(node, topic, status=2, limit=7, cursor=cursor)
        pages.append(page)
        if not cursor:
            break
    assert [len(p) for p in pages] == [7] * 7 + [1]
    assert [m for p in pages for m in p] == sent


def test_paging_while_messages_are_promoted_pulled_and_acked_repeats_and_skips_nothing(
        node, topic):
    # Ten messages due soon join the ready queue's tail while it is paged; pulls take (and
    # acks end) messages at its head, the first time together with the page's last entry,
    # so the next page starts after a cursor whose entry has gone.
    send_batch(node, topic, [{"msg": "x", "msgId": f"d{i}", "delayMillis": 1500}
                             for i in range(10)])
    ready = [f"r{i:02d}" for i in range(50)]
    send_batch(node, topic, [{"msg": "x", "msgId": msg_id} for msg_id in ready])
    listed, taken, cursor = [], [], None
    for page_no in range(30):
        page, cursor = api.list_page(node, topic, status=2, limit=7, cursor=cursor)
        listed += api.ids(page)
        if not cursor:
            break
        got = api.pull(node, topic, batch=8 if page_no == 0 else 3)
        taken += api.ids(got)
        for m in got:
            assert api.ack(node, topic, m["msgId"], receipt=m["receipt"])["code"] == 200
        if page_no == 1:    # the delayed ones are promoted before the third page
            wait_until(lambda: api.info(node, topic)["waitingQueueSize"] == 0, 15)
    assert cursor is None
    assert taken[:8] == ready[:8] and listed[6] == "r06"     # the first cursor's entry went
    assert len(listed) == len(set(listed)), listed           # no repeats
    stayed = [m for m in ready if m not in taken]            # never moved: each listed once
    assert [m for m in listed if m in stayed] == stayed
    assert set(listed) - set(ready) <= {f"d{i}" for i in range(10)}


def test_a_page_whose_cursor_entry_was_promoted_starts_with_the_next_waiting_message(
        node, topic):
    soon = [f"s{i}" for i in range(7)]
    later = [f"l{i:02d}" for i in range(13)]
    send_batch(node, topic, [{"msg": "x", "msgId": m, "delayMillis": 1000 + 10 * i}
                             for i, m in enumerate(soon)] +
               [{"msg": "x", "msgId": m, "delayMillis": api.HOUR + i} for i, m in
                enumerate(later)])
    page, cursor = api.list_page(node, topic, status=1, limit=7)
    assert api.ids(page) == soon and cursor
    wait_until(lambda: api.info(node, topic)["readyQueueSize"] == 7, 15)
    rest = []
    for _ in range(5):
        page, cursor = api.list_page(node, topic, status=1, limit=7, cursor=cursor)
        rest += api.ids(page)
        if not cursor:
            break
    assert rest == later


def test_a_page_is_cut_at_4_mib_and_the_cursor_goes_on(node, topic):
    body = "x" * 300_000
    for i in range(20):
        api.send(node, topic, msgId=f"big{i:02d}", msg=body)
    response = api.SESSION.post(node.url + api.API + "listMsg", timeout=30,
                                data={"topic": topic, "status": 2, "limit": 100})
    first = response.json()
    assert first["code"] == 200 and first.get("nextCursor")
    assert 0 < len(first["delayMsgList"]) < 20
    assert len(response.content) <= 4 * api.MIB + 1024           # the page and its envelope
    rest = api.list_all(node, topic, status=2, limit=100, cursor=first["nextCursor"])
    assert api.ids(first["delayMsgList"] + rest) == [f"big{i:02d}" for i in range(20)]
    assert all(m["msg"] == body for m in rest)


BAD = [
    # (params, HTTP status, the parameter the message starts with)
    ({"status": 0}, 200, "status:"), ({"status": 4}, 200, "status:"),
    ({"status": "x"}, 400, "status:"),
    ({"status": 1, "groupBlocked": "true"}, 200, "status, groupBlocked:"),
    ({}, 400, "status:"), ({"groupBlocked": "false"}, 400, "status:"),
    ({"status": 1, "limit": 0}, 200, "limit:"), ({"status": 1, "limit": 1001}, 200, "limit:"),
    ({"status": 1, "limit": "many"}, 400, "limit:"),
    ({"status": 1, "cursor": "not-a-cursor"}, 200, "cursor:"),
    ({"status": 1, "cursor": "WzEsMiwzXQ"}, 200, "cursor:"),            # [1,2,3]
    ({"groupBlocked": "perhaps"}, 400, "groupBlocked:"),
]


@pytest.mark.parametrize("params, http, name", BAD, ids=[str(p) for p, _, _ in BAD])
def test_a_bad_list_parameter_is_refused_naming_it(node, topic, params, http, name):
    api.send(node, topic, msgId="m")
    status_code, reply = api.post(node, "listMsg", topic=topic, **params)
    assert (status_code, reply["code"]) == (http, 400), reply
    assert reply["msg"].startswith(name), reply


def test_get_msg_shows_receipt_and_ack_deadline_only_while_consuming(node, topic, raw_redis):
    api.send(node, topic, msgId="waiting", delayMillis=api.HOUR)
    api.send(node, topic, msgId="m")
    assert not DELIVERY & set(api.get_msg(node, topic, "waiting"))
    assert not DELIVERY & set(api.get_msg(node, topic, "m"))
    m, before, after = pull_timed(node, raw_redis, topic, 45_000)
    shown = api.get_msg(node, topic, "m")
    assert shown["status"] == 3 and shown["receipt"] == m["receipt"]
    assert before + 45_000 - api.CLOCK_SLACK <= shown["ackDeadline"] <= after + 45_000
    assert shown["ackDeadline"] == api.ack_deadline(raw_redis, topic, "m")
    assert api.ack(node, topic, "m", receipt=m["receipt"])["code"] == 200
    acked = api.get_msg(node, topic, "m")
    assert acked["status"] == 4 and not DELIVERY & set(acked) and "deadTime" not in acked


def test_get_msg_shows_when_a_dead_letter_died(node, topic, raw_redis):
    before = api.redis_now_ms(raw_redis)
    api.kill(node, topic, "dead")
    after = api.redis_now_ms(raw_redis)
    shown = api.get_msg(node, topic, "dead")
    assert shown["status"] == 6 and not DELIVERY & set(shown)
    assert before - api.CLOCK_SLACK <= shown["deadTime"] <= after
    (listed,) = api.list_dead(node, topic)["delayMsgList"]
    assert listed["deadTime"] == shown["deadTime"]
