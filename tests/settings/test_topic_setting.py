"""The table of topic settings and the places that declare them again for a reason of their
own (typed fields): each must stay the table's, name for name and kind for kind.

The Lua list is checked in tests/core/test_lua_contract.py.
"""

from __future__ import annotations

import dataclasses

import pytest

from delayqueue.client.model import TOPIC_SETTINGS, TopicConfig, setting_name
from delayqueue.settings.config import Settings, key_of
from delayqueue.settings.topic_setting import SETTINGS
from delayqueue.settings.value import ValueProblem


def test_the_table_holds_the_settings_in_the_scripts_order_with_their_three_spellings():
    assert [(s.name, s.sdk, s.key) for s in SETTINGS] == [
        ("ttlMillis", "ttl_ms", "ttl-millis"),
        ("maxRetry", "max_retry", "max-retry"),
        ("ackTimeoutMillis", "ack_timeout_ms", "ack-timeout-millis"),
        ("redeliveryDelayMillis", "redelivery_delay_ms", "redelivery-delay-millis"),
        ("redeliveryBackoffMultiplier", "redelivery_backoff_multiplier",
         "redelivery-backoff-multiplier"),
        ("redeliveryMaxDelayMillis", "redelivery_max_delay_ms", "redelivery-max-delay-millis"),
        ("deadLetter", "dead_letter", "dead-letter"),
        ("deadLetterRetentionMillis", "dead_letter_retention_ms",
         "dead-letter-retention-millis"),
        ("deadLetterMaxSize", "dead_letter_max_size", "dead-letter-max-size"),
        ("delayMillis", "delay_ms", "delay-millis"),
        ("maxBacklog", "max_backlog", "max-backlog"),
        ("dedupWindowMillis", "dedup_window_ms", "dedup-window-millis"),
        ("defaultSubscription", "default_subscription", "default-subscription"),
        ("description", "description", "topic-description"),      # no script reads it
    ]


def test_the_server_settings_declare_exactly_the_tables_defaults_named_by_its_keys():
    declared = {f.name: f for f in dataclasses.fields(Settings) if "topic" in f.metadata}
    assert [key_of(name) for name in declared] == [s.key for s in SETTINGS]
    for setting in SETTINGS:
        field = declared[setting.field]
        assert field.metadata["topic"] is setting
        assert field.type == setting.kind.__name__, setting.name


def test_every_server_default_is_a_value_a_topic_may_be_set_to():
    defaults = Settings()
    for setting in SETTINGS:
        value = getattr(defaults, setting.field)
        assert setting.parse(value) == value and type(value) is setting.kind, setting.name


@pytest.mark.parametrize("key,raw", [("ttl_millis", 0), ("max_retry", -1),
                                     ("redelivery_backoff_multiplier", 0.5),
                                     ("dead_letter", "perhaps")])
def test_the_server_default_is_checked_by_the_tables_kind_and_lowest_value(key, raw):
    with pytest.raises(ValueError, match=f"^{key_of(key)}: must be "):
        Settings(**{key: raw})


def test_the_sdk_names_every_setting_by_the_tables_keywords_in_its_order():
    assert TOPIC_SETTINGS == {s.sdk: s.name for s in SETTINGS}
    fields = [f.name for f in dataclasses.fields(TopicConfig)]
    assert fields == ["topic", *(s.sdk for s in SETTINGS), "sources", "raw"]
    for setting in SETTINGS:
        assert setting_name(setting.name) == setting_name(setting.key) == setting.sdk


def test_the_sdk_reads_each_value_in_its_kind():
    config = TopicConfig.from_json("t", {"ttlMillis": "5", "redeliveryBackoffMultiplier": 2,
                                         "deadLetter": "off", "maxRetry": 3.0})
    assert (config.ttl_ms, config.redelivery_backoff_multiplier, config.dead_letter,
            config.max_retry) == (5, 2.0, False, 3)
    assert type(config.redelivery_backoff_multiplier) is float
    with pytest.raises(ValueProblem):
        TopicConfig.from_json("t", {"deadLetter": "perhaps"})
