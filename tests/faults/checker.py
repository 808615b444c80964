"""The queue checker: what a history proves (Jepsen-style, for an at-least-once queue).

- lost: a send answered 200 whose message was never delivered;
- unexpected: a delivery of an id no client sent, or whose send was definitely refused;
- early: a delivery received before its triggerTime;
- again after ack: a delivery by a pull sent after an ack of the same message answered 200
  (an ack answered 200 ended the message; a redelivery before it would have made it 409);
- http 5xx: an HTTP status >= 500 (camellia's error envelope is code 500 at HTTP 200, what a
  Redis outage answers; an HTTP 5xx is a crash the error handlers did not catch);
- hangs: a request still unanswered past its own timeout plus a margin;
- lag: receive time - triggerTime of each message's first delivery, in and out of faults.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from faults.history import FAIL, OK, History
from support.fleet import percentile


@dataclass
class Verdict:
    sends: dict[str, int] = field(default_factory=dict)      # outcome -> count
    acks: dict[str, int] = field(default_factory=dict)
    pulls: dict[str, int] = field(default_factory=dict)
    delivered: int = 0                                      # distinct messages delivered
    redelivered: int = 0                                    # deliveries beyond the first
    lost: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    early: list[tuple[str, float, int]] = field(default_factory=list)
    again_after_ack: list[str] = field(default_factory=list)
    http_5xx: list[str] = field(default_factory=list)
    hangs: list[str] = field(default_factory=list)
    lag_ms: dict[str, float] = field(default_factory=dict)          # p50, p99, max: all
    lag_in_fault_ms: dict[str, float] = field(default_factory=dict)  # triggered in a fault
    traces: dict[str, list[str]] = field(default_factory=dict)      # msgId -> its history

    @property
    def violations(self) -> dict[str, list]:
        return {name: values for name, values in (
            ("lost", self.lost), ("unexpected", self.unexpected), ("early", self.early),
            ("again after ack", self.again_after_ack), ("http 5xx", self.http_5xx),
            ("hangs", self.hangs)) if values}

    def summary(self) -> str:
        return (f"sends {self.sends}, pulls {self.pulls}, acks {self.acks}, delivered "
                f"{self.delivered} (+{self.redelivered} again), lag {self.lag_ms}, "
                f"in fault {self.lag_in_fault_ms}, violations "
                f"{ {k: v[:5] for k, v in self.violations.items()} }, traces {self.traces}")


def _count(ops) -> dict[str, int]:
    counts: dict[str, int] = {}
    for op in ops:
        counts[op.outcome] = counts.get(op.outcome, 0) + 1
    return counts


def _lag(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    return {"p50": round(percentile(values, 50)), "p99": round(percentile(values, 99)),
            "max": round(max(values))}


def check(history: History) -> Verdict:
    sends, acks, pulls = history.of("send"), history.of("ack"), history.of("pull")
    v = Verdict(sends=_count(sends), acks=_count(acks), pulls=_count(pulls))
    sent_ok = {op.msg_id for op in sends if op.outcome == OK}
    attempted = {op.msg_id for op in sends if op.outcome != FAIL}
    first: dict[str, float] = {}
    lags, lags_in_fault = [], []
    faults = list(history.faults)
    # A 200 ack ends the message: the earliest such answer, per message.
    acked_at: dict[str, float] = {}
    for op in acks:
        if op.outcome == OK:
            acked_at[op.msg_id] = min(acked_at.get(op.msg_id, op.end_ms), op.end_ms)
    for d in sorted(history.deliveries, key=lambda d: d.received_ms):
        if d.msg_id not in attempted:
            v.unexpected.append(d.msg_id)
        if d.received_ms < d.trigger_ms:
            v.early.append((d.msg_id, d.received_ms, d.trigger_ms))
        if d.msg_id in acked_at and d.pull_start_ms > acked_at[d.msg_id]:
            v.again_after_ack.append(d.msg_id)
        if d.msg_id in first:
            v.redelivered += 1
            continue
        first[d.msg_id] = d.received_ms
        lag = d.received_ms - d.trigger_ms
        lags.append(lag)
        if any(start <= d.trigger_ms <= end for start, end, _ in faults):
            lags_in_fault.append(lag)
    v.delivered = len(first)
    v.lost = sorted(sent_ok - set(first))
    v.http_5xx = [f"{op.kind} {op.topic} {op.http_status}" for op in history.ops
                  if op.http_status is not None and op.http_status >= 500]
    v.hangs = [f"{op.kind} {op.topic} {op.end_ms - op.start_ms:.0f} ms" for op in history.hangs]
    v.lag_ms, v.lag_in_fault_ms = _lag(lags), _lag(lags_in_fault)
    for msg_id in {*v.lost[:5], *v.unexpected[:5], *(e[0] for e in v.early[:5]),
                   *v.again_after_ack[:5]}:
        v.traces[msg_id] = history.trace(msg_id)
    return v
