"""Named subscriptions (createSubscription .. getSubscriptionConfig): every named
subscription of a topic receives every message accepted after it was created, each with its
own delivery state, receipts, backoff, dead letters and message groups.

The default subscription is the topic's own keys (what camellia clients use); a named one is
the same set of keys under ``<topic base>:s:<name>:`` (core/keys.py SubscriptionKeys), in the
topic's Cluster slot. How a message reaches them, and how its body is shared and freed, is
lua/includes/fanout.lua's; this module checks requests and answers the admin routes.
"""

from __future__ import annotations

import re
import uuid
from typing import Any, Mapping

import redis

from delayqueue.settings.topic_setting import BY_NAME

from . import topic_config
from .clock import Clock
from .errors import BadRequest, MissingParameter, NotFound, redis_errors
from .keys import NamespaceKeys
from .outcome import Outcome
from .queue import SUBSCRIPTION_DEFAULT, DelayQueue
from .refusal import refusal
from .scripts import Scripts

DEFAULT = SUBSCRIPTION_DEFAULT
NAME_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,64}")
# The topic settings a subscription may set as its own (the rest are the topic's).
SUBSCRIPTION_SETTINGS = ("ackTimeoutMillis", "maxRetry", "redeliveryDelayMillis",
                         "redeliveryBackoffMultiplier", "redeliveryMaxDelayMillis",
                         "deadLetter", "deadLetterRetentionMillis", "deadLetterMaxSize")
DROP_SLICE = 1000   # entries of a deleted subscription freed per script call


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
    def __init__(self, queue: DelayQueue) -> None:
        self.queue = queue
        self.scripts = queue.scripts
        self.clock = queue.clock

    # -- definitions ---------------------------------------------------------------------------
    def create(self, topic: str, name: str, raw: Mapping[str, Any] | None = None) -> dict:
        """Create the subscription (or find it) and set the settings given as its own; all
        settings are checked before anything is written."""
        name = subscription_name(name, named=True)
        values = _subscription_values(raw or {})
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
            free_dropped(self.queue.client, self.scripts, self.queue.keys, self.clock, topic,
                         drop_id)

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
        if name is None:
            return data, source
        if not replies[1]:
            raise NotFound(f"subscription: no subscription '{name}' on topic '{topic}'")
        for setting_name in SUBSCRIPTION_SETTINGS:
            text = replies[2].get(setting_name)
            if text is not None:
                data[setting_name] = topic_config.loaded(BY_NAME[setting_name], text)
                source[setting_name] = "subscription"
        return data, source

    def set_config(self, topic: str, name: str | None, raw: Mapping[str, Any],
                   reset: bool = False) -> tuple[dict[str, Any], dict[str, str]]:
        """Set the named subscription's own settings (checked first: 400, nothing written)."""
        name = subscription_name(name, named=True)
        values = _subscription_values(raw)
        with redis_errors():
            self._write(topic, name, values, reset)
        return self.get_config(topic, name)

    def _write(self, topic: str, name: str, values: Mapping[str, Any], reset: bool) -> None:
        pairs = [item for setting, value in values.items()
                 for item in (setting, topic_config.stored(value))]
        outcome = self.scripts.topic_config(
            self.queue.topic_keys(topic).subscription(name), reset, pairs)
        if outcome != Outcome.OK:
            raise RuntimeError(f"topic_config.lua refused its arguments: {outcome}")


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


def _subscription_values(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The settings a request gives a subscription, checked: only SUBSCRIPTION_SETTINGS."""
    given = {k: v for k, v in raw.items() if k not in ("topic", "subscription", "reset")}
    values = topic_config.parse_values(given)
    for setting_name in values:
        if setting_name not in SUBSCRIPTION_SETTINGS:
            raise BadRequest(f"{setting_name}: a subscription may set only "
                             f"{', '.join(SUBSCRIPTION_SETTINGS)}; it is the topic's")
    return values
