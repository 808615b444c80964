"""Subscriptions over HTTP (ours) on a live node: the six subscription routes and their
answers' shapes (each held to its /openapi.json schema), the names refused (``default`` on
create and delete, bad characters, 65 characters), an unknown subscription on the message
routes (404), the admin role of the writes, POST only, the ``subscription`` parameter on
every route that takes it, a long poll in a subscription woken by a send, and the fan-out
end to end: every subscription receives every message and consumes it on its own."""

from __future__ import annotations

import json
import threading
import time

import pytest
import requests
from jsonschema import Draft202012Validator

from delayqueue.core.subscriptions import SUBSCRIPTION_SETTINGS
from delayqueue.http.endpoints import BY_NAME
from delayqueue.http.openapi import document

from support import conformance as api
from support.node import ServerProcess

Q = "/camellia/delayQueue/"
ROUTES = ("createSubscription", "deleteSubscription", "listSubscriptions",
          "setSubscriptionConfig", "getSubscriptionConfig", "getPushStatus")
INFO_KEYS = {"subscription", "createdTime", "readyQueueSize", "ackQueueSize", "deadQueueSize",
             "groupBlockedSize", "waitingQueueSize", "paused"}
SOURCES = {"subscription", "topic", "server"}


def create(node, topic, name, **settings):
    reply = api.call(node, "createSubscription", topic=topic, subscription=name, **settings)
    assert reply["code"] == 200, reply
    return reply["data"]


def pull_ids(node, topic, subscription=None, batch=10):
    reply = api.call(node, "pullMsg", topic=topic, subscription=subscription, batch=batch)
    assert reply["code"] == 200, reply
    return [m["msgId"] for m in reply["delayMsgList"]]


def get_in(node, topic, msg_id, subscription=None):
    reply = api.call(node, "getMsg", topic=topic, msgId=msg_id, subscription=subscription)
    assert reply["code"] == 200, reply
    return reply["delayMsg"]


def assert_refused(reply, code=400):
    assert reply["code"] == code, reply
    assert reply["msg"].startswith("subscription:"), reply


def answer_validator(spec, name: str) -> Draft202012Validator:
    schema = spec["paths"][Q + name]["post"]["responses"]["200"]["content"][
        "application/json"]["schema"]
    return Draft202012Validator({**spec, "$ref": "#/$defs/target", "$defs": {"target": schema}})


# -- the routes and their answers ------------------------------------------------------------
def test_create_answers_the_subscription_and_list_shows_the_default_first(node, topic):
    api.send(node, topic, msgId="before")
    info = create(node, topic, "billing", maxRetry=5)
    assert set(info) >= INFO_KEYS, info
    assert info["subscription"] == "billing" and info["paused"] is False
    assert isinstance(info["createdTime"], int)
    create(node, topic, "audit")
    listed = api.call(node, "listSubscriptions", topic=topic)
    assert listed["code"] == 200, listed
    names = [s["subscription"] for s in listed["data"]]
    assert names[0] == "default" and sorted(names[1:]) == ["audit", "billing"], names
    assert all(set(s) >= INFO_KEYS for s in listed["data"]), listed
    default = listed["data"][0]
    assert default["readyQueueSize"] == 1, default          # "before" is the default's only
    assert api.info(node, topic)["subscriptions"] == listed["data"]


def test_creating_an_existing_subscription_changes_only_the_values_given(node, topic):
    first = create(node, topic, "s1", maxRetry=5)
    again = create(node, topic, "s1", ackTimeoutMillis=60_000)
    assert again["createdTime"] == first["createdTime"]
    reply = api.call(node, "getSubscriptionConfig", topic=topic, subscription="s1")
    assert reply["code"] == 200, reply
    data, source = reply["data"], reply["source"]
    assert (data["maxRetry"], source["maxRetry"]) == (5, "subscription")
    assert (data["ackTimeoutMillis"], source["ackTimeoutMillis"]) == (60_000, "subscription")
    assert source["deadLetter"] == "server"


def test_subscription_config_answers_as_the_topics_with_three_sources(node, topic):
    create(node, topic, "s1")
    api.set_config(node, topic, redeliveryDelayMillis=250)
    reply = api.call(node, "setSubscriptionConfig", topic=topic, subscription="s1",
                     maxRetry=2, deadLetter="false")
    assert reply["code"] == 200, reply
    assert set(reply) == {"code", "msg", "data", "source"}
    assert set(SUBSCRIPTION_SETTINGS) <= set(reply["data"]) and set(reply["source"]) == set(
        reply["data"]) - {"pushSecretSet"}        # whether there is a secret: no source
    assert set(reply["source"].values()) == SOURCES
    assert (reply["data"]["maxRetry"], reply["source"]["maxRetry"]) == (2, "subscription")
    assert (reply["data"]["deadLetter"], reply["source"]["deadLetter"]) == (False,
                                                                            "subscription")
    assert (reply["data"]["redeliveryDelayMillis"],
            reply["source"]["redeliveryDelayMillis"]) == (250, "topic")
    assert api.call(node, "getSubscriptionConfig", topic=topic, subscription="s1") == reply
    reset = api.call(node, "setSubscriptionConfig", topic=topic, subscription="s1",
                     reset="true")
    assert reset["code"] == 200 and "subscription" not in reset["source"].values(), reset
    # The default subscription's settings are addressed as "default".
    default = api.call(node, "getSubscriptionConfig", topic=topic, subscription="default")
    assert default["code"] == 200 and set(default["data"]) == set(reset["data"]), default


def test_a_bad_setting_is_refused_naming_it_and_nothing_is_written(node, topic):
    create(node, topic, "s1")
    reply = api.call(node, "setSubscriptionConfig", topic=topic, subscription="s1",
                     maxRetry=-1)
    assert reply["code"] == 400 and reply["msg"].startswith("maxRetry:"), reply
    status, reply = api.post(node, "createSubscription", topic=topic, subscription="s2",
                             ackTimeoutMillis="abc")
    assert (status, reply["code"]) == (400, 400) and reply["msg"].startswith(
        "ackTimeoutMillis:"), reply
    names = [s["subscription"] for s in api.call(node, "listSubscriptions",
                                                 topic=topic)["data"]]
    assert names == ["default", "s1"]


def test_delete_drops_the_subscription_and_an_unknown_one_is_404(node, topic):
    create(node, topic, "gone")
    api.send(node, topic, msgId="m1")
    reply = api.call(node, "deleteSubscription", topic=topic, subscription="gone")
    assert reply == {"code": 200, "msg": "success", "deleted": True}
    assert [s["subscription"] for s in api.call(node, "listSubscriptions",
                                                topic=topic)["data"]] == ["default"]
    assert_refused(api.call(node, "deleteSubscription", topic=topic, subscription="gone"), 404)
    assert_refused(api.call(node, "pullMsg", topic=topic, subscription="gone"), 404)
    assert pull_ids(node, topic) == ["m1"]                  # the default is untouched


def test_every_answer_satisfies_its_documented_schema(node, topic):
    spec = document()
    api.send(node, topic, msgId="m1")
    answers = [(name, api.call(node, name, topic=topic, **values)) for name, values in [
        ("createSubscription", {"subscription": "a", "maxRetry": 3}),
        ("createSubscription", {"subscription": "default"}),                 # 400
        ("listSubscriptions", {}),
        ("setSubscriptionConfig", {"subscription": "a", "ackTimeoutMillis": 1000}),
        ("getSubscriptionConfig", {"subscription": "a"}),
        ("getSubscriptionConfig", {"subscription": "nope"}),                 # 404
        ("deleteSubscription", {"subscription": "a"}),
        ("deleteSubscription", {"subscription": "a"}),                       # 404
        ("getTopicInfo", {}),
    ]]
    assert {reply["code"] for _, reply in answers} == {200, 400, 404}
    for name, reply in answers:
        errors = list(answer_validator(spec, name).iter_errors(reply))
        assert not errors, f"{name}: {reply}: {errors[0].message}"


# -- names -----------------------------------------------------------------------------------
@pytest.mark.parametrize("route", ["createSubscription", "deleteSubscription"])
def test_the_default_subscription_cannot_be_created_or_deleted(node, topic, route):
    assert_refused(api.call(node, route, topic=topic, subscription="default", maxRetry=1))


@pytest.mark.parametrize("subscription", [None, "", "default"])
def test_the_default_subscriptions_settings_but_push_are_the_topics(node, topic,
                                                                     subscription):
    """setSubscriptionConfig of the default subscription takes its push settings only; any
    other is refused naming it (setTopicConfig sets it), and nothing is written."""
    reply = api.call(node, "setSubscriptionConfig", topic=topic, subscription=subscription,
                     maxRetry=1, pushConcurrency=3)
    assert reply["code"] == 400 and reply["msg"].startswith("maxRetry:"), reply
    assert "setTopicConfig" in reply["msg"], reply
    config = api.call(node, "getSubscriptionConfig", topic=topic, subscription=subscription)
    assert config["source"]["maxRetry"] == "server" and config["source"][
        "pushConcurrency"] == "server", config


@pytest.mark.parametrize("name", ["a b", "a/b", "é", "x" * 65, "{t}", "a\tb"])
@pytest.mark.parametrize("route", ["createSubscription", "deleteSubscription",
                                   "getSubscriptionConfig", "pullMsg", "getMsg"])
def test_a_malformed_name_is_refused_naming_subscription(node, topic, route, name):
    assert_refused(api.call(node, route, topic=topic, subscription=name, msgId="m"))


def test_a_name_of_64_characters_of_the_alphabet_is_taken(node, topic):
    name = ("Ab9._-" * 11)[:64]
    assert create(node, topic, name)["subscription"] == name


def test_a_subscription_route_without_subscription_is_a_missing_parameter(node, topic):
    """createSubscription and deleteSubscription want a name; the config routes without one
    act in the default subscription (tests/http/test_push_http_api.py)."""
    for route in ("createSubscription", "deleteSubscription"):
        status, reply = api.post(node, route, topic=topic)
        assert (status, reply["code"]) == (400, 400), (route, reply)
        assert reply["msg"].startswith("subscription:"), (route, reply)


@pytest.mark.parametrize("route, params", [
    ("pullMsg", {}), ("longPollingMsg", {"longPollingTimeoutMillis": 1}),
    ("ackMsg", {"msgId": "m1"}), ("ackMsg", {"msgId": "m1", "ack": "false"}),
    ("getMsg", {"msgId": "m1"}), ("changeVisibility", {"msgId": "m1", "ackTimeoutMillis": 1}),
    ("listDeadMsg", {}), ("redriveDeadMsg", {}), ("purgeDeadMsg", {}),
    ("listMsg", {"status": 2}), ("pauseTopic", {}), ("resumeTopic", {})])
def test_an_unknown_subscription_is_404(node, topic, route, params):
    api.send(node, topic, msgId="m1")
    assert_refused(api.call(node, route, topic=topic, subscription="nope", **params), 404)


def test_the_batches_take_subscription_at_the_top_level(node, topic):
    create(node, topic, "s1")
    api.send(node, topic, msgId="m1")
    api.send(node, topic, msgId="m2")
    assert sorted(pull_ids(node, topic, "s1")) == ["m1", "m2"]
    status, reply = api.post_json(node, "changeVisibilityBatch", {
        "topic": topic, "subscription": "s1",
        "entries": [{"msgId": "m1", "ackTimeoutMillis": 60_000}]})
    assert status == 200 and [r["code"] for r in reply["results"]] == [200], reply
    status, reply = api.post_json(node, "ackMsgBatch", {
        "topic": topic, "subscription": "s1", "acks": [{"msgId": "m1"}, {"msgId": "m2"}]})
    assert status == 200 and [r["code"] for r in reply["results"]] == [200, 200], reply
    assert get_in(node, topic, "m1", "s1")["status"] == 4
    assert get_in(node, topic, "m1")["status"] == 2        # the default never pulled it
    status, reply = api.post_json(node, "ackMsgBatch", {
        "topic": topic, "subscription": "a b", "acks": [{"msgId": "m1"}]})
    assert (status, reply["code"]) == (400, 400) and reply["msg"].startswith(
        "subscription:"), reply


# -- access and methods ----------------------------------------------------------------------
def test_the_routes_take_post_only(node, topic):
    for name in ROUTES:
        assert BY_NAME[name].methods == ("POST",)
        response = api.SESSION.get(node.url + Q + name,
                                   params={"topic": topic, "subscription": "s"}, timeout=10)
        assert response.status_code == 405, name


TOKENS = [
    {"name": "consumer", "secret": "consumer-secret-0001", "roles": ["consume"]},
    {"name": "producer", "secret": "producer-secret-0002", "roles": ["produce"]},
    {"name": "admin", "secret": "admin-secret-000003", "roles": ["admin"]},
]


@pytest.fixture(scope="module")
def token_node(redis_server):
    with redis_server.leased_db_url() as url:
        with ServerProcess(url, settings={"auth-tokens": json.dumps(TOKENS)}) as server:
            yield server


def as_token(server, name, route, **params):
    secret = next(t["secret"] for t in TOKENS if t["name"] == name)
    response = requests.post(server.url + Q + route, data=params, timeout=10,
                             headers={"Authorization": f"Bearer {secret}"})
    return response.status_code, response.json()


def test_the_writes_are_the_admins_and_the_reads_any_client_s(token_node):
    for route in ("createSubscription", "setSubscriptionConfig", "deleteSubscription"):
        for name in ("consumer", "producer"):
            status, reply = as_token(token_node, name, route, topic="t", subscription="s")
            assert (status, reply["code"]) == (403, 403), (route, name, reply)
            assert f"{route} needs role admin" in reply["msg"], reply
    status, reply = as_token(token_node, "admin", "createSubscription", topic="t",
                             subscription="s")
    assert (status, reply["code"]) == (200, 200), reply
    for route in ("listSubscriptions", "getSubscriptionConfig"):
        for name in ("consumer", "producer"):
            status, reply = as_token(token_node, name, route, topic="t", subscription="s")
            assert (status, reply["code"]) == (200, 200), (route, name, reply)


# -- consuming in a subscription -------------------------------------------------------------
def test_fan_out_end_to_end(node, topic):
    """s1 and s2 each receive the three messages the default does; an ack in s1 is s1's."""
    create(node, topic, "s1")
    create(node, topic, "s2")
    sent = [api.send(node, topic, msgId=f"m{i}")["msgId"] for i in range(3)]
    assert pull_ids(node, topic) == sent
    s1 = api.call(node, "pullMsg", topic=topic, subscription="s1", batch=10)["delayMsgList"]
    assert [m["msgId"] for m in s1] == sent
    assert pull_ids(node, topic, "s2") == sent
    for message in s1:
        reply = api.ack(node, topic, message["msgId"], message["receipt"], subscription="s1")
        assert reply["code"] == 200, reply
    for msg_id in sent:
        assert get_in(node, topic, msg_id, "s1")["status"] == 4
        in_s2 = get_in(node, topic, msg_id, "s2")
        assert (in_s2["status"], in_s2["retry"]) == (3, 1)
        whole = get_in(node, topic, msg_id)
        assert whole["status"] == 3
        assert whole["subscriptions"] == {"s1": {"status": 4, "retry": 1},
                                          "s2": {"status": 3, "retry": 1}}
    # Acked in s1 only: s2 and the default still hold their deliveries.
    assert api.ack(node, topic, "m0", subscription="s2")["code"] == 200
    assert get_in(node, topic, "m0")["status"] == 3


def test_a_subscription_receives_only_what_is_sent_after_it_was_created(node, topic):
    api.send(node, topic, msgId="early", delayMillis=300)
    create(node, topic, "late")
    api.send(node, topic, msgId="after")
    time.sleep(0.5)
    assert pull_ids(node, topic, "late") == ["after"]
    assert sorted(pull_ids(node, topic)) == ["after", "early"]


def test_a_receipt_of_one_subscription_is_stale_in_another(node, topic):
    create(node, topic, "s1")
    create(node, topic, "s2")
    api.send(node, topic, msgId="m1")
    [in_s1] = api.call(node, "pullMsg", topic=topic, subscription="s1")["delayMsgList"]
    assert pull_ids(node, topic, "s2") == ["m1"]
    api.assert_stale(api.ack(node, topic, "m1", in_s1["receipt"], subscription="s2"))
    assert api.ack(node, topic, "m1", in_s1["receipt"], subscription="s1")["code"] == 200


def test_dead_letters_pause_and_list_are_the_subscriptions_own(node, topic):
    create(node, topic, "s1")
    api.send(node, topic, msgId="m1", maxRetry=0)
    assert pull_ids(node, topic, "s1") == ["m1"]
    assert api.nack(node, topic, "m1", subscription="s1")["code"] == 200
    assert get_in(node, topic, "m1", "s1")["status"] == 6
    dead = api.call(node, "listDeadMsg", topic=topic, subscription="s1")["delayMsgList"]
    assert [m["msgId"] for m in dead] == ["m1"]
    assert api.call(node, "listDeadMsg", topic=topic)["delayMsgList"] == []
    ready = api.call(node, "listMsg", topic=topic, status=2)["delayMsgList"]
    assert [m["msgId"] for m in ready] == ["m1"]                  # still ready in the default
    assert api.call(node, "listMsg", topic=topic, status=2,
                    subscription="s1")["delayMsgList"] == []
    assert api.call(node, "redriveDeadMsg", topic=topic, subscription="s1")["count"] == 1
    paused = api.call(node, "pauseTopic", topic=topic, subscription="s1")
    assert paused == {"code": 200, "msg": "success", "paused": True, "changed": True}
    assert pull_ids(node, topic, "s1") == []
    assert [s["paused"] for s in api.call(node, "listSubscriptions",
                                          topic=topic)["data"]] == [False, True]
    assert pull_ids(node, topic) == ["m1"]                        # the default goes on
    assert api.call(node, "resumeTopic", topic=topic, subscription="s1")["changed"] is True
    assert pull_ids(node, topic, "s1") == ["m1"]
    assert api.nack(node, topic, "m1", subscription="s1")["code"] == 200
    assert api.call(node, "purgeDeadMsg", topic=topic, subscription="s1")["count"] == 1


def hold(server, topic, subscription, timeout_ms):
    out: dict = {}

    def run():
        started = time.monotonic()
        out["reply"] = requests.post(server.url + Q + "longPollingMsg", timeout=30, data={
            k: v for k, v in {"topic": topic, "subscription": subscription,
                              "longPollingTimeoutMillis": timeout_ms}.items() if v}).json()
        out["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def test_a_long_poll_in_a_subscription_is_woken_by_a_send(hint_node, topic):
    """hint_node re-checks held polls only every 30 s: the answer within the poll comes from
    the send's hint, which wakes the held polls of every subscription of the topic."""
    create(hint_node, topic, "s1")
    create(hint_node, topic, "s2")
    polls = [hold(hint_node, topic, name, 8000) for name in ("s1", "s2", None)]
    time.sleep(0.5)                             # all three held (an empty topic: nothing yet)
    assert all("reply" not in out for _, out in polls)
    api.send(hint_node, topic, msgId="m1")
    for thread, out in polls:
        thread.join(10)
        assert [m["msgId"] for m in out["reply"]["delayMsgList"]] == ["m1"], out
        assert out["seconds"] < 3, out          # woken by the send, not by the timeout
    assert get_in(hint_node, topic, "m1", "s1")["status"] == 3
    assert get_in(hint_node, topic, "m1", "s2")["status"] == 3
