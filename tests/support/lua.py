"""Helpers of the Lua script tests (tests/lua/): the scripts driven directly, no HTTP.

A ManualClock supplies now_ms, so every time comparison is exact. After each transition the
"one place per message" invariant is checked against the raw keys (``assert_one_place``);
a message is read through lua/get.lua, the one reader of its record.
"""

from __future__ import annotations

import hashlib
from contextlib import contextmanager
from pathlib import Path

from delayqueue.core.keys import NamespaceKeys, TopicKeys
from delayqueue.core.message import MESSAGE_FIELDS
from delayqueue.core.outcome import Outcome
from delayqueue.core.scripts import assemble, lua_source
from delayqueue.core.topic_config import server_defaults
from delayqueue.settings.config import load_settings

NS = NamespaceKeys("dq", "default")
CHANNEL = NS.hint_channel
END_LIFE = 60_000
HOUR = 3_600_000
T0 = 1_700_000_000_000

ZSET_OF_STATUS = {1: "waiting", 2: "ready", 3: "ack"}
DEFAULTS = server_defaults(load_settings(env={}))     # the server's topic settings, as ARGV
DEAD_RETENTION = load_settings(env={}).dead_letter_retention_millis
_GET = lua_source("get")
PURGE_SLACK_MS = 60_000   # includes/message.lua: ended records are due this much after


def due_heads(client, tk: TopicKeys) -> int | None:
    """The topic's exact due time read from its queue heads (ended ones plus the purge slack),
    as the scheduler's visit computes it for the default subscription (None: nothing)."""
    heads = []
    for key, slack in ((tk.waiting, 0), (tk.ack, 0), (tk.expire, 0), (tk.ended, PURGE_SLACK_MS),
                       (tk.fanout, 0), (tk.sexpire, 0)):
        head = client.zrange(key, 0, 0, withscores=True)
        if head:
            heads.append(int(head[0][1]) + slack)
    return min(heads, default=None)


def settle_due(client, tk: TopicKeys) -> int | None:
    """What a scheduler visit leaves behind: the topic's exact due time (``due_heads``) in
    the namespace due index and in its Cluster due record, so that a script's lowered_due
    answers only what the script brought forward. Returns that time (None: nothing is due)."""
    due = due_heads(client, tk)
    if due is None:
        client.zrem(tk.namespace_due, tk.topic)
        client.delete(tk.due)
    else:
        client.zadd(tk.namespace_due, {tk.topic: due})
        client.set(tk.due, due)
    return due


def read(client, tk: TopicKeys, msg_id: str, scripts=None) -> tuple[list | None, str | None]:
    """(fields in MESSAGE_FIELDS order, slot), or (None, None) when there is no message.
    ``scripts``: read with these (a test's shorter slots), not the production ones."""
    reply = scripts.get(tk, msg_id, None) if scripts else \
        client.register_script(_GET)(keys=tk.queues, args=[msg_id, ""])
    if not reply:
        return None, None
    return reply[:-4], reply[-4]    # then the ack deadline, the death time, the holders


def field(client, tk: TopicKeys, msg_id: str, name: str) -> str | None:
    """One field of the message ("s", "n", "t", ...), as the scripts reply with it."""
    fields, _ = read(client, tk, msg_id)
    return None if fields is None else fields[MESSAGE_FIELDS.index(name)]


def status_of(client, tk: TopicKeys, msg_id: str) -> int | None:
    value = field(client, tk, msg_id, "s")
    return None if value is None else int(value)


def assert_one_place(client, tk: TopicKeys, msg_id: str, expected_status: int | None,
                     scripts=None, left_index: bool = False) -> None:
    """The message's slot is in exactly the zset its status names, and in the expiry index iff
    it is ready or consuming (a waiting message enters the index when promoted); an ended
    one is in `ended` (its retention) and nowhere else, but a dead letter is in its topic's
    dead-letter queue too, retained until death + its retention. A message blocked behind its
    group's head (stored status 1) is in the group structures (`blocked`, `held`) and the
    expiry index, and in no queue. ``expected_status`` is the stored one (get.lua without a
    time: a blocked message reads 1). ``left_index``: a consuming message past its
    expireTime that lua/expire.lua has visited, so out of the expiry index (its ack
    timeout ends it)."""
    fields, slot = read(client, tk, msg_id, scripts)
    status = None if fields is None else int(fields[6])
    assert status == expected_status
    if slot is None:
        return
    places = {name for name in ("ack", "dead", "ended")
              if client.zscore(getattr(tk, name), slot) is not None}
    places |= {name for name in ("waiting", "ready") if queue_member(client, tk, name, slot)}
    in_expire = client.zscore(tk.expire, slot) is not None
    group = fields[MESSAGE_FIELDS.index("g")]
    blocked = [m for m in client.zrange(tk.blocked, 0, -1)
               if m.startswith(group + "\0") and m[len(group) + 25:] == slot] if group else []
    in_held = client.zscore(tk.held, slot) is not None
    assert len(blocked) == in_held, (msg_id, blocked, in_held)
    if in_held:
        assert status == 1 and places == set() and in_expire, (msg_id, places)
        assert client.hget(tk.groups, group) not in (None, slot)   # behind another message
    elif status in ZSET_OF_STATUS:
        assert places == {ZSET_OF_STATUS[status]}
        # Waiting messages are not in the index; a consuming one leaves it when it expires.
        assert in_expire == (status != 1 and not left_index)
    elif status == 6 and "dead" in places:  # a dead letter: its own place, its own retention
        assert places == {"dead", "ended"} and not in_expire
        window = int(client.hget(tk.config, "dedupWindowMillis") or 0)   # kept at least that
        assert client.zscore(tk.ended, slot) == client.zscore(tk.dead, slot) + max(
            DEAD_RETENTION, window)
    else:
        assert places == {"ended"}
        assert not in_expire


def queue_member(client, tk: TopicKeys, name: str, slot: str) -> str | None:
    """The message's member of `waiting` or `ready` (``name``): its acceptance sequence in 12
    hex digits, then its slot; None when it is not there."""
    return next((m for m in client.zrange(getattr(tk, name), 0, -1) if m[12:] == slot), None)


def ready_member(client, tk: TopicKeys, slot: str) -> str | None:
    return queue_member(client, tk, "ready", slot)


def ready_score(client, tk: TopicKeys, slot: str) -> float | None:
    """When the message became ready (its score in `ready`), or None when it is not ready."""
    member = ready_member(client, tk, slot)
    return None if member is None else client.zscore(tk.ready, member)


def waiting_score(client, tk: TopicKeys, slot: str) -> float | None:
    """The message's score in `waiting` (its triggerTime), or None when it is not waiting."""
    member = queue_member(client, tk, "waiting", slot)
    return None if member is None else client.zscore(tk.waiting, member)


def ready_slots(client, tk: TopicKeys) -> list[str]:
    """The slots of `ready`, in delivery order."""
    return [member[12:] for member in client.zrange(tk.ready, 0, -1)]


def waiting_slots(client, tk: TopicKeys) -> list[str]:
    """The slots of `waiting`, in promotion order."""
    return [member[12:] for member in client.zrange(tk.waiting, 0, -1)]


def assert_groups(client, tk: TopicKeys, scripts=None) -> None:
    """The group structures agree with the records: every group in `groups` has its front
    live, unblocked and in a queue; every blocked message belongs to a group that has a front;
    `held` holds exactly the blocked ones; at most one message per group is consuming."""
    fronts = client.hgetall(tk.groups)
    for group, slot in fronts.items():
        assert client.zscore(tk.held, slot) is None, group
        assert client.zscore(tk.ack, slot) is not None or \
            any(queue_member(client, tk, name, slot) for name in ("waiting", "ready")), group
    members = client.zrange(tk.blocked, 0, -1)
    assert len(members) == client.zcard(tk.held)
    for member in members:
        group = member.split("\0", 1)[0]
        assert group in fronts, member
        assert client.zscore(tk.held, member[len(group) + 25:]) is not None, member
    consuming_groups = [record_group(client, tk, slot) for slot in client.zrange(tk.ack, 0, -1)]
    grouped = [g for g in consuming_groups if g]
    assert len(grouped) == len(set(grouped)), grouped


def record_group(client, tk: TopicKeys, slot: str) -> str | None:
    """The groupId of the record at a slot (decoded by lua/includes/message.lua)."""
    return client.eval(_RECORD_GROUP, len(tk.queues), *tk.queues, slot) or None


_RECORD_GROUP = assemble(Path(__file__).with_name("record_group.lua"))
_RECORDS_1 = assemble(Path(__file__).with_name("records1.lua"))
_RECORDS_2 = assemble(Path(__file__).with_name("records2.lua"))


def as_records_2(client, tk: TopicKeys) -> None:
    """Turn the topic's records into what storage format records-2 kept: no end time."""
    client.eval(_RECORDS_2, len(tk.queues), *tk.queues, *client.hkeys(tk.msgs))


def as_records_1(client, tk: TopicKeys) -> list[str]:
    """Turn the topic's messages into what storage format records-1 kept: records without a
    sequence and bare slots in `waiting` and `ready`. Returns the bare ready members."""
    client.eval(_RECORDS_1, len(tk.queues), *tk.queues, *client.hkeys(tk.msgs))
    bare: dict[str, list[str]] = {"waiting": [], "ready": []}
    for name, slots in bare.items():
        zset = getattr(tk, name)
        for member, score in client.zrange(zset, 0, -1, withscores=True):
            client.zrem(zset, member)
            client.zadd(zset, {member[12:]: score})
            slots.append(member[12:])
    return bare["ready"]


def retention_end(client, tk: TopicKeys, msg_id: str) -> float | None:
    """When the ended message's record may be purged (its `ended` score), or None."""
    _, slot = read(client, tk, msg_id)
    return None if slot is None else client.zscore(tk.ended, slot)


def send(scripts, tk, msg_id, now, trigger, ttl=HOUR, max_retry=10, body="body", group="",
         replace=False, attributes=""):
    """sendMsg's script for one message (``replace``: onDuplicate=replace)."""
    return scripts.send(tk, msg_id, body, now, trigger, ttl, max_retry, attributes, CHANNEL,
                        DEFAULTS, group, replace)


def pull(scripts, tk, now, batch=1, ack_timeout=30_000):
    return scripts.pull(tk, now, batch, ack_timeout, END_LIFE, 1000, CHANNEL, DEFAULTS)


def pulled_ids(result) -> list[str]:
    return [m[0] for m in result[0]]


def slot_of(client, tk: TopicKeys, msg_id: str, scripts=None) -> str | None:
    """Where the message's record is (its member in the topic's zsets), or None."""
    return read(client, tk, msg_id, scripts)[1]


def ids_sharing_a_digest(hex_chars: int, count: int) -> list[str]:
    """msgIds whose sha1 starts with the same `hex_chars` hex digits."""
    by_digest: dict[str, list[str]] = {}
    for i in range(100_000):
        msg_id = f"m{i}"
        group = by_digest.setdefault(hashlib.sha1(msg_id.encode()).hexdigest()[:hex_chars], [])
        group.append(msg_id)
        if len(group) == count:
            return group
    raise AssertionError("no collision found")


def drop_record(client, tk: TopicKeys, msg_id: str) -> str:
    """Remove a message's record behind the scripts' back (as a lost write would); returns
    its slot, still in the zsets."""
    slot = slot_of(client, tk, msg_id)
    client.hdel(tk.msgs, slot)
    return slot


def set_status_behind_the_scripts(client, tk: TopicKeys, msg_id: str, status: int) -> str:
    """Overwrite the status byte of a message's record (its first byte, lua/includes/
    message.lua), as a stale copy would leave it; returns its slot."""
    slot = slot_of(client, tk, msg_id)
    client.eval("local r = redis.call('HGET', KEYS[1], ARGV[1]) "
                "return redis.call('HSET', KEYS[1], ARGV[1], string.char(ARGV[2]) .. "
                "string.sub(r, 2))", 1, tk.msgs, slot, status)
    return slot


def nack(scripts, tk, msg_id, now, receipt="", delay=-1):
    """Nack a delivery (receipt '' = the latest), redelivered after `delay` ms (-1: the
    topic's backoff)."""
    return scripts.nack(tk, msg_id, now, END_LIFE, CHANNEL, DEFAULTS, receipt, delay)


def receipt_of(pulled) -> str:
    """The receipt of the first message of a pull's reply."""
    return pulled[0][0][MESSAGE_FIELDS.index("c") + 1]


def configure(scripts, tk: TopicKeys, **values) -> None:
    """Set topic settings (setTopicConfig's script), e.g. ``deadLetterMaxSize=3``."""
    pairs = [str(x) for name, value in values.items() for x in (name, value)]
    assert scripts.topic_config(tk, False, pairs) == Outcome.OK


def make_dead_letter(scripts, tk: TopicKeys, msg_id: str, now: int) -> None:
    """Send, pull and nack a message of one delivery: a dead letter that died at `now`."""
    send(scripts, tk, msg_id, now, now, max_retry=0)
    assert msg_id in pulled_ids(pull(scripts, tk, now, batch=1000))
    assert nack(scripts, tk, msg_id, now)[3] == 1


def snapshot(client) -> dict:
    """Every key's DUMP: equal before and after a call means the call wrote nothing."""
    return {key: client.dump(key) for key in client.keys("*")}


@contextmanager
def hints(client):
    """The hints published on CHANNEL while the block runs (the list fills when it ends).
    Exact, not timed: a mark published at the end arrives after every earlier message."""
    pubsub = client.pubsub()
    pubsub.subscribe(CHANNEL)
    assert pubsub.get_message(timeout=5)["type"] == "subscribe"
    seen: list[str] = []
    try:
        yield seen
        client.publish(CHANNEL, "<end of block>")
        while (message := pubsub.get_message(timeout=5)["data"]) != "<end of block>":
            seen.append(message)
    finally:
        pubsub.close()
