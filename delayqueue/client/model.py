"""Typed results: the message, topic sizes, topic settings, dead-letter pages and monitoring
data, built from the JSON answers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, NamedTuple

from delayqueue.message import DelayMsg  # noqa: F401 - shared with the server


@dataclass(frozen=True)
class TopicInfo:
    """Queue sizes of one topic; ``waiting_buckets`` maps camellia's bucket names to counts."""

    topic: str
    waiting_queue_size: int
    ready_queue_size: int
    ack_queue_size: int
    waiting_buckets: dict[str, int] = field(default_factory=dict)
    dead_queue_size: int = 0  # messages in the topic's dead-letter queue
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
            raw=dict(data),
        )


# Topic settings: the SDK's keyword (snake_case, ``_ms`` for milliseconds) -> the API's name.
TOPIC_SETTINGS: dict[str, str] = {
    "ttl_ms": "ttlMillis",
    "max_retry": "maxRetry",
    "ack_timeout_ms": "ackTimeoutMillis",
    "redelivery_delay_ms": "redeliveryDelayMillis",
    "redelivery_backoff_multiplier": "redeliveryBackoffMultiplier",
    "redelivery_max_delay_ms": "redeliveryMaxDelayMillis",
    "dead_letter": "deadLetter",
    "dead_letter_retention_ms": "deadLetterRetentionMillis",
    "dead_letter_max_size": "deadLetterMaxSize",
}
API_SETTINGS: dict[str, str] = {api: name for name, api in TOPIC_SETTINGS.items()}


def setting_name(name: str) -> str:
    """The SDK name of a setting given as ``ttl_ms``, ``ttlMillis`` or ``ttl-millis``.

    Raises:
        ValueError: no such setting.
    """
    if name in TOPIC_SETTINGS:
        return name
    if name in API_SETTINGS:
        return API_SETTINGS[name]
    folded = name.replace("-", "").replace("_", "").lower()
    for sdk, api in TOPIC_SETTINGS.items():
        if folded in (api.lower(), sdk.replace("_", "")):
            return sdk
    raise ValueError(f"unknown topic setting {name!r}; one of: " + ", ".join(TOPIC_SETTINGS))


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
    sources: dict[str, str] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, topic: str, data: Mapping[str, Any],
                  source: Mapping[str, Any] | None = None) -> "TopicConfig":
        values: dict[str, Any] = {}
        for name, api in TOPIC_SETTINGS.items():
            value = data.get(api)
            if value is None:
                continue
            if name == "dead_letter":
                value = value if isinstance(value, bool) else \
                    str(value).strip().lower() in ("true", "1", "yes", "on")
            elif name == "redelivery_backoff_multiplier":
                value = float(value)
            else:
                value = int(value)
            values[name] = value
        sources = {API_SETTINGS.get(k, k): str(v) for k, v in (source or {}).items()}
        return cls(topic=topic, **values, sources=sources,
                   raw={"data": dict(data), "source": dict(source or {})})

    def values(self) -> dict[str, Any]:
        """SDK name -> effective value, for every setting the server reported."""
        return {name: getattr(self, name) for name in TOPIC_SETTINGS
                if getattr(self, name) is not None}

    def source(self, name: str) -> str | None:
        """``"topic"`` or ``"server"`` for a setting (any spelling ``setting_name`` takes)."""
        return self.sources.get(setting_name(name))


class DeadLetterPage(NamedTuple):
    """One page of ``list_dead``: oldest death first; ``next_cursor`` None on the last page."""

    messages: list[DelayMsg]
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
