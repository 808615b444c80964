"""The operator's console at /dashboard/: server-rendered pages, no build step.

- ``/dashboard/``: every topic, largest backlog first, paged (fleet_view.py); the table
  refreshes itself every ``refresh`` seconds (default 5; it fetches ``?fragment=1`` and swaps
  the table in).
- ``/dashboard/topic?topic=t``: the last hour in charts, sizes, settings (editable), dead
  letters with redrive and purge buttons.
- ``/dashboard/message?topic=t&msgId=m``: one message's state and fields.

Writes are POST forms. A cross-site POST is refused (403) by ``same_origin``: the browser's
``Sec-Fetch-Site`` must be ``same-origin`` (or ``none``, typed by the user), else its
``Origin`` must be this server's; a POST with neither header (not a browser) is refused
too — scripts use the HTTP API, not the console.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode, urlsplit

from flask import Blueprint, Response, abort, redirect, render_template, request, url_for
from markupsafe import Markup

from delayqueue.core.errors import DelayQueueError, NotFound
from delayqueue.core.status import Status
from delayqueue.http.endpoints import route
from delayqueue.http.request import params, runtime
from delayqueue.settings.topic_setting import BY_NAME

from .charts import Series, line_chart
from .fleet_view import PAGE_SIZES, FleetView, backlog_of

console = Blueprint("console", __name__, template_folder="templates")

REFRESH_S = 5
DEAD_PAGE = 100


def view() -> FleetView:
    rt = runtime()
    return FleetView(rt.queue, rt.monitor)


def same_origin() -> None:
    """Refuse a cross-site request (CSRF): 403 unless the browser says it is same-origin."""
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None:
        if site not in ("same-origin", "none"):
            abort(403, description=f"Sec-Fetch-Site: {site}: the console accepts writes "
                                   "only from its own pages")
        return
    origin = request.headers.get("Origin")
    if origin is None:
        abort(403, description="Origin: missing; the console accepts writes only from a "
                               "browser on its own pages (use the HTTP API from scripts)")
    parts = urlsplit(origin)
    if parts.netloc != request.host or parts.scheme != request.scheme:
        abort(403, description=f"Origin: {origin} is not this server; the console accepts "
                               "writes only from its own pages")


@console.before_request
def guard_writes() -> None:
    if request.method == "POST":
        same_origin()


@console.app_template_filter("when")
def when(ms: int | None) -> str:
    if ms is None:
        return ""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


@console.app_template_filter("rate")
def rate(value: float) -> str:
    return f"{value:.2f}" if value < 100 else f"{value:.0f}"


def _int_arg(name: str, default: int) -> int:
    try:
        return int(request.args.get(name, default))
    except ValueError:
        return default


@route(console, "fleet")
def fleet() -> str:
    size = _int_arg("size", 50)
    size = size if size in PAGE_SIZES else 50
    refresh_s = min(max(_int_arg("refresh", REFRESH_S), 1), 3600)
    page = view().fleet_page(_int_arg("page", 1), size)
    template = "console/fleet_table.html" if request.args.get("fragment") else "console/fleet.html"
    return render_template(template, page=page, refresh_s=refresh_s, sizes=PAGE_SIZES)


def status_name(status: int) -> str:
    return Status(status).name.lower().replace("_", " ")


@route(console, "topic")
def topic() -> str:
    name = params().topic()
    rt = runtime()
    info = rt.queue.topic_info(name)
    backlog = backlog_of(info)
    history = view().topic_history(name, backlog)
    seconds = rt.monitor.interval_ms / 1000
    starts = history.starts
    charts = [
        Markup(line_chart("Throughput (messages/s)", starts, [
            Series("sent/s", [s.counters["sendMsg"] / seconds for s in history.stats]),
            Series("delivered/s", [s.counters["pullMsg"] / seconds for s in history.stats]),
            Series("acked/s", [s.counters["ackMsg"] / seconds for s in history.stats]),
        ])),
        Markup(line_chart("Delivery lag (ms after triggerTime)", starts, [
            Series("p50", [s.lag_p50 for s in history.stats]),
            Series("p99", [s.lag_p99 for s in history.stats]),
        ], "")),
        Markup(line_chart("Backlog (estimated)", starts, [Series("backlog", history.backlog)])),
    ]
    data, source = rt.admin.get_config(name)
    dead = rt.admin.list(name, DEAD_PAGE, request.args.get("cursor") or None)
    return render_template("console/topic.html", topic=name, info=info, backlog=backlog,
                           charts=charts, config=data, source=source, rules=BY_NAME,
                           dead=dead, status_name=status_name, done=request.args.get("done"),
                           interval_s=int(seconds),
                           minutes=round(len(starts) * seconds / 60))


@route(console, "message")
def message() -> str:
    topic_name = request.args.get("topic", "")
    msg_id = request.args.get("msgId", "")
    found: dict[str, Any] | None = None
    error = None
    if topic_name and msg_id:
        p = params()
        try:
            found = runtime().queue.get(p.topic(), p.msg_id()).to_json()
        except NotFound:
            error = f"no message {msg_id!r} in topic {topic_name!r} (never sent, or ended " \
                    "longer ago than end-life-msg-expire-millis)"
        except DelayQueueError as exc:
            error = exc.msg
    return render_template("console/message.html", topic=topic_name, msg_id=msg_id,
                           message=found, error=error, status_name=status_name)


def back_to_topic(name: str, done: str) -> Response:
    return redirect(url_for("console.topic") + "?" + urlencode({"topic": name, "done": done}),
                    code=303)


@route(console, "redrive")
def redrive() -> Response:
    p = params()
    name, msg_id = p.topic(), p.msg_id(required=False)
    count = runtime().admin.redrive(name, msg_id, p.limit(1000))
    return back_to_topic(name, f"redriven: {count}")


@route(console, "purge")
def purge() -> Response:
    p = params()
    name, msg_id = p.topic(), p.msg_id(required=False)
    count = runtime().admin.purge(name, msg_id)
    return back_to_topic(name, f"purged: {count}")


@route(console, "settings")
def settings() -> Response:
    p = params()
    name = p.topic()
    values = {k: v for k, v in p.values.items() if k in BY_NAME and v != ""}
    runtime().admin.set_config(name, values, p.boolean("reset", default=False))
    return back_to_topic(name, "settings saved")
