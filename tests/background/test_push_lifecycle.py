"""Push delivery, in-process, around its setup: where a push URL may point (checked when it is
set, and again at every connection: a name that later resolves to a refused address is not
connected to), what stops pushes (pause of the topic or of the subscription, a cleared
pushUrl, a deleted subscription) and starts them again, and a grouped push subscription's
one-at-a-time order. A started Runtime on a real Redis, a local receiver
(tests/support/receiver.py).

"Nothing was POSTed" is asserted over a quiet window after the push loop was seen working on
the same subscription (a delivery before the change), so that a loop which kept going would
have been seen.
"""

from __future__ import annotations

import threading

import pytest
import redis

from delayqueue.background.push_client import PushClient
from delayqueue.background.runtime import Runtime
from delayqueue.core.errors import BadRequest, NotFound
from delayqueue.core.status import Status
from delayqueue.settings.config import load_settings
from delayqueue.settings.push_networks import AllowedNetworks

from support import wait_until
from support.ports import free_port
from support.receiver import Answer, Receiver

pytestmark = pytest.mark.timeout(60)

QUIET_S = 1.5    # > the push loop's refresh and config TTL (1 s): long enough to act


def make_runtime(redis_url: str, **overrides) -> Runtime:
    settings = load_settings(overrides={"redis_url": redis_url, "snapshot_dir": "",
                                        "graceful_timeout_seconds": 2, **overrides})
    return Runtime(settings, client=redis.Redis.from_url(redis_url, decode_responses=True))


@pytest.fixture
def runtime(redis_url):
    rt = make_runtime(redis_url, push_allowed_networks="127.0.0.0/8")
    rt.start()
    yield rt
    rt.stop()


@pytest.fixture
def receiver():
    with Receiver() as r:
        yield r


def status_of(rt: Runtime, topic: str, msg_id: str, subscription: str | None = None) -> int:
    return int(rt.queue.get(topic, msg_id, subscription=subscription).status)


def wait_acked(rt: Runtime, topic: str, msg_ids, subscription: str | None = None,
               timeout_s: float = 15) -> None:
    msg_ids = list(msg_ids)

    def statuses() -> list[int]:
        return [status_of(rt, topic, m, subscription) for m in msg_ids]

    wait_until(lambda: statuses() == [Status.ACKED] * len(msg_ids), timeout_s, interval_s=0.05,
               message=lambda: f"statuses {statuses()}")


def assert_quiet(receiver: Receiver, path: str, seen: int) -> None:
    """No POST beyond the ``seen`` ones arrives within QUIET_S."""
    with pytest.raises(AssertionError):
        receiver.wait_for(seen + 1, path, timeout_s=QUIET_S)


def msg_ids(receiver: Receiver, path: str) -> list[str]:
    return [r.json["delayMsg"]["msgId"] for r in receiver.requests(path)]


# -- 6. where a push may go --------------------------------------------------------------------

REFUSED_URLS = [
    "http://localhost:8080/hook",                       # loopback by name
    "http://127.0.0.1:8080/hook",
    "http://10.1.2.3/hook",                             # private
    "http://169.254.169.254/latest/meta-data/",         # link-local: cloud metadata
    "http://[::1]:8080/hook",
    "ftp://203.0.113.7/hook",                           # not http(s)
    "http://user:password@203.0.113.7/hook",            # credentials in the URL
]


@pytest.mark.parametrize("url", REFUSED_URLS)
def test_a_disallowed_push_url_is_refused_when_set_and_nothing_is_written(redis_url, url):
    rt = make_runtime(redis_url)                        # push-allowed-networks: public
    with pytest.raises(BadRequest, match="^pushUrl: "):
        rt.subscriptions.set_config("orders", None, {"pushUrl": url})
    with pytest.raises(BadRequest, match="^pushUrl: "):
        rt.subscriptions.create("orders", "hooks", {"pushUrl": url, "maxRetry": 3})
    assert rt.subscriptions.names("orders") == []       # checked before anything is written
    assert rt.subscriptions.get_config("orders", None)[0]["pushUrl"] is None
    assert rt.client.smembers(rt.keys.push_subscriptions) == set()


def test_a_name_that_later_resolves_outside_the_allowed_networks_is_not_connected_to(
        redis_url):
    """hooks.test resolves to 127.0.0.1 (allowed) when pushUrl is set, to 127.0.0.2 (refused)
    when the push connects. A receiver listens on both addresses, same port: a connection
    made despite the refusal would be seen."""
    names = {"hooks.test": ["127.0.0.1"], "elsewhere.test": ["127.0.0.2"]}

    def resolver(host: str, port: int) -> list[str]:
        if host not in names:
            raise OSError(f"unknown host {host}")
        return list(names[host])

    inside, outside = receivers_on_one_port()
    rt = make_runtime(redis_url, push_allowed_networks="127.0.0.1/32")
    rt.subscriptions.resolver = resolver
    rt.pusher.client = PushClient(AllowedNetworks.parse("127.0.0.1/32"), resolver=resolver)
    rt.start()
    try:
        port, topic = inside.port, "guarded"
        with pytest.raises(BadRequest, match="outside push-allowed-networks"):
            rt.subscriptions.set_config(topic, None,
                                        {"pushUrl": f"http://elsewhere.test:{port}/hook"})
        rt.admin.set_config(topic, {"redeliveryDelayMillis": 60_000})
        rt.subscriptions.set_config(topic, None, {"pushUrl": f"http://hooks.test:{port}/hook"})
        names["hooks.test"] = ["127.0.0.2"]             # DNS changed after the check
        rt.queue.send(topic, "payload", msg_id="m")
        errors = wait_until(lambda: rt.subscriptions.push_status(topic, None)["lastErrors"],
                            15, message="no push attempt failed")
        assert [(e["msgId"], e["outcome"]) for e in errors] == [("m", "refused")]
        message = rt.queue.get(topic, "m")              # nacked: waiting out the backoff
        assert (message.status, message.retry) == (Status.WAITING, 1)
        assert inside.requests() == [] and outside.requests() == []
        # Resolving inside again, the message is delivered (to the allowed address) and acked.
        names["hooks.test"] = ["127.0.0.1"]
        rt.queue.reschedule(topic, "m", delay_ms=0)
        wait_acked(rt, topic, ["m"])
        assert msg_ids(inside, "/hook") == ["m"] and outside.requests() == []
    finally:
        rt.stop()
        inside.stop()
        outside.stop()


def receivers_on_one_port() -> tuple[Receiver, Receiver]:
    """A receiver on 127.0.0.1 and one on 127.0.0.2, on the same port."""
    for _ in range(5):
        port = free_port()
        try:
            inside = Receiver("127.0.0.1", port).start()
        except OSError:
            continue
        try:
            return inside, Receiver("127.0.0.2", port).start()
        except OSError:
            inside.stop()
    raise RuntimeError("no port free on both 127.0.0.1 and 127.0.0.2")


# -- 9. what stops pushes -------------------------------------------------------------------------

@pytest.mark.parametrize("scope", ["topic", "subscription"])
def test_pause_stops_pushes_and_resume_starts_them_again(runtime, receiver, scope):
    topic, path = f"pause-{scope}", "/paused"
    runtime.subscriptions.create(topic, "hooks", {"pushUrl": receiver.url(path)})
    runtime.queue.send(topic, "first", msg_id="m0")
    receiver.wait_for(1, path)
    wait_acked(runtime, topic, ["m0"], "hooks")
    assert runtime.controls.pause(topic, None if scope == "topic" else "hooks")
    assert runtime.subscriptions.push_status(topic, "hooks")["paused"] is True
    runtime.queue.send(topic, "second", msg_id="m1")
    assert_quiet(receiver, path, 1)
    assert status_of(runtime, topic, "m1", "hooks") == Status.READY
    assert runtime.controls.resume(topic, None if scope == "topic" else "hooks")
    receiver.wait_for(2, path)
    wait_acked(runtime, topic, ["m1"], "hooks")
    assert msg_ids(receiver, path) == ["m0", "m1"]


def test_clearing_push_url_stops_pushes_and_the_subscription_can_be_pulled(runtime, receiver):
    topic, path = "cleared", "/cleared"
    runtime.subscriptions.create(topic, "hooks", {"pushUrl": receiver.url(path)})
    with pytest.raises(BadRequest, match="push subscription"):
        runtime.queue.pull(topic, 1, subscription="hooks")
    runtime.queue.send(topic, "first", msg_id="m0")
    receiver.wait_for(1, path)
    wait_acked(runtime, topic, ["m0"], "hooks")
    runtime.subscriptions.set_config(topic, "hooks", {"pushUrl": ""})
    assert runtime.subscriptions.push_status(topic, "hooks")["pushUrl"] is None
    assert runtime.client.smembers(runtime.keys.push_subscriptions) == set()
    runtime.queue.send(topic, "second", msg_id="m1")
    assert_quiet(receiver, path, 1)
    [pulled] = runtime.queue.pull(topic, 1, subscription="hooks").messages
    assert pulled.msg_id == "m1" and pulled.retry == 1      # its first delivery: this pull
    runtime.queue.ack(topic, "m1", pulled.receipt, subscription="hooks")
    assert msg_ids(receiver, path) == ["m0"]


def test_deleting_a_push_subscription_stops_its_pushes(runtime, receiver):
    topic, path = "deleted", "/deleted"
    runtime.subscriptions.create(topic, "hooks", {"pushUrl": receiver.url(path)})
    runtime.queue.send(topic, "first", msg_id="m0")
    receiver.wait_for(1, path)
    wait_acked(runtime, topic, ["m0"], "hooks")
    runtime.subscriptions.delete(topic, "hooks")
    assert runtime.client.smembers(runtime.keys.push_subscriptions) == set()
    with pytest.raises(NotFound):
        runtime.subscriptions.push_status(topic, "hooks")
    runtime.queue.send(topic, "second", msg_id="m1")
    assert_quiet(receiver, path, 1)
    assert msg_ids(receiver, path) == ["m0"]
    assert status_of(runtime, topic, "m1") == Status.READY   # the default subscription's
    wait_until(lambda: (topic, "hooks") not in runtime.pusher.pushers, 5,
               message="the deleted subscription's push thread did not end")


# -- 10. a grouped push subscription --------------------------------------------------------

def test_a_grouped_push_subscription_pushes_one_message_of_a_group_at_a_time_in_order(
        runtime, receiver):
    topic, path = "grouped", "/grouped"
    receiver.script(path, then=Answer(sleep_s=0.1))
    runtime.subscriptions.set_config(topic, None, {"pushUrl": receiver.url(path),
                                                   "pushConcurrency": 10})
    groups, per_group = ["g0", "g1", "g2"], 4
    sent = [f"{g}-{n}" for n in range(per_group) for g in groups]   # the groups interleaved
    for msg_id in sent:
        runtime.queue.send(topic, msg_id, msg_id=msg_id, group_id=msg_id.split("-")[0])
    receiver.wait_for(len(sent), path, timeout_s=20)
    wait_acked(runtime, topic, sent)
    requests = receiver.requests(path)
    assert sorted(msg_ids(receiver, path)) == sorted(sent)          # each exactly once
    for group in groups:
        mine = [r for r in requests if r.json["delayMsg"]["groupId"] == group]
        assert [r.json["delayMsg"]["msgId"] for r in mine] == \
            [f"{group}-{n}" for n in range(per_group)], "out of order"
        # Strictly one at a time: each POST arrived after the previous one was answered.
        overlaps = [(a.json["delayMsg"]["msgId"], b.json["delayMsg"]["msgId"])
                    for a, b in zip(mine, mine[1:]) if b.at_ms < a.answered_ms]
        assert not overlaps, f"{group}: pushed while the previous was in flight: {overlaps}"


# -- a push URL set while the push loop refreshes ------------------------------------------------

# core/subscriptions.py adds the subscription to the push registry before its script writes
# pushUrl (so a loop never misses it) and again after: a push-loop tick in between starts a
# delivery thread that finds no pushUrl yet, ends, and drops the member (Pusher.forget). Here
# that window is widened past the loop's 1 s refresh; the URL must still be pushed.
def test_a_push_url_set_while_the_push_loop_refreshes_is_not_forgotten(runtime, receiver):
    topic, path = "raced", "/raced"
    real = runtime.subscriptions.scripts.topic_config
    delayed = 2.0    # > push.REFRESH_S: a tick sees the registry member before pushUrl exists

    def slow_topic_config(*args, **kwargs):
        threading.Event().wait(delayed)      # a slow Redis round trip, stretched
        return real(*args, **kwargs)

    runtime.subscriptions.scripts.topic_config = slow_topic_config
    try:
        runtime.subscriptions.set_config(topic, None, {"pushUrl": receiver.url(path)})
    finally:
        runtime.subscriptions.scripts.topic_config = real
    runtime.queue.send(topic, "payload", msg_id="m")
    receiver.wait_for(1, path, timeout_s=10)
    wait_acked(runtime, topic, ["m"])
