"""Human-readable rendering for the CLI: tables, ISO times, "in 4m 10s", status names."""

from __future__ import annotations

import json
import re
import time
from datetime import datetime
from typing import Any, Iterable, Sequence
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from delayqueue.client.model import (
    PUSH_SETTINGS,
    TOPIC_SETTINGS,
    DelayMsg,
    MonitorData,
    Schedule,
    SubscriptionConfig,
    SubscriptionInfo,
    TopicConfig,
    TopicInfo,
)
from delayqueue.client.push import PushStatus
from delayqueue.core.status import Status

BODY_WIDTH = 40
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(text: str) -> int:
    """``1500`` (ms), ``500ms``, ``10s``, ``4m``, ``1h30m``, ``2d`` -> milliseconds."""
    text = text.strip().lower()
    if text.lstrip("-").isdigit():
        return int(text)
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a duration: {text!r} (use e.g. 1500, 500ms, 10s, 4m, 1h30m)")
    return int(sum(float(n) * _UNIT_MS[u] for n, u in parts))


def parse_time_ms(text: str) -> int:
    """Epoch milliseconds, or an ISO date-time (local time when it has no offset)."""
    if text.strip().isdigit():
        return int(text)
    try:
        return int(datetime.fromisoformat(text.strip()).timestamp() * 1000)
    except ValueError:
        raise ValueError(f"not a time: {text!r} (use epoch ms or ISO, e.g. "
                         "2030-01-31T12:00:00+00:00)") from None


def span(ms: int) -> str:
    """``250000`` -> ``4m 10s``; two units at most."""
    ms = abs(int(ms))
    if ms < 1000:
        return f"{ms}ms"
    seconds = (ms + 500) // 1000
    units = [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)]
    parts: list[tuple[int, str]] = []
    for name, size in units:
        if seconds >= size or parts:
            parts.append((seconds // size, name))
            seconds %= size
    shown = [f"{n}{u}" for n, u in parts[:2] if n or (u == parts[0][1])]
    return " ".join(shown)


def relative(at_ms: int, now_ms: int | None = None) -> str:
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    delta = at_ms - now_ms
    if abs(delta) < 1000:
        return "now"
    return f"in {span(delta)}" if delta > 0 else f"{span(delta)} ago"


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000).astimezone().isoformat(timespec="seconds")


def zoned_iso(ms: int, zone: str | None) -> str:
    """The time in the time zone ``zone`` (a cron schedule's: its fire times read as its
    cron reads them), else in local time as ``iso``; a zone this machine does not know
    falls back to local time."""
    if zone:
        try:
            return datetime.fromtimestamp(ms / 1000, ZoneInfo(zone)).isoformat(
                timespec="seconds")
        except (ZoneInfoNotFoundError, ValueError):
            pass
    return iso(ms)


def status_label(status: Status | int) -> str:
    status = Status(int(status))
    return f"{status.name.lower().replace('_', ' ')} ({int(status)})"


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    cells = [list(map(str, headers))] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def short(body: str, width: int = BODY_WIDTH) -> str:
    body = body.replace("\n", "\\n")
    return body if len(body) <= width else body[: width - 1] + "…"


def attributes_text(attributes: Any) -> str:
    """``{"a": "1", "b": "x y"}`` -> ``a=1 b=x y``, in one line."""
    return " ".join(f"{k}={v}" for k, v in (attributes or {}).items()).replace("\n", "\\n")


def message_table(messages: Sequence[DelayMsg]) -> str:
    """The messages, one a row; GROUP, RECEIPT, ACK DEADLINE (listMsg of consuming messages)
    and ATTRIBUTES columns only when any has them."""
    if not messages:
        return "(no messages)"
    now = int(time.time() * 1000)
    groups = any(m.group_id for m in messages)
    receipts = any(m.receipt for m in messages)
    deadlines = any(m.ack_deadline is not None for m in messages)
    attributes = any(m.attributes for m in messages)
    headers = ["MSG ID"] + ["GROUP"] * groups + ["STATUS", "TRIGGER", "DUE", "RETRY"]
    headers += ["RECEIPT"] * receipts + ["ACK DEADLINE"] * deadlines
    headers += ["ATTRIBUTES"] * attributes + ["BODY"]
    rows = []
    for m in messages:
        row = [m.msg_id] + [m.group_id or ""] * groups
        row += [status_label(m.status), iso(m.trigger_time), relative(m.trigger_time, now),
                f"{m.retry}/{m.max_retry}"]
        row += [m.receipt or ""] * receipts
        row += [relative(m.ack_deadline, now) if m.ack_deadline is not None else ""] * deadlines
        row += [short(attributes_text(m.attributes))] * attributes
        rows.append(row + [short(m.msg)])
    return table(headers, rows)


def dead_table(messages: Sequence[DelayMsg]) -> str:
    """Dead letters, oldest death first: when each died, its deliveries and body."""
    if not messages:
        return "(no dead letters)"
    now = int(time.time() * 1000)
    groups = any(m.group_id for m in messages)
    attributes = any(m.attributes for m in messages)
    headers = ["MSG ID"] + ["GROUP"] * groups + ["DIED", "AGO", "RETRY", "TRIGGER"]
    headers += ["ATTRIBUTES"] * attributes
    rows = []
    for m in messages:
        died = m.dead_time if m.dead_time is not None else m.expire_time
        row = [m.msg_id] + [m.group_id or ""] * groups
        row += [iso(died), relative(died, now), f"{m.retry}/{m.max_retry}", iso(m.trigger_time)]
        row += [short(attributes_text(m.attributes))] * attributes
        rows.append(row + [short(m.msg)])
    return table(headers + ["BODY"], rows)


def setting_value(name: str, value: Any) -> str:
    """A topic setting for people: durations also as ``1h``, booleans as on/off."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False) if not value or "\n" in value or \
            "\t" in value else value
    if isinstance(value, bool):
        return "on" if value else "off"
    if name.endswith("_ms"):
        return f"{value} ({span(int(value))})"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def topic_config_table(config: TopicConfig) -> str:
    """SETTING (the API's name), VALUE, SOURCE (topic or server) of every setting."""
    return table(["SETTING", "VALUE", "SOURCE"],
                 [[api, setting_value(name, getattr(config, name)),
                   config.sources.get(name, "")]
                  for name, api in TOPIC_SETTINGS.items()])


def subscription_config_table(config: SubscriptionConfig) -> str:
    """SETTING, VALUE, SOURCE (subscription, topic or server) of every setting the server
    reports for a subscription, then its push settings when the server has push delivery
    (pushSecret only as set or not: the server never answers it)."""
    rows = [[api, setting_value(name, getattr(config, name)), config.sources.get(name, "")]
            for name, api in TOPIC_SETTINGS.items()
            if name in config.sources or getattr(config, name) is not None]
    if "pushSecretSet" in config.raw.get("data", {}):
        for name, api in PUSH_SETTINGS.items():
            if name == "push_secret":
                rows.append([api, "set" if config.push_secret_set else "-",
                             "subscription" if config.push_secret_set else ""])
            else:
                rows.append([api, setting_value(name, getattr(config, name)),
                             config.sources.get(name, "")])
    return table(["SETTING", "VALUE", "SOURCE"], rows)


def subscriptions_table(infos: Sequence[SubscriptionInfo]) -> str:
    """A topic's subscriptions, the default first, with their queue sizes; GROUP BLOCKED and
    PAUSED columns only when some subscription has such messages or is paused."""
    if not infos:
        return "(no subscriptions)"
    blocked = any(i.group_blocked_size for i in infos)
    paused = any(i.paused for i in infos)
    pushed = any(i.push_url for i in infos)
    return table(["SUBSCRIPTION", "CREATED", "WAITING", "READY", "CONSUMING", "DEAD"]
                 + ["GROUP BLOCKED"] * blocked + ["PAUSED"] * paused + ["PUSH URL"] * pushed,
                 [[i.subscription, iso(i.created_time) if i.created_time else "-",
                   i.waiting_queue_size, i.ready_queue_size, i.ack_queue_size,
                   i.dead_queue_size]
                  + [i.group_blocked_size] * blocked + ["yes" if i.paused else ""] * paused
                  + [i.push_url or ""] * pushed
                  for i in infos])


def subscription_detail(topic: str, info: SubscriptionInfo) -> str:
    """One subscription, a field a line."""
    rows = [("topic", topic), ("subscription", info.subscription)]
    if info.created_time:
        rows.append(("createdTime", f"{iso(info.created_time)}  "
                                    f"({relative(info.created_time)})"))
    rows += [("waiting", str(info.waiting_queue_size)), ("ready", str(info.ready_queue_size)),
             ("consuming", str(info.ack_queue_size)), ("dead", str(info.dead_queue_size))]
    if info.group_blocked_size:
        rows.append(("blocked", f"{info.group_blocked_size}  (due, behind their group's head)"))
    rows.append(("paused", "yes" if info.paused else "no"))
    if info.push_url:
        rows.append(("pushUrl", info.push_url))
    return "\n".join(f"{k:<13} {v}" for k, v in rows)


def push_status_text(status: PushStatus) -> str:
    """A subscription's push delivery, a field a line (never the secret: whether deliveries
    are signed), then its last failed pushes as a table, newest first."""
    rows = [("topic", status.topic), ("subscription", status.subscription),
            ("pushUrl", status.push_url or "- (not pushed: consumers pull it)")]
    if status.is_push:
        rows += [("timeout", setting_value("push_timeout_ms", status.push_timeout_ms)),
                 ("concurrency", str(status.push_concurrency)),
                 ("signed", "yes" if status.push_secret_set else "no"),
                 ("paused", "yes" if status.paused else "no"),
                 ("inFlight", str(status.in_flight))]
    lines = [f"{k:<13} {v}" for k, v in rows]
    if not status.last_errors:
        return "\n".join(lines + ["", "(no failed pushes)"])
    now = int(time.time() * 1000)
    return "\n".join(lines + ["", table(
        ["TIME", "AGO", "MSG ID", "OUTCOME", "STATUS", "MILLIS", "ERROR"],
        [[iso(e.time), relative(e.time, now), e.msg_id, e.outcome,
          "-" if e.status is None else e.status,
          "-" if e.millis is None else f"{e.millis:g}", short(e.error or "-", 60)]
         for e in status.last_errors])])


def subscription_states(subscriptions: Any) -> str:
    """getMsg's ``subscriptions`` ({name: {"status", "retry"}}) in one line:
    ``audit: ready (retry 0), billing: acked (retry 1)``."""
    return ", ".join(f"{name}: {status_label(int(state.get('status', 0)))} "
                     f"(retry {state.get('retry', 0)})"
                     for name, state in subscriptions.items())


def message_detail(m: DelayMsg) -> str:
    now = int(time.time() * 1000)
    rows = [
        ("topic", m.topic), ("msgId", m.msg_id),
        *([("groupId", m.group_id)] if m.group_id else []),
        ("status", status_label(m.status)),
        ("produceTime", f"{iso(m.produce_time)}  ({relative(m.produce_time, now)})"),
        ("triggerTime", f"{iso(m.trigger_time)}  ({relative(m.trigger_time, now)})"),
        ("expireTime", f"{iso(m.expire_time)}  ({relative(m.expire_time, now)})"),
        ("retry", f"{m.retry} delivered of at most {m.max_retry + 1} (maxRetry {m.max_retry})"),
    ]
    if m.dead_time is not None:
        rows.append(("deadTime", f"{iso(m.dead_time)}  ({relative(m.dead_time, now)})"))
    if m.receipt:
        rows.append(("receipt", m.receipt))
    if m.ack_deadline is not None:
        rows.append(("ackDeadline", f"{iso(m.ack_deadline)}  ({relative(m.ack_deadline, now)})"))
    if m.attributes:
        rows.append(("attributes", json.dumps(dict(m.attributes), ensure_ascii=False)))
    if m.subscriptions:
        rows.append(("subscriptions", subscription_states(m.subscriptions)))
    if m.duplicate:
        rows.append(("duplicate", "yes: a message with this msgId answered (live, or ended "
                                  "within the dedup window), nothing was enqueued"))
    if m.replaced:
        rows.append(("replaced", "yes: the waiting or ready message began again with these "
                                 "values"))
    rows.append(("msg", m.msg))
    width = max(12, *(len(k) for k, _ in rows))   # "subscriptions" is the one longer name
    return "\n".join(f"{k:<{width}} {v}" for k, v in rows)


def schedule_state(s: Schedule) -> str:
    """``paused``, ``finished`` (no fire time left: its end or limit reached) or ``active``."""
    if s.paused:
        return "paused"
    return "active" if s.next_fire_time is not None else "finished"


def schedule_table(schedules: Sequence[Schedule], with_topic: bool = True) -> str:
    """Schedules, one a row: the rule, the next fire time (a date, in the schedule's zone for
    a cron) and how far off, the counts, the state; TOPIC when they span topics."""
    if not schedules:
        return "(no schedules)"
    now = int(time.time() * 1000)
    headers = ["TOPIC"] * with_topic + ["SCHEDULE ID", "RULE", "NEXT FIRE", "IN", "SENT",
                                        "MISSED", "STATE"]
    rows = []
    for s in schedules:
        nxt = s.next_fire_time
        zone = s.timezone if s.cron else None
        rows.append([s.topic] * with_topic + [
            s.schedule_id, s.recurrence, zoned_iso(nxt, zone) if nxt is not None else "-",
            relative(nxt, now) if nxt is not None else "-", s.sent_count, s.missed_count,
            schedule_state(s)])
    return table(headers, rows)


def schedule_detail(s: Schedule) -> str:
    """One schedule, a field a line; its next fire times as dates (in its zone for a cron),
    each with how far off."""
    now = int(time.time() * 1000)
    zone = s.timezone if s.cron else None

    def when(ms: int | None) -> str:
        return "-" if ms is None else f"{zoned_iso(ms, zone)}  ({relative(ms, now)})"

    rows: list[tuple[str, str]] = [("topic", s.topic), ("scheduleId", s.schedule_id)]
    if s.cron:
        rows += [("cron", s.cron), ("timezone", s.timezone or "UTC")]
    else:
        rows.append(("everyMillis", f"{s.every_ms} ({span(s.every_ms or 0)})"))
    rows.append(("state", schedule_state(s)))
    if s.start_time is not None:
        rows.append(("startTime", when(s.start_time)))
    if s.end_time is not None:
        rows.append(("endTime", when(s.end_time)))
    if s.limit is not None:
        rows.append(("limit", f"{s.limit} occurrences"))
    rows.append(("misfire", s.misfire))
    if s.group_id:
        rows.append(("groupId", s.group_id))
    rows.append(("ttlMillis", setting_value("ttl_ms", s.ttl_ms) if s.ttl_ms is not None
                 else "the topic's"))
    rows.append(("maxRetry", str(s.max_retry) if s.max_retry is not None else "the topic's"))
    if s.attributes:
        rows.append(("attributes", json.dumps(dict(s.attributes), ensure_ascii=False)))
    if s.created_time is not None:
        rows.append(("createdTime", when(s.created_time)))
    rows += [("sent", str(s.sent_count)), ("missed", str(s.missed_count))]
    if s.last_fire_time is not None:
        rows.append(("lastFireTime", when(s.last_fire_time)))
    rows.append(("nextFireTime", when(s.next_fire_time)))
    rows.append(("msg", s.msg))
    lines = [f"{k:<13} {v}" for k, v in rows]
    if s.next_fire_times:
        lines += ["", "next fire times"]
        lines += [f"  {zoned_iso(t, zone)}  ({relative(t, now)})" for t in s.next_fire_times]
    return "\n".join(lines)


def topics_table(infos: Sequence[TopicInfo]) -> str:
    """Queue sizes per topic, dead letters always among them (an operator's first look: a
    column that came and went would hide that there are none); "-" where the server does not
    count them (camellia's). A GROUP BLOCKED column only when some topic has messages blocked
    behind their group's head, a PAUSED column only when some topic is paused."""
    if not infos:
        return "(no topics)"
    blocked = any(t.group_blocked_size for t in infos)
    paused = any(t.paused for t in infos)
    return table(["TOPIC", "WAITING", "READY", "CONSUMING", "DEAD"]
                 + ["GROUP BLOCKED"] * blocked + ["PAUSED"] * paused,
                 [[t.topic, t.waiting_queue_size, t.ready_queue_size, t.ack_queue_size,
                   t.dead_queue_size if "deadQueueSize" in t.raw else "-"]
                  + [t.group_blocked_size] * blocked
                  + ["yes" if t.paused else ""] * paused
                  for t in infos])


def topic_detail(info: TopicInfo) -> str:
    lines = [f"topic      {info.topic}", f"waiting    {info.waiting_queue_size}",
             f"ready      {info.ready_queue_size}", f"consuming  {info.ack_queue_size}"]
    if "groupBlockedSize" in info.raw:
        lines.append(f"blocked    {info.group_blocked_size}  (due, behind their group's head)")
    if "deadQueueSize" in info.raw:
        lines.append(f"dead       {info.dead_queue_size}")
    if "paused" in info.raw:
        lines.append("paused     " + ("yes  (nothing is handed out until topic resume)"
                                      if info.paused else "no"))
    if info.waiting_buckets:
        lines += ["", table(["DUE IN", "WAITING"],
                            [[_bucket_name(k), v] for k, v in info.waiting_buckets.items()])]
    if len(info.subscriptions) > 1:  # named ones besides the default (whose sizes are above)
        lines += ["", subscriptions_table(info.subscriptions)]
    return "\n".join(lines)


def _bucket_name(key: str) -> str:
    """``sizeOf1minTo10min`` -> ``1min – 10min``."""
    match = re.fullmatch(r"sizeOf(\w+?)To(\w+)", key)
    return f"{match.group(1)} – {match.group(2)}" if match else key


def monitor_text(data: MonitorData) -> str:
    out = []
    if data.request_stats:
        keys = [k for k in data.request_stats[0] if k != "topic"]
        out.append(table(["TOPIC", *keys], [[r.get("topic"), *(r.get(k, "") for k in keys)]
                                            for r in data.request_stats]))
    for title, rows in (("pull delay after trigger (ms)", data.pull_msg_time_gap_stats),
                        ("ready delay after trigger (ms)", data.ready_queue_time_gap_stats)):
        if rows:
            keys = [k for k in rows[0] if k != "topic"]
            out.append(title + "\n" + table(["TOPIC", *keys],
                                            [[r.get("topic"), *(r.get(k, "") for k in keys)]
                                             for r in rows]))
    return "\n\n".join(out) or "(no requests in the last monitoring interval)"
