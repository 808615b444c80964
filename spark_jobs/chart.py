"""The report's charts: line charts of the collected series, drawn with matplotlib as PNGs."""

from __future__ import annotations

import base64
import io
import math
from dataclasses import dataclass
from datetime import datetime, timedelta

GRAIN_MS = {"minute": 60_000, "hour": 3_600_000, "day": 86_400_000}
"""The length of one point of each grain the page charts by."""
MARKED_POINTS = 60
"""A series of at most this many points is drawn with a marker on each; a longer one marks
only its isolated points (no neighbour drawn), which a line alone would not show."""


@dataclass(frozen=True)
class Chart:
    """One chart: its PNG (base64), the x range drawn and the data's, and the plot area in
    the image's pixels (left, top, right, bottom), so a check can look inside it."""

    png: str
    x_from: datetime | None
    x_to: datetime | None
    first: datetime | None
    last: datetime | None
    box: tuple[int, int, int, int]
    points: int


def _num(value) -> float:
    return float("nan") if value is None else float(value)


def _isolated(ys: list[float]) -> list[bool]:
    def drawn(i: int) -> bool:
        return 0 <= i < len(ys) and not math.isnan(ys[i])

    return [drawn(i) and not drawn(i - 1) and not drawn(i + 1) for i in range(len(ys))]


def line_chart(
    title: str,
    series: dict[str, tuple[list, list]],
    ylabel: str,
    log: bool = False,
    grain: str = "hour",
) -> Chart:
    """One line chart. The x axis spans the data (a single time is given one ``grain`` of
    room, centred), never matplotlib's default years around one point; short series carry a
    marker on every point and long ones on their isolated points, so a single point shows;
    the legend sits right of the plot, where it cannot hide data."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 3.2), dpi=90, layout="constrained")
    times = [x for xs, _ in series.values() for x in xs]
    points = 0
    for index, (label, (xs, ys)) in enumerate(series.items()):
        values = [_num(y) for y in ys]
        color = f"C{index % 10}"
        drawn = sum(not math.isnan(v) for v in values)
        points += drawn
        every = drawn <= MARKED_POINTS
        ax.plot(
            xs,
            values,
            label=label,
            linewidth=1.3,
            color=color,
            marker="o" if every else None,
            markersize=3.5,
        )
        if not every:
            lone = _isolated(values)
            ax.plot(
                [x for x, keep in zip(xs, lone) if keep],
                [v for v, keep in zip(values, lone) if keep],
                linestyle="none",
                marker="o",
                markersize=3.5,
                color=color,
            )
    first, last = (min(times), max(times)) if times else (None, None)
    x_from, x_to = first, last
    if first is not None and first == last:
        half = timedelta(milliseconds=GRAIN_MS[grain] / 2)
        x_from, x_to = first - half, last + half
    if x_from is not None:
        ax.set_xlim(x_from, x_to)
        locator = mdates.AutoDateLocator(minticks=3, maxticks=10)
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    ax.set_title(title, fontsize=11, loc="left")
    ax.set_ylabel(ylabel)
    if log and any(
        not math.isnan(_num(y)) and _num(y) > 0 for _, ys in series.values() for y in ys
    ):
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    if series:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    # The plot area in the saved image's pixels (matplotlib's origin is the bottom left).
    extent = ax.get_window_extent()
    height = fig.get_size_inches()[1] * fig.dpi
    box = (
        math.ceil(extent.x0),
        math.ceil(height - extent.y1),
        math.floor(extent.x1),
        math.floor(height - extent.y0),
    )
    plt.close(fig)
    png = base64.b64encode(buffer.getvalue()).decode("ascii")
    return Chart(png, x_from, x_to, first, last, box, points)


def _by(rows: list[dict], key: str) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(row[key], []).append(row)
    return groups


def charts(data: dict) -> list[tuple[str, Chart]]:
    """The page's charts (title, ``Chart``): throughput, lag and backlog of the charted
    namespaces, then of the top topics (``report_html.collect_report_data``'s series)."""
    grain = data.get("grain", "hour")

    def draw(*args, **kwargs) -> Chart:
        return line_chart(*args, grain=grain, **kwargs)

    charts = []
    for ns, rows in _by(data["namespace_series"], "namespace").items():
        t = [r["time"] for r in rows]
        col = lambda name: [r[name] for r in rows]  # noqa: E731
        charts.append(
            (
                f"Throughput — namespace {ns}",
                draw(
                    f"Throughput per second — namespace {ns}",
                    # a recurring schedule's occurrences arrive beside the sends (not in them)
                    {
                        label: (t, col(f"{k}_per_s"))
                        for label, k in (
                            ("sent", "sent"),
                            ("scheduled", "schedule_sent"),
                            ("delivered", "delivered"),
                            ("acked", "acked"),
                        )
                    },
                    "messages/s",
                ),
            )
        )
        charts.append(
            (
                f"Lag percentiles — namespace {ns}",
                draw(
                    f"Lag percentiles — namespace {ns}",
                    {
                        "delivery p50": (t, col("delivery_lag_p50_ms")),
                        "delivery p90": (t, col("delivery_lag_p90_ms")),
                        "delivery p99": (t, col("delivery_lag_p99_ms")),
                        "scheduling p99": (t, col("scheduling_lag_p99_ms")),
                    },
                    "ms",
                    log=True,
                ),
            )
        )
        charts.append(
            (
                f"Backlog — namespace {ns}",
                draw(
                    f"Backlog (average queue size) — namespace {ns}",
                    {
                        k.replace("_", " "): (t, col(f"{k}_size_avg"))
                        for k in ("waiting", "ready", "consuming", "group_blocked")
                    },
                    "messages",
                ),
            )
        )
    topics = {f"{r['namespace']}/{r['topic']}": r for r in data["topic_series"]}
    grouped: dict[str, list[dict]] = {}
    for row in data["topic_series"]:
        grouped.setdefault(f"{row['namespace']}/{row['topic']}", []).append(row)
    if topics:

        def per_topic(name: str) -> dict:
            return {
                key: ([r["time"] for r in rows], [r[name] for r in rows])
                for key, rows in grouped.items()
            }

        charts.append(
            (
                "Top topics — delivered per second",
                draw(
                    "Top topics — delivered per second", per_topic("delivered_per_s"), "messages/s"
                ),
            )
        )
        charts.append(
            (
                "Top topics — p99 delivery lag",
                draw(
                    "Top topics — p99 delivery lag",
                    per_topic("delivery_lag_p99_ms"),
                    "ms",
                    log=True,
                ),
            )
        )
        charts.append(
            (
                "Top topics — ready backlog",
                draw(
                    "Top topics — ready queue (average size)",
                    per_topic("ready_size_avg"),
                    "messages",
                ),
            )
        )
    return charts
