"""The queue checker: what a history proves (Jepsen-style, for an at-least-once queue).

- lost: a send answered 200 whose message was never delivered;
- unexpected: a delivery of an id no client sent, or whose send was definitely refused;
- early: a delivery received before its triggerTime;
- again after ack: a delivery by a pull sent after an ack of the same message answered 200
  (an ack answered 200 ended the message; a redelivery before it would have made it 409);
- http 5xx: an HTTP status >= 500 (camellia's error envelope is code 500 at HTTP 200, what a
  Redis outage answers; an HTTP 5xx is a crash the error handlers did not catch);
- hangs: a request still unanswered past its own timeout plus a margin;
- group, two outstanding: two deliveries of one group outstanding at once. A delivery is
  outstanding from its pull until its ack or nack, or until its ack deadline passed; for sure
  from its receipt until the start of the first ack or nack of the message that may have
  taken effect (answered 200, or unknown), or until the pull's start + the ack timeout;
- group, out of order: a message's first delivery (retry 1) received before an earlier
  message of its group (by triggerTime, then acceptance) ended, the earlier one's send
  answered 200 before that pull was sent (it existed: once delivered, a message is its
  group's head however early a later send comes). Acceptance order is known for sends that
  did not overlap; "ended" is the start of its first ack that may have taken effect (the
  workload's grouped messages cannot expire or run out of deliveries within a run);
- delivered while paused: a delivery by a pull sent after a pause of its topic answered and
  answered before the resume was sent (a pull already in flight when the pause was called,
  or one whose answer came after the resume was sent, may deliver);
- schedule, missing: a fire time of a recurring schedule (everyMillis), due before its
  deleteSchedule was sent by more than the promotion allowance, whose occurrence was never
  delivered (an occurrence the delete found still waiting is deleted with it);
- schedule, off the grid: a delivered occurrence whose fire time is not first + k * every, or
  later than the delete's answer (none can have been written after it); an occurrence
  received before its fire time is early like any message;
- lag: receive time - triggerTime of each message's first delivery, in and out of faults.
The verdicts above read the default subscription's deliveries, acks and nacks (a pause holds
the whole topic: its verdict reads every subscription's). Each named subscription has its own:
- subscription, never delivered: a send answered 200 whose call started after the
  subscription's createSubscription answered 200 (so it was accepted after the creation),
  never delivered in that subscription;
- subscription, unexpected: a delivery in it of an id no client sent (nor its topic's
  schedule), whose send was refused, or whose send answered before the first
  createSubscription call was sent (a message accepted before is not the subscription's);
- subscription, early and again after ack: as above, within the subscription (its own acks);
- subscription, group: two outstanding and out of order, as above, within the subscription
  (groups hold within each subscription), among the sends accepted after its creation.
Every verdict claims only what the history proves: an unknown outcome counts both ways.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from faults.history import FAIL, OK, Delivery, History, Op, Pause, ScheduleRun, SubscriptionRun
from support.fleet import percentile

GroupKey = tuple[str, str]                 # (topic, groupId)


@dataclass
class SubscriptionVerdict:
    """One named subscription's verdicts, over every topic that has it."""

    delivered: int = 0                                      # distinct messages delivered
    redelivered: int = 0                                    # deliveries beyond the first
    missing: list[str] = field(default_factory=list)        # acked sends never delivered
    unexpected: list[str] = field(default_factory=list)
    early: list[tuple[str, float, int]] = field(default_factory=list)
    again_after_ack: list[str] = field(default_factory=list)
    two_outstanding: list[tuple] = field(default_factory=list)
    out_of_order: list[tuple] = field(default_factory=list)

    def violations(self, name: str) -> dict[str, list]:
        return {label: values for label, values in (
            (f"subscription: acked send never delivered in {name}", self.missing),
            (f"subscription: unexpected in {name}", self.unexpected),
            (f"subscription: early in {name}", self.early),
            (f"subscription: again after ack in {name}", self.again_after_ack),
            (f"subscription: group two outstanding at once in {name}", self.two_outstanding),
            (f"subscription: group delivered before an earlier one ended in {name}",
             self.out_of_order)) if values}


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
    # (topic, groupId, msgId, msgId, at ms): the earlier message first
    two_outstanding: list[tuple] = field(default_factory=list)
    out_of_order: list[tuple] = field(default_factory=list)
    grouped: int = 0                                        # distinct grouped messages delivered
    # (topic, msgId, pull start, received, paused from, until), ms
    delivered_while_paused: list[tuple] = field(default_factory=list)
    pauses: int = 0                                         # topic pauses in the history
    pulls_in_pause: int = 0         # pulls sent while their topic was paused
    # (scheduleId, fire time): fire times that must have been delivered and were not;
    # occurrences delivered off the schedule's grid or after its delete
    schedule_missing: list[tuple] = field(default_factory=list)
    schedule_off_grid: list[tuple] = field(default_factory=list)
    occurrences: int = 0            # distinct schedule occurrences delivered
    subscriptions: dict[str, SubscriptionVerdict] = field(default_factory=dict)  # by name
    http_5xx: list[str] = field(default_factory=list)
    hangs: list[str] = field(default_factory=list)
    lag_ms: dict[str, float] = field(default_factory=dict)          # p50, p99, max: all
    lag_in_fault_ms: dict[str, float] = field(default_factory=dict)  # triggered in a fault
    traces: dict[str, list[str]] = field(default_factory=dict)      # msgId -> its history

    @property
    def violations(self) -> dict[str, list]:
        named = {label: values for name, sv in sorted(self.subscriptions.items())
                 for label, values in sv.violations(name).items()}
        return named | {name: values for name, values in (
            ("lost", self.lost), ("unexpected", self.unexpected), ("early", self.early),
            ("again after ack", self.again_after_ack),
            ("group: two outstanding at once", self.two_outstanding),
            ("group: delivered before an earlier one ended", self.out_of_order),
            ("delivered while paused", self.delivered_while_paused),
            ("schedule: fire time never delivered", self.schedule_missing),
            ("schedule: occurrence off its grid", self.schedule_off_grid),
            ("http 5xx", self.http_5xx), ("hangs", self.hangs)) if values}

    def summary(self) -> str:
        return (f"sends {self.sends}, pulls {self.pulls}, acks {self.acks}, delivered "
                f"{self.delivered} (+{self.redelivered} again, {self.grouped} grouped), "
                f"pauses {self.pauses} ({self.pulls_in_pause} pulls sent within), "
                f"schedule occurrences {self.occurrences}, subscriptions "
                f"{ {n: (sv.delivered, sv.redelivered) for n, sv in self.subscriptions.items()} } "
                "(delivered, again), "
                f"lag {self.lag_ms}, "
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


def _may_have_acted(ops: list[Op]) -> dict[str, list[Op]]:
    """Per message, its calls that may have taken effect (answered 200, or unknown)."""
    acted: dict[str, list[Op]] = defaultdict(list)
    for op in ops:
        if op.outcome != FAIL:
            acted[op.msg_id].append(op)
    return acted


def _by_group(deliveries: list[Delivery]) -> dict[GroupKey, list[Delivery]]:
    grouped: dict[GroupKey, list[Delivery]] = defaultdict(list)
    for d in deliveries:
        if d.group:
            grouped[(d.topic, d.group)].append(d)
    return grouped


def _two_outstanding(deliveries: list[Delivery], ends: dict[str, list[Op]],
                     ack_timeout_ms: float) -> list[tuple]:
    """Pairs of one group's deliveries outstanding for sure at one moment."""
    found = []
    for (topic, group), ds in _by_group(deliveries).items():
        spans = []
        for d in ds:
            until = min([d.pull_start_ms + ack_timeout_ms] + [
                op.start_ms for op in ends.get(d.msg_id, ()) if op.end_ms > d.pull_start_ms])
            if until > d.received_ms:
                spans.append((d.received_ms, until, d.msg_id))
        latest: tuple[float, str] | None = None    # the latest end among earlier spans
        for start, until, msg_id in sorted(spans):
            if latest and start < latest[0]:
                found.append((topic, group, latest[1], msg_id, round(start)))
            if latest is None or until > latest[0]:
                latest = (until, msg_id)
    return found


def _out_of_order(sends: list[Op], deliveries: list[Delivery], acks: dict[str, list[Op]]
                  ) -> list[tuple]:
    """First deliveries received before an earlier message of their group ended."""
    send_of = {op.msg_id: op for op in sends}
    earlier: dict[GroupKey, list[Op]] = defaultdict(list)   # sent for sure, by answer time
    for op in sorted(sends, key=lambda op: op.end_ms):
        if op.outcome == OK and op.group:
            earlier[(op.topic, op.group)].append(op)
    found = []
    for key, ds in _by_group(deliveries).items():
        candidates, taken, live = earlier.get(key, []), 0, []
        for d in sorted((d for d in ds if d.retry == 1), key=lambda d: d.pull_start_ms):
            while taken < len(candidates) and candidates[taken].end_ms < d.pull_start_ms:
                live.append(candidates[taken])
                taken += 1
            # An earlier message whose ack may have acted before this pull stays ended.
            live = [a for a in live if _ended_from(a, acks) > d.pull_start_ms]
            accepted_from = send_of[d.msg_id].start_ms if d.msg_id in send_of else None
            for a in live:
                comes_first = a.trigger_ms < d.trigger_ms or (
                    a.trigger_ms == d.trigger_ms and accepted_from is not None
                    and a.end_ms < accepted_from)
                if a.msg_id != d.msg_id and comes_first and \
                        _ended_from(a, acks) > d.received_ms:
                    found.append((*key, a.msg_id, d.msg_id, round(d.received_ms)))
    return found


def _pause_at(topic: str, sent_ms: float, pauses: dict[str, list[Pause]]) -> Pause | None:
    """The pause of ``topic`` a call was sent within: after the pause answered (a pull in flight
    when the pause was called may deliver), before the resume was sent."""
    for pause in pauses.get(topic, ()):
        if pause.from_ms < sent_ms < pause.until_ms:
            return pause
    return None


def _delivered_while_paused(deliveries: list[Delivery], pulls: list[Op],
                            pauses: list[Pause]) -> tuple[list[tuple], int]:
    """Deliveries by pulls sent within a pause of their topic and answered before its resume
    was sent (one answered later may hold the resumed messages), and how many pulls were sent
    within a pause: how often the run put the promise to the test."""
    by_topic: dict[str, list[Pause]] = defaultdict(list)
    for pause in pauses:
        by_topic[pause.topic].append(pause)
    found = []
    for d in deliveries:
        pause = _pause_at(d.topic, d.pull_start_ms, by_topic)
        if pause and d.received_ms < pause.until_ms:
            found.append((d.topic, d.msg_id, round(d.pull_start_ms), round(d.received_ms),
                          round(pause.from_ms), round(pause.until_ms)))
    tested = sum(1 for op in pulls if _pause_at(op.topic, op.start_ms, by_topic))
    return found, tested


def _schedule_verdicts(runs: list[ScheduleRun], deliveries: list[Delivery],
                       allowance_ms: float) -> tuple[list[tuple], list[tuple], set[str]]:
    """Missing and off-grid fire times of each schedule, and every occurrence delivered.
    A fire time due ``allowance_ms`` before the delete was sent was promoted before it (the
    delete removes only a waiting occurrence), so it must have been delivered."""
    missing, off_grid, occurrences = [], [], set()
    for run in runs:
        fires = {}
        for d in deliveries:
            fire = run.fire_time(d.msg_id) if d.topic == run.topic else None
            if fire is not None:
                fires[fire] = d.msg_id
                occurrences.add(d.msg_id)
        for fire in sorted(fires):
            on_grid = fire >= run.first_fire_ms and \
                (fire - run.first_fire_ms) % run.every_ms == 0
            if not on_grid or fire > run.deleted_ms:
                off_grid.append((run.schedule_id, fire))
        fire = run.first_fire_ms
        while fire <= run.deleted_from_ms - allowance_ms:
            if fire not in fires:
                missing.append((run.schedule_id, fire))
            fire += run.every_ms
    return missing, off_grid, occurrences


def _ended_from(op: Op, acks: dict[str, list[Op]]) -> float:
    """The earliest time the sent message may have ended: its first ack that may have acted."""
    return min((a.start_ms for a in acks.get(op.msg_id, ())), default=float("inf"))


def _acked_at(acks: list[Op]) -> dict[str, float]:
    """A 200 ack ends the message: the earliest such answer, per message."""
    acked_at: dict[str, float] = {}
    for op in acks:
        if op.outcome == OK:
            acked_at[op.msg_id] = min(acked_at.get(op.msg_id, op.end_ms), op.end_ms)
    return acked_at


def _by_subscription(items) -> dict[str | None, list]:
    """Deliveries or calls by the subscription they were made in (None: the default one)."""
    split: dict[str | None, list] = defaultdict(list)
    for item in items:
        split[item.subscription].append(item)
    return split


def _subscription_verdict(runs: list[SubscriptionRun], sends: list[Op],
                          deliveries: list[Delivery], acks: list[Op], nacks: list[Op],
                          occurrences: set[str], ack_timeout_ms: float) -> SubscriptionVerdict:
    """One named subscription's verdicts: ``runs`` are its creations (one per topic that has
    it), ``deliveries``, ``acks`` and ``nacks`` its own; ``occurrences`` every schedule
    occurrence delivered in the run (sent by their schedule, not by a client)."""
    sv = SubscriptionVerdict()
    created = {run.topic: run for run in runs}
    # Accepted after the creation for sure: the send's call started after its 200 answer.
    after = [op for op in sends
             if op.topic in created and op.start_ms > created[op.topic].created_ms]
    # May have been accepted after the creation: not refused, answered after the first call.
    may_hold = {op.msg_id for op in sends if op.outcome != FAIL and op.topic in created
                and op.end_ms >= created[op.topic].created_from_ms} | occurrences
    acked_at = _acked_at(acks)
    first: set[str] = set()
    for d in sorted(deliveries, key=lambda d: d.received_ms):
        if d.topic not in created or d.msg_id not in may_hold:
            sv.unexpected.append(d.msg_id)
        if d.received_ms < d.trigger_ms:
            sv.early.append((d.msg_id, d.received_ms, d.trigger_ms))
        if d.msg_id in acked_at and d.pull_start_ms > acked_at[d.msg_id]:
            sv.again_after_ack.append(d.msg_id)
        if d.msg_id in first:
            sv.redelivered += 1
        first.add(d.msg_id)
    sv.delivered = len(first)
    sv.missing = sorted(op.msg_id for op in after if op.outcome == OK and op.msg_id not in first)
    sv.two_outstanding = _two_outstanding(deliveries, _may_have_acted(acks + nacks),
                                          ack_timeout_ms)
    sv.out_of_order = _out_of_order(after, deliveries, _may_have_acted(acks))
    return sv


def check(history: History, ack_timeout_ms: float,
          promotion_allowance_ms: float = 5000) -> Verdict:
    """``ack_timeout_ms``: the ack timeout of the pulls (the topics' setting);
    ``promotion_allowance_ms``: how late a due occurrence may be promoted in a run (faults
    included), for the schedule verdict."""
    sends, pulls = history.of("send"), history.of("pull")
    acks_in, nacks_in = _by_subscription(history.of("ack")), _by_subscription(history.of("nack"))
    acks = acks_in.get(None, [])
    v = Verdict(sends=_count(sends), acks=_count(history.of("ack")), pulls=_count(pulls))
    sent_ok = {op.msg_id for op in sends if op.outcome == OK}
    with history.lock:
        runs, all_deliveries = list(history.schedules), list(history.deliveries)
        subscription_runs, faults = list(history.subscriptions), list(history.faults)
        pauses = list(history.pauses)
    delivered_in = _by_subscription(all_deliveries)
    deliveries = delivered_in.get(None, [])          # the default subscription's
    v.schedule_missing, v.schedule_off_grid, occurrences = _schedule_verdicts(
        runs, deliveries, promotion_allowance_ms)
    v.occurrences = len(occurrences)
    # Occurrences are sent by their schedule, not by a client: expected, never "unexpected";
    # the named subscriptions receive them too.
    every_occurrence = {d.msg_id for d in all_deliveries for run in runs
                        if d.topic == run.topic and run.fire_time(d.msg_id) is not None}
    attempted = {op.msg_id for op in sends if op.outcome != FAIL} | occurrences
    first: dict[str, float] = {}
    lags, lags_in_fault = [], []
    acked_at = _acked_at(acks)
    for d in sorted(deliveries, key=lambda d: d.received_ms):
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
    v.grouped = len({d.msg_id for d in deliveries if d.group})
    v.two_outstanding = _two_outstanding(
        deliveries, _may_have_acted(acks + nacks_in.get(None, [])), ack_timeout_ms)
    v.out_of_order = _out_of_order(sends, deliveries, _may_have_acted(acks))
    v.pauses = len(pauses)
    # A pause holds the whole topic: every subscription's deliveries are held to it.
    v.delivered_while_paused, v.pulls_in_pause = _delivered_while_paused(all_deliveries, pulls,
                                                                         pauses)
    names = {run.name for run in subscription_runs} | {n for n in delivered_in if n}
    for name in sorted(names):
        v.subscriptions[name] = _subscription_verdict(
            [run for run in subscription_runs if run.name == name], sends,
            delivered_in.get(name, []), acks_in.get(name, []), nacks_in.get(name, []),
            every_occurrence, ack_timeout_ms)
    traced = {*v.lost[:5], *v.unexpected[:5], *(e[0] for e in v.early[:5]),
              *v.again_after_ack[:5], *(e[1] for e in v.delivered_while_paused[:5]),
              *(m for pair in v.two_outstanding[:3] + v.out_of_order[:3] for m in pair[2:4])}
    for sv in v.subscriptions.values():
        traced |= {*sv.missing[:3], *sv.unexpected[:3], *(e[0] for e in sv.early[:3]),
                   *sv.again_after_ack[:3],
                   *(m for pair in sv.two_outstanding[:2] + sv.out_of_order[:2]
                     for m in pair[2:4])}
    for msg_id in traced:
        v.traces[msg_id] = history.trace(msg_id)
    return v
