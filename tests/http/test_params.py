"""Parameter validation: every rule of docs/api.md, through Params and through the Flask app.

Rule violations answer code 400 in an HTTP 200 envelope; a missing or unconvertible
parameter answers HTTP 400; a required text parameter sent empty answers as camellia does on
camellia's endpoints (code 400, HTTP 200) and as a missing one on ours (the whole table:
test_param_rules.py). Either way the message names the parameter and nothing is written.
"""

from __future__ import annotations

import json

import pytest

from delayqueue.core.errors import BadRequest, MissingParameter
from delayqueue.http.app import create_app
from delayqueue.http.endpoints import CAMELLIA
from delayqueue.http.params import MAX_DURATION_MS, Params

BASE = "/camellia/delayQueue/"
LIMITS = dict(max_topic_length=256, max_msg_id_length=256, max_msg_bytes=1_048_576,
              max_batch=1000, max_long_polling_timeout_ms=60_000)


def params(**values) -> Params:
    return Params(values, **LIMITS)


def camellias(**values) -> Params:
    """As one of camellia's endpoints reads them."""
    return Params(values, **LIMITS, origin=CAMELLIA)


@pytest.fixture
def app(redis_url):
    return create_app(overrides={"redis_url": redis_url, "snapshot_dir": ""})


@pytest.fixture
def client(app):
    return app.test_client()


def assert_rejected(response, name: str, http_status: int = 200) -> None:
    assert response.status_code == http_status, response.get_data(as_text=True)
    body = response.get_json()
    assert body["code"] == 400
    assert body["msg"].startswith(name + ":") or body["msg"].startswith(name + ","), body
    assert "Traceback" not in body["msg"]


# -- Params, unit level ------------------------------------------------------------------
@pytest.mark.parametrize("text", ["true", "TRUE", "True", "1", "yes", "YES", "on", "On",
                                  " true "])
def test_true_spellings(text):
    assert params(ack=text).boolean("ack", default=False) is True


@pytest.mark.parametrize("text", ["false", "FALSE", "0", "no", "No", "off", "OFF"])
def test_false_spellings(text):
    assert params(ack=text).boolean("ack", default=True) is False


@pytest.mark.parametrize("text", ["maybe", "2", "y", "t", "nope"])
def test_unknown_boolean_spelling_is_missing_parameter(text):
    with pytest.raises(MissingParameter, match="^ack:"):
        params(ack=text).boolean("ack", default=True)


def test_boolean_defaults_when_absent_or_empty():
    assert params().boolean("ack", default=True) is True
    assert params(ack="").boolean("ack", default=True) is True
    assert params(release=True).boolean("release", default=False) is True


def test_topic_rules():
    assert params(topic="t" * 256).topic() == "t" * 256
    with pytest.raises(BadRequest, match="^topic: must be at most 256"):
        params(topic="t" * 257).topic()
    for bad in ("a{b", "a}b", "{ab}"):
        with pytest.raises(BadRequest, match="^topic:.*'\\{' or '\\}'"):
            params(topic=bad).topic()
    for ch in ("\x00", "\x01", "\n", "\t", "\x7f", "\x85"):
        with pytest.raises(BadRequest, match="^topic: must not contain control"):
            params(topic=f"a{ch}b").topic()
    with pytest.raises(MissingParameter, match="^topic:"):
        params().topic()
    with pytest.raises(MissingParameter, match="^topic:"):
        params(topic="").topic()
    assert params(topic="主题 with space").topic() == "主题 with space"


def test_msg_id_rules():
    assert params().msg_id(required=False) is None
    assert params(msgId="").msg_id(required=False) is None
    with pytest.raises(MissingParameter, match="^msgId:"):
        params().msg_id()
    assert params(msgId="i" * 256).msg_id() == "i" * 256
    with pytest.raises(BadRequest, match="^msgId: must be at most 256"):
        params(msgId="i" * 257).msg_id()
    with pytest.raises(BadRequest, match="^msgId: must not contain control"):
        params(msgId="a\rb").msg_id()


@pytest.mark.parametrize("name,read", [("topic", Params.topic), ("msgId", Params.msg_id),
                                       ("msg", Params.body)])
def test_on_camellias_endpoints_an_empty_required_text_is_a_broken_rule(name, read):
    with pytest.raises(BadRequest) as caught:
        read(camellias(**{name: ""}))
    assert type(caught.value) is BadRequest                   # code 400 in HTTP 200
    assert caught.value.msg == f"{name}: must not be empty"
    with pytest.raises(MissingParameter) as caught:           # absent: HTTP 400
        read(camellias())
    assert caught.value.msg == f"{name}: required parameter is missing"
    with pytest.raises(MissingParameter) as caught:           # a JSON null is absent
        read(camellias(**{name: None}))
    assert caught.value.msg == f"{name}: required parameter is missing"
    with pytest.raises(MissingParameter) as caught:           # ours: empty is missing
        read(params(**{name: ""}))
    assert caught.value.msg == f"{name}: required parameter is missing or empty"


def test_on_camellias_endpoints_an_empty_optional_parameter_is_still_absent():
    p = camellias(msgId="", groupId="", delayMillis="", ack="", receipt="")
    assert p.msg_id(required=False) is None and p.group_id() is None
    assert p.duration("delayMillis") is None and p.receipt() is None
    assert p.boolean("ack", default=True) is True


def test_body_limit_counts_utf8_bytes():
    assert params(msg="x" * 1_048_576).body() == "x" * 1_048_576
    with pytest.raises(BadRequest, match="^msg: must be at most 1048576 bytes"):
        params(msg="x" * 1_048_577).body()
    with pytest.raises(BadRequest, match="^msg:"):
        params(msg="é" * 524_289).body()          # 524289 characters, 1048578 bytes
    with pytest.raises(MissingParameter, match="^msg:"):
        params(msg="").body()


@pytest.mark.parametrize("value,expected", [("5", 5), ("-5", -5), (7, 7), (7.0, 7),
                                            (" 12 ", 12)])
def test_integer_conversion(value, expected):
    assert params(delayMillis=value).duration("delayMillis") == expected


@pytest.mark.parametrize("value", ["abc", "1.5", 1.5, True, False, "", "1e3x"])
def test_unconvertible_integer_is_missing_parameter(value):
    p = params(delayMillis=value)
    if value == "":
        assert p.duration("delayMillis") is None
        return
    with pytest.raises(MissingParameter, match="^delayMillis: must be an integer"):
        p.duration("delayMillis")


def test_duration_upper_bound():
    assert params(ttlMillis=MAX_DURATION_MS).duration("ttlMillis") == MAX_DURATION_MS
    with pytest.raises(BadRequest, match="^ttlMillis: must be at most"):
        params(ttlMillis=MAX_DURATION_MS + 1).duration("ttlMillis")


def test_trigger_time_must_be_a_plausible_epoch_time():
    assert params(triggerTime=0).trigger_time() == 0
    with pytest.raises(BadRequest, match="^triggerTime:"):
        params(triggerTime=-1).trigger_time()
    with pytest.raises(BadRequest, match="^triggerTime:"):
        params(triggerTime=MAX_DURATION_MS * 3 + 1).trigger_time()


def test_max_retry_bounds():
    assert params(maxRetry=0).max_retry() == 0
    assert params(maxRetry=-3).max_retry() == -3          # < 0 means the default (service)
    assert params(maxRetry=1_000_000).max_retry() == 1_000_000
    with pytest.raises(BadRequest, match="^maxRetry:"):
        params(maxRetry=1_000_001).max_retry()


def test_batch_rules():
    assert params().pull_count() == 1
    assert params(batch=0).pull_count() == 1
    assert params(batch=-4).pull_count() == 1
    assert params(batch=1000).pull_count() == 1000
    with pytest.raises(BadRequest, match="^batch: must be at most 1000"):
        params(batch=1001).pull_count()


def test_long_polling_timeout_rules():
    assert params().long_polling_timeout(10_000) == 10_000
    assert params(longPollingTimeoutMillis=0).long_polling_timeout(10_000) == 10_000
    assert params(longPollingTimeoutMillis=60_000).long_polling_timeout(10_000) == 60_000
    with pytest.raises(BadRequest, match="^longPollingTimeoutMillis: must be at most 60000"):
        params(longPollingTimeoutMillis=60_001).long_polling_timeout(10_000)


@pytest.mark.parametrize("key", ["", "a\x00b", "line\nbreak", "tab\t", "del\x7f", "c1\x85"])
def test_an_attribute_key_empty_or_with_control_characters_is_refused(key):
    for given in ({key: "v"}, json.dumps({key: "v"})):       # a JSON body's object, a form's text
        with pytest.raises(BadRequest) as caught:
            params(attributes=given).attributes()
        assert type(caught.value) is BadRequest              # code 400 in an HTTP 200 envelope
        assert caught.value.msg == ("attributes: keys must be non-empty, without control "
                                    "characters")


def test_an_attribute_key_may_be_any_other_text():
    given = {"k": "v", "主题 with space": "", "a.b-c_d/e": "x"}
    assert params(attributes=json.dumps(given)).attributes() == given


def test_json_non_string_values():
    assert params(topic=12).topic() == "12"
    with pytest.raises(MissingParameter, match="^topic: must be a string"):
        params(topic=["a"]).topic()
    with pytest.raises(MissingParameter, match="^msg: must be a string"):
        params(msg={"a": 1}).body()


# -- through the app ---------------------------------------------------------------------
def registry_and_keys(app, topic):
    runtime = app.extensions["delayqueue"]
    client = runtime.client
    return client.zscore(runtime.keys.topics, topic), client.keys(f"*{topic}*")


@pytest.mark.parametrize("form,name,http_status", [
    ({"topic": "t" * 257, "msg": "x"}, "topic", 200),
    ({"topic": "ok{", "msg": "x"}, "topic", 200),
    ({"topic": "ok}", "msg": "x"}, "topic", 200),
    ({"topic": "ok\x00", "msg": "x"}, "topic", 200),
    ({"topic": "ok", "msg": "x", "msgId": "m" * 257}, "msgId", 200),
    ({"topic": "ok", "msg": "x", "msgId": "m\x1b"}, "msgId", 200),
    ({"topic": "ok", "msg": "x" * 1_048_577}, "msg", 200),
    ({"topic": "ok", "msg": "x", "delayMillis": "1", "triggerTime": "1"}, "delayMillis", 200),
    ({"topic": "ok", "msg": "x", "delayMillis": "abc"}, "delayMillis", 400),
    ({"topic": "ok", "msg": "x", "ttlMillis": "soon"}, "ttlMillis", 400),
    ({"topic": "ok", "msg": "x", "maxRetry": "1.5"}, "maxRetry", 400),
    ({"topic": "ok", "msg": "x", "maxRetry": "2000000"}, "maxRetry", 200),
    ({"topic": "ok", "msg": "x", "triggerTime": "-1"}, "triggerTime", 200),
    ({"topic": "ok", "msg": "x", "attributes": '{"": "v"}'}, "attributes", 200),
    ({"topic": "ok", "msg": "x", "attributes": '{"a\\u0000": "v"}'}, "attributes", 200),
    ({"topic": "ok"}, "msg", 400),
    ({"msg": "x"}, "topic", 400),
    ({"topic": "ok", "msg": ""}, "msg", 200),                 # camellia's endpoint: as camellia
    ({"topic": "", "msg": "x"}, "topic", 200),
])
def test_send_rule_violations_answer_400_and_write_nothing(app, client, form, name,
                                                          http_status):
    response = client.post(BASE + "sendMsg", data=form)
    assert_rejected(response, name, http_status)
    topic = form.get("topic", "ok")
    if "{" not in topic and "}" not in topic:
        assert registry_and_keys(app, topic) == (None, [])


@pytest.mark.parametrize("endpoint,form,name,http_status", [
    ("pullMsg", {"topic": "ok", "batch": "1001"}, "batch", 200),
    ("pullMsg", {"topic": "ok", "batch": "x"}, "batch", 400),
    ("pullMsg", {"topic": "ok", "ackTimeoutMillis": "x"}, "ackTimeoutMillis", 400),
    ("longPollingMsg", {"topic": "ok", "longPollingTimeoutMillis": "60001"},
     "longPollingTimeoutMillis", 200),
    ("longPollingMsg", {"topic": "ok", "batch": "1001"}, "batch", 200),
    ("ackMsg", {"topic": "ok", "msgId": "m", "ack": "perhaps"}, "ack", 400),
    ("ackMsg", {"topic": "ok"}, "msgId", 400),
    ("deleteMsg", {"topic": "ok", "msgId": "m", "release": "2"}, "release", 400),
    ("getMsg", {"topic": "ok"}, "msgId", 400),
    ("getTopicInfo", {"topic": "a{b}"}, "topic", 200),
    ("getMsg", {"topic": "ok", "msgId": ""}, "msgId", 200),   # camellia's: empty, as camellia
    ("ackMsg", {"topic": "ok", "msgId": ""}, "msgId", 200),
    ("pullMsg", {"topic": ""}, "topic", 200),
    ("changeVisibility", {"topic": "ok", "msgId": "", "ackTimeoutMillis": "0"}, "msgId",
     400),                                                    # ours: empty is missing
    ("rescheduleMsg", {"topic": "", "msgId": "m", "delayMillis": "0"}, "topic", 400),
])
def test_other_endpoint_rule_violations_answer_400_and_write_nothing(app, client, endpoint,
                                                                    form, name, http_status):
    response = client.post(BASE + endpoint, data=form)
    assert_rejected(response, name, http_status)
    assert registry_and_keys(app, "ok") == (None, [])


def test_json_body_is_read_and_validated(app, client):
    response = client.post(BASE + "sendMsg", json={"topic": "js", "msg": "x", "delayMillis": 5.5})
    assert_rejected(response, "delayMillis", 400)
    response = client.post(BASE + "sendMsg", json={"topic": "js", "msg": "x", "maxRetry": 2,
                                                   "delayMillis": 0})
    assert response.get_json()["delayMsg"]["maxRetry"] == 2
    response = client.post(BASE + "sendMsg", json=[1, 2])
    assert_rejected(response, "body", 400)


def test_query_string_is_read_on_get(client):
    response = client.get(BASE + "sendMsg", query_string={"topic": "qs", "msg": "x",
                                                          "batch": "1"})
    assert response.get_json()["code"] == 200
    response = client.get(BASE + "pullMsg", query_string={"topic": "qs", "batch": "1001"})
    assert_rejected(response, "batch")


def test_limits_are_configurable(redis_url):
    app = create_app(overrides={"redis_url": redis_url, "snapshot_dir": "",
                                "max_topic_length": 5, "max_msg_id_length": 40,
                                "max_msg_bytes": 4, "max_batch": 2,
                                "max_long_polling_timeout_millis": 100,
                                "long_polling_timeout_millis": 50})
    client = app.test_client()
    assert_rejected(client.post(BASE + "sendMsg", data={"topic": "sixsix", "msg": "x"}),
                    "topic")
    assert_rejected(client.post(BASE + "sendMsg", data={"topic": "t", "msg": "x",
                                                        "msgId": "i" * 41}), "msgId")
    assert_rejected(client.post(BASE + "sendMsg", data={"topic": "t", "msg": "fives"}), "msg")
    assert_rejected(client.post(BASE + "pullMsg", data={"topic": "t", "batch": "3"}), "batch")
    assert_rejected(client.post(BASE + "longPollingMsg",
                                data={"topic": "t", "longPollingTimeoutMillis": "101"}),
                    "longPollingTimeoutMillis")
    ok = client.post(BASE + "sendMsg", data={"topic": "fivef", "msg": "four", "msgId": "i" * 40})
    assert ok.get_json()["code"] == 200
