"""The batch calls of both clients, as plans (plan.py): sendMsgBatch, ackMsgBatch, deleteMsgBatch,
changeVisibilityBatch.

A batch goes to one topic; the client splits it into requests of at most 1000 entries (and
4 MiB of JSON), and every entry gets its own result, in order. A request that fails as a
whole raises, carrying the results of the requests before it in ``exc.results``.

An atomic send (``send_batch(..., atomic=True)``) is all or nothing on the server, so it is
never split: it must fit one request. Its refusal is answered per entry like any batch (the
refused entries with their own code, every other one 409 "not written"), not raised.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from datetime import timedelta
from typing import Any, Iterable, Iterator, Mapping

from .entries import AckEntry, BatchResult, SendEntry, SendResult, VisibilityEntry
from .errors import BadRequestError, DelayQueueError, ServerError
from .model import DelayMsg, attributes_json
from .plan import Plan, Request
from .subscriptions import with_subscription

# The most entries (and messages per pull), and bytes of JSON body, the server takes in one
# batch request.
MAX_BATCH = 1000
MAX_BATCH_BYTES = 4 * 1024 * 1024


def _batch_size(size: int) -> int:
    if not 1 <= int(size) <= MAX_BATCH:
        raise ValueError(f"batch_size: must be between 1 and {MAX_BATCH}, got {size}")
    return int(size)


def _json(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def _chunks(encoded: list[bytes], size: int) -> Iterator[tuple[int, int]]:
    """(start, end) of consecutive runs of at most ``size`` entries and MAX_BATCH_BYTES."""
    start, total = 0, 0
    for i, entry in enumerate(encoded):
        if i > start and (i - start >= size or total + len(entry) + 1 > MAX_BATCH_BYTES):
            yield start, i
            start, total = i, 0
        total += len(entry) + 1
    if start < len(encoded):
        yield start, len(encoded)


def _send_entry(item: "str | SendEntry | Mapping[str, Any]") -> SendEntry:
    if isinstance(item, SendEntry):
        entry = item
    elif isinstance(item, str):
        entry = SendEntry(item)
    else:
        entry = SendEntry.from_json(item)
    if entry.attributes:
        attributes_json(entry.attributes)  # strings to strings, or ValueError
    if entry.msg_id is None:  # generated here, so a re-sent request is seen as a duplicate
        entry = replace(entry, msg_id=uuid.uuid4().hex)
    return entry


def _ack_entry(item: "AckEntry | DelayMsg | str") -> AckEntry:
    if isinstance(item, AckEntry):
        return item
    if isinstance(item, DelayMsg):
        return AckEntry.of(item)
    return AckEntry(str(item))


def _visibility_entry(item: "VisibilityEntry | tuple[DelayMsg | str, int | timedelta]"
                      ) -> VisibilityEntry:
    if isinstance(item, VisibilityEntry):
        return item
    msg, ack_timeout_ms = item
    if isinstance(msg, DelayMsg):
        return VisibilityEntry.of(msg, ack_timeout_ms)
    return VisibilityEntry(str(msg), ack_timeout_ms)


class BatchPlans:
    """The batch calls as plans (plan.py), mixed into ``Plans``."""

    def send_batch(self, topic: str, msgs: Iterable["str | SendEntry | Mapping[str, Any]"],
                   *, batch_size: int = MAX_BATCH, atomic: bool = False) -> Plan[list[SendResult]]:
        """Send many messages to one topic: one request per ``batch_size`` (at most 1000)
        entries, or fewer to stay within the 4 MiB body limit (or the server's, when lower).

        Each item is a body, a ``SendEntry``, or a mapping with the API's field names
        (``{"msg": .., "delayMillis": ..}``); one without a delay or a time is due after the
        topic's ``delay_ms`` (0, due now, unless set). Entries without a msgId get one here,
        as in ``send``. Returns one ``SendResult`` per entry, in order: each entry succeeds or
        fails on its own (``result.ok``, ``result.code``, ``result.msg``).

        With ``atomic=True`` every entry is written or none is, in one request (so at most
        ``batch_size`` entries and 4 MiB). When the server refuses it, nothing was written
        and the results say why: each refused entry has its own code (400 bad entry, 429 the
        topic's backlog is full) and every other entry 409 ("not written: another entry of
        this atomic batch was refused"). A live duplicate is not a refusal.

        Raises:
            ValueError: an item is not a valid entry, or an atomic batch does not fit one
                request (nothing sent).
            DelayQueueError: a request failed as a whole; ``exc.results`` holds the results
                of the requests before it (those entries were sent).
        """
        entries = [_send_entry(m) for m in msgs]
        encoded = [_json(e.to_json()) for e in entries]
        size = _batch_size(batch_size)
        if atomic:
            return (yield from self._send_atomic(topic, entries, encoded, size))
        results: list[SendResult] = []
        for start, end in _chunks(encoded, size):
            results += yield from self._send_chunk(topic, entries[start:end], encoded[start:end],
                                                   results)
        return results

    def _send_atomic(self, topic: str, entries: list[SendEntry], encoded: list[bytes],
                     size: int) -> Plan[list[SendResult]]:
        """One all-or-nothing sendMsgBatch; a refusal (code 400 with a result per entry)
        becomes those results."""
        if not entries:
            return []
        if len(list(_chunks(encoded, size))) > 1:
            raise ValueError(f"atomic: an atomic batch is sent in one request, so at most "
                             f"{size} entries and {MAX_BATCH_BYTES} bytes of JSON; got "
                             f"{len(entries)} entries, {sum(map(len, encoded))} bytes")
        body = b'{"topic":%s,"atomic":true,"msgs":[%s]}' % (_json(topic), b",".join(encoded))
        try:
            answers = yield from self._batch_call("sendMsgBatch", body, len(entries), [], True)
        except BadRequestError as exc:
            answers = (exc.envelope or {}).get("results")
            if not isinstance(answers, list) or len(answers) != len(entries):
                raise
        return [SendResult.from_json(e.msg_id or "", a if isinstance(a, dict) else
                                     {"code": 500, "msg": repr(a)})
                for e, a in zip(entries, answers)]

    def _send_chunk(self, topic: str, entries: list[SendEntry], encoded: list[bytes],
                    done: list[SendResult]) -> Plan[list[SendResult]]:
        """One sendMsgBatch; a body over the server's limit (413: its max-msg-bytes is set
        lower than the default) is sent again in halves, and one entry alone that is still
        too large gets code 413 as its result."""
        body = b'{"topic":%s,"msgs":[%s]}' % (_json(topic), b",".join(encoded))
        try:
            answers = yield from self._batch_call("sendMsgBatch", body, len(entries), done, True)
        except ServerError as exc:
            if exc.code != 413:
                raise
            if len(entries) == 1:
                return [SendResult(entries[0].msg_id or "", 413, exc.msg)]
            half = len(entries) // 2
            first = yield from self._send_chunk(topic, entries[:half], encoded[:half], done)
            return first + (yield from self._send_chunk(topic, entries[half:], encoded[half:],
                                                        done + first))
        return [SendResult.from_json(e.msg_id or "", a) for e, a in zip(entries, answers)]

    def ack_batch(self, topic: str, acks: Iterable["AckEntry | DelayMsg | str"], *,
                  subscription: str | None = None) -> Plan[list[BatchResult]]:
        """Ack (or nack) many messages of one topic, 1000 per request, in the default
        subscription or the named ``subscription`` (the one they were pulled from).

        Each item is a delivered ``DelayMsg`` (acked with its receipt), an ``AckEntry`` (an
        ack or a nack, with or without a receipt) or a msgId. Returns one ``BatchResult`` per
        item, in order, with the code ``ackMsg`` would answer: 200, 404 (unknown or ended),
        409 (stale receipt), 400 (not delivered).

        Raises:
            DelayQueueError: a request failed as a whole (``exc.results``: those before it).
        """
        entries = [_ack_entry(a) for a in acks]
        # A re-sent ack is harmless; a re-sent nack is only when a receipt guards it.
        idempotent = all(e.ack or e.receipt for e in entries)
        results: list[BatchResult] = []
        for start in range(0, len(entries), MAX_BATCH):
            chunk = entries[start:start + MAX_BATCH]
            body = _json(with_subscription({"topic": topic}, subscription)
                         | {"acks": [e.to_json() for e in chunk]})
            answers = yield from self._batch_call("ackMsgBatch", body, len(chunk), results,
                                                  idempotent)
            results += [BatchResult.from_json(e.msg_id, a) for e, a in zip(chunk, answers)]
        return results

    def delete_batch(self, topic: str, msg_ids: Iterable[str],
                     release: bool = False) -> Plan[list[BatchResult]]:
        """Delete many messages of one topic, 1000 per request (``release`` as in ``delete``).

        Returns one ``BatchResult`` per msgId, in order: 200, or 404 (unknown or ended).

        Raises:
            DelayQueueError: a request failed as a whole (``exc.results``: those before it).
        """
        ids = [str(i) for i in msg_ids]
        results: list[BatchResult] = []
        for start in range(0, len(ids), MAX_BATCH):
            chunk = ids[start:start + MAX_BATCH]
            body = _json({"topic": topic, "msgIds": chunk, "release": bool(release)})
            answers = yield from self._batch_call("deleteMsgBatch", body, len(chunk), results,
                                                  False)
            results += [BatchResult.from_json(i, a) for i, a in zip(chunk, answers)]
        return results

    def change_visibility_batch(
            self, topic: str,
            entries: Iterable["VisibilityEntry | tuple[DelayMsg | str, int | timedelta]"], *,
            subscription: str | None = None) -> Plan[list[BatchResult]]:
        """Set the ack deadlines of many deliveries of one topic, 1000 per request: a
        consumer's heartbeat for every message it holds, or (0) giving some up at once; in
        the default subscription or the named ``subscription``.

        Each item is a ``VisibilityEntry`` or a pair: a delivered ``DelayMsg`` (its receipt
        guards the change) or a msgId, and the new ack timeout. Returns one ``BatchResult`` per
        item, in order, with the code ``change_visibility`` would answer: 200 (``delay_msg``:
        the message as it is now), 400 (not consuming), 404 (unknown or ended), 409 (stale
        receipt).

        Raises:
            DelayQueueError: a request failed as a whole (``exc.results``: those before it).
        """
        items = [_visibility_entry(e) for e in entries]
        # As change_visibility: a re-sent extension is harmless, a re-sent release is not (the
        # first may have landed, and the retry would answer 400 for it).
        idempotent = all(e.timeout_ms > 0 for e in items)
        results: list[BatchResult] = []
        for start in range(0, len(items), MAX_BATCH):
            chunk = items[start:start + MAX_BATCH]
            body = _json(with_subscription({"topic": topic}, subscription)
                         | {"entries": [e.to_json() for e in chunk]})
            answers = yield from self._batch_call("changeVisibilityBatch", body, len(chunk),
                                                  results, idempotent)
            results += [BatchResult.from_json(e.msg_id, a) for e, a in zip(chunk, answers)]
        return results

    def _batch_call(self, endpoint: str, body: bytes, count: int, done: list[Any],
                    idempotent: bool) -> Plan[list[dict[str, Any]]]:
        """One batch request; its ``results``, checked to be one per entry."""
        try:
            envelope = yield Request(endpoint, body=body, idempotent=idempotent)
            answers = envelope.get("results")
            if not isinstance(answers, list) or len(answers) != count:
                raise ServerError(f"{endpoint}: expected {count} results, got "
                                  f"{len(answers) if isinstance(answers, list) else answers!r}")
        except DelayQueueError as exc:
            exc.results = list(done)  # type: ignore[attr-defined]
            raise
        return [a if isinstance(a, dict) else {"code": 500, "msg": repr(a)} for a in answers]

