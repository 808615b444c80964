"""The message storage format of a namespace: the mark, the check a node makes before it
starts, and the migration from the older formats.

Five formats so far:
- legacy (no mark): every message a HASH of its own at ``<prefix>:{<ns>:<topic>}:msg:<msgId>``,
  the topic's zsets holding msgIds;
- ``records-1``: a message is one field of its topic's ``msgs`` hash (a binary record written
  only by lua/includes/message.lua), the zsets hold slots;
- ``records-2``: records carry an acceptance sequence and a groupId, the ``waiting`` and
  ``ready`` members start with the sequence (send order among equal times), and grouped
  messages wait in the group structures (lua/includes/group.lua);
- ``records-3``: an ended record may carry the time it ended (flag bit 5, for the topic's
  dedupWindowMillis). records-2 records read as they are (no end time: outside any window),
  so its conversion is the mark alone; but a records-2 node would read the end time as the
  body's first bytes, so the mark keeps such nodes out.
- ``records-4`` (this version): named subscriptions. A record may carry flag bit 6 (the send
  gave maxRetry) and bit 7 (detached: the default subscription does not hold it,
  defaultSubscription=false); a named subscription's records hold no body (it is the topic's
  record's). records-3 records read as they are (no subscription holds them), so the step
  is the mark alone; but a records-3 node would deliver a detached message in the default
  subscription and knows no fan-out, so the mark keeps such nodes out.
No two can be read by each other's scripts, so the namespace carries a mark
(``NamespaceKeys.storage_format``): a node refuses to start on a namespace marked with another
format, or unmarked and holding messages of an older one, and ``delayqueue migrate-storage``
converts such a namespace and sets the mark. An older node refuses a newer mark the same
way, so an old node cannot join a fleet that moved on.
"""

from __future__ import annotations

import re
from typing import Callable

import redis
from redis.cluster import RedisCluster

from .bookkeeping import ShardCountError, check_shards, namespace_keys, registered_topics
from .keys import NamespaceKeys, TopicKeys
from .scripts import Scripts

STORAGE_FORMAT = "records-4"
OLDER_FORMATS = ("records-1", "records-2", "records-3")
MIGRATE_CHUNK = 500          # msgIds per migrate.lua call, keys per read or SCAN
MIGRATE_COMMAND = "delayqueue migrate-storage"


class StorageFormatError(RuntimeError):
    """The namespace holds messages in a format this version does not read (or, as
    ``ShardCountError``, keeps its bookkeeping in another number of shards)."""


def check_format(client: redis.Redis, keys: NamespaceKeys) -> None:
    """Raise ``StorageFormatError`` when the namespace is marked with an older format or holds
    messages of one; otherwise make sure it carries the ``STORAGE_FORMAT`` mark.

    Without a mark, the registered topics are looked at: the head of each zset of each topic
    is an old msgId when its per-message hash exists, and the head of ``waiting`` or
    ``ready`` is a records-1 member when it is a bare slot (a field of ``msgs``). None found (a new
    namespace, or one whose Redis lost the mark, e.g. restarted empty while nodes kept
    writing) means this format: the namespace is marked. O(topics) reads, pipelined in
    chunks, only while the mark is missing.
    """
    mark = client.get(keys.storage_format)
    if mark == STORAGE_FORMAT:
        return
    if mark in OLDER_FORMATS:
        raise StorageFormatError(
            f"storage: namespace '{keys.namespace}' is marked {mark!r}; this version reads "
            f"{STORAGE_FORMAT!r}: stop every node and run `{MIGRATE_COMMAND}` first")
    if mark is not None:
        raise StorageFormatError(f"storage: namespace '{keys.namespace}' is marked {mark!r}; "
                                 f"this version reads {STORAGE_FORMAT!r}")
    if _holds_old_format(client, keys):
        raise StorageFormatError(
            f"storage: namespace '{keys.namespace}' holds topics in the older message format "
            f"(a hash per message); stop every node and run `{MIGRATE_COMMAND}` first")
    client.set(keys.storage_format, STORAGE_FORMAT, nx=True)


def _holds_old_format(client: redis.Redis, keys: NamespaceKeys) -> bool:
    topics = registered_topics(client, keys)
    for start in range(0, len(topics), MIGRATE_CHUNK):
        tks = [keys.topic(topic) for topic in topics[start:start + MIGRATE_CHUNK]]
        pipe = client.pipeline(transaction=False)
        for tk in tks:
            for zset in (tk.waiting, tk.ready, tk.ack, tk.dead):
                pipe.zrange(zset, 0, 0)
        heads = pipe.execute()
        pipe = client.pipeline(transaction=False)
        for i, tk in enumerate(tks):
            for head in heads[4 * i:4 * i + 4]:
                for member in head:
                    pipe.exists(tk.legacy_msg_prefix + member)
            for member in heads[4 * i] + heads[4 * i + 1]:     # waiting's and ready's heads
                pipe.hexists(tk.msgs, member)
        if any(pipe.execute()):
            return True
    return False


def _glob_escape(text: str) -> str:
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


def _migrate_ids(scripts: Scripts, tk: TopicKeys, now_ms: int, ids: list[str]) -> int:
    converted = 0
    for start in range(0, len(ids), MIGRATE_CHUNK):
        converted += scripts.migrate(tk, now_ms, ids[start:start + MIGRATE_CHUNK]).converted
    return converted


def migrate(client: redis.Redis, keys: NamespaceKeys, now: Callable[[], int],
            progress: Callable[[str], None] = lambda line: None) -> int:
    """Convert every registered topic of the namespace to records-4, then set the mark.

    Per topic: legacy messages first (the members of its zsets, ZSCAN in bounded chunks, then
    the per-message hashes left: ended messages kept for their retention, SCAN MATCH on the
    topic's old prefix), then records-1's waiting and ready members (bare slots) get their
    acceptance sequence (migrate_order.lua). records-2 -> records-3 -> records-4 converts
    nothing (their records read as they are): the mark is the step. Idempotent: converted
    messages have no old hash and converted members are no slot, so a re-run skips them.
    Returns how many messages were converted. Every node must be stopped while it runs.
    """
    scripts = Scripts(client)
    topics = registered_topics(client, keys)
    total = 0
    for n, topic in enumerate(topics, 1):
        tk = keys.topic(topic)
        converted = 0
        for zset in (tk.waiting, tk.ready, tk.ack, tk.expire, tk.dead):
            cursor = 0
            while True:
                cursor, members = client.zscan(zset, cursor, count=MIGRATE_CHUNK)
                ids = [member for member, _ in members]
                converted += _migrate_ids(scripts, tk, now(), ids)
                if cursor == 0:
                    break
        prefix = tk.legacy_msg_prefix
        for found in _scan_chunks(client, _glob_escape(prefix) + "*"):
            ids = [key[len(prefix):] for key in found if key.startswith(prefix)]
            converted += _migrate_ids(scripts, tk, now(), ids)
        converted += _migrate_order(client, scripts, tk)
        total += converted
        progress(f"migrate-storage: topic {n}/{len(topics)} {topic!r}: {converted} converted")
    client.set(keys.storage_format, STORAGE_FORMAT)
    progress(f"migrate-storage: done, {total} messages converted; namespace "
             f"'{keys.namespace}' marked {STORAGE_FORMAT}")
    return total


def _migrate_order(client: redis.Redis, scripts: Scripts, tk: TopicKeys) -> int:
    """records-1 -> records-2 for one topic: its waiting and ready members, each zset read in
    full first (the conversion renames them, so a ZSCAN running alongside could see one
    twice). Waiting ones first, in their order, so equal trigger times keep it."""
    converted = 0
    for name in ("waiting", "ready"):
        zset = getattr(tk, name)
        members = [member for member, _ in client.zscan_iter(zset, count=MIGRATE_CHUNK)]
        for start in range(0, len(members), MIGRATE_CHUNK):
            converted += scripts.migrate_order(
                tk, name, members[start:start + MIGRATE_CHUNK]).converted
    return converted


def _scan_chunks(client: redis.Redis, match: str):
    cursor = 0
    while True:
        cursor, found = client.scan(cursor, match=match, count=MIGRATE_CHUNK)
        if found:
            yield found
        if cursor == 0:
            return


def check_node_start(settings) -> str | None:
    """The check a node makes before its workers start (gunicorn_conf.py): raises
    ``StorageFormatError`` (a ShardCountError as one too); returns a warning line when
    Redis cannot be reached to check (the node starts, as it does whenever Redis is down)."""
    from delayqueue.settings.redis_connection import connect_redis

    client = connect_redis(settings.redis_url,
                           socket_timeout_ms=settings.redis_socket_timeout_millis,
                           connect_timeout_ms=settings.redis_connect_timeout_millis,
                           max_connections=1)
    try:
        keys = namespace_keys(settings, isinstance(client, RedisCluster))
        check_format(client, keys)
        check_shards(client, keys)
    except ShardCountError as exc:
        raise StorageFormatError(str(exc)) from None
    except redis.RedisError as exc:
        return f"storage format not checked, Redis unreachable: {exc}"
    finally:
        client.close()
    return None
