"""How the console's templates write times, durations, counts, rates and message bodies.

Times are ms since the epoch everywhere in the API; a page shows them relative to the page's
``now`` ("in 4 min 10 s", "12 s ago"), which is what an operator reads first, with the exact
UTC moment beside them or in the element's title. Durations (lags, uptimes) read the same
way ("120 ms", "41 s", "2 h 5 min"), counts as whole numbers with thousands separators.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

PREVIEW_CHARS = 80           # a message body's preview in a list: its first characters
UNITS = (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000))


def when(ms: int | None) -> str:
    """The UTC moment to the millisecond: ``2025-11-22 08:00:05.250Z``."""
    if ms is None:
        return ""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def zoned(ms: int | None, zone: str | None) -> str:
    """The moment as a wall clock in the time zone ``zone`` reads it, with its offset:
    ``2026-11-28 02:30:00 +01:00`` (a cron schedule's fire times, read as its cron reads
    them); without a zone, or one this machine does not know, ``when``'s UTC."""
    if ms is None:
        return ""
    if zone:
        try:
            at = datetime.fromtimestamp(ms / 1000, tz=ZoneInfo(zone))
        except (ZoneInfoNotFoundError, ValueError):
            return when(ms)
        return at.strftime("%Y-%m-%d %H:%M:%S ") + at.isoformat()[-6:]
    return when(ms)


def iso(ms: int | None) -> str:
    """ISO 8601 in UTC (a ``<time datetime>`` and its title): ``2025-11-22T08:00:05.250Z``."""
    return when(ms).replace(" ", "T")


def ago(ms: int | None, now_ms: int) -> str:
    """``ms`` relative to ``now_ms`` in its two largest units: "in 4 min 10 s", "3 h ago";
    "now" within a second."""
    if ms is None:
        return ""
    delta = ms - now_ms
    left = abs(delta)
    if left < 1000:
        return "now"
    text = _two_units(left)             # "2 h 5 s" reads as more exact than it is: "2 h"
    return f"in {text}" if delta > 0 else f"{text} ago"


def _two_units(ms: int) -> str:
    """``ms`` (at least a second) in its two largest units, the second left out when 0:
    "41 s", "3 min", "3 min 5 s", "2 h 5 min"."""
    parts = []
    for unit, size in UNITS:
        if ms >= size and len(parts) < 2:
            parts.append(f"{ms // size} {unit}")
            ms %= size
        elif parts:
            break
    return " ".join(parts)


def duration(ms: float | None) -> str:
    """A length of time: "120 ms" under a second ("0.5 ms" under ten), "4.2 s" or "6 s"
    under ten, then "41 s", "3 min", "2 h 5 min"."""
    if ms is None:
        return ""
    if ms < 10 and not float(ms).is_integer():
        return f"{ms:.1f} ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 10_000:
        return f"{ms / 1000:g} s" if ms % 1000 == 0 else f"{ms / 1000:.1f} s"
    return _two_units(int(ms))


def count(value: float | None) -> str:
    """A count as a whole number: ``41,156``."""
    return "" if value is None else f"{int(value):,}"


def rate(value: float) -> str:
    """Messages a second: two decimals below 100, then whole."""
    return f"{value:.2f}" if value < 100 else f"{value:,.0f}"


def preview(text: str | None, chars: int = PREVIEW_CHARS) -> str:
    """The start of a body on one line: control characters (newlines too) as spaces, cut at
    ``chars`` with an ellipsis. The template escapes it."""
    if not text:
        return ""
    head = "".join(" " if ord(c) < 32 or ord(c) == 127 else c for c in text[:chars])
    return head + "…" if len(text) > chars else head
