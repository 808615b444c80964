"""report.html: one self-contained page (charts embedded as PNG data URIs).

Everything drawn here comes from the small aggregate tables (namespace and top-topic series,
totals, findings), collected with explicit limits; raw rows never reach the driver.
Every figure cell carries its unrounded value in ``data-value`` so the page can be checked
against the tables. A small script sets ``data-charts="ok"`` on <body> once every chart image
has loaded (``"failed"`` otherwise), which a headless browser check reads.
"""

from __future__ import annotations

import html
import math
from datetime import datetime, timedelta, timezone

from spark_jobs import chart
from spark_jobs.snapshot import DEFAULT_SUBSCRIPTION

MAX_TOPIC_ROWS = 50
MAX_HOURLY_DAYS = 31
MINUTE_SPAN_MS = 6 * 3_600_000
"""Inputs spanning at most this long (a first day, a server that ran a few hours) are charted
by minute: by hour they would be a handful of points, or one."""
CHART_NAMESPACES = 3

NAMESPACE_COLUMNS = (
    ("namespace", "Namespace"),
    ("topics", "Topics"),
    ("sent", "Sent"),
    ("delivered", "Delivered"),
    ("acked", "Acked"),
    ("nacked", "Nacked"),
    ("timed_out", "Timed out"),
    ("ended", "Ended"),
    ("dead_lettered", "Dead-lettered"),
    ("redriven", "Redriven"),
    ("purged", "Purged"),
    ("backlog_refused", "Refused (backlog)"),
    ("replaced", "Replaced"),
    ("deduplicated", "Deduplicated"),
    ("schedule_sent", "Scheduled"),
    ("schedule_missed", "Missed fire times"),
    ("sent_per_s", "Sent/s"),
    ("delivered_per_s", "Delivered/s"),
    ("ack_ratio", "Ack ratio"),
    ("redelivery_ratio", "Redelivery ratio"),
    ("delivery_lag_mean_ms", "Lag mean ms"),
    ("delivery_lag_p50_ms", "Lag p50 ms"),
    ("delivery_lag_p90_ms", "Lag p90 ms"),
    ("delivery_lag_p99_ms", "Lag p99 ms"),
    ("delivery_lag_max", "Lag max ms"),
    ("scheduling_lag_p99_ms", "Sched. p99 ms"),
    ("waiting_size_last", "Waiting"),
    ("ready_size_last", "Ready"),
    ("consuming_size_last", "Consuming"),
    ("group_blocked_size_last", "Group-blocked"),
    # a topic's 1 / 0; a namespace's paused topics (both at the last interval)
    ("paused_last", "Paused"),
)
TOPIC_COLUMNS = (("topic", "Topic"),) + tuple(
    c for c in NAMESPACE_COLUMNS if c[0] not in ("namespace", "topics")
)
DAY_COLUMNS = (("date", "Date"),) + NAMESPACE_COLUMNS
# A named subscription's row: its consumers' figures (sends are its topic's).
SUBSCRIPTION_COLUMNS = (
    ("namespace", "Namespace"),
    ("topic", "Topic"),
    ("subscription", "Subscription"),
) + tuple(
    c
    for c in NAMESPACE_COLUMNS
    if c[0]
    in (
        "delivered",
        "acked",
        "nacked",
        "timed_out",
        "ended",
        "dead_lettered",
        "redriven",
        "purged",
        "delivered_per_s",
        "ack_ratio",
        "redelivery_ratio",
        "delivery_lag_p50_ms",
        "delivery_lag_p99_ms",
        "delivery_lag_max",
        "scheduling_lag_p99_ms",
        "ready_size_last",
        "consuming_size_last",
        "group_blocked_size_last",
        "paused_last",
    )
)
# Push delivery per (topic, subscription) that pushed: the POSTs answered, the share acked
# (2xx), each failure class, and the POSTs' latency.
PUSH_COLUMNS = (
    ("namespace", "Namespace"),
    ("topic", "Topic"),
    ("subscription", "Subscription"),
    ("pushes", "Pushes"),
    ("push_success_ratio", "Success ratio"),
    ("push_2xx", "2xx"),
    ("push_3xx", "3xx"),
    ("push_4xx", "4xx"),
    ("push_5xx", "5xx"),
    ("push_timeout", "Timeout"),
    ("push_connection_error", "Connection"),
    ("push_refused", "Refused"),
    ("push_latency_p50_ms", "Latency p50 ms"),
    ("push_latency_p99_ms", "Latency p99 ms"),
    ("push_latency_max", "Latency max ms"),
)
FINDING_COLUMNS = (
    ("kind", "Finding"),
    ("namespace", "Namespace"),
    ("topic", "Topic"),
    ("subscription", "Subscription"),
    ("time", "Time (UTC)"),
    ("figure", "Figure"),
    ("unit", "Unit"),
    ("detail", "Detail"),
)
SERIES_COLUMNS = (
    "namespace",
    "topic",
    "time",
    "sent_per_s",
    "schedule_sent_per_s",
    "delivered_per_s",
    "acked_per_s",
    "delivery_lag_p50_ms",
    "delivery_lag_p90_ms",
    "delivery_lag_p99_ms",
    "scheduling_lag_p99_ms",
    "waiting_size_avg",
    "ready_size_avg",
    "consuming_size_avg",
    "group_blocked_size_avg",
)
COMPARED = (
    ("sent_per_s", "Sent/s"),
    ("delivered_per_s", "Delivered/s"),
    ("delivery_lag_p99_ms", "Lag p99 ms"),
    ("dead_lettered", "Dead-lettered"),
)
"""Day-over-day figures: throughput, p99 delivery lag, dead letters."""
COMPARISON_COLUMNS = (
    ("namespace", "Namespace"),
    ("topic", "Topic"),
    ("metric", "Figure"),
    ("today", "Latest day"),
    ("previous_day", "Day before"),
    ("previous_day_change", "Change"),
    ("week_before", "Same day last week"),
    ("week_before_change", "Change"),
)


def _rows(df) -> list[dict]:
    return [row.asDict() for row in df.collect()]


def _change(now, then):
    if now is None or then is None:
        return None
    if then == 0:
        return None if now == 0 else float("inf")
    return (now - then) / then


def day_over_day(rows: list[dict], latest, key: str | None) -> list[dict]:
    """Per namespace (or namespace/topic): the latest day's throughput, p99 lag and dead
    letters against the day before and the same weekday a week before (None when absent)."""
    if latest is None:
        return []
    by_key: dict[tuple, dict] = {}
    for row in rows:
        by_key.setdefault((row["namespace"], row.get(key) if key else None), {})[row["date"]] = row
    result = []
    for (namespace, topic), days in sorted(
        by_key.items(), key=lambda item: (item[0][0], item[0][1] or "")
    ):
        today = days.get(latest)
        if today is None:
            continue
        before = days.get(latest - timedelta(days=1))
        week = days.get(latest - timedelta(days=7))
        for metric, label in COMPARED:
            now = today.get(metric)
            day_value = before.get(metric) if before else None
            week_value = week.get(metric) if week else None
            result.append(
                {
                    "namespace": namespace,
                    "topic": topic,
                    "metric": label,
                    "today": now,
                    "previous_day": day_value,
                    "previous_day_change": _change(now, day_value),
                    "week_before": week_value,
                    "week_before_change": _change(now, week_value),
                }
            )
    return result


def chart_grain(namespace_days: list[dict]) -> str:
    """The charts' grain: ``minute`` when the input spans at most ``MINUTE_SPAN_MS`` (from
    the first interval's start to the last one's end), ``hour`` up to ``MAX_HOURLY_DAYS``
    dates, ``day`` beyond."""
    if not namespace_days:
        return "hour"
    first = min(row["first_interval_start_ms"] for row in namespace_days)
    last = max(row["last_interval_end_ms"] for row in namespace_days)
    if last - first <= MINUTE_SPAN_MS:
        return "minute"
    dates = {row["date"] for row in namespace_days}
    return "hour" if len(dates) <= MAX_HOURLY_DAYS else "day"


def collect_report_data(
    tables: dict, quality: dict, top_topics: int, max_findings: int, minute_tables=None
) -> dict:
    """Collect the bounded pieces the page shows from the aggregate tables (read back with
    their schemas: every table may be empty). ``minute_tables()``: the topic_hour and
    namespace_hour tables rolled up by minute instead (``output.minute_tables``; None when the
    input is gone), called only when the input is short enough to be charted by minute
    (``chart_grain``)."""
    from pyspark.sql import functions as F

    namespace_days = _rows(tables["namespace_day"].orderBy("date", "namespace"))
    dates = sorted({row["date"] for row in namespace_days})
    latest = dates[-1] if dates else None
    grain = chart_grain(namespace_days)
    by_minute = minute_tables() if grain == "minute" and minute_tables else None
    if grain == "minute" and by_minute is None:
        grain = "hour"
    namespaces = _rows(tables["namespace_total"].orderBy(F.desc("sent"), "namespace"))
    chart_namespaces = [row["namespace"] for row in namespaces[:CHART_NAMESPACES]]
    # The topics' own rows (their default subscriptions', with their sends); the named
    # subscriptions have their section.
    own = F.col("subscription") == DEFAULT_SUBSCRIPTION
    top = _rows(
        tables["topic_total"]
        .filter(own)
        .orderBy(F.desc("sent"), "namespace", "topic")
        .limit(top_topics)
    )
    top_keys = [f"{row['namespace']}/{row['topic']}" for row in top]
    topic_key = F.concat_ws("/", "namespace", "topic")

    if by_minute is not None:
        ns_series = by_minute["namespace_hour"].withColumn("time", F.col("hour_start"))
        topic_series = by_minute["topic_hour"].withColumn("time", F.col("hour_start"))
    elif grain == "hour":
        ns_series = tables["namespace_hour"].withColumn("time", F.col("hour_start"))
        topic_series = tables["topic_hour"].withColumn("time", F.col("hour_start"))
    else:
        ns_series = tables["namespace_day"].withColumn("time", F.col("date").cast("timestamp"))
        topic_series = tables["topic_day"].withColumn("time", F.col("date").cast("timestamp"))
    topic_series = topic_series.filter(own)
    ns_series = ns_series.withColumn("topic", F.lit(None).cast("string"))
    findings = tables["findings"]
    finding_counts = {
        row["date"]: row["n"]
        for row in findings.groupBy("date").agg(F.count(F.lit(1)).alias("n")).collect()
    }
    latest_day = tables["topic_day"].filter(F.col("date") == F.lit(latest)) if latest else None
    latest_topics = latest_day.filter(own) if latest_day is not None else None
    latest_subscriptions = latest_day.filter(~own) if latest_day is not None else None
    latest_pushes = (
        latest_day.filter(F.col("pushes") > 0).orderBy("namespace", "topic", "subscription")
        if latest_day is not None
        else None
    )
    compared_dates = [
        d
        for d in (
            latest,
            latest and latest - timedelta(days=1),
            latest and latest - timedelta(days=7),
        )
        if d
    ]
    topic_days = (
        _rows(
            tables["topic_day"].filter(
                F.col("date").isin(compared_dates) & topic_key.isin(top_keys) & own
            )
        )
        if latest and top_keys
        else []
    )
    finding_count = sum(finding_counts.values())
    latest_findings = finding_counts.get(latest, 0) if latest else 0
    if finding_count == 0:
        period = "day" if len(dates) == 1 else "period"
        summary = f"no findings on {_dates_text(dates)}: a healthy {period}"
    else:
        summary = f"{finding_count} finding(s), {latest_findings} on the latest day ({latest})"
    return {
        "quality": quality,
        "grain": grain,
        "dates": dates,
        "latest_date": latest,
        "summary": summary,
        "namespace_totals": namespaces,
        "namespace_days": namespace_days,
        "latest_topics": _rows(
            latest_topics.orderBy(F.desc("sent"), "namespace", "topic").limit(MAX_TOPIC_ROWS)
        )
        if latest_topics is not None
        else [],
        "latest_topic_count": latest_topics.count() if latest_topics is not None else 0,
        "latest_subscriptions": _rows(
            latest_subscriptions.orderBy(
                F.desc("delivered"), "namespace", "topic", "subscription"
            ).limit(MAX_TOPIC_ROWS)
        )
        if latest_subscriptions is not None
        else [],
        "latest_pushes": _rows(latest_pushes.limit(MAX_TOPIC_ROWS))
        if latest_pushes is not None
        else [],
        "latest_push_count": latest_pushes.count() if latest_pushes is not None else 0,
        "finding_count": finding_count,
        "latest_finding_count": latest_findings,
        "findings": _rows(
            findings.orderBy(
                F.desc("date"), "kind", "namespace", "topic", "subscription", "time"
            ).limit(
                max_findings
            )
        )
        if finding_count
        else [],
        "comparison": day_over_day(namespace_days, latest, None)
        + day_over_day(topic_days, latest, "topic"),
        "namespace_series": _rows(
            ns_series.filter(F.col("namespace").isin(chart_namespaces))
            .select(*SERIES_COLUMNS)
            .orderBy("time")
        )
        if chart_namespaces
        else [],
        "topic_series": _rows(
            topic_series.filter(topic_key.isin(top_keys)).select(*SERIES_COLUMNS).orderBy("time")
        )
        if top_keys
        else [],
        "top_topics": top_keys,
    }


def _dates_text(dates: list) -> str:
    if not dates:
        return "no day"
    if len(dates) == 1:
        return str(dates[0])
    return f"{dates[0]} .. {dates[-1]}"


# ---- page ----------------------------------------------------------------------------------


def _format(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        if math.isinf(value):
            return "new" if value > 0 else "–"
        if value.is_integer() and abs(value) < 1e15:
            return f"{int(value):,}"  # a count (a finding's figure, a sum): no decimals
        return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M")
    return str(value)


def _raw(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _table(table_id: str, columns, rows: list[dict]) -> str:
    head = "".join(f"<th>{html.escape(label)}</th>" for _, label in columns)
    body = []
    for row in rows:
        cells = "".join(
            f'<td data-col="{name}" data-value="{html.escape(_raw(row.get(name)))}">'
            f"{html.escape(_format(row.get(name)))}</td>"
            for name, _ in columns
        )
        body.append(f"<tr>{cells}</tr>")
    rows = "".join(body)
    return (
        f'<div class="scroll"><table id="{table_id}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{rows}</tbody></table></div>"
    )


_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;
margin:24px;color:#1d2330}
h1{font-size:22px;margin-bottom:4px} h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ccd}
.scroll{max-width:100%;overflow-x:auto}
table{border-collapse:collapse;font-size:12px;margin:8px 0}
th,td{padding:3px 7px;border:1px solid #dde;white-space:nowrap}
td[data-col=detail]{white-space:normal;min-width:24em}
th{background:#eef1f7;text-align:left} td{text-align:right}
td[data-col=namespace],td[data-col=topic],
td[data-col=kind],td[data-col=detail],td[data-col=unit],td[data-col=date],td[data-col=time]{text-align:left}
.meta{color:#5a6275;font-size:12px} .warn{color:#a4262c;font-weight:600}
img{display:block;margin:6px 0;max-width:100%}
"""

_SCRIPT = """
window.addEventListener('load', function () {
  var images = document.querySelectorAll('img.chart'), failed = 0;
  for (var i = 0; i < images.length; i++) {
    if (!images[i].complete || images[i].naturalWidth === 0) { failed++; }
  }
  document.body.setAttribute('data-charts', failed ? 'failed' : 'ok');
  document.body.setAttribute('data-chart-count', String(images.length - failed));
});
"""


def _quality_section(q: dict) -> str:
    bad = q["malformed_lines"] + q["unsupported_lines"] + q["misplaced_lines"]
    rows = (
        ("Input lines", "input_lines"),
        ("Valid lines", "valid_lines"),
        ("Malformed lines (skipped)", "malformed_lines"),
        ("Unsupported schemaVersion (skipped)", "unsupported_lines"),
        ("In another day's date= directory (skipped)", "misplaced_lines"),
        ("Duplicate intervals (counted once)", "duplicate_lines"),
        ("Distinct topic-intervals", "distinct_intervals"),
    )
    body = "".join(
        f"<tr><th>{html.escape(label)}</th>"
        f'<td data-col="{key}" data-value="{q[key]}">{q[key]:,}</td></tr>'
        for label, key in rows
    )
    note = ""
    if bad:
        note = f'<p class="warn">{bad:,} input line(s) were skipped.'
        if q.get("example_bad_file"):
            note += (
                f" First in {html.escape(str(q.get('example_bad_file')))}: "
                f"<code>{html.escape(str(q.get('example_bad_line')))}</code>"
            )
        note += "</p>"
    return f'<table id="input-quality">{body}</table>{note}'


def _time_attr(value) -> str:
    return "" if value is None else value.isoformat(timespec="seconds")


def _chart_html(title: str, drawn) -> str:
    """A chart's image, with what it draws in data- attributes: the x range drawn and the
    data's first and last times, the points and the plot area (left,top,right,bottom in
    the image's pixels), which the browser check of the page reads."""
    attrs = {
        "x-from": _time_attr(drawn.x_from),
        "x-to": _time_attr(drawn.x_to),
        "first": _time_attr(drawn.first),
        "last": _time_attr(drawn.last),
        "points": str(drawn.points),
        "box": ",".join(map(str, drawn.box)),
    }
    data = " ".join(f'data-{k}="{html.escape(v)}"' for k, v in attrs.items())
    return (
        f'<h3>{html.escape(title)}</h3><img class="chart" alt="{html.escape(title)}" {data} '
        f'src="data:image/png;base64,{drawn.png}">'
    )


def render_report(data: dict) -> str:
    """The whole page as a string."""
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    settings = data.get("settings", {})
    charts = "".join(_chart_html(title, drawn) for title, drawn in chart.charts(data))
    shown = len(data["findings"])
    findings_note = (
        f'<p class="meta">Showing {shown} of {data["finding_count"]} findings '
        "(all are in findings/).</p>"
        if data["finding_count"] > shown
        else ""
    )
    if data["findings"]:
        findings = _table("findings", FINDING_COLUMNS, data["findings"]) + findings_note
    else:
        findings = (
            f'<p id="findings-none">No findings on {html.escape(_dates_text(data["dates"]))}: '
            f"no ready backlog grew for {settings.get('growth_min_intervals', '')} consecutive "
            "snapshots, p99 delivery lag stayed at or under "
            f"{settings.get('lag_threshold_ms', '')} ms, no message expired, exhausted its retries "
            "or was dead-lettered, every topic that was sent to was consumed, and no send was "
            "refused for a topic's backlog quota.</p>"
        )
    if data["comparison"]:
        comparison = _table("day-over-day", COMPARISON_COLUMNS, data["comparison"])
    else:
        comparison = '<p class="meta">No data.</p>'
    latest = data["latest_date"]
    compared_note = (
        f'<p class="meta">{latest} against {latest - timedelta(days=1)} and '
        f"{latest - timedelta(days=7)} "
        "(– where that day has no data; the namespace first, then its top topics).</p>"
        if latest
        else ""
    )
    topics_note = (
        f'<p class="meta">Top {len(data["latest_topics"])} of {data["latest_topic_count"]} '
        "topics by messages "
        "sent; every topic is in topic_daily.csv.</p>"
    )
    totals_table = _table("namespace-totals", NAMESPACE_COLUMNS, data["namespace_totals"])
    if data.get("latest_subscriptions"):
        subscriptions = (
            f'<p class="meta">Top {len(data["latest_subscriptions"])} named subscriptions by '
            "messages delivered; each topic's default subscription is its row above; every "
            "subscription is in topic_daily.csv.</p>"
            + _table("latest-subscriptions", SUBSCRIPTION_COLUMNS, data["latest_subscriptions"])
        )
    else:
        subscriptions = '<p class="meta">No named subscription on the latest day.</p>'
    if data.get("latest_pushes"):
        pushed = (
            f'<p class="meta">{len(data["latest_pushes"])} of {data["latest_push_count"]} '
            "subscriptions that pushed (the default subscription's row is named default), by "
            "topic; a POST answered 2xx is acked, any other outcome nacked; latency from the "
            "request to its answer; every one is in topic_daily.csv.</p>"
            + _table("push-delivery", PUSH_COLUMNS, data["latest_pushes"])
        )
    else:
        pushed = '<p class="meta">No push delivery on the latest day.</p>'
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>delayqueue monitoring report</title>
<style>{_STYLE}</style><script>{_SCRIPT}</script></head>
<body data-charts="pending">
<h1>delayqueue monitoring report</h1>
<p class="meta">Input {html.escape(str(settings.get("input", "")))} · generated {generated} ·
charts by {data["grain"]} (UTC) · p99 lag threshold {settings.get("lag_threshold_ms", "")} ms ·
backlog growth finding after {settings.get("growth_min_intervals", "")} intervals</p>
<h2>Findings</h2>{findings}
<h2>Day over day</h2>{compared_note}{comparison}
<h2>Summary — whole input, per namespace</h2>{totals_table}
<h2>Per namespace and day</h2>{_table("namespace-days", DAY_COLUMNS, data["namespace_days"])}
<h2>Topics on {data["latest_date"] or "–"} (latest day)</h2>{topics_note}
{_table("latest-topics", (("namespace", "Namespace"),) + TOPIC_COLUMNS, data["latest_topics"])}
<h2>Subscriptions on {data["latest_date"] or "–"} (latest day)</h2>{subscriptions}
<h2>Push delivery on {data["latest_date"] or "–"} (latest day)</h2>{pushed}
<h2>Charts</h2>{charts}
<h2>Input quality</h2>{_quality_section(data["quality"])}
</body></html>
"""
