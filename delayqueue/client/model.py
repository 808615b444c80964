"""Typed results: the message, topic sizes and monitoring data, built from the JSON answers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from delayqueue.message import DelayMsg  # noqa: F401 - shared with the server


@dataclass(frozen=True)
class TopicInfo:
    """Queue sizes of one topic; ``waiting_buckets`` maps camellia's bucket names to counts."""

    topic: str
    waiting_queue_size: int
    ready_queue_size: int
    ack_queue_size: int
    waiting_buckets: dict[str, int] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "TopicInfo":
        return cls(
            topic=str(data["topic"]),
            waiting_queue_size=int(data.get("waitingQueueSize", 0)),
            ready_queue_size=int(data.get("readyQueueSize", 0)),
            ack_queue_size=int(data.get("ackQueueSize", 0)),
            waiting_buckets={k: int(v) for k, v in (data.get("waitingQueueInfo") or {}).items()},
            raw=dict(data),
        )


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
