"""The message as the API shows it (camellia's ``delayMsg``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from .status import Status


@dataclass(frozen=True)
class DelayMsg:
    topic: str
    msg_id: str
    msg: str
    produce_time: int
    trigger_time: int
    expire_time: int
    max_retry: int
    retry: int
    status: Status

    @classmethod
    def from_fields(cls, topic: str, msg_id: str, fields: Sequence[Any]) -> "DelayMsg":
        """Build from a script's ``{m, p, t, e, r, n, s}`` reply (see lua/includes/message.lua)."""
        body, produce, trigger, expire, max_retry, retry, status = fields
        return cls(topic, msg_id, body, int(produce), int(trigger), int(expire),
                   int(max_retry), int(retry), Status(int(status)))

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "msgId": self.msg_id,
            "msg": self.msg,
            "produceTime": self.produce_time,
            "triggerTime": self.trigger_time,
            "expireTime": self.expire_time,
            "maxRetry": self.max_retry,
            "retry": self.retry,
            "status": int(self.status),
        }
