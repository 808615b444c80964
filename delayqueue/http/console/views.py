"""The operator's console at /dashboard/: server-rendered pages, no build step.

- ``/dashboard/``: every topic, largest backlog first, paged (fleet_view.py); the table
  refreshes itself every ``refresh`` seconds (default 5; it fetches ``?fragment=1`` and swaps
  the table in).
- ``/dashboard/topic?topic=t``: its description, sizes, pause / resume and purge, its live
  messages a queue and a page at a time (messages_view.py), the last hour in charts,
  settings (editable), dead letters with redrive and purge buttons.
- ``/dashboard/message?topic=t&msgId=m``: one message's state and fields.

A form answers 303 back to the topic page, whose ``done`` (or ``error``, when the service
refused: an unknown topic's pause or purge) says what happened.

Writes are POST forms. A cross-site POST is refused (403) by ``same_origin``: the browser's
``Sec-Fetch-Site`` must be ``same-origin`` (or ``none``, typed by the user), else its
``Origin`` must be this server's; a POST with neither header (not a browser) is refused
too — scripts use the HTTP API, not the console.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode, urlsplit

from flask import Blueprint, Response, abort, redirect, render_template, request, url_for
from markupsafe import Markup

from delayqueue.core.errors import DelayQueueError, NotFound
from delayqueue.core.status import Status
from delayqueue.core.topic_controls import PURGE_LIMIT
from delayqueue.http import audit
from delayqueue.http.endpoints import route
from delayqueue.http.request import params, runtime
from delayqueue.settings.topic_setting import BY_NAME

from . import filters
from .charts import Series, line_chart
from .fleet_view import PAGE_SIZES, FleetView, backlog_of
from .messages_view import MSG_PAGE_SIZES, TABS, read_section

console = Blueprint("console", __name__, template_folder="templates")

REFRESH_S = 5
DEAD_PAGE = 100
DESCRIPTION = "description"      # the one free-text setting: a textarea holding its value
PURGE_PER_POST = PURGE_LIMIT     # live messages one "Purge topic" ends (purgeTopic's default)

for _filter in (filters.when, filters.iso, filters.ago, filters.rate, filters.preview):
    console.add_app_template_filter(_filter)


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
    p = params()
    name = p.topic()
    rt = runtime()
    info = rt.queue.topic_info(name)
    messages = read_section(p, name, info)
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
                           error=request.args.get("error"), messages=messages, tabs=TABS,
                           msg_sizes=MSG_PAGE_SIZES, now=rt.clock.now_ms(),
                           purge_per_post=PURGE_PER_POST,
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
                           message=found, error=error, status_name=status_name,
                           now=runtime().clock.now_ms())


def back_to_topic(name: str, done: str, key: str = "done") -> Response:
    """303 to the topic page, which shows ``done`` (``key="error"``: shows it as an error)."""
    return redirect(url_for("console.topic") + "?" + urlencode({"topic": name, key: done}),
                    code=303)


@route(console, "redrive")
def redrive() -> Response:
    p = params()
    name, msg_id = p.topic(), p.msg_id(required=False)
    count = runtime().admin.redrive(name, msg_id, p.limit(1000))
    audit.note(count=count)
    return back_to_topic(name, f"redriven: {count}")


@route(console, "purge")
def purge() -> Response:
    p = params()
    name, msg_id = p.topic(), p.msg_id(required=False)
    count = runtime().admin.purge(name, msg_id)
    audit.note(count=count)
    return back_to_topic(name, f"purged: {count}")


@route(console, "settings")
def settings() -> Response:
    p = params()
    name = p.topic()
    values = {k: v for k, v in p.values.items() if k in BY_NAME and v != ""
              and k != DESCRIPTION}
    values = with_description(name, values, p.values.get(DESCRIPTION))  # "": emptied
    audit.note(settings=values)
    runtime().admin.set_config(name, values, p.boolean("reset", default=False))
    return back_to_topic(name, "settings saved")


def with_description(name: str, values: dict[str, Any], description: Any) -> dict[str, Any]:
    """The settings form's values with its description textarea's.

    The textarea holds the current value: written only when edited, so an untouched form
    does not make the server's default the topic's own; emptied, it writes the empty text.
    Browsers send newlines as CRLF.
    """
    if description is None:
        return values
    if not isinstance(description, str):            # a JSON body: refused by its rule
        return {**values, DESCRIPTION: description}
    description = description.replace("\r\n", "\n")
    data, _ = runtime().admin.get_config(name)
    if description == data[DESCRIPTION]:
        return values
    return {**values, DESCRIPTION: description}


@route(console, "pause")
def pause() -> Response:
    name = params().topic()
    try:
        changed = runtime().controls.pause(name)
        audit.note(changed=changed)
    except NotFound as exc:
        audit.note(code=exc.code, msg=exc.msg)
        return back_to_topic(name, exc.msg, "error")
    return back_to_topic(name, "paused: nothing is handed out until resumed" if changed
                         else "already paused")


@route(console, "resume")
def resume() -> Response:
    name = params().topic()
    try:
        changed = runtime().controls.resume(name)
        audit.note(changed=changed)
    except NotFound as exc:
        audit.note(code=exc.code, msg=exc.msg)
        return back_to_topic(name, exc.msg, "error")
    return back_to_topic(name, "resumed" if changed else "not paused: nothing to resume")


@route(console, "purgeMessages")
def purge_messages() -> Response:
    """purgeTopic with its default limit: a topic of more takes more than one post (the
    answer says how many remain)."""
    name = params().topic()
    try:
        result = runtime().controls.purge(name, PURGE_PER_POST)
        audit.note(count=result.count, remaining=result.remaining,
                   params={"limit": PURGE_PER_POST})
    except NotFound as exc:
        audit.note(code=exc.code, msg=exc.msg)
        return back_to_topic(name, exc.msg, "error")
    more = " (purge again to go on)" if result.remaining else ""
    return back_to_topic(name, f"purged: {result.count}, remaining: {result.remaining}{more}")
