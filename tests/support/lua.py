"""Helpers of the Lua script tests (tests/lua/): the scripts driven directly, no HTTP.

A ManualClock supplies now_ms, so every time comparison is exact. After each transition the
"one place per message" invariant is checked against the raw keys (``assert_one_place``).
"""

from __future__ import annotations

from delayqueue.config import load_settings
from delayqueue.keys import NamespaceKeys, TopicKeys
from delayqueue.topic_config import server_defaults

NS = NamespaceKeys("dq", "default")
CHANNEL = NS.hint_channel
END_LIFE = 60_000
HOUR = 3_600_000
T0 = 1_700_000_000_000

ZSET_OF_STATUS = {1: "waiting", 2: "ready", 3: "ack"}
DEFAULTS = server_defaults(load_settings(env={}))     # the server's topic settings, as ARGV
DEAD_RETENTION = load_settings(env={}).dead_letter_retention_millis


def status_of(client, tk: TopicKeys, msg_id: str) -> int | None:
    value = client.hget(tk.msg(msg_id), "s")
    return None if value is None else int(value)


def assert_one_place(client, tk: TopicKeys, msg_id: str, expected_status: int | None) -> None:
    """The id is in exactly the zset its status names, and in the expiry index iff it is
    ready or consuming (a waiting message enters the index when promoted); a dead letter is
    in its topic's dead-letter queue and nowhere else, kept for its retention."""
    status = status_of(client, tk, msg_id)
    assert status == expected_status
    places = {name for name in ("waiting", "ready", "ack", "dead")
              if client.zscore(getattr(tk, name), msg_id) is not None}
    in_expire = client.zscore(tk.expire, msg_id) is not None
    if status in ZSET_OF_STATUS:
        assert places == {ZSET_OF_STATUS[status]}
        assert in_expire == (status != 1)   # waiting messages are not in the index
    elif status == 6 and places:            # a dead letter: its own place, its own retention
        assert places == {"dead"} and not in_expire
        assert 0 < client.pttl(tk.msg(msg_id)) <= DEAD_RETENTION
        return
    else:
        assert places == set()
        assert not in_expire
    if status is not None and status >= 4:
        ttl = client.pttl(tk.msg(msg_id))
        assert 0 < ttl <= END_LIFE


def send(scripts, tk, msg_id, now, trigger, ttl=HOUR, max_retry=10, body="body"):
    return scripts.send(tk, msg_id, body, now, trigger, ttl, max_retry, "", CHANNEL, DEFAULTS)


def pull(scripts, tk, now, batch=1, ack_timeout=30_000):
    return scripts.pull(tk, now, batch, ack_timeout, END_LIFE, 1000, CHANNEL, DEFAULTS)


def pulled_ids(result) -> list[str]:
    return [m[0] for m in result[0]]
