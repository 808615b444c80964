"""Long polling without pinning a worker.

One pub/sub subscriber per process (``Hub``) fans "<count> <topic>" hints out to the requests
held in that process. A held request waits on its own ``threading.Event`` (a greenlet under
gevent), so thousands fit in one worker. Pub/sub is only a hint: each waiter also wakes by
itself at the topic's next due time and at least every ``safety_s`` — only the topic's
first waiter in the process does, so a thousand waiters on one topic neither stampede Redis
at the due millisecond nor poll it while idle; a lost hint costs at most that interval.

A held request takes messages only by calling ``pull`` when it is about to answer, so it
never moves a message to consuming that it cannot hand back.

Waiters are kept by (topic, subscription): a long poll in a named subscription waits for, and
pulls, that subscription's messages; ``None`` is the topic's default subscription. A hint
names a topic only, and whatever made a message ready there (a send above all) made it ready
in every subscription that holds it: so a hint wakes up to ``<count>`` waiters of *each*
subscription of the topic, and each subscription has its own leader and its own memory.

A hint reaches one process, not all of them: a long poll's pull that hands out nothing
registers its hub in the topic's hub set with a lease (``HUB_LEASES`` safety intervals; the
topic's leader renews it with each re-check), and a script that makes k messages ready
publishes "<k> <topic>" on the channel of one registered hub (``<hint channel>:<hub id>``),
taking turns, or on the channel every hub hears when none is registered or the topic has
named subscriptions (lua/includes/group.lua publish_ready). A hub that cannot wake as many
idle waiters as it was told passes the rest on to every hub, so a hint is never lost to a
hub whose waiters just left; one with no idle waiter at all also leaves the topic's hub set
(lua/hint_pass.lua) until one of its long polls waits again, so under full load, when
nobody waits, hints go back to every process at no extra cost per hint. Under a steady
load one ready message wakes one waiter in the fleet instead of one per process. On a
Cluster older than Redis 7 every hint goes to every process (a classic PUBLISH answers only
the subscribers of the node it ran on, so a routed one could not tell a hub that is gone
from one subscribed elsewhere). On a Cluster of Redis >= 7 hints are sharded
(``shard_hints.py``): a script SPUBLISHes on the topic's own channel and the hub SSUBSCRIBEs
the channel of each topic it has waiters on (``register`` waits for it before the first
pull), so a hint reaches the topic's master and the processes waiting there only; the
namespace channel still carries the control messages and the "0 <topic>" due hints.

The hub also remembers, per topic, what the process's last pull saw: "ready was empty and
nothing is due before T", valid while no hint for the topic has arrived since, for at most
``safety_s``. A new long poll, or a waiter that just became the topic's leader, trusts that
instead of running a pull that would find nothing — under a steady load, that was two of the
four pull scripts per delivered message. Anything that can make a message ready publishes a
hint (send, promote, nack, timeout, a pull that promoted more than it took), and a message due
later than the hint horizon is found by the leader's own re-check before it is due, so the
memory is never trusted past a change; a leader waking on its own timer always pulls.
"""

from __future__ import annotations

import logging
import random
import secrets
import threading
import time
from collections import defaultdict
from dataclasses import dataclass

import redis

from delayqueue.core.clock import Clock
from delayqueue.core.queue import DelayQueue
from delayqueue.core.requests import PullResult

logger = logging.getLogger(__name__)


# A control message on the hint channel: "0 <CONTROL_PREFIX><text>". No topic can start with
# a tab (the API refuses control characters), so a node that does not know the message takes
# it for a hint about a topic nobody waits on: harmless.
CONTROL_PREFIX = "\tcontrol\t"


# What waiters are kept by: (topic, subscription), None being the default subscription.
Key = tuple[str, str | None]

# A hub's registration for a topic's hints lasts this many safety intervals: the topic's
# leader re-checks (and so renews it) at least once a safety interval while it waits.
HUB_LEASES = 3


class Waiter:
    __slots__ = ("topic", "subscription", "event", "release", "pusher")

    def __init__(self, topic: str, release: int = 0, subscription: str | None = None,
                 pusher: bool = False) -> None:
        self.topic = topic
        self.subscription = subscription
        self.event = threading.Event()
        self.release = release   # the hub's release count when it registered
        self.pusher = pusher     # a push subscription's delivery thread, not a long poll

    @property
    def key(self) -> Key:
        return (self.topic, self.subscription)


@dataclass
class Quiet:
    """What a pull saw: nothing ready, nothing due before ``next_due_ms`` (None: nothing)."""
    seq: int
    next_due_ms: int | None
    noted_at: float


class Hub:
    """The process's subscriber and the registry of its held long polls."""

    def __init__(self, client: redis.Redis, channel: str, routed: bool = True) -> None:
        """``routed``: this process's long polls register for hints of their own (one Redis);
        else every hint comes on the channel every process hears (a Cluster)."""
        self._client = client
        self._channel = channel
        self.routed = routed
        # This process's own channel: hints routed to it alone (publish_ready).
        self.id = secrets.token_hex(6)
        self.own_channel = f"{channel}:{self.id}"
        self._waiters: dict[Key, list[Waiter]] = defaultdict(list)
        # The subscriptions of each topic that have waiters here: whom a hint wakes.
        self._subscriptions: dict[str, set[str | None]] = defaultdict(set)
        # Hints (and local changes) per topic: one counter for all of its subscriptions, as
        # a hint names the topic only.
        self._seq: dict[str, int] = defaultdict(int)
        self._quiet: dict[Key, Quiet] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.subscribed = threading.Event()
        self.on_due_hint = None  # callable(topic), set by the scheduler to be nudged
        # Set when the worker is shutting down: every held poll answers (empty) at once.
        self.draining = threading.Event()
        # Bumped by release_held(): the polls held at that moment answer (empty) at once.
        self.releases = 0
        self.on_control = None  # callable(text), for control messages on the hint channel
        # callable(topic, hub id, leave, count): passes a routed hint on (the runtime's
        # Scripts.hint_pass); None: a plain PUBLISH to every hub
        self.pass_hint = None
        # A Cluster's sharded hints (shard_hints.ShardHints): told of each topic's first and
        # last waiter here; None: every hint comes on the classic channel.
        self.shards = None

    # -- waiters -------------------------------------------------------------------------
    def register(self, topic: str, subscription: str | None = None,
                 pusher: bool = False) -> Waiter:
        with self._lock:
            waiter = Waiter(topic, self.releases, subscription, pusher)
            self._waiters[waiter.key].append(waiter)
            self._subscriptions[topic].add(subscription)
        if self.shards is not None:
            # Before the first pull: a hint sent after it is heard.
            self.shards.want(topic)
        return waiter

    def has_waiters(self, topic: str) -> bool:
        with self._lock:
            return topic in self._subscriptions

    def unregister(self, waiter: Waiter) -> None:
        with self._lock:
            waiters = self._waiters.get(waiter.key)
            if not waiters or waiter not in waiters:
                return
            was_leader = waiters[0] is waiter
            waiters.remove(waiter)
            if not waiters:
                del self._waiters[waiter.key]
                # Nobody left to keep the subscription's memory fresh...
                self._quiet.pop(waiter.key, None)
                subscriptions = self._subscriptions[waiter.topic]
                subscriptions.discard(waiter.subscription)
                if not subscriptions:
                    # ...nor, once the topic has no waiter at all, its counter meaningful.
                    del self._subscriptions[waiter.topic]
                    self._seq.pop(waiter.topic, None)
                    if self.shards is not None:
                        self.shards.release(waiter.topic)
            elif was_leader:
                # The new leader may be sleeping on the safety interval only: let it
                # re-read the topic's next due time.
                waiters[0].event.set()

    def is_leader(self, waiter: Waiter) -> bool:
        with self._lock:
            waiters = self._waiters.get(waiter.key)
            return bool(waiters) and waiters[0] is waiter

    def held(self) -> int:
        """The long polls this process holds now: what its node registry heartbeat
        (node_registry.py) reports, and so the Nodes page and /metrics."""
        with self._lock:
            return sum(not w.pusher for ws in self._waiters.values() for w in ws)

    def wake(self, topic: str, count: int, subscription: str | None = None) -> None:
        """Wake up to ``count`` idle waiters of ``topic`` in ``subscription``, oldest first
        (at least one)."""
        with self._lock:
            self._wake((topic, subscription), count)

    def wake_topic(self, topic: str, count: int) -> int:
        """Wake up to ``count`` idle waiters of each subscription of ``topic`` (a hint);
        returns the fewest woken in one subscription (0 when none waits here)."""
        with self._lock:
            woken = [self._wake((topic, subscription), count)
                     for subscription in self._subscriptions.get(topic, ())]
        return min(woken, default=0)

    def missed(self, topic: str) -> None:
        """Hints of ``topic`` may have gone unheard (its channel was resubscribed): every
        waiter of it re-checks."""
        self.invalidate(topic)
        with self._lock:
            for subscription in self._subscriptions.get(topic, ()):
                for waiter in self._waiters.get((topic, subscription), ()):
                    waiter.event.set()

    def _wake(self, key: Key, count: int) -> int:
        woken = 0
        for waiter in self._waiters.get(key, ()):
            if woken >= max(count, 1):
                break
            if not waiter.event.is_set():
                waiter.event.set()
                woken += 1
        return woken

    # -- what the last pull saw ------------------------------------------------------------
    def seq(self, topic: str) -> int:
        with self._lock:
            return self._seq[topic]

    def note_quiet(self, topic: str, seq: int, next_due_ms: int | None,
                   subscription: str | None = None) -> None:
        """Record a pull (in ``subscription``) that left nothing ready, if no hint for the
        topic came since ``seq``."""
        with self._lock:
            if self._seq[topic] == seq:
                self._quiet[(topic, subscription)] = Quiet(seq, next_due_ms, time.monotonic())

    def invalidate(self, topic: str) -> None:
        """Forget what the pulls of every subscription of ``topic`` saw."""
        with self._lock:
            self._seq[topic] += 1
            for subscription in self._subscriptions.get(topic, ()):
                self._quiet.pop((topic, subscription), None)

    def quiet(self, topic: str, now_ms: int, max_age_s: float,
              subscription: str | None = None) -> Quiet | None:
        """The subscription's last quiet observation, if still valid now; None means: pull."""
        with self._lock:
            state = self._quiet.get((topic, subscription))
            if state is None or state.seq != self._seq[topic] \
                    or time.monotonic() - state.noted_at >= max_age_s \
                    or (state.next_due_ms is not None and now_ms >= state.next_due_ms):
                return None
            return state

    def wake_all(self) -> None:
        with self._lock:
            self._quiet.clear()
            for topic in self._seq:
                self._seq[topic] += 1
            for waiters in self._waiters.values():
                for waiter in waiters:
                    waiter.event.set()

    # -- subscriber ----------------------------------------------------------------------
    def dispatch(self, payload: str, routed: bool = False) -> None:
        """Act on a hint: "<count> <topic>", or a control message. ``routed``: it came on this
        hub's own channel (it alone was told), so what its idle waiters cannot take is passed
        on to every hub."""
        count, _, topic = payload.partition(" ")
        if topic.startswith(CONTROL_PREFIX):
            if self.on_control is not None:
                self.on_control(topic[len(CONTROL_PREFIX):])
            return
        try:
            n = int(count)
        except ValueError:
            logger.warning("ignoring malformed hint %r", payload)
            return
        self.invalidate(topic)
        woken = self.wake_topic(topic, n)
        if n == 0 and self.on_due_hint is not None:
            self.on_due_hint(topic)
        if routed and woken < n:
            self._pass_on(topic, n - woken, leave=woken == 0)

    def _pass_on(self, topic: str, count: int, leave: bool) -> None:
        """Hand the part of a routed hint no idle waiter here could take to every hub; with
        none idle here, this hub also stops drawing the topic's hints until one of its long
        polls waits again (``pass_hint``, lua/hint_pass.lua)."""
        try:
            if self.pass_hint is not None:
                self.pass_hint(topic, self.id, leave, count)
            else:
                self._client.publish(self._channel, f"{count} {topic}")
        except redis.RedisError as exc:   # the waiters elsewhere re-check on their own
            logger.warning("could not pass a hint on for topic %r: %s", topic, exc)

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name="dq-hub", daemon=True)
        self._thread.start()
        if self.shards is not None:
            self.shards.start()

    def stop(self) -> None:
        self._stop.set()
        if self.shards is not None:
            self.shards.stop()
        self.wake_all()

    def drain(self) -> None:
        """Answer every held long poll now with an empty list, and any new one at once."""
        self.draining.set()
        self.wake_all()

    def release_held(self) -> None:
        """Answer the long polls held now with an empty list; later ones are held as usual."""
        with self._lock:
            self.releases += 1
        self.wake_all()

    def released(self, waiter: Waiter) -> bool:
        return self.draining.is_set() or waiter.release != self.releases

    def run(self) -> None:
        """Subscribe and dispatch until stopped; reconnect with capped, jittered backoff."""
        backoff = 0.1
        while not self._stop.is_set():
            pubsub = self._client.pubsub(ignore_subscribe_messages=True)
            try:
                pubsub.subscribe(self._channel, self.own_channel)
                self.subscribed.set()
                # Hints published while we were away are lost: let every waiter re-check.
                self.wake_all()
                backoff = 0.1
                while not self._stop.is_set():
                    message = pubsub.get_message(timeout=1.0)
                    if message and message["type"] == "message":
                        data, channel = message["data"], message["channel"]
                        if isinstance(channel, bytes):
                            channel = channel.decode()
                        self.dispatch(data.decode() if isinstance(data, bytes) else data,
                                      routed=channel == self.own_channel)
            except redis.RedisError as exc:
                self.subscribed.clear()
                logger.warning("hint subscriber lost Redis (%s); retrying in %.1fs", exc, backoff)
                self._stop.wait(backoff * (1 + random.random()))
                backoff = min(backoff * 2, 5.0)
            except Exception:  # noqa: BLE001 - the subscriber must never die silently
                self.subscribed.clear()
                logger.exception("hint subscriber failed; restarting")
                self._stop.wait(1.0)
            finally:
                try:
                    pubsub.close()
                except Exception:  # noqa: BLE001
                    pass


def long_poll(queue: DelayQueue, hub: Hub, clock: Clock, topic: str, count: int,
              ack_timeout_ms: int | None, timeout_ms: int, safety_s: float,
              subscription: str | None = None) -> PullResult:
    """Answer as soon as messages are ready in ``subscription`` (None: the default one), up
    to ``count`` (the API's ``batch``), or with an empty result after ``timeout_ms``."""
    deadline = time.monotonic() + timeout_ms / 1000.0
    # A pull that hands out nothing registers this hub for the topic's hints (lua/pull.lua).
    waiting_hub = f"{hub.id} {int(safety_s * 1000 * HUB_LEASES)}" \
        if hub.routed and hub.subscribed.is_set() else ""
    # Register before the first pull so a hint between the pull and the wait is not lost.
    waiter = hub.register(topic, subscription)
    own_timer = False
    try:
        while True:
            if hub.released(waiter):
                return PullResult([], None, 0)   # drained: hand nothing out, answer
            waiter.event.clear()
            # A leader waking on its own timer must look; anyone else may trust what this
            # process's last pull saw while no hint has said otherwise.
            known = None if own_timer else hub.quiet(topic, clock.now_ms(), safety_s,
                                                     subscription)
            if known is None:
                seq = hub.seq(topic)
                result = queue.pull(topic, count, ack_timeout_ms, subscription=subscription,
                                    waiting_hub=waiting_hub)
                if result.messages:
                    if result.ready_left:
                        hub.unregister(waiter)  # first, so the wake-up below goes to others
                        hub.invalidate(topic)
                        hub.wake(topic, result.ready_left, subscription)
                    else:
                        # first, so a waiter that becomes the leader on our leaving trusts it
                        # instead of pulling again
                        hub.note_quiet(topic, seq, result.next_due_ms, subscription)
                        hub.unregister(waiter)
                    return result
                hub.note_quiet(topic, seq, result.next_due_ms, subscription)
                next_due = result.next_due_ms
            else:
                next_due = known.next_due_ms
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return PullResult([], next_due, 0)
            wait_s = remaining
            if hub.is_leader(waiter):
                # Only the topic's first waiter re-checks on its own; the others are woken
                # by hints, by the leader passing on what it saw, or by becoming leader.
                wait_s = min(wait_s, safety_s)
                if next_due is not None:
                    # +1 ms: the clock reads a lower bound of Redis time; never wake early.
                    wait_s = min(wait_s, clock.seconds_until(next_due + 1))
            own_timer = not waiter.event.wait(wait_s)
    finally:
        hub.unregister(waiter)
