"""Small inline SVG line charts for the console: no JavaScript library, no build step."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape

WIDTH, HEIGHT = 640, 200
LEFT, RIGHT, TOP, BOTTOM = 56, 12, 12, 28
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


def _label(value: float) -> str:
    return f"{value:g}" if value < 10_000 else f"{value / 1000:g}k"


def line_chart(title: str, starts_ms: list[int], series: list[Series], unit: str = "") -> str:
    """An SVG of one or more series over the same interval starts (ms since the epoch)."""
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
                     f'font-size="11">{_label(value)}{escape(unit)}</text>')
    for i, anchor in ((0, "start"), (points // 2, "middle"), (points - 1, "end")):
        if not points:
            break
        moment = datetime.fromtimestamp(starts_ms[i] / 1000, tz=UTC).strftime("%H:%M")
        parts.append(f'<text x="{x(i):.1f}" y="{HEIGHT - 8}" text-anchor="{anchor}" '
                     f'font-size="11">{moment}</text>')
    for n, s in enumerate(series):
        colour = COLOURS[n % len(COLOURS)]
        coords = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(s.values))
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" '
                     f'points="{coords}"><title>{escape(s.name)}</title></polyline>')
        parts.append(f'<text x="{LEFT + 8 + 120 * n}" y="{TOP + 14}" font-size="12" '
                     f'fill="{colour}">{escape(s.name)}</text>')
    parts.append("</svg>")
    return "".join(parts)
