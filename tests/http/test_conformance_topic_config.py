"""setTopicConfig and getTopicConfig (ours): every setting, merge and reset, the refusals,
and sends and pulls that take the topic's values."""

from __future__ import annotations

import pytest

from support import conformance as api
from support import wait_until

SERVER_DEFAULTS = {
    "ttlMillis": api.HOUR, "maxRetry": 10, "ackTimeoutMillis": 30_000,
    "redeliveryDelayMillis": 0, "redeliveryBackoffMultiplier": 1,
    "redeliveryMaxDelayMillis": api.HOUR, "deadLetter": True,
    "deadLetterRetentionMillis": 7 * api.DAY, "deadLetterMaxSize": 100_000,
    "delayMillis": 0, "maxBacklog": 0, "dedupWindowMillis": 0, "defaultSubscription": True,
    "description": "",
}


def test_get_topic_config_of_a_fresh_topic_shows_the_server_defaults(node, topic,
                                                                    raw_redis):
    status_code, reply = api.post(node, "getTopicConfig", topic=topic)
    assert status_code == 200 and reply["code"] == 200 and reply["msg"] == "success"
    assert reply["data"] == SERVER_DEFAULTS
    assert reply["source"] == {name: "server" for name in SERVER_DEFAULTS}
    api.assert_nothing_written(raw_redis, topic)


def test_set_topic_config_sets_every_setting_merges_and_resets(node, topic):
    values = {"ttlMillis": 120_000, "maxRetry": 3, "ackTimeoutMillis": 5000,
              "redeliveryDelayMillis": 250, "redeliveryBackoffMultiplier": 1.5,
              "redeliveryMaxDelayMillis": 4000, "deadLetter": False,
              "deadLetterRetentionMillis": 60_000, "deadLetterMaxSize": 50,
              "delayMillis": 1500, "maxBacklog": 20, "dedupWindowMillis": 60_000,
              "defaultSubscription": False, "description": "orders of the shop"}
    form = {k: ("false" if v is False else v) for k, v in values.items()}
    reply = api.set_config(node, topic, **form)
    assert reply["data"] == values
    assert reply["source"] == {name: "topic" for name in values}
    assert api.get_config(node, topic) == reply
    # Another call merges: the values not given stay.
    reply = api.set_config(node, topic, maxRetry=0, deadLetter="true")
    assert reply["data"] == {**values, "maxRetry": 0, "deadLetter": True}
    # reset=true drops every topic value first, then applies the given ones.
    reply = api.set_config(node, topic, reset="true", ackTimeoutMillis=900)
    assert reply["data"] == {**SERVER_DEFAULTS, "ackTimeoutMillis": 900}
    assert reply["source"] == {name: "topic" if name == "ackTimeoutMillis" else "server"
                               for name in SERVER_DEFAULTS}
    reply = api.set_config(node, topic, reset="true")
    assert reply["data"] == SERVER_DEFAULTS
    assert set(reply["source"].values()) == {"server"}
    # A JSON body with JSON types.
    status_code, reply = api.post_json(node, "setTopicConfig",
                                       {"topic": topic, "deadLetter": False, "maxRetry": 2,
                                    "redeliveryBackoffMultiplier": 2})
    assert reply["code"] == 200, reply
    assert reply["data"]["deadLetter"] is False and reply["data"]["maxRetry"] == 2
    assert reply["data"]["redeliveryBackoffMultiplier"] == 2


BAD_SETTINGS = [
    # (setting, value, HTTP status): rule broken -> 200, unconvertible -> 400
    ("ttlMillis", 0, 200), ("ttlMillis", -5, 200), ("ttlMillis", 3_153_600_000_001, 200),
    ("ttlMillis", "abc", 400), ("ttlMillis", "1.5", 400),
    ("maxRetry", -1, 200), ("maxRetry", 1_000_001, 200), ("maxRetry", "many", 400),
    ("ackTimeoutMillis", 0, 200), ("ackTimeoutMillis", -1, 200),
    ("ackTimeoutMillis", 3_153_600_000_001, 200),
    ("redeliveryDelayMillis", -1, 200),
    ("redeliveryBackoffMultiplier", 0.5, 200), ("redeliveryBackoffMultiplier", "x", 400),
    ("redeliveryBackoffMultiplier", "nan", None), ("redeliveryBackoffMultiplier", "inf", None),
    ("redeliveryMaxDelayMillis", -1, 200),
    ("deadLetter", "perhaps", 400),
    ("deadLetterRetentionMillis", 0, 200),
    ("deadLetterMaxSize", 0, 200), ("deadLetterMaxSize", "lots", 400),
    ("delayMillis", -1, 200), ("delayMillis", 3_153_600_000_001, 200),
    ("delayMillis", "soon", 400),
    ("maxBacklog", -1, 200), ("maxBacklog", 1_000_000_001, 200), ("maxBacklog", "big", 400),
    ("dedupWindowMillis", -1, 200), ("dedupWindowMillis", 3_153_600_000_001, 200),
    ("dedupWindowMillis", "long", 400),
    ("description", "x" * 1025, 200), ("description", "a\x00b", 200),
]


@pytest.mark.parametrize("setting,value,http", BAD_SETTINGS,
                         ids=[f"{s}={v}" for s, v, _ in BAD_SETTINGS])
def test_set_topic_config_refuses_a_bad_value_naming_it_and_writes_nothing(
        node, topic, raw_redis, setting, value, http):
    valid = {"deadLetterMaxSize": 5} if setting != "deadLetterMaxSize" else {"maxRetry": 2}
    status_code, reply = api.post(node, "setTopicConfig", topic=topic, **valid,
                                  **{setting: value})
    assert reply["code"] == 400, reply
    assert reply["msg"].startswith(setting), reply
    if http is not None:
        assert status_code == http
    api.assert_nothing_written(raw_redis, topic)
    # On a topic with settings, a refused call changes none of them.
    api.set_config(node, topic, maxRetry=4)
    before = api.dump(raw_redis, topic)
    api.post(node, "setTopicConfig", topic=topic, reset="true", **{setting: value})
    assert api.dump(raw_redis, topic) == before
    assert api.get_config(node, topic)["data"]["maxRetry"] == 4


def test_set_topic_config_accepts_the_edges_of_every_rule(node, topic):
    edges = {"ttlMillis": 1, "maxRetry": 0, "ackTimeoutMillis": 1, "redeliveryDelayMillis": 0,
             "redeliveryBackoffMultiplier": 1, "redeliveryMaxDelayMillis": 0,
             "deadLetterRetentionMillis": 1, "deadLetterMaxSize": 1, "delayMillis": 0,
             "maxBacklog": 0, "dedupWindowMillis": 0}
    assert api.set_config(node, topic, **edges)["data"] == {**edges, "deadLetter": True,
                                                          "defaultSubscription": True,
                                                          "description": ""}
    upper = {"delayMillis": 3_153_600_000_000, "maxBacklog": 1_000_000_000,
             "dedupWindowMillis": 3_153_600_000_000,
             "description": "é" * 512}                       # 1024 bytes of UTF-8
    assert api.set_config(node, topic, **upper)["data"] == {**edges, **upper,
                                                            "deadLetter": True,
                                                            "defaultSubscription": True}
    reply = api.set_config(node, topic, redeliveryBackoffMultiplier=1000)     # its upper edge
    assert reply["data"]["redeliveryBackoffMultiplier"] == 1000
    status_code, reply = api.post(node, "setTopicConfig", topic=topic,
                                  redeliveryBackoffMultiplier=1000.5)
    assert status_code == 200 and reply["code"] == 400


def test_set_topic_config_refuses_a_bad_topic(node, topic, raw_redis):
    status_code, reply = api.post(node, "setTopicConfig", topic=topic + "}", maxRetry=1)
    assert reply["code"] == 400 and reply["msg"].startswith("topic")
    status_code, reply = api.post(node, "setTopicConfig", maxRetry=1)
    assert status_code == 400 and reply["msg"].startswith("topic")
    api.assert_nothing_written(raw_redis, topic)


def test_send_and_pull_without_values_use_the_topic_settings(node, topic, raw_redis):
    api.set_config(node, topic, ttlMillis=120_000, maxRetry=2, ackTimeoutMillis=700)
    for params in ({}, {"ttlMillis": 0, "maxRetry": -1}):
        m = api.send(node, topic, **params)
        assert m["maxRetry"] == 2 and m["expireTime"] == m["triggerTime"] + 120_000
    explicit = api.send(node, topic, msgId="explicit", ttlMillis=5000, maxRetry=7,
                        delayMillis=60_000)
    assert explicit["maxRetry"] == 7
    assert explicit["expireTime"] == explicit["triggerTime"] + 5000
    for endpoint in ("pullMsg", "longPollingMsg"):
        before = api.redis_now_ms(raw_redis)
        reply = api.call(node, endpoint, topic=topic, longPollingTimeoutMillis=1000)
        after = api.redis_now_ms(raw_redis)
        (m,) = reply["delayMsgList"]
        deadline = api.ack_deadline(raw_redis, topic, m["msgId"])
        assert before + 700 - api.CLOCK_SLACK <= deadline <= after + 700
    # An explicit ackTimeoutMillis still wins; the topic's maxRetry counts deliveries.
    wait_until(lambda: api.info(node, topic)["readyQueueSize"] == 2, 5)
    got = api.pull(node, topic, batch=2, ackTimeoutMillis=60_000)
    assert all(api.ack_deadline(raw_redis, topic, m["msgId"]) >= api.redis_now_ms(raw_redis)
               + 50_000 for m in got)
