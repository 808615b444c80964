"""Push delivery over HTTP (ours) on live nodes: the push settings of createSubscription and
setSubscriptionConfig, named and default (set, answered, cleared, reset), each bad value
refused naming it with nothing written, addresses outside push-allowed-networks refused, the
pulls of a push subscription refused (400), getPushStatus filled by a real failed push to a
receiver of the test's own, and the secret in no answer and in no line of the node's log
(audit and access log included).

``push_node`` allows loopback targets (push-allowed-networks 127.0.0.0/8) and logs at info
with gunicorn's access log on, into a file the last tests read; ``node`` (conftest.py) has
the default settings: public addresses only.
"""

from __future__ import annotations

import json
import uuid

import pytest
import requests
from jsonschema import Draft202012Validator

from delayqueue.client import verify_signature
from delayqueue.http.openapi import document

from support import conformance as api
from support import wait_until
from support.node import ServerProcess
from support.receiver import Answer, Receiver

Q = "/camellia/delayQueue/"
# Every secret this module sends: none may appear in an answer or a log line.
SECRET = "s3cret-" + uuid.uuid4().hex
OTHER_SECRET = "s3cret-" + uuid.uuid4().hex
LONG_SECRET = "s3cret-" + uuid.uuid4().hex + "x" * 260            # refused: over 256 bytes
QUERY_SECRET = "s3cret-" + uuid.uuid4().hex                       # refused: in the URL
SECRETS = (SECRET, OTHER_SECRET, LONG_SECRET, QUERY_SECRET)
PUSH_KEYS = {"pushUrl", "pushTimeoutMillis", "pushConcurrency", "pushSecretSet"}
DEFAULTS = {"pushUrl": None, "pushTimeoutMillis": 10_000, "pushConcurrency": 16,
            "pushSecretSet": False}
STATUS_KEYS = {"subscription", "pushUrl", "pushTimeoutMillis", "pushConcurrency",
               "pushSecretSet", "paused", "inFlight", "lastErrors"}


class LoggedNode(ServerProcess):
    """A node with gunicorn's access log on (stdout, into the node's log file)."""

    @property
    def env(self) -> dict[str, str]:
        return {**super().env, "GUNICORN_CMD_ARGS": "--access-logfile -"}


@pytest.fixture(scope="module")
def receiver():
    """tests/support/receiver.py: 200 unless a test scripts its path otherwise."""
    with Receiver() as receiver:
        yield receiver


@pytest.fixture(scope="module")
def push_node(redis_server, tmp_path_factory):
    log = tmp_path_factory.mktemp("push-node") / "node.log"
    with redis_server.leased_db_url() as url:
        server = LoggedNode(url, log_path=log, settings={
            "push-allowed-networks": "127.0.0.0/8", "log-level": "info"})
        with server:
            server.session = requests.Session()
            yield server
            server.session.close()   # no keep-alive connection for the stop to wait on


def call(server, route, **params):
    """The envelope of a form POST (None values left out), from a node of this module or
    a shared one."""
    session = getattr(server, "session", None)
    if session is None:
        return api.call(server, route, **params)
    data = {k: v for k, v in params.items() if v is not None}
    return session.post(server.url + Q + route, data=data, timeout=15).json()


def ok(reply):
    assert reply["code"] == 200, reply
    return reply


def push_values(reply):
    data, source = reply["data"], reply["source"]
    assert PUSH_KEYS <= set(data) and "pushSecret" not in data, data
    return ({k: data[k] for k in PUSH_KEYS},
            {k: source[k] for k in PUSH_KEYS - {"pushSecretSet"}})


def validator(route: str) -> Draft202012Validator:
    spec = document()
    schema = spec["paths"][Q + route]["post"]["responses"]["200"]["content"][
        "application/json"]["schema"]
    return Draft202012Validator({**spec, "$ref": "#/$defs/target", "$defs": {"target": schema}})


def assert_valid(route, reply):
    errors = list(validator(route).iter_errors(reply))
    assert not errors, f"{route}: {reply}: {errors[0].message}"


# -- set, get, clear, reset ------------------------------------------------------------------
def test_a_named_subscriptions_push_settings_set_answered_cleared_and_reset(push_node,
                                                                           receiver, topic):
    url = receiver.url("/named")
    info = ok(call(push_node, "createSubscription", topic=topic, subscription="hook",
                   pushUrl=url, pushTimeoutMillis=2000, pushConcurrency=4, pushSecret=SECRET,
                   maxRetry=3))["data"]
    assert info["pushUrl"] == url
    reply = ok(call(push_node, "getSubscriptionConfig", topic=topic, subscription="hook"))
    assert_valid("getSubscriptionConfig", reply)
    values, sources = push_values(reply)
    assert values == {"pushUrl": url, "pushTimeoutMillis": 2000, "pushConcurrency": 4,
                      "pushSecretSet": True}
    assert set(sources.values()) == {"subscription"}
    listed = ok(call(push_node, "listSubscriptions", topic=topic))["data"]
    assert [s.get("pushUrl") for s in listed] == [None, url]
    assert ok(call(push_node, "getTopicInfo", topic=topic))["data"]["subscriptions"] == listed

    cleared = ok(call(push_node, "setSubscriptionConfig", topic=topic, subscription="hook",
                      pushUrl="", pushSecret=""))
    assert_valid("setSubscriptionConfig", cleared)
    values, sources = push_values(cleared)
    assert (values["pushUrl"], values["pushSecretSet"], sources["pushUrl"]) == (None, False,
                                                                                "server")
    assert values["pushConcurrency"] == 4                    # the others stay
    assert "pushUrl" not in ok(call(push_node, "listSubscriptions", topic=topic))["data"][1]

    ok(call(push_node, "setSubscriptionConfig", topic=topic, subscription="hook", pushUrl=url,
            pushSecret=SECRET))
    reset = ok(call(push_node, "setSubscriptionConfig", topic=topic, subscription="hook",
                    reset="true"))
    values, sources = push_values(reset)
    assert values == DEFAULTS and set(sources.values()) == {"server"}
    assert reset["source"]["maxRetry"] == "server"           # a named reset drops every own


@pytest.mark.parametrize("subscription", [None, "", "default"])
def test_the_default_subscription_has_push_settings_of_its_own(push_node, receiver, topic,
                                                               subscription):
    url = receiver.url("/default")
    ok(call(push_node, "setTopicConfig", topic=topic, maxRetry=2))
    reply = ok(call(push_node, "setSubscriptionConfig", topic=topic, subscription=subscription,
                    pushUrl=url, pushConcurrency=2, pushSecret=SECRET))
    values, sources = push_values(reply)
    assert values == {**DEFAULTS, "pushUrl": url, "pushConcurrency": 2, "pushSecretSet": True}
    assert (sources["pushUrl"], sources["pushTimeoutMillis"]) == ("subscription", "server")
    assert reply["source"]["maxRetry"] == "topic"
    got = ok(call(push_node, "getSubscriptionConfig", topic=topic, subscription=subscription))
    assert got == reply
    assert ok(call(push_node, "listSubscriptions", topic=topic))["data"][0]["pushUrl"] == url
    # The topic's settings are not the default subscription's push settings, and the topic's
    # reset keeps these.
    assert "pushUrl" not in ok(call(push_node, "getTopicConfig", topic=topic))["data"]
    ok(call(push_node, "setTopicConfig", topic=topic, reset="true", maxRetry=2))
    assert push_values(ok(call(push_node, "getSubscriptionConfig", topic=topic)))[0] == values
    # Its reset drops only its push settings.
    reset = ok(call(push_node, "setSubscriptionConfig", topic=topic, subscription=subscription,
                    reset="true"))
    assert push_values(reset)[0] == DEFAULTS
    assert (reset["data"]["maxRetry"], reset["source"]["maxRetry"]) == (2, "topic")
    assert "pushUrl" not in ok(call(push_node, "listSubscriptions", topic=topic))["data"][0]


BAD_VALUES = [
    ("pushUrl", "ftp://127.0.0.1/x", 200),
    ("pushUrl", "http://user:pw@127.0.0.1/x", 200),
    ("pushUrl", "127.0.0.1/x", 200),
    ("pushUrl", "http://no-such-host.invalid/x", 200),
    ("pushUrl", "http://127.0.0.1/" + "x" * 2048, 200),
    ("pushTimeoutMillis", "99", 200),
    ("pushTimeoutMillis", "600001", 200),
    ("pushTimeoutMillis", "soon", 400),
    ("pushConcurrency", "0", 200),
    ("pushConcurrency", "10001", 200),
    ("pushConcurrency", "1.5", 400),
    ("pushSecret", LONG_SECRET, 200),
    ("pushSecret", SECRET[:12] + "\x01", 200),
]


@pytest.mark.parametrize("name, value, http_status", BAD_VALUES,
                         ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(BAD_VALUES)])
@pytest.mark.parametrize("route", ["createSubscription", "setSubscriptionConfig"])
def test_a_bad_push_value_is_refused_naming_it_and_nothing_is_written(
        push_node, topic, route, name, value, http_status):
    """(An unconvertible number: HTTP 400, as any parameter; a value out of its rule: code
    400 in HTTP 200.) setSubscriptionConfig here: of the default subscription."""
    subscription = "s1" if route == "createSubscription" else None
    response = push_node.session.post(push_node.url + Q + route, timeout=15, data={
        "topic": topic, **({"subscription": subscription} if subscription else {}),
        "pushConcurrency": 3, name: value})
    reply = response.json()
    assert (response.status_code, reply["code"]) == (http_status, 400), reply
    assert reply["msg"].startswith(f"{name}:"), reply
    assert not any(secret[:12] in response.text for secret in SECRETS), reply
    names = [s["subscription"] for s in ok(call(push_node, "listSubscriptions",
                                                topic=topic))["data"]]
    assert names == ["default"]
    values, sources = push_values(ok(call(push_node, "getSubscriptionConfig", topic=topic)))
    assert values == DEFAULTS and set(sources.values()) == {"server"}


@pytest.mark.parametrize("url", ["http://10.0.0.1/hook", "http://169.254.169.254/latest",
                                 "http://localhost:8080/hook", "http://127.0.0.1/hook",
                                 "http://[::1]/hook", "http://192.168.1.20/hook"])
def test_a_target_outside_the_default_allowed_networks_is_refused(node, topic, url):
    """``node`` runs with push-allowed-networks' default, ``public``."""
    for route, subscription in (("createSubscription", "s1"), ("setSubscriptionConfig", None)):
        reply = api.call(node, route, topic=topic, subscription=subscription, pushUrl=url)
        assert reply["code"] == 400 and reply["msg"].startswith("pushUrl:"), reply
        assert "push-allowed-networks" in reply["msg"], reply
    assert [s["subscription"] for s in api.call(node, "listSubscriptions",
                                                topic=topic)["data"]] == ["default"]


# -- pulls of a push subscription ------------------------------------------------------------
@pytest.mark.parametrize("subscription", [None, "hook"])
def test_a_pull_of_a_push_subscription_is_refused(push_node, receiver, topic, subscription):
    receiver_url = receiver.url("/never-called")
    if subscription:
        ok(call(push_node, "createSubscription", topic=topic, subscription=subscription,
                pushUrl=receiver_url))
    else:
        ok(call(push_node, "setSubscriptionConfig", topic=topic, pushUrl=receiver_url))
    spec_checked = 0
    for route, extra in (("pullMsg", {"batch": 5}),
                         ("longPollingMsg", {"longPollingTimeoutMillis": 5000})):
        response = push_node.session.post(push_node.url + Q + route, timeout=15, data={
            "topic": topic, **({"subscription": subscription} if subscription else {}),
            **extra})
        reply = response.json()
        assert (response.status_code, reply["code"]) == (200, 400), reply
        name = subscription or "default"
        assert reply["msg"].startswith(f"subscription: '{name}' is a push subscription"), reply
        assert_valid(route, reply)
        spec_checked += 1
    assert spec_checked == 2
    # Cleared, it is pulled again.
    ok(call(push_node, "setSubscriptionConfig", topic=topic, subscription=subscription,
            pushUrl=""))
    assert ok(call(push_node, "pullMsg", topic=topic, subscription=subscription))[
        "delayMsgList"] == []


# -- getPushStatus ---------------------------------------------------------------------------
def test_get_push_status_of_a_pulled_an_unknown_and_a_malformed_subscription(push_node, topic):
    ok(call(push_node, "createSubscription", topic=topic, subscription="pulled"))
    for subscription in (None, "default", "pulled"):
        reply = ok(call(push_node, "getPushStatus", topic=topic, subscription=subscription))
        assert_valid("getPushStatus", reply)
        assert reply["data"] == {"subscription": subscription or "default", **DEFAULTS,
                                 "paused": False, "inFlight": 0, "lastErrors": []}, reply
    reply = call(push_node, "getPushStatus", topic=topic, subscription="nope")
    assert reply["code"] == 404 and reply["msg"].startswith("subscription:"), reply
    reply = call(push_node, "getPushStatus", topic=topic, subscription="a b")
    assert reply["code"] == 400 and reply["msg"].startswith("subscription:"), reply
    assert_valid("getPushStatus", reply)


def test_a_failed_push_fills_last_errors_and_a_2xx_acks(push_node, receiver, topic):
    """A real delivery: the receiver answers 500 (a nack, its entry in lastErrors), then
    204 (the ack). The POST is signed with the secret, which the node never shows."""
    path = "/status-" + topic
    url = receiver.url(path)
    answer = {"status": 500}
    receiver.script(path, lambda request: Answer(answer["status"]))
    ok(call(push_node, "createSubscription", topic=topic, subscription="hook", pushUrl=url,
            pushSecret=SECRET, pushTimeoutMillis=5000, redeliveryDelayMillis=200,
            redeliveryMaxDelayMillis=1000, maxRetry=1000))
    msg = api.send(push_node, topic, msgId="m1", msg="body-1")

    def failures():
        reply = ok(call(push_node, "getPushStatus", topic=topic, subscription="hook"))
        return reply if reply["data"]["lastErrors"] else None
    reply = wait_until(failures, 30, interval_s=0.1, message="no failed push recorded")
    assert_valid("getPushStatus", reply)
    status = reply["data"]
    assert set(status) == STATUS_KEYS
    assert (status["subscription"], status["pushUrl"], status["pushSecretSet"]) == (
        "hook", url, True)
    error = status["lastErrors"][0]
    assert (error["msgId"], error["outcome"], error["status"]) == ("m1", "5xx", 500), error
    assert error["time"] >= msg["produceTime"] and error["millis"] >= 0, error

    first = receiver.requests(path)[0]
    headers, body = first.headers, first.body
    delivered = first.json
    assert delivered["subscription"] == "hook" and delivered["delayMsg"]["msgId"] == "m1"
    assert delivered["delayMsg"]["msg"] == "body-1"
    assert first.header("X-DelayQueue-Topic") == topic
    assert first.header("X-DelayQueue-Subscription") == "hook"
    assert first.header("X-DelayQueue-Msg-Id") == "m1"
    assert first.header("X-DelayQueue-Receipt") == delivered["delayMsg"]["receipt"]
    assert verify_signature(SECRET, headers, body)
    assert not verify_signature(OTHER_SECRET, headers, body)

    paused = ok(call(push_node, "pauseTopic", topic=topic, subscription="hook"))
    assert paused["paused"] is True
    assert ok(call(push_node, "getPushStatus", topic=topic, subscription="hook"))["data"][
        "paused"] is True
    answer["status"] = 204
    ok(call(push_node, "resumeTopic", topic=topic, subscription="hook"))

    def acked():
        reply = call(push_node, "getMsg", topic=topic, msgId="m1", subscription="hook")
        return reply["delayMsg"]["status"] == 4
    wait_until(acked, 30, interval_s=0.1, message="m1 never acked by a 2xx")
    final = wait_until(lambda: (lambda r: r if r["data"]["inFlight"] == 0 else None)(
        ok(call(push_node, "getPushStatus", topic=topic, subscription="hook"))), 15)
    assert final["data"]["lastErrors"][-1]["msgId"] == "m1"     # the failures stay listed
    # The default subscription is not a push one: it still holds m1, ready.
    assert [m["msgId"] for m in ok(call(push_node, "pullMsg", topic=topic))[
        "delayMsgList"]] == ["m1"]


# -- the secret: never answered, never logged ------------------------------------------------
def test_the_secret_is_never_answered(push_node, receiver, topic):
    url = receiver.url("/secret")
    answers = [
        call(push_node, "createSubscription", topic=topic, subscription="s1", pushUrl=url,
             pushSecret=SECRET),
        push_node.session.post(push_node.url + Q + "setSubscriptionConfig", timeout=15,
                               json={"topic": topic, "pushSecret": OTHER_SECRET}).json(),
        call(push_node, "setSubscriptionConfig", topic=topic, subscription="s1",
             pushSecret=LONG_SECRET),                                          # 400
        push_node.session.post(push_node.url + Q + "setSubscriptionConfig", timeout=15,
                               params={"pushSecret": QUERY_SECRET},
                               data={"topic": topic, "subscription": "s1"}).json(),  # 400
        call(push_node, "getSubscriptionConfig", topic=topic, subscription="s1"),
        call(push_node, "getSubscriptionConfig", topic=topic),
        call(push_node, "getPushStatus", topic=topic, subscription="s1"),
        call(push_node, "getPushStatus", topic=topic),
        call(push_node, "listSubscriptions", topic=topic),
        call(push_node, "getTopicInfo", topic=topic),
        call(push_node, "getTopicConfig", topic=topic),
    ]
    assert [a["code"] for a in answers] == [200, 200, 400, 400, *[200] * 7], answers
    assert answers[2]["msg"].startswith("pushSecret:"), answers[2]
    assert answers[3]["msg"].startswith("pushSecret: send it in the request body"), answers[3]
    text = json.dumps(answers)
    assert not any(secret[:12] in text for secret in SECRETS), text
    # The refused ones wrote nothing: the secret is the one set first.
    data = answers[4]["data"]
    assert data["pushSecretSet"] is True and data["pushUrl"] == url
    assert answers[5]["data"]["pushSecretSet"] is True            # the default's, by JSON
    assert "pushSecret" not in answers[4]["data"] and "pushSecret" not in answers[6]["data"]


def test_the_secret_is_in_no_log_line(push_node, receiver, topic):
    """Every line the module's node wrote (its audit trail, gunicorn's access log, the push
    loop's lines at info), after this test's own writes: the secrets appear in none, the
    audit lines say only (set) or (cleared), the access log's request line masks one sent in
    the URL as ***."""
    url = receiver.url("/logged")
    ok(call(push_node, "createSubscription", topic=topic, subscription="s1", pushUrl=url,
            pushSecret=SECRET))
    ok(call(push_node, "setSubscriptionConfig", topic=topic, pushSecret=OTHER_SECRET))
    ok(call(push_node, "setSubscriptionConfig", topic=topic, pushSecret=""))
    call(push_node, "setSubscriptionConfig", topic=topic, subscription="s1",
         pushSecret=LONG_SECRET)
    push_node.session.post(push_node.url + Q + "setSubscriptionConfig", timeout=15,
                           params={"topic": topic, "pushSecret": QUERY_SECRET})

    def audit_lines():
        lines = [json.loads(line[line.index("{"):]) for line in
                 push_node.log_path.read_text().splitlines()
                 if "delayqueue.audit" in line and topic in line]
        return lines if len(lines) >= 5 else None
    audits = wait_until(audit_lines, 10, message="the audit lines were not written")
    secrets = [a["params"].get("pushSecret") for a in audits]
    assert secrets == ["(set)", "(set)", "(cleared)", "(set)", "(set)"], audits
    assert [a["code"] for a in audits] == [200, 200, 200, 400, 400], audits

    def access_line():
        return [line for line in push_node.log_path.read_text().splitlines()
                if "gunicorn.access" in line and f"topic={topic}&pushSecret=***" in line]
    wait_until(access_line, 10, message="no access-log line of the URL's secret, masked")
    log = push_node.log_path.read_text()
    assert "/camellia/delayQueue/createSubscription" in log       # the access log is on
    for secret in SECRETS:
        assert secret[:12] not in log, f"a secret in the node's log: {secret[:12]}..."
