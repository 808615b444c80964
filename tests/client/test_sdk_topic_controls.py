"""The SDK's topic controls against a live node: pause and resume, purge (one call and until
done), listing by status with cursors, the settings delay_ms / max_backlog / description, the
backlog refusal and atomic send_batch."""

from __future__ import annotations

from datetime import timedelta

import pytest

from delayqueue.client import (
    BacklogExceededError,
    BadRequestError,
    DelayQueueClient,
    MessagePage,
    NotFoundError,
    PurgeResult,
    RateLimitedError,
    SendEntry,
    Status,
)

from support.sdk import node, topic  # noqa: F401 - fixtures


@pytest.fixture
def client(node):
    with DelayQueueClient(node.url, timeout=5) as c:
        yield c


# ---- pause and resume ----------------------------------------------------------------------
def test_a_paused_topic_hands_nothing_out_until_resumed(client, topic):
    sent = client.send(topic, "due now")
    assert client.pause_topic(topic) is True
    assert client.pause_topic(topic) is False                  # paused already
    assert client.topic_info(topic).paused is True
    assert [t.paused for t in client.topics() if t.topic == topic] == [True]
    assert client.pull(topic) == []
    client.send(topic, "sends go on")
    assert client.topic_info(topic).ready_queue_size == 2

    assert client.resume_topic(topic) is True
    assert client.resume_topic(topic) is False                 # not paused
    assert client.topic_info(topic).paused is False
    assert [m.msg_id for m in client.pull(topic)] == [sent.msg_id]


def test_pausing_an_unknown_topic_raises_not_found_and_creates_nothing(client, topic):
    with pytest.raises(NotFoundError) as caught:
        client.pause_topic(topic)
    assert caught.value.code == 404 and "topic" in caught.value.msg
    assert topic not in [t.topic for t in client.topics()]


# ---- purge ---------------------------------------------------------------------------------
def live_messages(client: DelayQueueClient, topic: str) -> list[str]:
    """Five live messages: two waiting, two ready, one consuming; their msgIds."""
    ids = [client.send(topic, f"w{i}", delay_ms=60_000, msg_id=f"w{i}").msg_id for i in (0, 1)]
    ids += [client.send(topic, f"r{i}", msg_id=f"r{i}").msg_id for i in (0, 1, 2)]
    assert len(client.pull(topic)) == 1
    return ids


def test_purge_topic_ends_at_most_limit_and_reports_what_remains(client, topic):
    ids = live_messages(client, topic)
    result = client.purge_topic(topic, limit=2)
    assert isinstance(result, PurgeResult) and result == (2, 3)
    assert client.purge_topic(topic) == (3, 0)
    assert {client.get(topic, i).status for i in ids} == {Status.DELETED}
    info = client.topic_info(topic)
    assert (info.waiting_queue_size, info.ready_queue_size, info.ack_queue_size) == (0, 0, 0)
    assert client.purge_topic(topic) == (0, 0)


def test_purge_topic_all_calls_until_nothing_remains_reporting_progress(client, topic):
    ids = live_messages(client, topic)
    seen: list[PurgeResult] = []
    assert client.purge_topic_all(topic, batch=2, progress=seen.append) == (5, 0)
    assert [total for total, _ in seen] == [2, 4, 5]
    assert {client.get(topic, i).status for i in ids} == {Status.DELETED}
    seen.clear()
    ids = live_messages(client, topic)
    assert client.purge_topic_all(topic, batch=5, progress=seen.append) == (5, 0)
    assert seen == [(5, 0), (5, 0)]          # a call that used its whole budget: once more
    assert client.purge_topic_all(topic, progress=seen.append) == (0, 0)


def test_purge_topic_all_stops_after_max_calls_with_what_remains(client, topic):
    live_messages(client, topic)
    total, _ = client.purge_topic_all(topic, batch=1, max_calls=2)
    info = client.topic_info(topic)
    assert (total, info.waiting_queue_size + info.ready_queue_size + info.ack_queue_size) == \
        (2, 3)
    with pytest.raises(ValueError, match="max_calls"):
        client.purge_topic_all(topic, max_calls=0)


def test_purge_topic_all_stops_at_max_count(client, topic):
    live_messages(client, topic)
    total, _ = client.purge_topic_all(topic, batch=2, max_count=3)
    info = client.topic_info(topic)
    assert (total, info.waiting_queue_size + info.ready_queue_size + info.ack_queue_size) == \
        (3, 2)
    assert client.purge_topic_all(topic, max_count=0) == (0, 0)


def test_purge_refuses_an_unknown_topic_and_a_limit_out_of_range(client, topic):
    with pytest.raises(NotFoundError):
        client.purge_topic(topic)
    client.send(topic, "x")
    for limit in (0, 1_000_001):
        with pytest.raises(BadRequestError) as caught:
            client.purge_topic(topic, limit=limit)
        assert caught.value.msg.startswith("limit:"), caught.value.msg
    assert client.topic_info(topic).ready_queue_size == 1


# ---- list ----------------------------------------------------------------------------------
def test_list_messages_shows_each_status_in_its_order(client, topic):
    for i, delay in enumerate((30_000, 10_000, 20_000)):
        client.send(topic, f"w{i}", delay_ms=delay, msg_id=f"w{i}")
    for i in range(3):
        client.send(topic, f"r{i}", msg_id=f"r{i}")
    pulled = client.pull(topic, ack_timeout_ms=60_000)

    waiting = client.list_messages(topic, Status.WAITING)
    assert isinstance(waiting, MessagePage) and waiting.next_cursor is None
    assert [m.msg_id for m in waiting.messages] == ["w1", "w2", "w0"]   # by trigger time
    assert {m.status for m in waiting.messages} == {Status.WAITING}
    assert [m.msg_id for m in client.list_messages(topic, 2).messages] == ["r1", "r2"]
    [consuming] = client.list_messages(topic, 3).messages
    assert (consuming.msg_id, consuming.receipt) == (pulled[0].msg_id, pulled[0].receipt)
    assert consuming.ack_deadline is not None
    assert consuming.ack_deadline - consuming.trigger_time >= 60_000


def test_list_messages_of_group_blocked_shows_each_group_behind_its_head(client, topic):
    for i in range(3):
        client.send(topic, f"g{i}", group_id="g", msg_id=f"g{i}")
    client.send(topic, "alone", msg_id="alone")
    blocked = client.list_messages(topic, group_blocked=True)
    assert [m.msg_id for m in blocked.messages] == ["g1", "g2"]
    assert {m.group_id for m in blocked.messages} == {"g"}


def test_iter_messages_follows_the_cursor_over_several_pages(client, topic):
    ids = [client.send(topic, f"m{i}", delay_ms=60_000 + i, msg_id=f"m{i}").msg_id
           for i in range(7)]
    first = client.list_messages(topic, 1, limit=3)
    assert [m.msg_id for m in first.messages] == ids[:3] and first.next_cursor
    second = client.list_messages(topic, 1, limit=3, cursor=first.next_cursor)
    assert [m.msg_id for m in second.messages] == ids[3:6] and second.next_cursor
    assert [m.msg_id for m in client.iter_messages(topic, 1, page_size=3)] == ids
    assert [m.msg_id for m in client.iter_messages(topic, 1, page_size=7)] == ids
    assert list(client.iter_messages(topic, 2)) == []


def test_list_messages_refuses_bad_arguments(client, topic):
    client.send(topic, "x")
    for kwargs in ({}, {"status": 1, "group_blocked": True}):
        with pytest.raises(ValueError, match="status"):
            client.list_messages(topic, **kwargs)
    for kwargs, name in (({"status": 4}, "status"), ({"status": 1, "limit": 0}, "limit"),
                         ({"status": 1, "cursor": "not a cursor"}, "cursor")):
        with pytest.raises(BadRequestError) as caught:
            client.list_messages(topic, **kwargs)
        assert caught.value.msg.startswith(name), caught.value.msg


# ---- the new settings ----------------------------------------------------------------------
def test_a_send_without_a_delay_takes_the_topics_delay_ms(client, topic):
    config = client.set_topic_config(topic, delay_ms=timedelta(minutes=2), max_backlog=100,
                                     description="orders\tof the shop\n(team A)")
    assert (config.delay_ms, config.max_backlog) == (120_000, 100)
    assert config.description == "orders\tof the shop\n(team A)"
    assert config.source("delay_ms") == config.source("description") == "topic"
    assert client.get_topic_config(topic) == config

    plain = client.send(topic, "topic delay")
    assert plain.status is Status.WAITING and plain.trigger_time - plain.produce_time == 120_000
    now = client.send(topic, "own delay", delay_ms=0)
    assert now.status is Status.READY
    batch = client.send_batch(topic, ["batch body", SendEntry("entry"),
                                      SendEntry("own", delay_ms=0)])
    assert [r.delay_msg.status for r in batch] == [Status.WAITING] * 2 + [Status.READY]
    assert batch[1].delay_msg.trigger_time - batch[1].delay_msg.produce_time == 120_000


def test_the_new_settings_refuse_bad_values_naming_the_setting(client, topic):
    with pytest.raises(ValueError, match="description"):
        client.set_topic_config(topic, description=5)
    for settings, name in (({"description": "bell\x07"}, "description"),
                           ({"description": "x" * 1025}, "description"),
                           ({"max_backlog": -1}, "maxBacklog"),
                           ({"delay_ms": -1}, "delayMillis")):
        with pytest.raises(BadRequestError) as caught:
            client.set_topic_config(topic, **settings)
        assert name in caught.value.msg, caught.value.msg
    assert set(client.get_topic_config(topic).sources.values()) == {"server"}


# ---- backlog and atomic batches ------------------------------------------------------------
def test_a_send_over_max_backlog_raises_backlog_exceeded_and_writes_nothing(client, topic):
    client.set_topic_config(topic, max_backlog=2)
    client.send(topic, "a")
    client.send(topic, "b", delay_ms=60_000)
    with pytest.raises(BacklogExceededError) as caught:
        client.send(topic, "c", msg_id="c")
    assert caught.value.code == 429 and "backlog" in caught.value.msg
    assert not isinstance(caught.value, RateLimitedError)
    assert client.get(topic, "c") is None
    results = client.send_batch(topic, [SendEntry("d", msg_id="d")])
    assert [(r.code, r.ok) for r in results] == [(429, False)]
    assert "backlog" in results[0].msg


def test_an_atomic_batch_writes_every_entry_or_none_and_says_why(client, topic):
    refused = client.send_batch(topic, [SendEntry("a", msg_id="a"), {"msg": "", "msgId": "e"},
                                        SendEntry("c", msg_id="c")], atomic=True)
    assert [r.code for r in refused] == [409, 400, 409]
    assert not any(r.ok for r in refused) and "msg" in refused[1].msg
    assert "not written" in refused[0].msg
    assert [client.get(topic, i) for i in ("a", "e", "c")] == [None] * 3

    written = client.send_batch(topic, [SendEntry("a", msg_id="a"), "b"], atomic=True)
    assert [r.code for r in written] == [200, 200]
    again = client.send_batch(topic, [SendEntry("a", msg_id="a"), SendEntry("c")], atomic=True)
    assert [(r.code, r.duplicate) for r in again] == [(200, True), (200, False)]
    assert client.topic_info(topic).ready_queue_size == 3


def test_an_atomic_batch_over_the_backlog_is_refused_whole(client, topic):
    client.set_topic_config(topic, max_backlog=2)
    client.send(topic, "a")
    results = client.send_batch(topic, ["b", "c"], atomic=True)
    assert [r.code for r in results] == [409, 429]     # "b" took the last place
    assert client.topic_info(topic).ready_queue_size == 1


def test_an_atomic_batch_must_fit_one_request(client, topic):
    with pytest.raises(ValueError, match="atomic"):
        client.send_batch(topic, [f"m{i}" for i in range(5)], batch_size=4, atomic=True)
    with pytest.raises(ValueError, match="atomic"):
        client.send_batch(topic, [f"m{i}" for i in range(1001)], atomic=True)
    assert client.send_batch(topic, [], atomic=True) == []
    assert topic not in [t.topic for t in client.topics()]
