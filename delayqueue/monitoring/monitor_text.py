"""getMonitorString: camellia's text view of the monitor data, as aligned plain-text tables.

The same figures as getMonitorData (the last complete interval, fleet-wide) and
getTopicInfoList (sizes now), for a terminal or a monitoring agent that greps text.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

REQUEST_COLUMNS = ("sendMsg", "pullMsg", "ackMsg", "deleteMsg", "getMsg", "triggerMsgReady",
                   "triggerMsgEndLife", "triggerMsgTimeout")
GAP_COLUMNS = ("count", "avg", "max", "p50", "p99")
PUSH_COLUMNS = (("2xx", "push2xx"), ("3xx", "push3xx"), ("4xx", "push4xx"), ("5xx", "push5xx"),
                ("timeout", "pushTimeout"), ("connection", "pushConnectionError"),
                ("refused", "pushRefused"))
SIZE_COLUMNS = (("waiting", "waitingQueueSize"), ("ready", "readyQueueSize"),
                ("consuming", "ackQueueSize"), ("dead", "deadQueueSize"))


def _cell(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def table(title: str, header: list[str], rows: list[list[Any]]) -> list[str]:
    cells = [header, *([_cell(v) for v in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = [f"== {title} =="]
    for row in cells:
        lines.append("  ".join(text.ljust(w) if i == 0 else text.rjust(w)
                               for i, (text, w) in enumerate(zip(row, widths))).rstrip())
    if not rows:
        lines.append("(none)")
    return lines


def monitor_string(data: dict, infos: list[dict], namespace: str, interval_start_ms: int,
                   interval_s: int) -> str:
    start = datetime.fromtimestamp(interval_start_ms / 1000, tz=UTC).isoformat(
        timespec="seconds").replace("+00:00", "Z")
    lines = [f"delayqueue monitor, namespace {namespace}: interval {start} + {interval_s}s, "
             "every node", ""]
    lines += table("request stats", ["topic", *REQUEST_COLUMNS],
                   [[s["topic"], *(s[c] for c in REQUEST_COLUMNS)]
                    for s in data["requestStatsList"]])
    for title, name in (("pullMsg time gap (ms)", "pullMsgTimeGapStatsList"),
                        ("readyQueue time gap (ms)", "readyQueueTimeGapStatsList")):
        lines.append("")
        lines += table(title, ["topic", *GAP_COLUMNS],
                       [[s["topic"], *(s[c] for c in GAP_COLUMNS)] for s in data[name]])
    lines.append("")
    lines += table("push delivery (ms: POST latency)",
                   ["topic", "subscription", *(label for label, _ in PUSH_COLUMNS), "p50",
                    "p99", "max"],
                   [[s["topic"], s["subscription"], *(s[key] for _, key in PUSH_COLUMNS),
                     *(s["pushMillis"][c] for c in ("p50", "p99", "max"))]
                    for s in data.get("pushStatsList") or ()])
    lines.append("")
    lines += table("topics now", ["topic", *(label for label, _ in SIZE_COLUMNS)],
                   [[i["topic"], *(i[key] for _, key in SIZE_COLUMNS)] for i in infos])
    return "\n".join(lines) + "\n"
