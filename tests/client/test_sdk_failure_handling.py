"""The SDK's failure handling against a live node: receipts, nack delays, changeVisibility,
the listener's heartbeat, reschedule, topic settings, dead letters and attributes."""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest

from delayqueue.client import (
    BadRequestError,
    DeadLetterPage,
    DelayMsg,
    DelayQueueClient,
    NotFoundError,
    StaleReceiptError,
    Status,
    TopicConfig,
)

from support import wait_until
from support.sdk import node, topic  # noqa: F401 - fixtures

FAST = {"poll_timeout_ms": 500, "backoff_base_s": 0.05, "backoff_max_s": 0.4, "grace_s": 5}
SERVER_DEFAULTS = {
    "ttl_ms": 3_600_000, "max_retry": 10, "ack_timeout_ms": 30_000, "redelivery_delay_ms": 0,
    "redelivery_backoff_multiplier": 1.0, "redelivery_max_delay_ms": 3_600_000,
    "dead_letter": True, "dead_letter_retention_ms": 7 * 86_400_000,
    "dead_letter_max_size": 100_000, "delay_ms": 0, "max_backlog": 0, "dedup_window_ms": 0,
    "default_subscription": True, "description": "",
}


@pytest.fixture
def client(node):
    with DelayQueueClient(node.url, timeout=5) as c:
        yield c


def now_ms() -> int:
    return int(time.time() * 1000)


# The server's clock trails this machine's by up to a Redis TIME round trip (never leads it):
# a trigger time it computes may be earlier than ``before`` + the delay by that much.
CLOCK_SLACK_MS = 250


def redelivered(client: DelayQueueClient, topic: str, ack_timeout_ms: int = 30_000):
    """Send one message, pull it, nack it, pull it again: (first delivery, second delivery)."""
    client.send(topic, "x")
    first = client.pull(topic, ack_timeout_ms=ack_timeout_ms)[0]
    client.nack(first)
    second = client.pull(topic, ack_timeout_ms=ack_timeout_ms)[0]
    assert second.msg_id == first.msg_id and second.retry == 2
    return first, second


def dead_letters(client: DelayQueueClient, topic: str, bodies: list[str],
                 **send) -> list[DelayMsg]:
    """Messages that end with status 6 at once: one delivery allowed, nacked."""
    sent = [client.send(topic, body, max_retry=0, **send) for body in bodies]
    for m in client.pull(topic, batch=len(bodies)):
        client.nack(m)
    assert {client.get(topic, s.msg_id).status for s in sent} == {Status.RETRY_EXHAUSTED}
    return sent


# ---- receipts ------------------------------------------------------------------------------
def test_deliveries_carry_a_receipt_that_ack_of_the_message_uses(client, topic):
    sent = client.send(topic, "x")
    assert sent.receipt is None
    [m] = client.pull(topic)
    assert isinstance(m.receipt, str) and m.receipt
    got = client.get(topic, m.msg_id)      # consuming: the latest receipt and its deadline
    assert got.receipt == m.receipt and got.ack_deadline is not None
    client.ack(m)
    acked = client.get(topic, m.msg_id)
    assert acked.status is Status.ACKED and acked.receipt is None and acked.ack_deadline is None
    client.ack(m)  # the receipt that acked it: harmless again
    client.ack(topic, m.msg_id, receipt=m.receipt)


def test_each_delivery_has_a_new_receipt_and_the_old_one_is_refused_with_409(client, topic):
    first, second = redelivered(client, topic)
    assert first.receipt != second.receipt
    with pytest.raises(StaleReceiptError) as caught:
        client.ack(first)
    assert caught.value.code == 409
    with pytest.raises(StaleReceiptError):
        client.nack(first)
    with pytest.raises(StaleReceiptError):
        client.change_visibility(first, 60_000)
    got = client.get(topic, first.msg_id)
    assert got.status is Status.CONSUMING and got.retry == 2  # nothing changed
    client.ack(second)
    with pytest.raises(StaleReceiptError):
        client.ack(first)  # acked, but not by that receipt


def test_ack_and_nack_by_name_without_a_receipt_work_as_before(client, topic):
    first, _ = redelivered(client, topic)
    client.nack(topic, first.msg_id)
    [third] = client.pull(topic)
    client.ack(topic, third.msg_id)
    assert client.get(topic, third.msg_id).status is Status.ACKED
    with pytest.raises(TypeError):
        client.ack(topic)


# ---- nack with a delay, redelivery backoff -------------------------------------------------
def assert_waiting_until_due(got: DelayMsg) -> None:
    """Read right after a nack with a delay: WAITING, unless this machine stalled past its
    trigger time before the read was answered (then READY is as right)."""
    read_by = now_ms()
    assert got.status is Status.WAITING or (
        got.status is Status.READY and read_by >= got.trigger_time), (got, read_by)


def redelivery(client: DelayQueueClient, topic: str) -> list[DelayMsg]:
    """Long polls until the message comes again: however late a loaded machine hands it out
    (how late is the benchmarks' measure), it comes, and the caller checks it was not early."""
    return wait_until(lambda: client.long_poll(topic, timeout_ms=1_000), 30,
                      message="not delivered again")


def test_nack_with_delay_is_not_redelivered_before_the_delay(client, topic):
    client.send(topic, "x")
    [m] = client.pull(topic)
    start = time.monotonic()
    before = now_ms()
    client.nack(m, delay_ms=800)
    waiting = client.get(topic, m.msg_id)
    assert_waiting_until_due(waiting)
    assert before + 800 - CLOCK_SLACK_MS <= waiting.trigger_time <= now_ms() + 800
    # At once it is not due: nothing (a pull this machine delayed past the delay gets it).
    again = client.pull(topic) or redelivery(client, topic)
    elapsed = time.monotonic() - start
    assert [d.msg_id for d in again] == [m.msg_id] and again[0].retry == 2
    assert elapsed >= 0.8 - 0.005, elapsed  # never early, whichever pull brought it
    client.nack(again[0], delay_ms=0)  # 0: ready at once
    assert client.get(topic, m.msg_id).status is Status.READY


def test_the_topic_redelivery_backoff_grows_with_each_delivery(client, topic):
    client.set_topic_config(topic, redelivery_delay_ms=300, redelivery_backoff_multiplier=2,
                            redelivery_max_delay_ms=1_000)
    client.send(topic, "x")
    [m] = client.pull(topic)
    before = now_ms()
    client.nack(m)  # retry 1: 300 ms
    got = client.get(topic, m.msg_id)
    assert_waiting_until_due(got)
    assert before + 300 - CLOCK_SLACK_MS <= got.trigger_time <= now_ms() + 300
    [m] = redelivery(client, topic)
    assert m.retry == 2
    before = now_ms()
    client.nack(m)  # retry 2: 600 ms
    got = client.get(topic, m.msg_id)
    assert before + 600 - CLOCK_SLACK_MS <= got.trigger_time <= now_ms() + 600


# ---- changeVisibility ----------------------------------------------------------------------
def test_change_visibility_extends_the_deadline_and_zero_gives_the_delivery_back(client,
                                                                                 topic):
    client.send(topic, "x")
    [m] = client.pull(topic, ack_timeout_ms=1_000)
    extended = client.change_visibility(m, 60_000)
    assert isinstance(extended, DelayMsg) and extended.status is Status.CONSUMING
    time.sleep(1.3)  # past the first deadline
    assert client.pull(topic) == []
    assert client.get(topic, m.msg_id).status is Status.CONSUMING
    back = client.change_visibility(topic, m.msg_id, timedelta(0), receipt=m.receipt)
    assert back.status is Status.READY
    [again] = client.pull(topic)
    assert again.retry == 2 and again.receipt != m.receipt
    client.ack(again)


def test_change_visibility_of_a_waiting_or_unknown_message_is_refused(client, topic):
    waiting = client.send(topic, "x", delay_ms=60_000)
    with pytest.raises(BadRequestError):
        client.change_visibility(topic, waiting.msg_id, 1_000)
    with pytest.raises(NotFoundError):
        client.change_visibility(topic, "absent", 1_000)


# ---- the listener --------------------------------------------------------------------------
def test_listener_heartbeat_keeps_a_handler_running_3x_the_ack_timeout_from_redelivery(
        client, topic):
    sent = client.send(topic, "slow")
    deliveries: list[int] = []

    def handler(m: DelayMsg) -> bool:
        deliveries.append(m.retry)
        time.sleep(6.0)   # the handler's work: 3x the ack timeout
        return True

    # Each beat (every half ack timeout) has the other half to reach the server: 1 s, more
    # than a busy 2-core machine delays a thread's wake-up and one request (seen: 0.25 s).
    with client.listen(topic, handler, consume_threads=2, ack_timeout_ms=2_000,
                       **FAST) as consumer:
        wait_until(lambda: consumer.acked == 1, 15)
    # A redelivery would have come before that ack (the ack ends the message), to the idle
    # thread, and its run would be in ``deliveries``: nothing to wait for after it.
    assert deliveries == [1]
    assert consumer.lost == 0 and consumer.nacked == 0
    got = client.get(topic, sent.msg_id)
    assert got.status is Status.ACKED and got.retry == 1


def test_without_heartbeat_the_slow_handlers_ack_is_refused_and_not_counted(client, topic,
                                                                            caplog):
    sent = client.send(topic, "slow")
    deliveries: list[int] = []
    lock = threading.Lock()
    delivered_again = threading.Event()

    def handler(m: DelayMsg) -> bool:
        with lock:
            deliveries.append(m.retry)
            first = len(deliveries) == 1
        if first:  # runs until its 500 ms deadline has passed and the other thread got it
            delivered_again.wait(10)
        else:
            delivered_again.set()
        return True

    with caplog.at_level(logging.WARNING, logger="delayqueue.client"):
        with client.listen(topic, handler, consume_threads=2, ack_timeout_ms=500,
                           heartbeat=False, **FAST) as consumer:
            wait_until(lambda: consumer.acked + consumer.lost == 2, 8)
    assert deliveries == [1, 2]
    assert consumer.acked == 1 and consumer.lost == 1
    assert client.get(topic, sent.msg_id).status is Status.ACKED
    assert any("delivered again" in r.getMessage() for r in caplog.records)


class StaleBeats(DelayQueueClient):
    """Counts the changeVisibility calls answered 409 (the listener's heartbeats: the test
    makes its own on another client)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.stale = 0

    def change_visibility(self, *args, **kwargs) -> DelayMsg:  # type: ignore[override]
        try:
            return super().change_visibility(*args, **kwargs)
        except StaleReceiptError:
            self.stale += 1
            raise


def test_listener_neither_acks_nor_nacks_a_delivery_its_heartbeat_found_lost(client, node,
                                                                             topic, caplog):
    sent = client.send(topic, "x")
    other: list[DelayMsg] = []
    listening = StaleBeats(node.url, timeout=5)

    def handler(m: DelayMsg) -> bool:
        client.change_visibility(m, 0)  # given up: someone else takes it
        other.extend(client.pull(topic, ack_timeout_ms=60_000))
        # Runs until a heartbeat (every 500 ms) has met the newer receipt.
        wait_until(lambda: listening.stale, 5, message="no heartbeat met the newer receipt")
        return True

    with caplog.at_level(logging.WARNING, logger="delayqueue.client"), listening:
        with listening.listen(topic, handler, ack_timeout_ms=1_000, **FAST) as consumer:
            wait_until(lambda: consumer.lost == 1, 5)
    assert consumer.acked == 0 and consumer.nacked == 0
    assert consumer._acks.requests == 0  # skipped, not sent and refused with 409
    assert [m.retry for m in other] == [2]
    got = client.get(topic, sent.msg_id)
    assert got.status is Status.CONSUMING and got.retry == 2  # the other delivery's
    assert any("lost" in r.getMessage() for r in caplog.records)
    client.ack(other[0])


# ---- reschedule ----------------------------------------------------------------------------
def test_reschedule_moves_the_trigger_time_and_the_expire_time_with_it(client, topic):
    sent = client.send(topic, "x", delay_ms=60_000, ttl_ms=120_000)
    now = client.reschedule(topic, sent.msg_id, delay_ms=0)
    assert now.status is Status.READY and now.trigger_time < sent.trigger_time
    assert now.expire_time - now.trigger_time == 120_000
    when = datetime.now(timezone.utc) + timedelta(minutes=10)
    later = client.reschedule(topic, sent.msg_id, trigger_time=when)
    assert later.status is Status.WAITING
    assert later.trigger_time == int(when.timestamp() * 1000)
    assert later.expire_time == later.trigger_time + 120_000
    assert client.get(topic, sent.msg_id) == later
    with pytest.raises(ValueError):
        client.reschedule(topic, sent.msg_id)
    with pytest.raises(ValueError):
        client.reschedule(topic, sent.msg_id, 1_000, trigger_time=when)
    with pytest.raises(NotFoundError):
        client.reschedule(topic, "absent", delay_ms=0)
    client.reschedule(topic, sent.msg_id, timedelta(0))
    client.pull(topic)
    with pytest.raises(BadRequestError):
        client.reschedule(topic, sent.msg_id, delay_ms=1_000)  # being consumed


# ---- topic settings ------------------------------------------------------------------------
def test_topic_config_shows_server_defaults_then_set_values_with_their_source(client, topic):
    config = client.get_topic_config(topic)
    assert isinstance(config, TopicConfig)
    assert config.values() == SERVER_DEFAULTS
    assert set(config.sources.values()) == {"server"}

    config = client.set_topic_config(topic, ttl_ms=timedelta(minutes=5), max_retry=2,
                                     redelivery_backoff_multiplier=2.5, dead_letter=False)
    assert (config.ttl_ms, config.max_retry) == (300_000, 2)
    assert config.redelivery_backoff_multiplier == 2.5 and config.dead_letter is False
    assert config.source("ttl_ms") == config.source("maxRetry") == "topic"
    assert config.source("ack-timeout-millis") == "server"
    assert client.get_topic_config(topic) == config

    sent = client.send(topic, "uses the topic's settings")
    assert sent.max_retry == 2 and sent.expire_time - sent.trigger_time == 300_000

    config = client.set_topic_config(topic, reset=True, ackTimeoutMillis=5_000)
    assert config.ack_timeout_ms == 5_000 and config.max_retry == 10
    assert {k for k, v in config.sources.items() if v == "topic"} == {"ack_timeout_ms"}


def test_set_topic_config_refuses_unknown_and_invalid_settings_and_writes_nothing(client,
                                                                                 topic):
    with pytest.raises(ValueError):
        client.set_topic_config(topic, max_retries=3)
    with pytest.raises(BadRequestError) as caught:
        client.set_topic_config(topic, max_retry=1, redelivery_backoff_multiplier=0.5)
    assert "redeliveryBackoffMultiplier" in str(caught.value)
    with pytest.raises(BadRequestError):
        client.set_topic_config(topic, ttl_ms=0)
    assert set(client.get_topic_config(topic).sources.values()) == {"server"}


# ---- dead letters --------------------------------------------------------------------------
def test_dead_letters_list_in_pages_redrive_and_purge(client, topic):
    sent = dead_letters(client, topic, ["a", "b", "c"], attributes={"why": "poison"})
    ids = [s.msg_id for s in sent]
    assert client.topic_info(topic).dead_queue_size == 3
    assert next(t for t in client.topics() if t.topic == topic).dead_queue_size == 3

    page = client.list_dead(topic, limit=2)
    assert isinstance(page, DeadLetterPage) and len(page.messages) == 2 and page.next_cursor
    rest, cursor = client.list_dead(topic, limit=2, cursor=page.next_cursor)
    assert cursor is None
    listed = page.messages + rest
    assert sorted(m.msg_id for m in listed) == sorted(ids)
    assert [m.dead_time for m in listed] == sorted(m.dead_time for m in listed)
    assert all(m.status is Status.RETRY_EXHAUSTED and m.dead_time for m in listed)
    assert listed[0].attributes == {"why": "poison"}
    assert [m.msg_id for m in client.iter_dead(topic, page_size=1)] == [
        m.msg_id for m in listed]

    oldest = listed[0].msg_id
    assert client.redrive_dead(topic, msg_id=oldest) == 1
    back = client.get(topic, oldest)
    assert back.status is Status.READY and back.retry == 0
    with pytest.raises(NotFoundError):
        client.redrive_dead(topic, msg_id=oldest)

    assert client.purge_dead(topic, msg_id=listed[1].msg_id) == 1
    with pytest.raises(NotFoundError):
        client.purge_dead(topic, msg_id=listed[1].msg_id)
    totals: list[int] = []
    assert client.redrive_all_dead(topic, batch=1, progress=totals.append) == 1
    assert totals == [1, 1]  # the second call found nothing more
    assert client.get(topic, listed[2].msg_id).status is Status.READY
    assert client.topic_info(topic).dead_queue_size == 0

    for m in client.pull(topic, batch=2):  # the two redriven ones, out of the way
        client.ack(m)
    dead_letters(client, topic, ["d", "e"])
    assert client.purge_dead(topic) == 2
    assert client.list_dead(topic) == ([], None)


def test_a_topic_with_dead_letters_off_keeps_none(client, topic):
    client.set_topic_config(topic, dead_letter=False)
    dead_letters(client, topic, ["x"])
    assert client.topic_info(topic).dead_queue_size == 0
    assert client.list_dead(topic).messages == []


# ---- attributes ----------------------------------------------------------------------------
def test_attributes_with_unicode_round_trip_on_send_get_and_delivery(client, topic):
    attrs = {"lang": "日本語", "emoji": "🙂 ok", "k=v": "a,b;\"quoted\"", "ünï": ""}
    sent = client.send(topic, "x", attributes=attrs, msg_id="m1")
    assert sent.attributes == attrs
    assert client.get(topic, "m1").attributes == attrs
    again = client.send(topic, "y", attributes={"other": "1"}, msg_id="m1")
    assert again.duplicate and again.attributes == attrs  # the stored message's
    [m] = client.pull(topic)
    assert m.attributes == attrs
    plain = client.send(topic, "no attributes")
    assert plain.attributes is None
    with pytest.raises(ValueError):
        client.send(topic, "x", attributes={"n": 1})  # type: ignore[dict-item]


def test_consume_commands_get_the_attributes_as_json_in_their_environment(tmp_path):
    from delayqueue.cli.command import CommandHandler

    out = tmp_path / "attrs"
    handler = CommandHandler(["sh", "-c", f'printf %s "$DELAYQUEUE_MSG_ATTRIBUTES" > {out}'])
    msg = DelayMsg("t", "m", "body", 1, 1, 2, 0, 1, Status.CONSUMING,
                   attributes={"lang": "日本語"}, receipt="r")
    assert handler(msg) is True
    assert out.read_text(encoding="utf-8") == '{"lang": "日本語"}'
