"""setTopicConfig's script, lua/topic_config.lua: a topic's own settings written (a reset
drops them first, in the same call), and the scripts reading them over the server's
defaults (includes/settings.lua). Named _script beside tests/core/test_topic_config.py (the
Python rules), as test_recycle_script.py is."""

from __future__ import annotations

from delayqueue.core.outcome import Outcome
from delayqueue.core.topic_config import server_defaults
from delayqueue.settings.config import load_settings
from delayqueue.settings.topic_setting import SCRIPT_SETTINGS, SETTINGS

from support.lua import (
    CHANNEL,
    DEFAULTS,
    END_LIFE,
    T0,
    configure,
    send,
    slot_of,
    snapshot,
)


# -- topic settings ------------------------------------------------------------------------------
def test_topic_settings_override_the_server_defaults_in_the_scripts(scripts, tk,
                                                                     redis_client):
    configure(scripts, tk, ttlMillis=5000, maxRetry=1, ackTimeoutMillis=700)
    outcome, fields, _ = scripts.send(tk, "a", "b", T0, T0, -1, -1, "", CHANNEL, DEFAULTS)
    assert (fields[3], fields[4]) == (str(T0 + 5000), "1")
    scripts.pull(tk, T0, 1, -1, END_LIFE, 1000, CHANNEL, DEFAULTS)
    assert redis_client.zscore(tk.ack, slot_of(redis_client, tk, "a")) == T0 + 700
    assert scripts.topic_config(tk, True, []) == Outcome.OK       # reset: server defaults
    assert redis_client.exists(tk.config) == 0
    assert scripts.topic_config(tk, False, ["ttlMillis"]) == Outcome.BAD_ARGUMENT

def test_server_defaults_are_passed_in_setting_order():
    settings = load_settings(env={})
    defaults = server_defaults(settings)
    assert len(defaults) == len(SCRIPT_SETTINGS) == len(SETTINGS) - 1   # not description
    assert defaults[[s.name for s in SETTINGS].index("deadLetter")] == "1"

def test_values_land_over_the_topic_settings_and_a_reset_drops_the_others(scripts, tk,
                                                                         redis_client):
    configure(scripts, tk, ttlMillis=5000, maxRetry=1)
    configure(scripts, tk, maxRetry=2)
    assert redis_client.hgetall(tk.config) == {"ttlMillis": "5000", "maxRetry": "2"}
    assert scripts.topic_config(tk, True, ["ackTimeoutMillis", "700"]) == Outcome.OK
    assert redis_client.hgetall(tk.config) == {"ackTimeoutMillis": "700"}


def test_only_the_config_hash_is_written_and_twice_is_the_same(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0)
    others = snapshot(redis_client)
    configure(scripts, tk, deadLetter=0)
    configured = snapshot(redis_client)
    configure(scripts, tk, deadLetter=0)
    assert snapshot(redis_client) == configured
    assert {key: dump for key, dump in configured.items() if key != tk.config} == others


def test_pairs_that_do_not_pair_are_refused_and_nothing_is_written_even_with_a_reset(
        scripts, tk, redis_client):
    configure(scripts, tk, maxRetry=2)
    before = snapshot(redis_client)
    assert scripts.topic_config(tk, True, ["ttlMillis"]) == Outcome.BAD_ARGUMENT
    assert scripts.topic_config(tk, False, ["ttlMillis", "1", "maxRetry"]) == \
        Outcome.BAD_ARGUMENT
    assert snapshot(redis_client) == before
