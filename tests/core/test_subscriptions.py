"""Named subscriptions (core/subscriptions.py, lua/includes/fanout.lua): every subscription
gets every message sent after it was created, each with its own delivery state; the body is
stored once and freed only when every subscription has let go of it."""

from __future__ import annotations

import pytest
from test_bounded_work import make_runtime

from delayqueue.core.clock import ManualClock
from delayqueue.core.errors import BadRequest, Conflict, MissingParameter, NotFound
from delayqueue.core.requests import SendRequest
from delayqueue.core.status import Status
from delayqueue.core.subscriptions import subscription_name

from support.lua import T0
from support.node import REPO
from support.redis_server import RedisServer


@pytest.fixture
def rt(redis_url):
    return make_runtime(redis_url, ManualClock(T0))


def pulled(rt, topic="t", subscription=None, count=100):
    return [m.msg_id for m in rt.queue.pull(topic, count, subscription=subscription).messages]


def visit(rt, topic="t"):
    """The scheduler's visit of the topic (promotion, ack timeouts, expiry, purge)."""
    return rt.scheduler.visit([topic])


def test_names_are_checked_and_default_is_the_default_subscription():
    assert subscription_name(None) is None and subscription_name("") is None
    assert subscription_name("default") is None
    assert subscription_name("billing.v2_x-1") == "billing.v2_x-1"
    for bad in ("a b", "x" * 65, "ü", "a:b"):
        with pytest.raises(BadRequest, match="^subscription: must be 1-64 characters"):
            subscription_name(bad)
    with pytest.raises(BadRequest, match="^subscription: 'default' is the default"):
        subscription_name("default", named=True)
    with pytest.raises(MissingParameter, match="^subscription: required"):
        subscription_name("", named=True)


def test_every_subscription_gets_every_message_sent_after_it_was_created(rt):
    rt.queue.send("t", "before", msg_id="old")
    for name in ("s1", "s2", "s3"):
        rt.subscriptions.create("t", name)
    rt.queue.send_batch("t", [SendRequest(f"body {i}", f"m{i}") for i in range(5)])
    expected = [f"m{i}" for i in range(5)]
    assert pulled(rt) == ["old", *expected]
    for name in ("s1", "s2", "s3"):
        assert pulled(rt, subscription=name) == expected   # in acceptance order, once
        assert pulled(rt, subscription=name) == []
    message = rt.queue.get("t", "m3", subscription="s2")
    assert (message.msg, message.status, message.retry) == ("body 3", Status.CONSUMING, 1)


def test_a_message_sent_before_and_due_after_the_creation_is_not_delivered(rt):
    rt.queue.send("t", "b", msg_id="early", delay_ms=10_000)
    rt.subscriptions.create("t", "late")
    rt.clock.advance(10_000)
    visit(rt)
    assert pulled(rt, subscription="late") == []
    assert pulled(rt) == ["early"]
    with pytest.raises(NotFound):
        rt.queue.get("t", "early", subscription="late")


def test_acks_receipts_and_retries_are_per_subscription(rt):
    rt.subscriptions.create("t", "a")
    rt.subscriptions.create("t", "b")
    rt.queue.send("t", "x", msg_id="m")
    [in_a] = rt.queue.pull("t", subscription="a").messages
    [in_b] = rt.queue.pull("t", subscription="b").messages
    [in_default] = rt.queue.pull("t").messages
    receipts = {in_a.receipt, in_b.receipt, in_default.receipt}
    assert len(receipts) == 3                      # same time, same retry: still unique
    with pytest.raises(Conflict, match="stale receipt"):
        rt.queue.ack("t", "m", in_a.receipt, subscription="b")
    with pytest.raises(Conflict, match="stale receipt"):
        rt.queue.ack("t", "m", in_b.receipt)
    rt.queue.ack("t", "m", in_a.receipt, subscription="a")
    assert rt.queue.get("t", "m", subscription="a").status == Status.ACKED
    assert rt.queue.get("t", "m", subscription="b").status == Status.CONSUMING
    rt.queue.nack("t", "m", in_b.receipt, subscription="b")
    assert pulled(rt, subscription="b") == ["m"]
    assert rt.queue.get("t", "m", subscription="b").retry == 2
    summary = rt.queue.get("t", "m")
    assert summary.status == Status.CONSUMING and summary.retry == 1
    assert summary.subscriptions == {"a": {"status": 4, "retry": 1},
                                     "b": {"status": 3, "retry": 2}}
    assert summary.to_json()["subscriptions"]["b"] == {"status": 3, "retry": 2}


def test_a_default_nack_with_a_delay_does_not_move_a_named_subscriptions_trigger_time(rt):
    """The topic's record carries the default subscription's next trigger time after its
    nack with a delay; a named subscription's first delivery shows its own (found by the push
    model test: a message shown due at T0 + 700 handed out at T0)."""
    rt.subscriptions.create("t", "a")
    rt.queue.send("t", "x", msg_id="m")
    [in_default] = rt.queue.pull("t").messages
    rt.queue.nack("t", "m", in_default.receipt, delay_ms=700)
    assert rt.queue.get("t", "m").trigger_time == T0 + 700
    assert rt.queue.get("t", "m", subscription="a").trigger_time == T0
    [listed] = rt.controls.list("t", "ready", subscription="a").messages
    assert (listed.msg_id, listed.trigger_time) == ("m", T0)
    [in_a] = rt.queue.pull("t", subscription="a").messages
    assert in_a.trigger_time == T0
    assert rt.queue.get("t", "m", subscription="a").trigger_time == T0


def test_an_unknown_subscription_is_refused_404_and_creates_nothing(rt):
    rt.queue.send("t", "x", msg_id="m")
    keys = set(rt.client.keys("*"))
    for call in (lambda: rt.queue.pull("t", subscription="ghost"),
                 lambda: rt.queue.ack("t", "m", subscription="ghost"),
                 lambda: rt.queue.get("t", "m", subscription="ghost"),
                 lambda: rt.admin.list("t", subscription="ghost"),
                 lambda: rt.controls.pause("t", subscription="ghost"),
                 lambda: rt.subscriptions.delete("t", "ghost")):
        with pytest.raises(NotFound, match="^subscription: no subscription 'ghost'"):
            call()
    assert set(rt.client.keys("*")) - keys <= {rt.keys.topics}


def test_timeouts_backoff_and_dead_letters_are_per_subscription_with_its_own_settings(rt):
    rt.subscriptions.create("t", "strict", {"maxRetry": "0", "ackTimeoutMillis": "1000"})
    values, sources = rt.subscriptions.get_config("t", "strict")
    assert (values["maxRetry"], sources["maxRetry"]) == (0, "subscription")
    assert sources["ttlMillis"] == "server"
    rt.queue.send("t", "x", msg_id="m")
    assert pulled(rt, subscription="strict") == ["m"]
    assert pulled(rt) == ["m"]
    rt.clock.advance(1_000)
    visit(rt)
    dead = rt.admin.list("t", subscription="strict").messages
    assert [d.msg_id for d in dead] == ["m"]
    assert rt.admin.list("t").messages == []
    assert rt.queue.get("t", "m").status == Status.CONSUMING   # default's ack timeout is later
    assert rt.admin.redrive("t", "m", subscription="strict") == 1
    assert pulled(rt, subscription="strict") == ["m"]


def test_a_message_s_own_max_retry_wins_over_the_subscription_s(rt):
    rt.subscriptions.create("t", "s", {"maxRetry": "0"})
    rt.queue.send("t", "x", msg_id="own", max_retry=5)
    rt.queue.send("t", "x", msg_id="topic")
    assert {m.msg_id: m.max_retry for m in rt.queue.pull("t", 10, subscription="s").messages} \
        == {"own": 5, "topic": 0}


def test_groups_apply_within_each_subscription(rt):
    rt.subscriptions.create("t", "s")
    rt.queue.send_batch("t", [SendRequest("x", f"g{i}", group_id="g") for i in range(3)])
    assert pulled(rt, subscription="s") == ["g0"]
    assert pulled(rt, subscription="s") == []           # the group waits behind its head
    assert pulled(rt) == ["g0"]
    rt.queue.ack("t", "g0", subscription="s")
    assert pulled(rt, subscription="s") == ["g1"]
    assert pulled(rt) == []                              # the default's head is not acked
    info = {i["subscription"]: i for i in rt.subscriptions.list("t")}
    assert info["s"]["groupBlockedSize"] == 1 and info["s"]["ackQueueSize"] == 1


def test_the_body_is_freed_only_when_every_subscription_has_ended_it(rt):
    rt.subscriptions.create("t", "a")
    rt.subscriptions.create("t", "b")
    rt.queue.send("t", "x" * 1000, msg_id="m")
    tk = rt.queue.topic_keys("t")
    slot = rt.scripts.get(tk, "m", None).slot
    for sub in (None, "a", "b"):
        pulled(rt, subscription=sub)
        rt.queue.ack("t", "m", subscription=sub)
    # Past every retention: the default's purge keeps the body while a and b hold it.
    rt.clock.advance(rt.queue.end_life_ms + 120_000)
    visit(rt)
    assert rt.client.hget(tk.msgs, slot) is None
    assert rt.client.hget(tk.refs, slot) is None
    assert rt.client.hlen(tk.subscription("a").msgs) == 0


def test_a_body_held_by_one_subscription_outlives_the_others(rt):
    rt.subscriptions.create("t", "slow")
    rt.queue.send("t", "payload", msg_id="m")
    pulled(rt)
    rt.queue.ack("t", "m")
    rt.clock.advance(rt.queue.end_life_ms + 120_000)
    visit(rt)
    assert pulled(rt, subscription="slow") == ["m"]
    assert rt.queue.get("t", "m", subscription="slow").msg == "payload"


def test_delete_ends_the_message_everywhere(rt):
    rt.subscriptions.create("t", "a")
    rt.queue.send("t", "x", msg_id="m")
    rt.queue.send("t", "x", msg_id="later", delay_ms=60_000)
    pulled(rt, subscription="a")
    rt.queue.delete("t", "m")
    rt.queue.delete("t", "later")
    assert rt.queue.get("t", "m", subscription="a").status == Status.DELETED
    assert rt.queue.get("t", "m").status == Status.DELETED
    rt.clock.advance(60_000)
    visit(rt)
    assert pulled(rt, subscription="a") == [] and pulled(rt) == []


def test_a_bare_ready_entry_expires_in_every_subscription_without_a_pull(rt):
    rt.subscriptions.create("t", "a")
    rt.queue.send("t", "x", msg_id="m", ttl_ms=5_000)
    rt.clock.advance(5_000)
    visit(rt)
    assert rt.queue.get("t", "m", subscription="a").status == Status.EXPIRED
    info = {i["subscription"]: i for i in rt.subscriptions.list("t")}
    assert info["a"]["readyQueueSize"] == 0


def test_without_the_default_subscription_only_named_ones_receive(rt):
    rt.admin.set_config("t", {"defaultSubscription": "false"})
    with pytest.raises(BadRequest, match="^defaultSubscription: "):
        rt.queue.send("t", "x")
    rt.subscriptions.create("t", "only")
    rt.queue.send("t", "x", msg_id="m")
    assert pulled(rt) == []
    assert pulled(rt, subscription="only") == ["m"]
    assert rt.queue.send("t", "again", msg_id="m").duplicate


def test_reschedule_applies_until_a_subscription_has_begun_delivering(rt):
    rt.subscriptions.create("t", "a")
    rt.queue.send("t", "x", msg_id="m")
    rt.queue.reschedule("t", "m", delay_ms=10_000)
    assert pulled(rt, subscription="a") == [] and pulled(rt) == []
    rt.clock.advance(10_000)
    assert pulled(rt, subscription="a") == ["m"]
    with pytest.raises(BadRequest):
        rt.queue.reschedule("t", "m", delay_ms=10_000)


def test_delete_subscription_mid_flight_frees_its_state_and_a_namesake_starts_empty(rt):
    rt.subscriptions.create("t", "s")
    rt.queue.send_batch("t", [SendRequest("x", f"m{i}") for i in range(2500)])
    assert len(pulled(rt, subscription="s", count=1000)) == 1000
    tk = rt.queue.topic_keys("t")
    rt.subscriptions.delete("t", "s")
    assert rt.client.keys(f"{tk.base}:s:*") == [] and rt.client.keys(f"{tk.base}:sd:*") == []
    assert rt.client.hlen(tk.refs) == 0
    assert rt.client.smembers(rt.keys.subscription_drops) == set()
    rt.subscriptions.create("t", "s")
    assert pulled(rt, subscription="s") == []
    with pytest.raises(NotFound):
        rt.queue.ack("t", "m0", subscription="s")


def test_pause_of_a_subscription_and_of_the_whole_topic(rt):
    rt.subscriptions.create("t", "s")
    rt.queue.send("t", "x", msg_id="m")
    rt.controls.pause("t", subscription="s")
    assert pulled(rt, subscription="s") == [] and pulled(rt) == ["m"]
    rt.controls.resume("t", subscription="s")
    rt.controls.pause("t")
    assert pulled(rt, subscription="s") == []
    rt.controls.resume("t")
    assert pulled(rt, subscription="s") == ["m"]


def test_purge_topic_ends_messages_in_every_subscription(rt):
    rt.subscriptions.create("t", "s")
    rt.queue.send_batch("t", [SendRequest("x", f"m{i}") for i in range(3)])
    pulled(rt, subscription="s", count=1)
    assert rt.controls.purge("t").count == 3
    assert pulled(rt, subscription="s") == [] and pulled(rt) == []
    assert rt.queue.get("t", "m0", subscription="s").status == Status.DELETED


def test_list_msg_in_a_subscription_shows_its_bare_entries(rt):
    rt.subscriptions.create("t", "s")
    rt.queue.send_batch("t", [SendRequest("x", f"m{i}") for i in range(3)])
    page = rt.controls.list("t", "ready", subscription="s")
    assert [m.msg_id for m in page.messages] == ["m0", "m1", "m2"]
    assert {m.status for m in page.messages} == {Status.READY}


def test_the_cap_of_named_subscriptions_per_topic(rt):
    for i in range(32):
        rt.subscriptions.create("t", f"s{i}")
    with pytest.raises(BadRequest, match="max-subscriptions-per-topic"):
        rt.subscriptions.create("t", "one-more")
    assert rt.subscriptions.create("t", "s0")["subscription"] == "s0"   # exists: found


def test_a_subscription_may_set_only_its_own_settings(rt):
    with pytest.raises(BadRequest, match="^ttlMillis: a subscription may set only"):
        rt.subscriptions.create("t", "s", {"ttlMillis": "5"})
    assert rt.subscriptions.names("t") == []
    rt.subscriptions.create("t", "s", {"ackTimeoutMillis": "5000"})
    values, sources = rt.subscriptions.set_config("t", "s", {"maxRetry": "2"})
    assert (values["ackTimeoutMillis"], values["maxRetry"]) == (5000, 2)
    assert sources["maxRetry"] == "subscription"
    values, sources = rt.subscriptions.set_config("t", "s", {}, reset=True)
    assert sources["ackTimeoutMillis"] == "server"


def test_a_pull_in_a_subscription_knows_when_its_next_message_is_due(rt):
    """A long poll sleeps until then with no hint at all (the fan-out holds it till due)."""
    rt.subscriptions.create("t", "s")
    rt.queue.send("t", "x", msg_id="m", delay_ms=7_000)
    assert rt.queue.pull("t", subscription="s").next_due_ms == T0 + 7_000


def test_every_subscription_call_runs_as_the_restricted_redis_user(tmp_path):
    """config/delayqueue.acl allows every command subscriptions send (the drop's RENAME and
    ZREMRANGEBYRANK, the refs' HINCRBY, names' HKEYS)."""
    acl = tmp_path / "users.acl"
    acl.write_text((REPO / "config" / "delayqueue.acl").read_text().replace(
        ">CHANGE-ME", ">acl-test-password-1"))
    server = RedisServer(tmp_path, extra_args=["--aclfile", str(acl)]).start()
    try:
        rt = make_runtime(f"redis://delayqueue:acl-test-password-1@127.0.0.1:{server.port}/0",
                          ManualClock(T0))
        rt.subscriptions.create("t", "s", {"maxRetry": "1"})
        rt.queue.send_batch("t", [SendRequest("x", f"m{i}", group_id=None if i % 2 else "g")
                                  for i in range(6)])
        assert len(pulled(rt, subscription="s")) == 4
        rt.queue.delete("t", "m1")
        rt.clock.advance(rt.queue.end_life_ms + 120_000)
        visit(rt)
        assert rt.subscriptions.names("t") == ["s"]
        rt.subscriptions.delete("t", "s")
        assert rt.subscriptions.names("t") == []
        rt.client.close()
    finally:
        server.stop()
