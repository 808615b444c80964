"""The report's charts: line charts of the collected series, drawn with matplotlib as PNGs."""

from __future__ import annotations

import base64
import io
import math


def _num(value) -> float:
    return float("nan") if value is None else float(value)


def line_chart(
    title: str, series: dict[str, tuple[list, list]], ylabel: str, log: bool = False
) -> str:
    """One line chart as a base64 PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 3.2), dpi=90)
    for label, (xs, ys) in series.items():
        ax.plot(xs, [_num(y) for y in ys], label=label, linewidth=1.3)
    ax.set_title(title, fontsize=11, loc="left")
    ax.set_ylabel(ylabel)
    if log and any(
        not math.isnan(_num(y)) and _num(y) > 0 for _, ys in series.values() for y in ys
    ):
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    if series:
        ax.legend(fontsize=8, loc="upper left", ncol=min(len(series), 5))
    fig.autofmt_xdate()
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _by(rows: list[dict], key: str) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(row[key], []).append(row)
    return groups


def charts(data: dict) -> list[tuple[str, str]]:
    """The page's charts (title, base64 PNG): throughput, lag and backlog of the charted
    namespaces, then of the top topics (``report_html.collect_report_data``'s series)."""
    charts = []
    for ns, rows in _by(data["namespace_series"], "namespace").items():
        t = [r["time"] for r in rows]
        col = lambda name: [r[name] for r in rows]  # noqa: E731
        charts.append(
            (
                f"Throughput — namespace {ns}",
                line_chart(
                    f"Throughput per second — namespace {ns}",
                    {k: (t, col(f"{k}_per_s")) for k in ("sent", "delivered", "acked")},
                    "messages/s",
                ),
            )
        )
        charts.append(
            (
                f"Lag percentiles — namespace {ns}",
                line_chart(
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
                line_chart(
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
                line_chart(
                    "Top topics — delivered per second", per_topic("delivered_per_s"), "messages/s"
                ),
            )
        )
        charts.append(
            (
                "Top topics — p99 delivery lag",
                line_chart(
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
                line_chart(
                    "Top topics — ready queue (average size)",
                    per_topic("ready_size_avg"),
                    "messages",
                ),
            )
        )
    return charts
