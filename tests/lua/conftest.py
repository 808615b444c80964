"""Fixtures of the Lua script tests: the scripts on a flushed Redis, a topic, a hand-set clock.

One test file per script, test_<script>.py (test_recycle_script.py and
test_topic_config_script.py, beside tests/core/test_recycle.py and test_topic_config.py;
tests/core/test_lua_contract.py checks every script has one); test_message_record.py for
includes/message.lua. The helpers are in support/lua.py.
"""

from __future__ import annotations

import pytest

from delayqueue.core.clock import ManualClock
from delayqueue.core.scripts import Scripts

from support.lua import NS, T0


@pytest.fixture
def scripts(redis_client):
    return Scripts(redis_client)


@pytest.fixture
def tk():
    return NS.topic("topic-a")


@pytest.fixture
def clock():
    return ManualClock(T0)
