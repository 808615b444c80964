"""The message as the API shows it (camellia's ``delayMsg``).

Shared by the server and the client SDK, so it imports nothing but the status enum.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .status import Status

# The message hash's fields, in the order every script returns them (lua/includes/message.lua):
# body, produceTime, triggerTime, expireTime, maxRetry, deliveries (camellia's retry), status.
MESSAGE_FIELDS = ("m", "p", "t", "e", "r", "n", "s")


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
    duplicate: bool = False  # sendMsg only (client side): the msgId was live, nothing enqueued

    @classmethod
    def from_fields(cls, topic: str, msg_id: str, fields: Sequence[Any]) -> "DelayMsg":
        """Build from a script's reply: the values of ``MESSAGE_FIELDS``, in that order."""
        body, produce, trigger, expire, max_retry, retry, status = fields
        return cls(topic, msg_id, body, int(produce), int(trigger), int(expire),
                   int(max_retry), int(retry), Status(int(status)))

    @classmethod
    def from_json(cls, data: Mapping[str, Any], duplicate: bool = False) -> "DelayMsg":
        """Build from the API's JSON ``delayMsg`` object."""
        return cls(
            topic=str(data["topic"]), msg_id=str(data["msgId"]), msg=str(data["msg"]),
            produce_time=int(data["produceTime"]), trigger_time=int(data["triggerTime"]),
            expire_time=int(data["expireTime"]), max_retry=int(data["maxRetry"]),
            retry=int(data["retry"]), status=Status(int(data["status"])),
            duplicate=duplicate,
        )

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
