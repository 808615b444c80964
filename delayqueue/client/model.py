"""Typed results: the message, topic sizes and monitoring data, built from the JSON answers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from delayqueue.status import Status


@dataclass(frozen=True)
class DelayMsg:
    """camellia's ``delayMsg``; times are milliseconds since the epoch."""

    topic: str
    msg_id: str
    msg: str
    produce_time: int
    trigger_time: int
    expire_time: int
    max_retry: int
    retry: int
    status: Status
    duplicate: bool = False  # sendMsg only: the msgId was live, nothing was enqueued

    @classmethod
    def from_json(cls, data: Mapping[str, Any], duplicate: bool = False) -> "DelayMsg":
        return cls(
            topic=str(data["topic"]), msg_id=str(data["msgId"]), msg=str(data["msg"]),
            produce_time=int(data["produceTime"]), trigger_time=int(data["triggerTime"]),
            expire_time=int(data["expireTime"]), max_retry=int(data["maxRetry"]),
            retry=int(data["retry"]), status=Status(int(data["status"])),
            duplicate=duplicate,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic, "msgId": self.msg_id, "msg": self.msg,
            "produceTime": self.produce_time, "triggerTime": self.trigger_time,
            "expireTime": self.expire_time, "maxRetry": self.max_retry, "retry": self.retry,
            "status": int(self.status),
        }


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
