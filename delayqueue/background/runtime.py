"""The per-process runtime: Redis client, scripts, clock, queue, scheduler, hub and loops.

``Runtime`` is built by ``create_app`` (no I/O, no threads) and stored in
``app.extensions["delayqueue"]``; ``start()`` (called by the WSGI entry point after the
worker forks) starts the subscriber and the loops, ``stop()`` ends them and frees leases.
"""

from __future__ import annotations

import logging
import socket
from typing import Callable

import redis

from delayqueue.core.bookkeeping import namespace_keys
from delayqueue.core.clock import Clock, RedisClock
from delayqueue.core.errors import redis_errors
from delayqueue.core.monitor import Monitor
from delayqueue.core.queue import DelayQueue
from delayqueue.core.schedules import Schedules
from delayqueue.core.script_runner import ScriptRunner
from delayqueue.core.scripts import Scripts
from delayqueue.core.subscriptions import Subscriptions
from delayqueue.core.topic_admin import TopicAdmin
from delayqueue.core.topic_controls import TopicControls
from delayqueue.monitoring.metrics import named_subscription_sizes
from delayqueue.monitoring.size_cache import MetricsSizes, SnapshotSizes
from delayqueue.monitoring.snapshot import SnapshotWriter
from delayqueue.settings.config import ConfigError, Settings
from delayqueue.settings.push_networks import AllowedNetworks
from delayqueue.settings.redis_connection import connect_redis

from .lease import Lease
from .longpoll import CONTROL_PREFIX, Hub
from .loop import Loop
from .node_registry import HEARTBEAT_S, NodeRegistry
from .push import REFRESH_S, Pusher
from .push_client import PushClient
from .recurring import TICK_MS, Recurring
from .scheduler import Scheduler
from .shard_hints import ShardHints

logger = logging.getLogger(__name__)

MONITOR_FLUSH_S = 1.0
OFFLINE = "offline "           # control message: "offline <node id>"
PUSH_CHANGED = "push"          # control message: a push subscription was set up
SNAPSHOT_TICK_S = 1.0
PUSH_GRACE_MAX_S = 10.0       # longest a stopping worker waits for its POSTs in flight


class Runtime:
    def __init__(self, settings: Settings, client: redis.Redis | None = None,
                 clock: Clock | None = None) -> None:
        self.settings = settings
        # The limits every request's parameters are checked against (params.Params).
        self.param_limits = {
            "max_topic_length": settings.max_topic_length,
            "max_msg_id_length": settings.max_msg_id_length,
            "max_msg_bytes": settings.max_msg_bytes, "max_batch": settings.max_batch,
            "max_long_polling_timeout_ms": settings.max_long_polling_timeout_millis,
        }
        if client is None and not settings.redis_url:
            raise ConfigError("redis-url: is empty; set DELAYQUEUE_REDIS_URL, or start with "
                              "`delayqueue serve`, which runs an embedded Redis")
        self.client = client or connect_redis(
            settings.redis_url,
            socket_timeout_ms=settings.redis_socket_timeout_millis,
            connect_timeout_ms=settings.redis_connect_timeout_millis,
            max_connections=settings.redis_max_connections,
        )
        self.clock = clock or RedisClock(self.client)
        self.scripts = Scripts(self.client, runner=ScriptRunner(
            self.client, settings.redis_wait_replicas, settings.redis_wait_timeout_millis))
        self.keys = namespace_keys(settings, self.scripts.runner.cluster)
        self.monitor = Monitor(self.client, self.keys, self.clock,
                               settings.monitor_interval_seconds, self.scripts,
                               history_ms=settings.monitor_history_minutes * 60_000)
        self.queue = DelayQueue(self.client, self.scripts, self.clock, self.monitor, settings)
        self.admin = TopicAdmin(self.queue)
        self.controls = TopicControls(self.queue)
        self.schedules = Schedules(self.queue)
        self.subscriptions = Subscriptions(self.queue)
        self.recurring = Recurring(self.schedules, self.clock, self.keys)
        self.scheduler = Scheduler(
            self.client, self.scripts, self.clock, self.monitor, self.keys,
            end_life_ms=settings.end_life_msg_expire_millis,
            max_sleep_ms=settings.msg_schedule_millis,
            defaults=self.queue.defaults,
            min_gap_ms=settings.schedule_min_gap_millis,
            defer_ms=settings.schedule_defer_millis,
            repair_interval_ms=settings.due_repair_seconds * 1000,
            recycle_interval_ms=settings.topic_schedule_seconds * 1000,
            topic_inactive_ms=settings.topic_active_tag_timeout_millis,
            on_recycle=self.queue.forget,
        )
        # Hints go to one process only where its channel is heard on the node that publishes
        # (one Redis); a Cluster's classic PUBLISH answers only that node's subscribers, and
        # its sharded hints reach the processes waiting on the topic (below).
        self.hub = Hub(self.client, self.keys.hint_channel,
                       routed=not self.scripts.runner.cluster)
        self.hub.on_control = self.on_control
        if self.scripts.runner.cluster:
            # A Cluster of Redis >= 7 (found at start): each topic's hints on its own shard
            # channel, subscribed while the process has waiters on it.
            self.hub.shards = ShardHints(
                self.client, lambda topic: self.keys.topic(topic).hint_channel,
                self.hub.dispatch, self.hub.has_waiters, self.hub.missed)
        self.hub.pass_hint = lambda topic, hub_id, leave, count: self.scripts.hint_pass(
            self.keys.topic(topic), hub_id, leave, self.keys.hint_channel, count)
        self.snapshots = SnapshotWriter(
            self.monitor, self.client, self.keys, self.clock, settings.snapshot_dir,
            settings.namespace, settings.monitor_interval_seconds,
            sizes=SnapshotSizes(self.queue, self.monitor),
        )
        # /metrics' reads, cached in this process: only changed topics are read again.
        self.metrics_sizes = MetricsSizes(self.queue, self.monitor, named_subscription_sizes)
        self.pusher = Pusher(
            self.queue, self.hub, self.clock, self.monitor, self.keys,
            PushClient(AllowedNetworks.parse(settings.push_allowed_networks)), settings)
        self.subscriptions.on_push_change = self._push_changed
        self.nodes = NodeRegistry(self.client, self.keys, self.clock, self.node_id,
                                  self.hub.held)
        self.loops: list[Loop] = []

    def _lease(self, name: str) -> Lease:
        return Lease(self.client, self.keys.lease(name), self.settings.lease_ttl_millis / 1000)

    def build_loops(self) -> list[Loop]:
        s = self.settings
        timing: Callable[[str, float], None] = self.monitor.observe_loop
        schedule = Loop("schedule", self.scheduler.tick, s.msg_schedule_millis / 1000,
                        self._lease("schedule"), timing, tick_returns_delay=True)
        # A send that brings a topic's due time forward publishes "0 <topic>": wake early.
        self.hub.on_due_hint = lambda topic: schedule.nudge()
        return [
            schedule,
            # Recurring schedules' next occurrences (and their repair pass), leased.
            Loop("recurring", self.recurring.tick, TICK_MS / 1000, self._lease("recurring"),
                 timing, tick_returns_delay=True),
            Loop("repair", self.scheduler.repair_tick, s.due_repair_seconds, None, timing),
            Loop("recycle", self.scheduler.recycle_tick, min(s.topic_schedule_seconds, 60),
                 None, timing),
            Loop("snapshot", self.snapshots.tick, SNAPSHOT_TICK_S, self._lease("snapshot"),
                 timing),
            # At most half an interval: getMonitorData reads the last complete interval, and a
            # sample flushed later than that (1 s flushes, 1 s intervals) would never show.
            Loop("monitor-flush", self.monitor.flush,
                 min(MONITOR_FLUSH_S, s.monitor_interval_seconds / 2)),
            Loop("clock", self.clock.sync, s.clock_sync_seconds),
            # Every process: its record in the node registry (one HSET).
            Loop("heartbeat", self.nodes.tick, HEARTBEAT_S),
            # Every process (no lease): a delivery thread per push subscription.
            *([Loop("push", self.pusher.tick, REFRESH_S, None, timing)]
              if s.push_enabled else []),
        ]

    def start(self) -> None:
        """Start the subscriber and every loop (once per worker process, after fork)."""
        if self.loops:
            return
        self.hub.start()
        self.loops = self.build_loops()
        for loop in self.loops:
            loop.start()
        logger.info("background loops started: %s", ", ".join(loop.name for loop in self.loops))

    def drain(self) -> None:
        """Shutdown has begun (SIGTERM): answer held long polls now and take no new push
        deliveries; requests and POSTs in flight go on."""
        self.hub.drain()
        self.pusher.drain()

    def stop(self) -> None:
        self.hub.stop()
        for loop in self.loops:
            loop.stop()
        # POSTs in flight get part of the grace period, then go back to their subscription.
        self.pusher.stop(min(self.settings.graceful_timeout_seconds / 2, PUSH_GRACE_MAX_S))
        if self.loops:
            self.nodes.leave()
        self.monitor.flush()
        self.loops = []

    @property
    def node_id(self) -> str:
        return f"{socket.gethostname()}:{self.settings.port}"

    def set_online(self, online: bool) -> None:
        """Flip the flag a load balancer reads, for every worker of this node. Going offline
        also answers the long polls every worker of the node holds (empty), so that their
        consumers poll again through the balancer, on the nodes still online."""
        with redis_errors():
            if online:
                self.client.delete(self.keys.offline(self.node_id))
            else:
                self.client.set(self.keys.offline(self.node_id), "1")
                self.client.publish(self.keys.hint_channel,
                                    f"0 {CONTROL_PREFIX}{OFFLINE}{self.node_id}")

    def on_control(self, text: str) -> None:
        """A control message from the hint channel (see longpoll.CONTROL_PREFIX)."""
        if text == f"{OFFLINE}{self.node_id}":
            self.hub.release_held()
        elif text == PUSH_CHANGED:
            for loop in self.loops:
                if loop.name == "push":
                    loop.nudge()

    def _push_changed(self) -> None:
        """A pushUrl was set: every process's push loop looks at once (not within 1 s)."""
        try:
            self.client.publish(self.keys.hint_channel, f"0 {CONTROL_PREFIX}{PUSH_CHANGED}")
        except redis.RedisError:
            pass   # the loop's own refresh finds it

    def is_online(self) -> bool:
        try:
            return not self.client.exists(self.keys.offline(self.node_id))
        except redis.RedisError:
            return False

    def healthy(self) -> bool:
        try:
            return bool(self.client.ping())
        except redis.RedisError:
            return False
