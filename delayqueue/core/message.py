"""The message as the API shows it (camellia's ``delayMsg``).

Shared by the server and the client SDK, so it imports nothing but the status enum.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

from .status import Status

# The message's fields, in the order every script returns them (lua/includes/message.lua
# decodes them from the record):
# body, produceTime, triggerTime, expireTime, maxRetry, deliveries (camellia's retry), status,
# attributes (JSON text, absent when none), receipt of the latest delivery (absent before one),
# groupId (absent when none).
MESSAGE_FIELDS = ("m", "p", "t", "e", "r", "n", "s", "a", "c", "g")


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
    duplicate: bool = False  # sendMsg only (client side): a namesake answered, nothing enqueued
    replaced: bool = False   # sendMsg only (client side): onDuplicate=replace began it again
    attributes: Mapping[str, str] | None = None  # string -> string, as sent
    receipt: str | None = None    # a delivery (pull, long poll), or getMsg / listMsg of a
    #                               consuming message: the latest delivery's receipt
    dead_time: int | None = None  # a dead letter (listDeadMsg, getMsg): when it died
    group_id: str | None = None   # its message group (one consuming at a time, in order)
    ack_deadline: int | None = None   # consuming (getMsg, listMsg): when its delivery times out
    # getMsg without a subscription: name -> {"status", "retry"} of each named subscription
    # that holds the message (None: none does)
    subscriptions: Mapping[str, Mapping[str, int]] | None = None

    @classmethod
    def from_fields(cls, topic: str, msg_id: str, fields: Sequence[Any],
                    with_receipt: bool = False) -> "DelayMsg":
        """Build from a script's reply: the values of ``MESSAGE_FIELDS``, in that order.

        The receipt is shown only where the API hands the delivery out (``with_receipt``).
        """
        body, produce, trigger, expire, max_retry, retry, status, attributes, receipt, group = \
            (list(fields) + [None] * len(MESSAGE_FIELDS))[:len(MESSAGE_FIELDS)]
        return cls(topic, msg_id, body, int(produce), int(trigger), int(expire),
                   int(max_retry), int(retry), Status(int(status)),
                   attributes=json.loads(attributes) if attributes else None,
                   receipt=receipt if with_receipt and receipt else None,
                   group_id=group or None)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], duplicate: bool = False,
                  replaced: bool = False) -> "DelayMsg":
        """Build from the API's JSON ``delayMsg`` object."""
        return cls(
            topic=str(data["topic"]), msg_id=str(data["msgId"]), msg=str(data["msg"]),
            produce_time=int(data["produceTime"]), trigger_time=int(data["triggerTime"]),
            expire_time=int(data["expireTime"]), max_retry=int(data["maxRetry"]),
            retry=int(data["retry"]), status=Status(int(data["status"])),
            duplicate=duplicate, replaced=replaced,
            attributes=dict(data["attributes"]) if data.get("attributes") else None,
            receipt=data.get("receipt") or None,
            dead_time=int(data["deadTime"]) if data.get("deadTime") is not None else None,
            group_id=data.get("groupId") or None,
            ack_deadline=int(data["ackDeadline"]) if data.get("ackDeadline") is not None
            else None,
            subscriptions={name: {"status": int(held["status"]), "retry": int(held["retry"])}
                           for name, held in data["subscriptions"].items()}
            if data.get("subscriptions") else None,
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
            **({"groupId": self.group_id} if self.group_id else {}),
            **({"attributes": dict(self.attributes)} if self.attributes else {}),
            **({"receipt": self.receipt} if self.receipt else {}),
            **({"ackDeadline": self.ack_deadline} if self.ack_deadline is not None else {}),
            **({"deadTime": self.dead_time} if self.dead_time is not None else {}),
            **({"subscriptions": {name: dict(held) for name, held in self.subscriptions.items()}}
               if self.subscriptions else {}),
        }

    def with_subscriptions(self, held: Mapping[str, Mapping[str, int]]) -> "DelayMsg":
        return replace(self, subscriptions=held or None)

    def with_dead_time(self, dead_time_ms: int) -> "DelayMsg":
        return replace(self, dead_time=dead_time_ms)

    def with_place(self, ack_deadline_ms: int, dead_time_ms: int) -> "DelayMsg":
        """As getMsg and listMsg show it (built ``with_receipt``): a consuming message with
        its latest receipt and ack deadline, a dead letter with its death time (-1: none)."""
        consuming = self.status == Status.CONSUMING
        return replace(self, receipt=self.receipt if consuming else None,
                       ack_deadline=ack_deadline_ms if consuming and ack_deadline_ms >= 0
                       else None,
                       dead_time=dead_time_ms if dead_time_ms >= 0 else None)
