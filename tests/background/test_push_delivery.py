"""Push delivery, in-process: a started Runtime (its push loop, scheduler and hub) on a real
Redis POSTs to a local receiver (tests/support/receiver.py). Push is set up through the core
(``runtime.subscriptions``), as the HTTP parameters would.

What each test holds exactly: every message POSTed once per delivery and never before its
triggerTime (the body's, on the Redis clock, against the receiver's wall clock: one machine),
a 2xx acks it (getMsg: status 4), anything else nacks it with the subscription's backoff (or
a 429 / 503's Retry-After) until its maxRetry + 1 deliveries are used (status 6), each
failure listed in push_status' lastErrors, and a pushSecret signs what verify_signature
accepts.
"""

from __future__ import annotations

import math
import time
from email.utils import formatdate

import pytest
from test_push_lifecycle import receiver, runtime, status_of  # noqa: F401 - fixtures

from delayqueue.background.runtime import Runtime
from delayqueue.client import verify_signature
from delayqueue.core.status import Status

from support import wait_until
from support.ports import refused_port
from support.receiver import Answer

pytestmark = pytest.mark.timeout(60)

DELAY_MS = 400          # the backoff's first delay in the failure tests
MULTIPLIER = 2          # ... then 800 ms
MAX_RETRY = 2           # 3 deliveries, then a dead letter


def wait_status(rt: Runtime, topic: str, msg_ids, status: Status, timeout_s: float = 15,
                subscription: str | None = None) -> None:
    msg_ids = list(msg_ids)

    def statuses() -> list[int]:
        return [status_of(rt, topic, m, subscription) for m in msg_ids]

    wait_until(lambda: statuses() == [status] * len(msg_ids), timeout_s, interval_s=0.05,
               message=lambda: f"statuses {statuses()} (waiting for {int(status)})")


def by_msg_id(requests) -> dict[str, list]:
    seen: dict[str, list] = {}
    for request in requests:
        seen.setdefault(request.json["delayMsg"]["msgId"], []).append(request)
    return seen


def assert_never_early(requests) -> None:
    early = [(r.json["delayMsg"]["msgId"], r.at_ms, r.json["delayMsg"]["triggerTime"])
             for r in requests if r.at_ms < r.json["delayMsg"]["triggerTime"]]
    assert not early, f"POSTed before triggerTime: {early}"


# -- 1. 2xx acks ---------------------------------------------------------------------------------

def test_each_message_is_posted_once_as_documented_and_a_2xx_acks_it(runtime, receiver):
    topic, path = "orders", "/orders"
    runtime.subscriptions.set_config(topic, None, {"pushUrl": receiver.url(path)})
    sent = {}
    for n in range(5):                                   # due at once
        sent[f"now-{n}"] = runtime.queue.send(topic, f"body-{n}", msg_id=f"now-{n}",
                                              attributes={"n": str(n)}).message
    for n in range(5):                                   # due later, one after the other
        sent[f"later-{n}"] = runtime.queue.send(topic, f"later-{n}", msg_id=f"later-{n}",
                                                delay_ms=300 * (n + 1)).message
    receiver.wait_for(len(sent), path, timeout_s=20)
    wait_status(runtime, topic, sent, Status.ACKED)
    requests = receiver.requests(path)   # acked is final: no POST can come after this
    posts = by_msg_id(requests)
    assert sorted(posts) == sorted(sent)
    assert {m: len(p) for m, p in posts.items()} == {m: 1 for m in sent}, "POSTed more than once"
    assert_never_early(requests)
    for msg_id, [request] in posts.items():
        message = sent[msg_id]
        body = request.json
        assert request.method == "POST" and set(body) == {"subscription", "delayMsg"}
        assert body["subscription"] == "default"
        receipt = body["delayMsg"]["receipt"]
        assert receipt
        assert body["delayMsg"] == {**message.to_json(), "retry": 1,
                                    "status": int(Status.CONSUMING), "receipt": receipt}
        assert request.header("Content-Type") == "application/json"
        assert request.header("X-DelayQueue-Topic") == topic
        assert request.header("X-DelayQueue-Subscription") == "default"
        assert request.header("X-DelayQueue-Msg-Id") == msg_id
        assert request.header("X-DelayQueue-Receipt") == receipt
        assert request.header("X-DelayQueue-Signature") is None     # no pushSecret
        assert request.status == 200
    status = runtime.subscriptions.push_status(topic, None)
    assert status["lastErrors"] == [] and status["inFlight"] == 0


# -- 2. failures: backoff, dead letter, lastErrors ----------------------------------------------

FAILURES = {
    # name: (the receiver's answer, outcome, status recorded, the subscription's pushTimeout)
    "500": (Answer(500, body=b"boom"), "5xx", 500, None),
    "read-timeout": (Answer(sleep_s=2.0), "timeout", None, 300),
    "closed-unanswered": (Answer(close=True), "connection", None, None),
    "302-not-followed": (None, "3xx", 302, None),
    "connection-refused": (None, "connection", None, None),
}


@pytest.mark.parametrize("failure", list(FAILURES))
def test_a_failed_push_is_nacked_with_the_backoff_until_it_is_a_dead_letter(
        runtime, receiver, failure):
    answer, outcome, http_status, timeout_ms = FAILURES[failure]
    topic, path = f"fail-{failure}", "/hook"
    with refused_port() as closed:
        if failure == "connection-refused":
            url = f"http://127.0.0.1:{closed}/hook"
        else:
            url = receiver.url(path)
            if failure == "302-not-followed":
                answer = Answer(302, {"Location": receiver.url("/moved")}, b"")
            receiver.script(path, then=answer)
        runtime.admin.set_config(topic, {"maxRetry": MAX_RETRY, "redeliveryDelayMillis": DELAY_MS,
                                         "redeliveryBackoffMultiplier": MULTIPLIER})
        runtime.subscriptions.set_config(topic, None, {
            "pushUrl": url, **({"pushTimeoutMillis": timeout_ms} if timeout_ms else {})})
        runtime.queue.send(topic, "payload", msg_id="m")
        wait_status(runtime, topic, ["m"], Status.RETRY_EXHAUSTED, timeout_s=20)

    message = runtime.queue.get(topic, "m")
    assert message.retry == MAX_RETRY + 1
    errors = runtime.subscriptions.push_status(topic, None)["lastErrors"]
    assert len(errors) == MAX_RETRY + 1, errors
    assert [(e["msgId"], e["outcome"], e["status"]) for e in errors] == \
        [("m", outcome, http_status)] * (MAX_RETRY + 1)
    assert all(e["error"] for e in errors)
    # Newest first; each attempt came at least the backoff's delay after the previous one's
    # failure was noted (the same node clock, read just before its nack).
    times = [e["time"] for e in reversed(errors)]
    delays = [DELAY_MS * MULTIPLIER ** k for k in range(MAX_RETRY)]
    assert [b - a >= d for a, b, d in zip(times, times[1:], delays)] == [True] * MAX_RETRY, \
        (times, delays)

    requests = receiver.requests(path)
    if failure == "connection-refused":
        assert receiver.requests() == []
        return
    assert receiver.requests("/moved") == []             # a redirect is never followed
    # The dead letter ended the deliveries: exactly maxRetry + 1 POSTs, never early, the
    # gaps between them at least the backoff's delays.
    assert len(requests) == MAX_RETRY + 1
    assert [r.json["delayMsg"]["retry"] for r in requests] == list(range(1, MAX_RETRY + 2))
    assert_never_early(requests)
    arrivals = [r.at_ms for r in requests]
    assert [b - a >= d for a, b, d in zip(arrivals, arrivals[1:], delays)] == \
        [True] * MAX_RETRY, (arrivals, delays)


def test_a_receiver_that_was_down_gets_the_retry_and_it_is_acked(runtime, receiver):
    topic, path = "down", "/down"
    runtime.admin.set_config(topic, {"redeliveryDelayMillis": 200})
    runtime.subscriptions.set_config(topic, None, {"pushUrl": receiver.url(path)})
    receiver.down()
    runtime.queue.send(topic, "payload", msg_id="m")
    wait_until(lambda: runtime.subscriptions.push_status(topic, None)["lastErrors"], 15,
               message="no failed attempt noted while the receiver was down")
    receiver.up()
    wait_status(runtime, topic, ["m"], Status.ACKED)
    [request] = receiver.requests(path)
    assert request.json["delayMsg"]["retry"] >= 2
    assert {e["outcome"] for e in runtime.subscriptions.push_status(topic, None)["lastErrors"]} \
        == {"connection"}


# -- 3. Retry-After -------------------------------------------------------------------------------

BACKOFF_MS = 30_000     # what a nack without Retry-After would wait: far beyond the waits below


def test_a_429_retry_after_in_seconds_is_the_next_attempts_delay(runtime, receiver):
    topic, path = "throttled", "/throttled"
    runtime.admin.set_config(topic, {"redeliveryDelayMillis": BACKOFF_MS})
    receiver.script(path, Answer(429, {"Retry-After": "2"}))       # then 200
    runtime.subscriptions.set_config(topic, None, {"pushUrl": receiver.url(path)})
    runtime.queue.send(topic, "payload", msg_id="m")
    first, second = receiver.wait_for(2, path, timeout_s=15)       # not the 30 s backoff
    wait_status(runtime, topic, ["m"], Status.ACKED)
    assert (first.status, second.status) == (429, 200)
    assert second.at_ms - first.at_ms >= 2000, second.at_ms - first.at_ms
    assert_never_early([first, second])
    [error] = runtime.subscriptions.push_status(topic, None)["lastErrors"]
    assert (error["outcome"], error["status"]) == ("4xx", 429)
    assert second.json["delayMsg"]["triggerTime"] - error["time"] >= 2000


def test_a_503_retry_after_http_date_is_waited_for(runtime, receiver):
    topic, path = "unavailable", "/unavailable"
    runtime.admin.set_config(topic, {"redeliveryDelayMillis": BACKOFF_MS})
    until: list[float] = []

    def answer(request):
        if until:
            return Answer(200)
        until.append(math.ceil(time.time()) + 3)   # a whole second: an HTTP date has no less
        return Answer(503, {"Retry-After": formatdate(until[0], usegmt=True)})

    receiver.script(path, answer)
    runtime.subscriptions.set_config(topic, None, {"pushUrl": receiver.url(path)})
    runtime.queue.send(topic, "payload", msg_id="m")
    first, second = receiver.wait_for(2, path, timeout_s=15)
    wait_status(runtime, topic, ["m"], Status.ACKED)
    assert (first.status, second.status) == (503, 200)
    # Not before the date (50 ms: the node converts it on its wall clock, then schedules on
    # the Redis clock, a lower bound read a round trip late).
    assert second.at_ms >= until[0] * 1000 - 50, (second.at_ms, until[0] * 1000)
    [error] = runtime.subscriptions.push_status(topic, None)["lastErrors"]
    assert (error["outcome"], error["status"]) == ("5xx", 503)


# -- 4. the signature -----------------------------------------------------------------------------

def test_a_push_secret_signs_what_verify_signature_accepts(runtime, receiver):
    topic, path, secret = "signed", "/signed", "s3cret-for-hooks"
    runtime.subscriptions.create(topic, "hooks", {"pushUrl": receiver.url(path),
                                                  "pushSecret": secret})
    data, source = runtime.subscriptions.get_config(topic, "hooks")
    assert data["pushSecretSet"] is True and "pushSecret" not in data
    runtime.queue.send(topic, '{"order": 7}', msg_id="m")
    [request] = receiver.wait_for(1, path)
    wait_status(runtime, topic, ["m"], Status.ACKED, subscription="hooks")
    assert request.json["subscription"] == "hooks"
    assert request.header("X-DelayQueue-Subscription") == "hooks"
    assert request.header("X-DelayQueue-Signature")
    assert verify_signature(secret, request.headers, request.body) is True
    assert verify_signature("another-secret", request.headers, request.body) is False
    assert verify_signature(secret, request.headers, request.body + b" ") is False
    # The default subscription was not pushed (it has no pushUrl): the message waits there.
    assert status_of(runtime, topic, "m") == Status.READY
    assert receiver.requests() == [request]
