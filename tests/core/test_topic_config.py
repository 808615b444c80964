"""setTopicConfig's checks: every setting's bounds at and past each end, the exact messages,
unknown names refused, and values stored and read back by their kind.

The bounds are written out here, not read from the table: a test that read them from
settings/topic_setting.py would follow any change to it.
"""

from __future__ import annotations

import pytest

from delayqueue.core.errors import BadRequest, MissingParameter
from delayqueue.core.topic_config import effective, loaded, parse_values, stored
from delayqueue.http.app import create_app
from delayqueue.settings.config import Settings
from delayqueue.settings.topic_setting import BY_NAME

CENTURY = 3_153_600_000_000      # 100 years of milliseconds
# name -> (lowest, highest, the rule its messages state)
BOUNDS = {
    "ttlMillis": (1, CENTURY, f"an integer from 1 to {CENTURY} (100 years)"),
    "maxRetry": (0, 1_000_000, "an integer from 0 to 1000000"),
    "ackTimeoutMillis": (1, CENTURY, f"an integer from 1 to {CENTURY} (100 years)"),
    "redeliveryDelayMillis": (0, CENTURY, f"an integer from 0 to {CENTURY} (100 years)"),
    "redeliveryMaxDelayMillis": (0, CENTURY, f"an integer from 0 to {CENTURY} (100 years)"),
    "deadLetterRetentionMillis": (1, CENTURY, f"an integer from 1 to {CENTURY} (100 years)"),
    "deadLetterMaxSize": (1, 10_000_000, "an integer from 1 to 10000000"),
}


@pytest.mark.parametrize("name", BOUNDS)
def test_an_integer_setting_takes_both_ends_of_its_range(name):
    low, high, _ = BOUNDS[name]
    assert parse_values({name: low}) == {name: low}
    assert parse_values({name: str(high)}) == {name: high}


@pytest.mark.parametrize("name", BOUNDS)
def test_an_integer_setting_just_past_either_end_is_code_400_naming_it_and_its_rule(name):
    low, high, rule = BOUNDS[name]
    for value in (low - 1, high + 1):
        with pytest.raises(BadRequest) as caught:
            parse_values({name: value})
        assert type(caught.value) is BadRequest          # code 400 in an HTTP 200 envelope
        assert caught.value.msg == f"{name}: must be {rule}, got {value!r}"


def test_the_multiplier_takes_1_to_1000_and_refuses_just_past_them():
    name, rule = "redeliveryBackoffMultiplier", "a number from 1 to 1000"
    assert parse_values({name: 1}) == {name: 1.0}
    assert parse_values({name: "1000"}) == {name: 1000.0}
    for value in (0.999, 1000.001):
        with pytest.raises(BadRequest) as caught:
            parse_values({name: value})
        assert type(caught.value) is BadRequest
        assert caught.value.msg == f"{name}: must be {rule}, got {value!r}"


@pytest.mark.parametrize("name,value,rule", [
    ("ttlMillis", "abc", f"an integer from 1 to {CENTURY} (100 years)"),
    ("maxRetry", "1.5", "an integer from 0 to 1000000"),
    ("maxRetry", True, "an integer from 0 to 1000000"),
    ("redeliveryBackoffMultiplier", "nan", "a number from 1 to 1000"),
    ("redeliveryBackoffMultiplier", "x", "a number from 1 to 1000"),
    ("deadLetter", "perhaps", "true or false"),
])
def test_an_unconvertible_value_is_http_400_naming_the_setting_and_its_rule(name, value, rule):
    with pytest.raises(MissingParameter) as caught:
        parse_values({name: value})
    assert caught.value.msg == f"{name}: must be {rule}, got {value!r}"


@pytest.mark.parametrize("text,expected", [("on", True), ("NO", False), (True, True),
                                           ("0", False)])
def test_dead_letter_takes_the_boolean_words(text, expected):
    assert parse_values({"deadLetter": text}) == {"deadLetter": expected}


def test_an_unknown_name_is_refused_naming_it_before_any_value_is_read():
    # maxRetries is a typo of maxRetry: accepted, it would set nothing and say nothing.
    with pytest.raises(BadRequest) as caught:
        parse_values({"maxRetries": "3", "ttlMillis": "0"})
    assert type(caught.value) is BadRequest
    assert caught.value.msg == (
        "maxRetries: not a topic setting; the settings are ttlMillis, maxRetry, "
        "ackTimeoutMillis, redeliveryDelayMillis, redeliveryBackoffMultiplier, "
        "redeliveryMaxDelayMillis, deadLetter, deadLetterRetentionMillis, deadLetterMaxSize, "
        "delayMillis, maxBacklog, dedupWindowMillis, defaultSubscription, description")


def test_the_other_parameters_of_the_request_are_not_settings():
    assert parse_values({"topic": "t", "reset": "true", "maxRetry": "3"},
                        others=("topic", "reset")) == {"maxRetry": 3}
    assert parse_values({"maxRetry": "", "ttlMillis": None}) == {}


def test_a_value_reads_back_as_it_was_set_in_its_kind():
    values = parse_values({"ttlMillis": "5000", "redeliveryBackoffMultiplier": "2",
                           "deadLetter": "off", "maxRetry": 0})
    hash_ = {name: stored(value) for name, value in values.items()}
    assert hash_ == {"ttlMillis": "5000", "redeliveryBackoffMultiplier": "2.0",
                     "deadLetter": "0", "maxRetry": "0"}
    back = {name: loaded(BY_NAME[name], text) for name, text in hash_.items()}
    assert back == values
    assert [type(back[n]) for n in ("ttlMillis", "redeliveryBackoffMultiplier", "deadLetter")] \
        == [int, float, bool]


def test_effective_takes_the_topic_value_over_the_server_default_and_says_so():
    data, source = effective({"maxRetry": "4", "deadLetter": "0"}, Settings())
    assert (data["maxRetry"], data["deadLetter"], data["ttlMillis"]) == (4, False, 3_600_000)
    assert source == {name: "topic" if name in ("maxRetry", "deadLetter") else "server"
                      for name in BY_NAME}


def test_set_topic_config_with_an_unknown_name_answers_400_and_writes_nothing(redis_url,
                                                                             redis_client):
    app = create_app(overrides={"redis_url": redis_url, "snapshot_dir": ""})
    reply = app.test_client().post("/camellia/delayQueue/setTopicConfig",
                                   data={"topic": "typo", "maxRetries": "3"})
    assert reply.status_code == 200
    assert reply.get_json()["code"] == 400
    assert reply.get_json()["msg"].startswith("maxRetries: not a topic setting")
    config = app.extensions["delayqueue"].keys.topic("typo").config
    assert redis_client.exists(config) == 0
    assert redis_client.keys("*typo*") == []


def test_an_empty_description_is_a_value_an_empty_number_is_absent():
    assert parse_values({"description": "", "maxRetry": "", "ttlMillis": None}) == \
        {"description": ""}
