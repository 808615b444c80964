"""The entries and per-entry results of the batch calls (sendMsgBatch, ackMsgBatch,
deleteMsgBatch, changeVisibilityBatch): what ``send_batch``, ``ack_batch``, ``delete_batch``
and ``change_visibility_batch`` take and answer (batch.py sends them)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Mapping

from .model import DelayMsg, epoch_ms, millis

# ---- batches (sendMsgBatch, ackMsgBatch, deleteMsgBatch, changeVisibilityBatch) ------------
# The fields a sendMsgBatch entry may carry, as the API names them.
SEND_FIELDS = ("msg", "msgId", "delayMillis", "triggerTime", "ttlMillis", "maxRetry",
               "attributes", "groupId", "onDuplicate")
ON_DUPLICATE = ("keep", "replace")   # what a send does to a live namesake (sendMsg onDuplicate)


def on_duplicate_value(value: Any) -> str:
    """``on_duplicate`` checked: "keep" or "replace".

    Raises:
        ValueError: anything else (nothing sent).
    """
    if value not in ON_DUPLICATE:
        raise ValueError(f"on_duplicate: must be keep or replace, got {value!r}")
    return value


def _whole(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            (isinstance(value, float) and not value.is_integer()):
        raise ValueError(f"{name}: must be a whole number, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class SendEntry:
    """One message of ``send_batch``: the arguments of ``send`` (times in epoch ms / ms)."""

    msg: str
    msg_id: str | None = None
    delay_ms: int | timedelta | None = None  # None (and no trigger_time): the topic's delay
    trigger_time: int | datetime | None = None
    ttl_ms: int | timedelta | None = None
    max_retry: int | None = None
    attributes: Mapping[str, str] | None = None
    group_id: str | None = None
    on_duplicate: str = "keep"   # "replace": a waiting or ready namesake begins again

    @classmethod
    def from_json(cls, data: Any) -> "SendEntry":
        """From a JSON object with the API's field names (a sendMsgBatch entry).

        Raises:
            ValueError: not an object, an unknown field, or a value of the wrong type; the
                message names the field.
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"must be a JSON object, got {type(data).__name__}")
        unknown = [k for k in data if k not in SEND_FIELDS]
        if unknown:
            raise ValueError(f"{unknown[0]}: unknown field; one of: " + ", ".join(SEND_FIELDS))
        if not isinstance(data.get("msg"), str):
            raise ValueError("msg: required, a string" + (
                f", got {data['msg']!r}" if "msg" in data else ""))
        for api in ("msgId", "groupId"):
            if data.get(api) is not None and not isinstance(data[api], str):
                raise ValueError(f"{api}: must be a string, got {data[api]!r}")
        on_duplicate = data.get("onDuplicate") or "keep"
        if on_duplicate not in ON_DUPLICATE:
            raise ValueError(f"onDuplicate: must be keep or replace, got {on_duplicate!r}")
        attributes = data.get("attributes")
        if attributes is not None:
            if not isinstance(attributes, Mapping) or not all(
                    isinstance(v, str) for v in attributes.values()):
                raise ValueError("attributes: must be an object of strings to strings, "
                                 f"got {attributes!r}")
        ints = {api: _whole(api, data[api]) for api in
                ("delayMillis", "triggerTime", "ttlMillis", "maxRetry")
                if data.get(api) is not None}
        return cls(msg=data["msg"], msg_id=data.get("msgId"), delay_ms=ints.get("delayMillis"),
                   trigger_time=ints.get("triggerTime"), ttl_ms=ints.get("ttlMillis"),
                   max_retry=ints.get("maxRetry"),
                   attributes=dict(attributes) if attributes else None,
                   group_id=data.get("groupId") or None, on_duplicate=on_duplicate)

    def to_json(self) -> dict[str, Any]:
        """The sendMsgBatch entry (fields left at their default are left out: without a delay
        or a time the server applies the topic's ``delayMillis``)."""
        entry: dict[str, Any] = {"msg": self.msg}
        if self.msg_id is not None:
            entry["msgId"] = self.msg_id
        if self.trigger_time is not None:
            entry["triggerTime"] = epoch_ms(self.trigger_time)
            if self.delay_ms:
                entry["delayMillis"] = millis(self.delay_ms)  # the server refuses both: say so
        elif self.delay_ms is not None:
            entry["delayMillis"] = millis(self.delay_ms)
        if self.ttl_ms is not None:
            entry["ttlMillis"] = millis(self.ttl_ms)
        if self.max_retry is not None:
            entry["maxRetry"] = int(self.max_retry)
        if self.attributes:
            entry["attributes"] = dict(self.attributes)
        if self.group_id:
            entry["groupId"] = self.group_id
        if self.on_duplicate != "keep":
            entry["onDuplicate"] = on_duplicate_value(self.on_duplicate)
        return entry


@dataclass(frozen=True)
class AckEntry:
    """One settlement of ``ack_batch``: an ack, or a nack (``ack=False``, ``delay_ms``)."""

    msg_id: str
    receipt: str | None = None
    ack: bool = True
    delay_ms: int | timedelta | None = None  # nack only: redeliver no earlier than now + it

    @classmethod
    def of(cls, msg: DelayMsg, ack: bool = True,
           delay_ms: int | timedelta | None = None) -> "AckEntry":
        """Settle a delivered message with its receipt."""
        return cls(msg.msg_id, msg.receipt, ack, delay_ms)

    def to_json(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"msgId": self.msg_id, "ack": self.ack}
        if self.receipt:
            entry["receipt"] = self.receipt
        if not self.ack and self.delay_ms is not None:
            entry["delayMillis"] = max(0, millis(self.delay_ms))
        return entry


@dataclass(frozen=True)
class VisibilityEntry:
    """One deadline change of ``change_visibility_batch``: the delivery's ack deadline becomes
    now + ``ack_timeout_ms``; 0 (or less) gives it up at once, as ``change_visibility``."""

    msg_id: str
    ack_timeout_ms: int | timedelta
    receipt: str | None = None

    @classmethod
    def of(cls, msg: DelayMsg, ack_timeout_ms: int | timedelta) -> "VisibilityEntry":
        """Change a delivered message's deadline, guarded by its receipt."""
        return cls(msg.msg_id, ack_timeout_ms, msg.receipt)

    @property
    def timeout_ms(self) -> int:
        return max(0, millis(self.ack_timeout_ms))

    def to_json(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"msgId": self.msg_id, "ackTimeoutMillis": self.timeout_ms}
        if self.receipt:
            entry["receipt"] = self.receipt
        return entry


@dataclass(frozen=True)
class SendResult:
    """The answer for one entry of ``send_batch``, in request order.

    ``code`` is what ``sendMsg`` would answer (200, 400, 500, ...); ``delay_msg`` is set when
    it is 200 (``duplicate`` when a namesake answered and nothing was enqueued: a live one,
    or an ended one inside the topic's dedup window; ``replaced`` when ``on_duplicate=
    "replace"`` began a waiting or ready namesake again).
    """

    msg_id: str
    code: int
    msg: str
    delay_msg: DelayMsg | None = None

    @property
    def ok(self) -> bool:
        return self.code == 200

    @property
    def duplicate(self) -> bool:
        return self.delay_msg is not None and self.delay_msg.duplicate

    @property
    def replaced(self) -> bool:
        return self.delay_msg is not None and self.delay_msg.replaced

    @classmethod
    def from_json(cls, msg_id: str, data: Mapping[str, Any]) -> "SendResult":
        code = int(data.get("code", 500))
        delay_msg = data.get("delayMsg")
        return cls(msg_id, code, str(data.get("msg") or ""),
                   DelayMsg.from_json(delay_msg, bool(data.get("duplicate")),
                                      bool(data.get("replaced")))
                   if code == 200 and delay_msg else None)


@dataclass(frozen=True)
class BatchResult:
    """The answer for one entry of ``ack_batch``, ``delete_batch`` or
    ``change_visibility_batch``, in request order.

    ``code`` is what ``ackMsg`` / ``deleteMsg`` / ``changeVisibility`` would answer: 200; 404
    unknown or ended; 409 stale receipt; 400 not in a state that allows it. ``delay_msg``: the
    message as it is now, where a 200 carries it (``change_visibility_batch``).
    """

    msg_id: str
    code: int
    msg: str
    delay_msg: DelayMsg | None = None

    @property
    def ok(self) -> bool:
        return self.code == 200

    @classmethod
    def from_json(cls, msg_id: str, data: Mapping[str, Any]) -> "BatchResult":
        code = int(data.get("code", 500))
        delay_msg = data.get("delayMsg")
        return cls(msg_id, code, str(data.get("msg") or ""),
                   DelayMsg.from_json(delay_msg) if code == 200 and delay_msg else None)
