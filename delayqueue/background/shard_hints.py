"""Hints through sharded pub/sub, on a Redis Cluster whose masters all run Redis >= 7.

There a script that makes k messages ready SPUBLISHes "<k> <topic>" on the topic's own
channel (``TopicKeys.hint_channel``, in the topic's slot: lua/includes/keys.lua
publish_hint), which only the master serving that slot and the clients subscribed to it
there hear, instead of a classic PUBLISH the cluster bus carries to every node and every
process. ``ShardHints`` keeps the hub's side: it SSUBSCRIBEs the channel of each topic the
process has waiters on (long polls and push delivery threads), from the first waiter until
``LINGER_S`` after the last one left, so a consumer polling again and again does not
subscribe and unsubscribe each time.

One pub/sub connection per master that serves a subscribed channel, each read by its own
thread; one maintenance thread places every wanted channel on the master that serves its
slot now. A channel leaves its master when the master dies (the reader's connection fails),
when its slot moves (Redis answers SUNSUBSCRIBE itself) or when the master became a replica
(checked every ``VERIFY_S``): the slot map is read again and the channel subscribed where
it lives now, and the topic's waiters re-check at once (hints may have been lost meanwhile;
a lost hint costs a waiter at most its safety interval, a channel left unsubscribed would
cost every long poll of the topic its safety interval, for good).

Whether the cluster qualifies is read at start (INFO server of every master) and again every
``DETECT_S`` while it does not (a rolling upgrade): until then the classic channel carries
every hint, as on one Redis.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

import redis
from redis.cluster import RedisCluster
from redis.exceptions import RedisClusterException

logger = logging.getLogger(__name__)

LINGER_S = 10.0          # a topic's channel stays subscribed this long after its last waiter
CONFIRM_S = 1.0          # a new waiter waits at most this long for its topic's SSUBSCRIBE
VERIFY_S = 5.0           # how often the masters holding subscriptions are checked still masters
DETECT_S = 60.0          # how often a cluster found unfit for sharded hints is looked at again
TICK_S = 0.5             # the maintenance thread's longest sleep
MIN_VERSION = (7, 0)


def cluster_shards_hints(client: redis.Redis) -> bool:
    """Whether ``client`` is a Redis Cluster whose masters all run Redis >= 7.0 (sharded
    pub/sub: SPUBLISH, SSUBSCRIBE)."""
    if not isinstance(client, RedisCluster):
        return False
    infos = client.info("server", target_nodes=RedisCluster.PRIMARIES)
    versions = [info["redis_version"] for info in infos.values()] \
        if isinstance(infos, dict) and "redis_version" not in infos else [infos["redis_version"]]
    return bool(versions) and all(
        tuple(int(part) for part in v.split(".")[:2]) >= MIN_VERSION for v in versions)


class _Shard:
    """One master's pub/sub connection and the thread reading it."""

    def __init__(self, owner: "ShardHints", node) -> None:
        self.node = node
        self.pubsub = owner.client.get_redis_connection(node).pubsub()
        self.dead = False
        self.thread = threading.Thread(target=owner._read, args=(self,),
                                       name=f"dq-hub-shard-{node.port}", daemon=True)

    def close(self) -> None:
        self.dead = True
        try:
            self.pubsub.close()
        except Exception:  # noqa: BLE001 - best effort on a node that may be gone
            pass


class ShardHints:
    """The hub's SSUBSCRIBEs: one per topic with waiters in this process."""

    def __init__(self, client: RedisCluster, channel_of: Callable[[str], str],
                 deliver: Callable[[str], None], has_waiters: Callable[[str], bool],
                 missed: Callable[[str], None]) -> None:
        """``channel_of(topic)``: the topic's shard channel; ``deliver(payload)``: a hint;
        ``has_waiters(topic)``; ``missed(topic)``: hints of the topic may have been lost."""
        self.client = client
        self._channel_of = channel_of
        self._deliver = deliver
        self._has_waiters = has_waiters
        self._missed = missed
        self.enabled: bool | None = None     # None: not yet known
        self.known = threading.Event()       # set once ``enabled`` is known
        self._lock = threading.Lock()
        self._wanted: dict[str, float | None] = {}   # topic -> None (waiters) or linger end
        self._confirmed: dict[str, threading.Event] = {}
        self._placed: dict[str, str] = {}            # topic -> node name subscribed on
        self._topic_of: dict[str, str] = {}          # channel -> topic
        self._shards: dict[str, _Shard] = {}
        self._refresh = False                        # the slot map must be read again
        self._missing: set[str] = set()   # topics whose hints may have gone unheard
        self._evicted: set[tuple[str, str]] = set()  # (topic, node) Redis unsubscribed
        self._poke = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- what the hub says -------------------------------------------------------------
    def want(self, topic: str) -> None:
        """A waiter of ``topic`` registered: subscribe to its channel (returns once Redis
        confirmed it, or after ``CONFIRM_S``)."""
        if not self.known.wait(CONFIRM_S) or not self.enabled:
            return
        with self._lock:
            self._wanted[topic] = None
            confirmed = self._confirmed.setdefault(topic, threading.Event())
        if not confirmed.is_set():
            self._poke.set()
            confirmed.wait(CONFIRM_S)

    def release(self, topic: str) -> None:
        """The last waiter of ``topic`` left: unsubscribe after ``LINGER_S``."""
        with self._lock:
            if topic in self._wanted:
                self._wanted[topic] = time.monotonic() + LINGER_S

    def subscribed(self) -> set[str]:
        """The topics whose channel is subscribed now (confirmed by Redis)."""
        with self._lock:
            return {t for t, event in self._confirmed.items() if event.is_set()}

    # -- threads -----------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="dq-hub-shards", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._poke.set()
        with self._lock:
            shards, self._shards = list(self._shards.values()), {}
        for shard in shards:
            shard.close()

    def _run(self) -> None:
        next_detect = next_verify = 0.0
        while not self._stop.is_set():
            try:
                now = time.monotonic()
                if not self.enabled and now >= next_detect:
                    self.enabled = cluster_shards_hints(self.client)
                    self.known.set()
                    next_detect = now + DETECT_S
                    logger.info("long-poll hints: %s", "sharded pub/sub (SSUBSCRIBE per topic)"
                                if self.enabled else "classic pub/sub")
                if self.enabled:
                    if now >= next_verify:
                        self._verify()
                        next_verify = now + VERIFY_S
                    self._maintain()
            except (redis.RedisError, RedisClusterException) as exc:
                logger.warning("sharded hint subscriptions: %s; retrying", exc)
                self._refresh = True
            except Exception:  # noqa: BLE001 - the maintenance must never die silently
                logger.exception("sharded hint subscriptions failed; retrying")
            self._poke.wait(TICK_S)
            self._poke.clear()

    def _verify(self) -> None:
        """A master holding subscriptions that became a replica (its slots left it without a
        word to its subscribers, or it lost its connection): read the slot map again."""
        for shard in list(self._shards.values()):
            try:
                role = self.client.get_redis_connection(shard.node).info("replication")["role"]
            except redis.RedisError:
                role = None
            if role != "master":
                self._drop_shard(shard)

    def _maintain(self) -> None:
        self._collect()
        if self._refresh:
            self._refresh = False
            self.client.nodes_manager.initialize()
        now = time.monotonic()
        with self._lock:
            wanted = dict(self._wanted)
        for topic, until in wanted.items():
            if until is not None and until <= now and not self._has_waiters(topic):
                self._unsubscribe(topic)
            elif until is not None and self._has_waiters(topic):
                with self._lock:
                    self._wanted[topic] = None   # a waiter came back meanwhile
        with self._lock:
            wanted = [t for t in self._wanted]
        for topic in wanted:
            self._place(topic)
        for name, shard in list(self._shards.items()):
            if not shard.pubsub.subscribed and not any(
                    node == name for node in self._placed.values()):
                del self._shards[name]
                shard.close()

    def _place(self, topic: str) -> None:
        """Subscribe ``topic``'s channel on the master serving its slot, if not there."""
        channel = self._channel_of(topic)
        node = self.client.get_node_from_key(channel)
        placed = self._placed.get(topic)
        if placed == node.name:
            return
        if placed is not None and placed in self._shards:
            try:
                self._shards[placed].pubsub.sunsubscribe(channel)
            except redis.RedisError:
                pass
        self._topic_of[channel] = topic   # first: its confirmation may come at once
        shard = self._shards.get(node.name)
        if shard is None or shard.dead:
            shard = self._shards[node.name] = _Shard(self, node)
            shard.pubsub.ssubscribe(channel)
            shard.thread.start()
        else:
            shard.pubsub.ssubscribe(channel)
        self._placed[topic] = node.name

    def _unsubscribe(self, topic: str) -> None:
        channel = self._channel_of(topic)
        with self._lock:
            self._wanted.pop(topic, None)
            self._confirmed.pop(topic, None)
        shard = self._shards.get(self._placed.pop(topic, ""))
        self._topic_of.pop(channel, None)
        if shard is not None:
            try:
                shard.pubsub.sunsubscribe(channel)
            except redis.RedisError:
                pass

    def _drop_shard(self, shard: _Shard) -> None:
        """Every channel subscribed through ``shard`` must be placed again."""
        if self._shards.get(shard.node.name) is shard:
            del self._shards[shard.node.name]
        shard.close()
        for topic, name in list(self._placed.items()):
            if name == shard.node.name:
                self._lost(topic)
        self._refresh = True

    def _lost(self, topic: str) -> None:
        """The topic's channel is not subscribed anymore: place it again, and wake its
        waiters once it is (hints sent meanwhile went unheard)."""
        self._placed.pop(topic, None)
        with self._lock:
            event = self._confirmed.get(topic)
            if event is not None and event.is_set():
                self._confirmed[topic] = threading.Event()
                self._missing.add(topic)

    def _collect(self) -> None:
        """What the readers saw since the last pass: dead connections, channels taken away."""
        for shard in list(self._shards.values()):
            if shard.dead:
                self._drop_shard(shard)
        with self._lock:
            evicted, self._evicted = self._evicted, set()
        for topic, name in evicted:
            if self._placed.get(topic) == name:
                self._lost(topic)
                self._refresh = True

    def _read(self, shard: _Shard) -> None:
        """A master's subscriber thread: hints, confirmations, and Redis taking a channel
        away (its slot moved). What it sees is acted on by the maintenance thread."""
        while not shard.dead and not self._stop.is_set():
            try:
                message = shard.pubsub.get_message(timeout=1.0)
            except Exception as exc:  # noqa: BLE001 - a closed or failed connection
                if not shard.dead and not self._stop.is_set():
                    logger.warning("sharded hint subscriber of %s lost it (%s)",
                                   shard.node.name, exc)
                shard.dead = True
                self._poke.set()
                return
            if message:
                self._handle(shard, message)

    def _handle(self, shard: _Shard, message: dict) -> None:
        kind = message["type"]
        if kind == "smessage":
            data = message["data"]
            self._deliver(data.decode() if isinstance(data, bytes) else data)
            return
        channel = message["channel"]
        channel = channel.decode() if isinstance(channel, bytes) else channel
        topic = self._topic_of.get(channel)
        if topic is None:
            return
        if kind == "ssubscribe":
            with self._lock:
                event = self._confirmed.get(topic)
                missed = topic in self._missing
                self._missing.discard(topic)
            if event is not None:
                event.set()
            if missed:
                self._missed(topic)
        elif kind == "sunsubscribe":
            # Ours (a move, an unsubscribe) finds the topic placed elsewhere or not at all;
            # one Redis sent by itself (the slot left this master) must be placed again.
            shard.pubsub.shard_channels.pop(channel, None)
            with self._lock:
                self._evicted.add((topic, shard.node.name))
            self._poke.set()
