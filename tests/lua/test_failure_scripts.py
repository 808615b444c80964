"""The failure-handling scripts driven directly (their cases are moving to each script's own
test_<script>.py): topic settings."""

from __future__ import annotations

from delayqueue.core.outcome import Outcome
from delayqueue.core.topic_config import SETTINGS, server_defaults
from delayqueue.settings.config import load_settings

from support.lua import (
    CHANNEL,
    DEFAULTS,
    END_LIFE,
    T0,
    configure,
    slot_of,
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
    assert len(defaults) == len(SETTINGS)
    assert defaults[[s.name for s in SETTINGS].index("deadLetter")] == "1"
