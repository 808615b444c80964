"""Named subscriptions (createSubscription .. getSubscriptionConfig): every named
subscription of a topic receives every message accepted after it was created, each with its
own delivery state, receipts, backoff, dead letters and message groups.

The default subscription is the topic's own keys (what camellia clients use); a named one is
the same set of keys under ``<topic base>:s:<name>:`` (core/keys.py SubscriptionKeys), in the
topic's Cluster slot. How a message reaches them, and how its body is shared and freed, is
lua/includes/fanout.lua's; this module checks requests and answers the admin routes.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import redis

from delayqueue.settings.config import Settings
from delayqueue.settings.push_networks import AllowedNetworks
from delayqueue.settings.topic_setting import BY_NAME, PUSH_BY_NAME, PUSH_SETTINGS
from delayqueue.settings.value import ValueProblem

from . import topic_config
from .clock import Clock
from .errors import BadRequest, MissingParameter, NotFound, redis_errors
from .keys import NamespaceKeys
from .outcome import Outcome
from .push_target import Resolver, check_push_url, resolve
from .queue import SUBSCRIPTION_DEFAULT, DelayQueue
from .refusal import refusal
from .scripts import Scripts

DEFAULT = SUBSCRIPTION_DEFAULT
NAME_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,64}")
# The topic settings a subscription may set as its own (the rest are the topic's).
SUBSCRIPTION_SETTINGS = ("ackTimeoutMillis", "maxRetry", "redeliveryDelayMillis",
                         "redeliveryBackoffMultiplier", "redeliveryMaxDelayMillis",
                         "deadLetter", "deadLetterRetentionMillis", "deadLetterMaxSize")
# A subscription's push settings (the default one's too), never the topic's: PUSH_SETTINGS.
PUSH_NAMES = tuple(s.name for s in PUSH_SETTINGS)
DROP_SLICE = 1000   # entries of a deleted subscription freed per script call
# A subscription's push settings as its config hash holds them, in PushConfig.of's order.
PUSH_FIELDS = ("pushUrl", "pushTimeoutMillis", "pushConcurrency", "pushSecret")


@dataclass(frozen=True)
class PushConfig:
    """A subscription's push settings in force: its own over the server's defaults."""
    url: str | None
    timeout_ms: int
    concurrency: int
    secret: str

    @classmethod
    def of(cls, own: Sequence[str | None], settings: Settings) -> "PushConfig":
        """From the values of PUSH_FIELDS read from the subscription's config hash."""
        url, timeout, concurrency, secret = own
        return cls(url or None, int(timeout or settings.push_timeout_millis),
                   int(concurrency or settings.push_concurrency), secret or "")


def subscription_name(value: str | None, *, named: bool = False) -> str | None:
    """The subscription a request names: None for the default one (absent, empty or
    "default"); with ``named`` (create, delete) a named one is required.

    Raises:
        MissingParameter: ``named`` and none given.
        BadRequest: not 1-64 characters of [A-Za-z0-9._-], or "default" where ``named``.
    """
    if value is None or value == "":
        if named:
            raise MissingParameter("subscription: required: the name of a named subscription")
        return None
    if not isinstance(value, str) or not NAME_PATTERN.fullmatch(value):
        raise BadRequest(f"subscription: must be 1-64 characters of [A-Za-z0-9._-], got "
                         f"{str(value)[:80]!r}")
    if value == DEFAULT:
        if named:
            raise BadRequest("subscription: 'default' is the default subscription: it cannot "
                             "be created or deleted")
        return None
    return value


class Subscriptions:
    def __init__(self, queue: DelayQueue, resolver: Resolver = resolve) -> None:
        self.queue = queue
        self.scripts = queue.scripts
        self.clock = queue.clock
        self.networks = AllowedNetworks.parse(queue.settings.push_allowed_networks)
        self.resolver = resolver   # a push URL's host -> addresses (tests give their own)
        # Called after a pushUrl was set: the runtime tells every node's push loop to look
        # now rather than at its next refresh.
        self.on_push_change: Callable[[], None] = lambda: None

    # -- definitions ---------------------------------------------------------------------------
    def create(self, topic: str, name: str, raw: Mapping[str, Any] | None = None) -> dict:
        """Create the subscription (or find it) and set the settings given as its own; all
        settings are checked before anything is written."""
        name = subscription_name(name, named=True)
        values = self._values(raw or {}, default=False)
        with redis_errors():
            now = self.clock.now_ms()
            reply = self.scripts.subscription_put(
                self.queue.topic_keys(topic), name, now,
                self.queue.settings.max_subscriptions_per_topic)
            error = refusal("subscription_put", reply.outcome, topic, name)
            if error:
                raise error
            if values:
                self._write(topic, name, values, reset=False)
            self.queue.bookkeep(topic, now)
        self.queue.monitor.touch(topic)   # a new line in /metrics and the snapshot
        return self.info(topic, name)

    def delete(self, topic: str, name: str) -> None:
        """Delete the subscription: at once it receives nothing and is unknown; its state is
        freed here in bounded slices (a slice left undone by a crash is finished by the
        scheduler's repair pass: ``finish_drops``)."""
        name = subscription_name(name, named=True)
        drop_id = uuid.uuid4().hex[:16]
        member = f"{topic}\n{drop_id}"
        tk = self.queue.topic_keys(topic)
        with redis_errors():
            self.queue.client.sadd(self.queue.keys.subscription_drops, member)
            try:
                self.scripts.subscription_delete(tk.subscription(name), drop_id)
            except redis.RedisError:   # unknown (NotFound once translated), or Redis failed
                self.queue.client.srem(self.queue.keys.subscription_drops, member)
                raise
            self.queue.client.srem(self.queue.keys.push_subscriptions, f"{topic}\n{name}")
            self.queue.client.delete(tk.subscription(name).push_errors)
            free_dropped(self.queue.client, self.scripts, self.queue.keys, self.clock, topic,
                         drop_id)
        self.queue.monitor.touch(topic)

    def names(self, topic: str) -> list[str]:
        """The named subscriptions, by name."""
        with redis_errors():
            return sorted(self.queue.client.hkeys(self.queue.topic_keys(topic).subs))

    def list(self, topic: str) -> list[dict]:
        """The default subscription, then every named one, with their sizes."""
        return self.queue.subscription_infos(topic)

    def info(self, topic: str, name: str) -> dict:
        for info in self.list(topic):
            if info["subscription"] == name:
                return info
        raise NotFound(f"subscription: no subscription '{name}' on topic '{topic}'")

    def push_status(self, topic: str, name: str | None) -> dict:
        """A subscription's push state (getPushStatus, the console): its push settings (never
        the secret: whether there is one), deliveries in flight fleet-wide (its consuming
        messages) and its last failures, newest first (background/push.py writes them)."""
        name = subscription_name(name)
        tk = self.queue.topic_keys(topic)
        context = self.queue.context_keys(topic, name)
        with redis_errors():
            pipe = self.queue.client.pipeline(transaction=False)
            pipe.hexists(tk.subs, name or "")
            pipe.hmget(context.config, *PUSH_FIELDS, "paused")
            pipe.hget(tk.config, "paused").zcard(context.ack)
            pipe.lrange(context.push_errors, 0, -1)
            exists, own, topic_paused, in_flight, errors = pipe.execute()
        if name is not None and not exists:
            raise NotFound(f"subscription: no subscription '{name}' on topic '{topic}'")
        push, paused = PushConfig.of(own[:-1], self.queue.settings), own[-1]
        return {"subscription": name or DEFAULT, "pushUrl": push.url,
                "pushTimeoutMillis": push.timeout_ms, "pushConcurrency": push.concurrency,
                "pushSecretSet": bool(push.secret),
                "paused": paused == "1" or topic_paused == "1",
                "inFlight": in_flight if push.url else 0,
                "lastErrors": [json.loads(e) for e in errors]}

    # -- settings ------------------------------------------------------------------------------
    def get_config(self, topic: str, name: str | None) -> tuple[dict[str, Any], dict[str, str]]:
        """(effective value of every setting, its source: "subscription", "topic" or
        "server"); the default subscription's are the topic's."""
        name = subscription_name(name)
        tk = self.queue.topic_keys(topic)
        with redis_errors():
            pipe = self.queue.client.pipeline(transaction=False)
            pipe.hgetall(tk.config)
            if name is not None:
                pipe.hexists(tk.subs, name).hgetall(tk.subscription(name).config)
            replies = pipe.execute()
        data, source = topic_config.effective(replies[0], self.queue.settings)
        if name is not None and not replies[1]:
            raise NotFound(f"subscription: no subscription '{name}' on topic '{topic}'")
        own = replies[0] if name is None else replies[2]
        if name is not None:
            for setting_name in SUBSCRIPTION_SETTINGS:
                text = own.get(setting_name)
                if text is not None:
                    data[setting_name] = topic_config.loaded(BY_NAME[setting_name], text)
                    source[setting_name] = "subscription"
        for setting in PUSH_SETTINGS:
            if setting.name == "pushSecret":   # write-only: whether there is one
                data["pushSecretSet"] = bool(own.get("pushSecret"))
                continue
            text = own.get(setting.name)
            if text is not None:
                data[setting.name] = topic_config.loaded(setting, text)
                source[setting.name] = "subscription"
            else:
                data[setting.name] = getattr(self.queue.settings, setting.field, None)
                source[setting.name] = "server"
        return data, source

    def set_config(self, topic: str, name: str | None, raw: Mapping[str, Any],
                   reset: bool = False) -> tuple[dict[str, Any], dict[str, str]]:
        """Set the subscription's own settings (checked first: 400, nothing written). The
        default subscription's own are its push settings only (the rest are the topic's:
        setTopicConfig)."""
        name = subscription_name(name)
        values = self._values(raw, default=name is None)
        with redis_errors():
            if name is not None and not self.queue.client.hexists(
                    self.queue.topic_keys(topic).subs, name):
                raise NotFound(f"subscription: no subscription '{name}' on topic '{topic}'")
            self._write(topic, name, values, reset)
        self.queue.monitor.touch(topic)   # a subscription's pause or push URL: its sizes' line
        return self.get_config(topic, name)

    def _write(self, topic: str, name: str | None, values: Mapping[str, Any],
               reset: bool) -> None:
        """One script call: clear the emptied (and, with ``reset``, every own) setting, write
        the rest; the push registry follows (added before a URL is written, removed after)."""
        context = self.queue.context_keys(topic, name)
        owned = PUSH_NAMES if name is None else (*SUBSCRIPTION_SETTINGS, *PUSH_NAMES)
        cleared = [k for k, v in values.items() if v == "" and k in PUSH_BY_NAME]
        dropped = list(dict.fromkeys([*(owned if reset else ()), *cleared]))
        pairs = [item for setting, value in values.items() if setting not in cleared
                 for item in (setting, topic_config.stored(value))]
        # Added before the URL is written (a loop may start and find none yet) and after.
        member = f"{topic}\n{name or DEFAULT}"
        client, registry = self.queue.client, self.queue.keys.push_subscriptions
        if values.get("pushUrl"):
            client.sadd(registry, member)
        outcome = self.scripts.topic_config(context, bool(dropped), pairs, dropped)
        if outcome != Outcome.OK:
            raise RuntimeError(f"topic_config.lua refused its arguments: {outcome}")
        if dropped and "pushUrl" in dropped and not client.hget(context.config, "pushUrl"):
            client.srem(registry, member)
        if values.get("pushUrl"):
            # Again: a delivery thread started between the first SADD and the script found
            # no URL yet and may have dropped the member (Pusher.forget).
            client.sadd(registry, member)
            self.on_push_change()

    def _values(self, raw: Mapping[str, Any], default: bool) -> dict[str, Any]:
        """The settings a request gives a subscription, checked (a push URL by where it
        resolves): only SUBSCRIPTION_SETTINGS and PUSH_SETTINGS, only the latter for the
        default subscription. An empty pushUrl or pushSecret clears it."""
        given = {k: v for k, v in raw.items() if k not in ("topic", "subscription", "reset")}
        push = {k: v for k, v in given.items() if k in PUSH_BY_NAME}
        values = topic_config.parse_values(
            {k: v for k, v in given.items() if k not in PUSH_BY_NAME})
        for setting_name in values:
            if default:
                raise BadRequest(f"{setting_name}: the default subscription's settings are "
                                 f"the topic's (setTopicConfig); here only "
                                 f"{', '.join(PUSH_NAMES)}")
            if setting_name not in SUBSCRIPTION_SETTINGS:
                raise BadRequest(f"{setting_name}: a subscription may set only "
                                 f"{', '.join(SUBSCRIPTION_SETTINGS + PUSH_NAMES)}; it is "
                                 "the topic's")
        for setting in PUSH_SETTINGS:
            value = push.get(setting.name)
            if value is None or (value == "" and setting.kind is not str):
                continue
            try:
                values[setting.name] = setting.parse(value)
            except ValueProblem as problem:
                error = BadRequest if problem.out_of_range else MissingParameter
                # A refused secret is never repeated (answers and logs would carry it).
                said = f"{setting.rule} (the value is not repeated)" \
                    if setting.name == "pushSecret" else problem
                raise error(f"{setting.name}: {said}") from None
        if values.get("pushUrl"):
            check_push_url(values["pushUrl"], self.networks, self.resolver)
        return values


def free_dropped(client: redis.Redis, scripts: Scripts, nk: NamespaceKeys, clock: Clock,
                 topic: str, drop_id: str) -> None:
    """Free a deleted subscription's keys in bounded slices, then forget the drop."""
    dk = nk.topic(topic).dropping(drop_id)
    cursor = "0"
    while True:
        reply = scripts.subscription_drop(dk, DROP_SLICE, clock.now_ms(), cursor)
        cursor = reply.cursor
        if reply.left == 0:
            break
    client.srem(nk.subscription_drops, f"{topic}\n{drop_id}")


def finish_drops(client: redis.Redis, scripts: Scripts, nk: NamespaceKeys,
                 clock: Clock) -> int:
    """Free what deleted subscriptions left behind (a node stopped mid-delete): the
    scheduler's repair pass calls it. Returns how many drops it finished."""
    members = client.smembers(nk.subscription_drops)
    for member in members:
        topic, _, drop_id = member.partition("\n")
        free_dropped(client, scripts, nk, clock, topic, drop_id)
    return len(members)
