"""Small inline SVG line charts for the console: no JavaScript library, no build step.

Each chart says its unit on the value axis and "UTC" on the time axis. Each point has a
transparent hover area whose ``<title>`` holds the point's time and every series' value, so
a browser's own tooltip shows them with no script; console.js (served by the console, not
inline: the pages work under ``Content-Security-Policy: default-src 'self'``) also writes
them into the chart's readout line and marks the point. Everything is SVG presentation
attributes, no ``style``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape

WIDTH, HEIGHT = 640, 220
LEFT, RIGHT, TOP, BOTTOM = 72, 12, 12, 44
COLOURS = ("#2563eb", "#dc2626", "#16a34a", "#9333ea")


@dataclass(frozen=True)
class Series:
    name: str
    values: list[float]


def _nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    step = 10 ** len(str(int(value))) / 10 if value >= 1 else 1.0
    for factor in (1, 2, 2.5, 5, 10):
        if value <= step * factor:
            return step * factor
    return value


def number(value: float) -> str:
    """An axis or readout number: ``0.25``, ``12``, ``1,500``, ``25k``."""
    if value >= 10_000:
        return f"{value / 1000:g}k"
    if value >= 100 or float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:.2f}"


def _clock(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%H:%M")


def _moment(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def line_chart(title: str, starts_ms: list[int], series: list[Series], unit: str,
               point_ms: int, fmt: Callable[[float], str] = number,
               last_partial: bool = True) -> str:
    """An SVG of one or more series over the same point starts (ms since the epoch), each
    point ``point_ms`` long; ``unit`` names the value axis ("messages/s"), ``fmt`` writes a
    value (ticks and hover). With ``last_partial`` the last point is marked "so far"."""
    points = len(starts_ms)
    top = _nice_max(max((v for s in series for v in s.values), default=0))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(i: int) -> float:
        return LEFT + (plot_w * i / (points - 1) if points > 1 else 0)

    def y(v: float) -> float:
        return TOP + plot_h * (1 - v / top)

    parts = [f'<svg class="chart" role="img" aria-label="{escape(title)}" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}">',
             f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="#f8fafc" '
             'stroke="#cbd5e1"/>']
    for fraction in (0, 0.5, 1):
        value = top * fraction
        parts.append(f'<text x="{LEFT - 6}" y="{y(value) + 4:.1f}" text-anchor="end" '
                     f'font-size="11">{escape(fmt(value))}</text>')
    middle = TOP + plot_h / 2
    parts.append(f'<text class="axis-unit" x="14" y="{middle:.1f}" text-anchor="middle" '
                 f'font-size="11" transform="rotate(-90 14 {middle:.1f})">{escape(unit)}</text>')
    for i, anchor in ((0, "start"), (points // 2, "middle"), (points - 1, "end")):
        if not points:
            break
        parts.append(f'<text x="{x(i):.1f}" y="{HEIGHT - 26}" text-anchor="{anchor}" '
                     f'font-size="11">{_clock(starts_ms[i])}</text>')
    parts.append(f'<text class="axis-unit" x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 8}" '
                 'text-anchor="middle" font-size="11">time (UTC)</text>')
    for n, s in enumerate(series):
        colour = COLOURS[n % len(COLOURS)]
        coords = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(s.values))
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" '
                     f'points="{coords}"><title>{escape(s.name)}</title></polyline>')
        parts.append(f'<text x="{LEFT + 8 + 120 * n}" y="{TOP + 14}" font-size="12" '
                     f'fill="{colour}">{escape(s.name)}</text>')
    parts.append(f'<line class="marker" x1="{LEFT}" x2="{LEFT}" y1="{TOP}" '
                 f'y2="{TOP + plot_h}" stroke="#64748b" stroke-dasharray="3 3" '
                 'visibility="hidden"/>')
    half = plot_w / (points - 1) / 2 if points > 1 else plot_w / 2
    for i, start in enumerate(starts_ms):
        so_far = " (so far)" if last_partial and i == points - 1 else ""
        values = " · ".join(f"{s.name} {fmt(s.values[i])}" for s in series)
        text = f"{_moment(start)}–{_clock(start + point_ms)} UTC{so_far}: {values}"
        left = max(LEFT, x(i) - half)
        width = min(LEFT + plot_w, x(i) + half) - left
        parts.append(f'<rect class="hit" data-x="{x(i):.1f}" x="{left:.1f}" y="{TOP}" '
                     f'width="{width:.1f}" height="{plot_h}" fill="transparent">'
                     f'<title>{escape(text)}</title></rect>')
    parts.append("</svg>")
    return "".join(parts)
