"""Send a JSON Lines stream of sendMsgBatch entries in batches (``delayqueue send --file``).

Each non-blank line is one JSON object with the fields of a sendMsgBatch entry (``msg``,
``msgId``, ``delayMillis``, ``triggerTime``, ``ttlMillis``, ``maxRetry``, ``attributes``,
``groupId``).
Lines are read as they are sent, ``batch_size`` valid ones a request, so a file of any size
takes bounded memory. A line that is not such an object is reported and not sent; every
other line gets the server's answer for its entry.

Atomic (``send --file --atomic``): every line is written or none. The lines are one request,
so at most ``batch_size`` of them; a line that is not a valid entry, or a file too long,
sends nothing; a refusal by the server reports the refused lines (the others were "not
written" because of them) and writes nothing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping

from delayqueue.client.batch import MAX_BATCH
from delayqueue.client.entries import SendEntry, SendResult
from delayqueue.client.errors import DelayQueueError

if TYPE_CHECKING:
    from delayqueue.client.delay_queue_client import DelayQueueClient

ENTRY_PREFIX = re.compile(r"^msgs\[\d+\]\.")


@dataclass(frozen=True)
class LineError:
    """A line that was not sent, or that the server refused: ``code`` is the server's, None
    when the line is not a valid entry or no server answered (it was not sent)."""

    line: int
    code: int | None
    msg: str
    msg_id: str | None = None


@dataclass
class BulkReport:
    """What ``send_lines`` did so far: entries sent (``duplicates`` and ``replaced`` among
    them) and errors."""

    lines: int = 0        # non-blank lines read
    sent: int = 0         # entries the server accepted (code 200)
    duplicates: int = 0   # accepted as duplicates (a live or recently ended msgId): nothing
    #                       enqueued
    replaced: int = 0     # onDuplicate=replace began a waiting or ready namesake again
    errors: list[LineError] = field(default_factory=list)
    aborted: str | None = None  # why sending stopped before the end (a request failed)
    aborted_code: int | None = None  # the server's code for it (None: no server answered)

    @property
    def failed(self) -> int:
        return len(self.errors)


def entry_of(text: str | bytes, defaults: Mapping[str, Any] | None = None) -> SendEntry:
    """One line as a SendEntry; ``defaults`` (API field names) fill what the line leaves out
    (a line with its own delayMillis or triggerTime takes neither from them; attributes
    are merged, the line's winning).

    Raises:
        ValueError: not valid JSON, not an object, or a field of the wrong type.
    """
    try:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        data = json.loads(text)
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8: {exc.reason} at byte {exc.start}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc.msg} at column {exc.colno}") from None
    if defaults and isinstance(data, dict):
        merged = {k: v for k, v in defaults.items()
                  if not (k in ("delayMillis", "triggerTime")
                          and ("delayMillis" in data or "triggerTime" in data))}
        attributes = {**(defaults.get("attributes") or {})}
        if isinstance(data.get("attributes"), dict):
            attributes.update(data["attributes"])
        data = {**merged, **data}
        if attributes and (data.get("attributes") is None or
                           isinstance(data.get("attributes"), dict)):
            data["attributes"] = attributes
    return SendEntry.from_json(data)


def send_lines(client: "DelayQueueClient", topic: str, lines: Iterable[str | bytes], *,
               defaults: Mapping[str, Any] | None = None, batch_size: int = MAX_BATCH,
               progress: Callable[[BulkReport], None] | None = None,
               atomic: bool = False) -> BulkReport:
    """Send every line (numbered from 1) to ``topic``; ``progress`` hears after each batch.

    A request that fails as a whole (no server reachable, code 500) stops the sending: its
    entries are reported as errors and ``aborted`` says why; lines after it are not read.
    ``atomic``: every line or none, in one request (see the module's docstring).
    """
    if atomic:
        return _send_atomic(client, topic, lines, defaults, batch_size, progress)
    report = BulkReport()
    batch: list[tuple[int, SendEntry]] = []
    for number, entry in _parsed(lines, defaults, report):
        if entry is not None:
            batch.append((number, entry))
        if len(batch) >= batch_size:
            sent, batch = _send(client, topic, batch, batch_size, report, progress), []
            if not sent:
                break
    else:
        _send(client, topic, batch, batch_size, report, progress)
    report.errors.sort(key=lambda e: e.line)
    return report


def _parsed(lines: Iterable[str | bytes], defaults: Mapping[str, Any] | None,
            report: BulkReport) -> Iterator[tuple[int, SendEntry | None]]:
    """Each non-blank line as (its number, its entry), counted in ``report``; a line that is
    not a valid entry is reported there and comes as None."""
    for number, text in enumerate(lines, 1):
        if not text.strip():
            continue
        report.lines += 1
        try:
            entry: SendEntry | None = entry_of(text, defaults)
        except ValueError as exc:
            report.errors.append(LineError(number, None, str(exc)))
            entry = None
        yield number, entry


def _send_atomic(client: "DelayQueueClient", topic: str, lines: Iterable[str | bytes],
                 defaults: Mapping[str, Any] | None, batch_size: int,
                 progress: Callable[[BulkReport], None] | None) -> BulkReport:
    """Every line in one all-or-nothing request, or none sent when any line is not valid."""
    report = BulkReport()
    batch: list[tuple[int, SendEntry]] = []
    for number, entry in _parsed(lines, defaults, report):
        if report.lines > batch_size:
            report.aborted = (f"--atomic: more than {batch_size} lines; an atomic batch is "
                              "one request: nothing sent")
            report.aborted_code = 400
            return report
        if entry is not None:
            batch.append((number, entry))
    if report.errors:
        report.aborted, report.aborted_code = "--atomic: invalid lines: nothing sent", 400
    else:
        _send(client, topic, batch, batch_size, report, progress, atomic=True)
    return report


def _send(client: "DelayQueueClient", topic: str, batch: list[tuple[int, SendEntry]],
          batch_size: int, report: BulkReport,
          progress: Callable[[BulkReport], None] | None, atomic: bool = False) -> bool:
    """Send one batch into ``report``; False when it failed as a whole."""
    if not batch:
        return True
    ok, code = True, None
    try:
        results: list[SendResult] = client.send_batch(topic, [e for _, e in batch],
                                                      batch_size=batch_size, atomic=atomic)
    except DelayQueueError as exc:
        results = list(getattr(exc, "results", []))
        report.aborted, report.aborted_code = str(exc), exc.code
        ok, code = False, exc.code
    except ValueError as exc:   # atomic, over 4 MiB: nothing sent
        results, ok, code = [], False, None
        report.aborted, report.aborted_code = str(exc), 400
    if atomic and results and not all(r.ok for r in results):
        # 429 when the backlog alone refused it (try later), else 400 (lines to fix).
        report.aborted = "atomic batch refused: nothing written"
        report.aborted_code = 429 if all(r.code in (200, 429) or _not_written(r)
                                         for r in results) else 400
    for i, (number, _) in enumerate(batch):
        if i >= len(results):
            report.errors.append(LineError(number, code, f"not sent: {report.aborted}"))
        elif atomic and _not_written(results[i]):
            continue    # another line was refused, and is reported
        elif results[i].ok:
            report.sent += 1
            report.duplicates += results[i].duplicate
            report.replaced += results[i].replaced
        else:
            # "msgs[3].msg: ..." names the entry in its request; the line number replaces it.
            msg = ENTRY_PREFIX.sub("", results[i].msg)
            report.errors.append(LineError(number, results[i].code, msg, results[i].msg_id))
    if progress is not None:
        progress(report)
    return ok


def _not_written(result: SendResult) -> bool:
    """An atomic batch's entry left unwritten because another was refused (409 "not
    written"), not one refused itself (a 409 of its own: a replace of a consuming message)."""
    return result.code == 409 and result.msg.startswith("not written")
