"""Typed results: the message, topic sizes, topic settings, subscriptions, pages of messages,
purges, recurring schedules and monitoring data, built from the JSON answers (the batch calls'
entries and per-entry results are in entries.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Mapping, NamedTuple

from delayqueue.core.message import DelayMsg  # noqa: F401 - shared with the server
from delayqueue.settings.topic_setting import BY_NAME, PUSH_BY_NAME, SETTINGS
from delayqueue.settings.topic_setting import PUSH_SETTINGS as PUSH_SETTING_TABLE
from delayqueue.settings.value import ValueProblem, parse_bool

# The subscription every topic has: a call without ``subscription`` consumes from it (as a
# camellia client does); naming it "default" is the same.
DEFAULT_SUBSCRIPTION = "default"


@dataclass(frozen=True)
class TopicInfo:
    """Queue sizes of one topic; ``waiting_buckets`` maps camellia's bucket names to counts."""

    topic: str
    waiting_queue_size: int
    ready_queue_size: int
    ack_queue_size: int
    waiting_buckets: dict[str, int] = field(default_factory=dict)
    dead_queue_size: int = 0  # messages in the topic's dead-letter queue
    group_blocked_size: int = 0  # due messages waiting behind their group's head
    paused: bool = False  # pauseTopic: nothing is handed out until resumeTopic
    # The default subscription first, then the named ones (the sizes above are the default's).
    subscriptions: tuple["SubscriptionInfo", ...] = ()
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "TopicInfo":
        return cls(
            topic=str(data["topic"]),
            waiting_queue_size=int(data.get("waitingQueueSize", 0)),
            ready_queue_size=int(data.get("readyQueueSize", 0)),
            ack_queue_size=int(data.get("ackQueueSize", 0)),
            waiting_buckets={k: int(v) for k, v in (data.get("waitingQueueInfo") or {}).items()},
            dead_queue_size=int(data.get("deadQueueSize") or 0),
            group_blocked_size=int(data.get("groupBlockedSize") or 0),
            paused=bool(data.get("paused")),
            subscriptions=tuple(SubscriptionInfo.from_json(s)
                                for s in data.get("subscriptions") or ()),
            raw=dict(data),
        )


@dataclass(frozen=True)
class SubscriptionInfo:
    """One subscription of a topic and its queue sizes (``listSubscriptions``).

    A named subscription receives every message sent to its topic after it was created, each
    on its own: its own status, retries, receipts, ack deadlines and dead letters.
    ``created_time`` is None for the default subscription when the server gives none.
    """

    subscription: str
    created_time: int | None = None
    waiting_queue_size: int = 0
    ready_queue_size: int = 0
    ack_queue_size: int = 0
    dead_queue_size: int = 0
    group_blocked_size: int = 0
    paused: bool = False
    push_url: str | None = None   # where its deliveries are pushed (None: it is pulled)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def is_default(self) -> bool:
        return self.subscription == DEFAULT_SUBSCRIPTION

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "SubscriptionInfo":
        return cls(
            subscription=str(data.get("subscription") or DEFAULT_SUBSCRIPTION),
            created_time=_opt_int(data.get("createdTime")),
            waiting_queue_size=int(data.get("waitingQueueSize") or 0),
            ready_queue_size=int(data.get("readyQueueSize") or 0),
            ack_queue_size=int(data.get("ackQueueSize") or 0),
            dead_queue_size=int(data.get("deadQueueSize") or 0),
            group_blocked_size=int(data.get("groupBlockedSize") or 0),
            paused=bool(data.get("paused")),
            push_url=data.get("pushUrl") or None,
            raw=dict(data),
        )


# Topic settings: the SDK's keyword (snake_case, ``_ms`` for milliseconds) -> the API's name,
# in the server's order (delayqueue/settings/topic_setting.py is the table).
TOPIC_SETTINGS: dict[str, str] = {s.sdk: s.name for s in SETTINGS}
API_SETTINGS: dict[str, str] = {api: name for name, api in TOPIC_SETTINGS.items()}
# The server configuration's key of each (``topic-description`` does not fold to its name).
KEY_SETTINGS: dict[str, str] = {s.key: s.sdk for s in SETTINGS}
# A subscription's push delivery settings (the default subscription's too), its own only and
# never the topic's: the SDK's keyword -> the API's name. ``push_secret`` is write-only: a
# config answers ``push_secret_set`` instead.
PUSH_SETTINGS: dict[str, str] = {s.sdk: s.name for s in PUSH_SETTING_TABLE}
API_PUSH_SETTINGS: dict[str, str] = {api: name for name, api in PUSH_SETTINGS.items()}
KEY_PUSH_SETTINGS: dict[str, str] = {s.key: s.sdk for s in PUSH_SETTING_TABLE}


def setting_name(name: str) -> str:
    """The SDK name of a setting given as ``ttl_ms``, ``ttlMillis`` or ``ttl-millis``.

    Raises:
        ValueError: no such setting.
    """
    if name in TOPIC_SETTINGS:
        return name
    if name in API_SETTINGS:
        return API_SETTINGS[name]
    if name in KEY_SETTINGS:
        return KEY_SETTINGS[name]
    folded = name.replace("-", "").replace("_", "").lower()
    for sdk, api in TOPIC_SETTINGS.items():
        if folded in (api.lower(), sdk.replace("_", "")):
            return sdk
    raise ValueError(f"unknown topic setting {name!r}; one of: " + ", ".join(TOPIC_SETTINGS))


def setting_param(name: str, value: Any) -> str:
    """A setting's value (by its SDK name) as the form parameter; durations may be timedeltas.

    Raises:
        ValueError: a value of the wrong kind for the setting (nothing sent).
    """
    return value_param(name, BY_NAME[TOPIC_SETTINGS[name]].kind, value)


def value_param(name: str, kind: type, value: Any) -> str:
    """A value of ``kind`` (int, float, bool or str) as the form parameter; ``name`` (the SDK
    name) for the error. Durations may be timedeltas.

    Raises:
        ValueError: a value of the wrong kind (nothing sent).
    """
    if kind is str:
        if not isinstance(value, str):
            raise ValueError(f"{name}: must be a string, got {value!r}")
        return value
    if kind is bool:
        if not isinstance(value, bool):
            raise ValueError(f"{name}: must be True or False, got {value!r}")
        return "true" if value else "false"
    if isinstance(value, bool):
        raise ValueError(f"{name}: must be a number, got {value!r}")
    if isinstance(value, timedelta):
        value = millis(value)
    try:
        if kind is float:
            return repr(float(value))
        if isinstance(value, float) and not value.is_integer():
            raise ValueError
        return str(int(value))
    except (TypeError, ValueError):
        whole = "a number" if kind is float else "a whole number"
        raise ValueError(f"{name}: must be {whole}, got {value!r}") from None


def push_params(push: Mapping[str, Any]) -> dict[str, str]:
    """Push settings by their SDK names (``push_url``...) as the API's form parameters; a
    None value is left out, "" is sent (it clears ``push_url`` and ``push_secret``). The
    secret is checked here against the server's rule and never shown in an error.

    Raises:
        ValueError: a value of the wrong kind, or a secret the server would refuse.
    """
    params: dict[str, str] = {}
    for name, value in push.items():
        if value is None:
            continue
        setting = PUSH_BY_NAME[PUSH_SETTINGS[name]]
        if name == "push_secret":
            if not isinstance(value, str):
                raise ValueError(f"{name}: must be a string")
            try:
                setting.parse(value)
            except ValueProblem:
                raise ValueError(f"{name}: must be {setting.rule}") from None
        params[setting.name] = value_param(name, setting.kind, value)
    return params


def settings_params(settings: Mapping[str, Any]) -> dict[str, str]:
    """Settings given by any spelling ``setting_name`` takes, as the API's form parameters;
    a None value is left out.

    Raises:
        ValueError: an unknown setting, or a value of the wrong kind (nothing sent).
    """
    params: dict[str, str] = {}
    for key, value in settings.items():
        name = setting_name(key)
        if value is not None:
            params[TOPIC_SETTINGS[name]] = setting_param(name, value)
    return params


@dataclass(frozen=True)
class TopicConfig:
    """The effective settings of one topic and where each comes from.

    Each attribute is the value in force (None only if the server did not report it);
    ``sources`` maps the same SDK names to ``"topic"`` (set on the topic) or ``"server"``
    (the server's default). ``raw`` is the answer's ``{"data": …, "source": …}``.
    """

    topic: str
    ttl_ms: int | None = None
    max_retry: int | None = None
    ack_timeout_ms: int | None = None
    redelivery_delay_ms: int | None = None
    redelivery_backoff_multiplier: float | None = None
    redelivery_max_delay_ms: int | None = None
    dead_letter: bool | None = None
    dead_letter_retention_ms: int | None = None
    dead_letter_max_size: int | None = None
    delay_ms: int | None = None       # the delay of a send that gives no delay nor time
    max_backlog: int | None = None    # most live messages; 0: no limit
    dedup_window_ms: int | None = None  # re-sends this long after an end are duplicates
    default_subscription: bool | None = None  # False: only named subscriptions receive
    description: str | None = None    # free text for operators
    sources: dict[str, str] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, topic: str, data: Mapping[str, Any],
                  source: Mapping[str, Any] | None = None) -> "TopicConfig":
        values: dict[str, Any] = {}
        for setting in SETTINGS:
            value = data.get(setting.name)
            if value is not None:
                values[setting.sdk] = (parse_bool(value) if setting.kind is bool
                                       else setting.kind(value))
        sources = {API_SETTINGS.get(k) or API_PUSH_SETTINGS.get(k, k): str(v)
                   for k, v in (source or {}).items()}
        return cls(topic=topic, **values, sources=sources,
                   raw={"data": dict(data), "source": dict(source or {})})

    def values(self) -> dict[str, Any]:
        """SDK name -> effective value, for every setting the server reported."""
        return {name: getattr(self, name) for name in TOPIC_SETTINGS
                if getattr(self, name) is not None}

    def source(self, name: str) -> str | None:
        """``"topic"`` or ``"server"`` for a setting (any spelling ``setting_name`` takes);
        a subscription's config also says ``"subscription"``."""
        return self.sources.get(setting_name(name))


@dataclass(frozen=True)
class SubscriptionConfig(TopicConfig):
    """The effective settings of one subscription (``get_subscription_config``): each
    attribute as TopicConfig's, for the settings the server reports for a subscription (the
    others are None); ``sources`` says ``"subscription"`` (its own value), ``"topic"`` or
    ``"server"``.

    The push settings are the subscription's own or the server's defaults, never the
    topic's: ``push_url`` None means it is pulled (a consumer's pull of a push subscription
    is refused); ``push_secret_set`` says whether deliveries are signed (the secret itself is
    never answered). A server without push delivery leaves them None / False.
    """

    subscription: str = DEFAULT_SUBSCRIPTION
    push_url: str | None = None
    push_timeout_ms: int | None = None     # connect and read timeout of one POST
    push_concurrency: int | None = None    # deliveries in flight at most, fleet-wide
    push_secret_set: bool = False

    @classmethod
    def of(cls, topic: str, subscription: str, data: Mapping[str, Any],
           source: Mapping[str, Any] | None = None) -> "SubscriptionConfig":
        config = cls.from_json(topic, data, source)
        return replace(config, subscription=subscription,  # type: ignore[return-value]
                       push_url=data.get("pushUrl") or None,
                       push_timeout_ms=_opt_int(data.get("pushTimeoutMillis")),
                       push_concurrency=_opt_int(data.get("pushConcurrency")),
                       push_secret_set=bool(data.get("pushSecretSet")))

    @property
    def is_push(self) -> bool:
        """Whether its deliveries are POSTed to ``push_url`` rather than pulled."""
        return self.push_url is not None

    def values(self) -> dict[str, Any]:
        """SDK name -> effective value, for every setting the server reported (the push
        settings too; ``push_secret_set`` for the secret)."""
        values = super().values()
        for name in ("push_url", "push_timeout_ms", "push_concurrency"):
            if getattr(self, name) is not None:
                values[name] = getattr(self, name)
        if "pushSecretSet" in self.raw.get("data", {}):
            values["push_secret_set"] = self.push_secret_set
        return values

    def source(self, name: str) -> str | None:
        """As TopicConfig's, and the push settings' (``"subscription"`` or ``"server"``)
        by any of their spellings (``push_url``, ``pushUrl``, ``push-url``)."""
        push = push_setting_name(name)
        return self.sources.get(push) if push else super().source(name)


def push_setting_name(name: str) -> str | None:
    """The SDK name of a push setting given as ``push_url``, ``pushUrl`` or ``push-url``;
    None if ``name`` is no push setting."""
    if name in PUSH_SETTINGS:
        return name
    if name in API_PUSH_SETTINGS:
        return API_PUSH_SETTINGS[name]
    return KEY_PUSH_SETTINGS.get(name)


class DeadLetterPage(NamedTuple):
    """One page of ``list_dead``: oldest death first; ``next_cursor`` None on the last page."""

    messages: list[DelayMsg]
    next_cursor: str | None


class MessagePage(NamedTuple):
    """One page of ``list_messages`` in the order of its view; ``next_cursor`` None on the
    last page."""

    messages: list[DelayMsg]
    next_cursor: str | None


class PurgeResult(NamedTuple):
    """What one ``purge_topic`` call did: ``count`` messages ended (status 7); ``remaining``
    is 0 when the purge is done, else the topic's live messages (call again)."""

    count: int
    remaining: int


# The ways a schedule catches up on fire times it missed (its ``misfire``): one occurrence
# for the latest missed fire time, none, or one per missed fire time (docs/api.md).
MISFIRE_POLICIES = ("once", "skip", "all")


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


@dataclass(frozen=True)
class Schedule:
    """A recurring schedule: ``msg`` sent to ``topic`` at each fire time of ``cron`` (in
    ``timezone``) or every ``every_ms``, each occurrence an ordinary message whose msgId is
    ``<schedule_id>:<fire time>``.

    Times are epoch milliseconds. ``next_fire_time`` is the waiting occurrence's (None while
    paused or once finished); ``next_fire_times`` the next five, answered by
    ``create_schedule`` and ``get_schedule`` (empty from ``list_schedules``).
    ``raw`` is the server's JSON object.
    """

    schedule_id: str
    topic: str
    msg: str
    cron: str | None = None
    timezone: str | None = None
    every_ms: int | None = None
    attributes: Mapping[str, str] | None = None
    group_id: str | None = None
    ttl_ms: int | None = None         # None: the topic's ttl when each occurrence is written
    max_retry: int | None = None      # None: the topic's, likewise
    start_time: int | None = None
    end_time: int | None = None       # None: no end
    limit: int | None = None          # occurrences in all; None: no limit
    misfire: str = "once"
    paused: bool = False
    created_time: int | None = None
    sent_count: int = 0               # occurrences written
    missed_count: int = 0             # fire times not sent at their own time (misfire)
    last_fire_time: int | None = None
    next_fire_time: int | None = None
    next_fire_times: tuple[int, ...] = ()
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Schedule":
        """Build from the API's schedule object (fields it lacks keep their defaults)."""
        return cls(
            schedule_id=str(data["scheduleId"]), topic=str(data["topic"]),
            msg=str(data.get("msg") or ""), cron=data.get("cron") or None,
            timezone=data.get("timezone") or None,
            every_ms=_opt_int(data.get("everyMillis")),
            attributes=dict(data["attributes"]) if data.get("attributes") else None,
            group_id=data.get("groupId") or None, ttl_ms=_opt_int(data.get("ttlMillis")),
            max_retry=_opt_int(data.get("maxRetry")),
            start_time=_opt_int(data.get("startTime")), end_time=_opt_int(data.get("endTime")),
            limit=_opt_int(data.get("limit")), misfire=str(data.get("misfire") or "once"),
            paused=bool(data.get("paused")), created_time=_opt_int(data.get("createdTime")),
            sent_count=int(data.get("sentCount") or 0),
            missed_count=int(data.get("missedCount") or 0),
            last_fire_time=_opt_int(data.get("lastFireTime")),
            next_fire_time=_opt_int(data.get("nextFireTime")),
            next_fire_times=tuple(int(t) for t in data.get("nextFireTimes") or ()),
            raw=dict(data),
        )

    def to_json(self) -> dict[str, Any]:
        """The API's schedule object (``nextFireTimes`` only when there are some to show)."""
        shown: dict[str, Any] = {
            "scheduleId": self.schedule_id, "topic": self.topic, "cron": self.cron,
            "timezone": self.timezone, "everyMillis": self.every_ms, "msg": self.msg,
            "attributes": dict(self.attributes) if self.attributes else None,
            "groupId": self.group_id, "ttlMillis": self.ttl_ms, "maxRetry": self.max_retry,
            "startTime": self.start_time, "endTime": self.end_time, "limit": self.limit,
            "misfire": self.misfire, "paused": self.paused, "createdTime": self.created_time,
            "sentCount": self.sent_count, "missedCount": self.missed_count,
            "lastFireTime": self.last_fire_time, "nextFireTime": self.next_fire_time}
        if self.next_fire_times or "nextFireTimes" in self.raw:
            shown["nextFireTimes"] = list(self.next_fire_times)
        return shown

    @property
    def recurrence(self) -> str:
        """``cron 0 9 * * 1-5 Europe/Paris`` or ``every 1m``: the rule in one line."""
        if self.cron:
            return f"cron {self.cron} {self.timezone or 'UTC'}"
        return f"every {_span(self.every_ms or 0)}"


def _span(ms: int) -> str:
    """``90000`` -> ``1m30s``: the largest units that divide it exactly."""
    if ms <= 0 or ms % 1000:
        return f"{ms}ms"
    out, rest = [], ms // 1000
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)):
        if rest >= size:
            out.append(f"{rest // size}{unit}")
            rest %= size
    return "".join(out)


class SchedulePage(NamedTuple):
    """One page of ``list_schedules``; ``next_cursor`` None on the last page."""

    schedules: list[Schedule]
    next_cursor: str | None


@dataclass(frozen=True)
class MonitorData:
    """The last complete monitoring interval, summed over every node (rows as the server sends)."""

    request_stats: list[dict[str, Any]]
    pull_msg_time_gap_stats: list[dict[str, Any]]
    ready_queue_time_gap_stats: list[dict[str, Any]]
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "MonitorData":
        return cls(
            request_stats=list(data.get("requestStatsList") or []),
            pull_msg_time_gap_stats=list(data.get("pullMsgTimeGapStatsList") or []),
            ready_queue_time_gap_stats=list(data.get("readyQueueTimeGapStatsList") or []),
            raw=dict(data),
        )


def millis(value: int | float | timedelta) -> int:
    """A duration in milliseconds (a timedelta, or a number already in ms)."""
    if isinstance(value, timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)


def epoch_ms(value: int | float | datetime) -> int:
    """Milliseconds since the epoch; a naive datetime is taken as local time."""
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    return int(value)


def attributes_json(attributes: Mapping[str, str]) -> str:
    """The attributes as the JSON text sendMsg takes; ValueError unless strings to strings."""
    for key, value in attributes.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ValueError(f"attributes map strings to strings, got {key!r}: {value!r}")
    return json.dumps(dict(attributes), ensure_ascii=False, separators=(",", ":"))
