"""The operator's console at /dashboard/: server-rendered pages, no build step.

- ``/dashboard/``: every topic, largest backlog first or sorted by any column (``sort``,
  ``order``), filtered by name (``q``), paged (fleet_view.py); the table refreshes itself
  every ``refresh`` seconds (default 5; it fetches ``?fragment=1`` and swaps the table in).
- ``/dashboard/nodes``: the nodes of the fleet from the node registry (version, uptime, held
  long polls, last seen) and Redis (nodes_view.py).
- ``/dashboard/topic?topic=t``: its description, sizes, pause / resume and purge, a test
  message form, its live messages a queue and a page at a time (messages_view.py), its
  recurring schedules a page at a time with their next fire times (schedules_view.py),
  charts over ``span`` (5m, 1h, 6h, 24h), settings (editable), dead letters with redrive and
  purge buttons. A topic that does not exist answers 404 and creates nothing.
  Its subscriptions, the default first, with their sizes, state and age, and a form that
  creates one.
- ``/dashboard/subscription?topic=t&subscription=s``: a named subscription's sizes, pause /
  resume, its messages, settings (with their source) and dead letters, and its deletion
  (subscriptions_view.py; the topic page's templates with ``subscription`` set).
- Push delivery (push_view.py): a push subscription's badge and URL in the list, its push
  panel (settings, in flight, last failures) on its page (the default's: the topic page),
  and on every subscription's page the form that sets its push settings.
- ``/dashboard/message?topic=t&msgId=m``: one message's state and fields (with
  ``subscription``: as that subscription holds it; without, each named subscription's status
  too).

The pages carry no inline script or style: console.js and console.css, served by this
blueprint, so they work under ``Content-Security-Policy: default-src 'self'``.

A form answers 303 back to the page it was sent from (the topic's, or the subscription's when
it carries ``subscription``), whose ``done`` (or ``error``, when the service refused: an
unknown topic's pause or purge) says what happened.

Writes are POST forms. A cross-site POST is refused (403) by ``same_origin``: the browser's
``Sec-Fetch-Site`` must be ``same-origin`` (or ``none``, typed by the user), else its
``Origin`` must be this server's; a POST with neither header (not a browser) is refused
too — scripts use the HTTP API, not the console.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from flask import (
    Blueprint,
    Response,
    abort,
    redirect,
    render_template,
    request,
    send_file,
    url_for,
)
from markupsafe import Markup

from delayqueue.core.errors import BadRequest, DelayQueueError, NotFound
from delayqueue.core.requests import SendRequest
from delayqueue.core.status import Status
from delayqueue.core.subscriptions import SUBSCRIPTION_SETTINGS, Subscriptions
from delayqueue.core.topic_controls import PURGE_LIMIT
from delayqueue.http import audit
from delayqueue.http.endpoints import route
from delayqueue.http.request import params, runtime
from delayqueue.settings.topic_setting import BY_NAME

from . import filters
from .charts import Series, line_chart, number
from .fleet_view import (
    DEFAULT_SORT,
    DEFAULT_SPAN,
    MAX_INTERVALS,
    ORDERS,
    PAGE_SIZES,
    SORTS,
    SPAN_LABELS,
    SPANS,
    FleetView,
    backlog_of,
)
from .messages_view import MSG_PAGE_SIZES, TABS, read_section
from .nodes_view import read_nodes, read_redis
from .push_view import audited, is_push_form, push_form, push_panel, saved
from .schedules_view import read_schedules
from .subscriptions_view import chosen, info_of, listing, named, page_link

console = Blueprint("console", __name__, template_folder="templates")
STATIC = Path(__file__).parent / "static"
STATIC_MAX_AGE_S = 300         # console.js / console.css: kept 5 min, then revalidated (ETag)

REFRESH_S = 5
DEAD_PAGE = 100
DESCRIPTION = "description"      # the one free-text setting: a textarea holding its value
PURGE_PER_POST = PURGE_LIMIT     # live messages one "Purge topic" ends (purgeTopic's default)
BOOLEANS = frozenset(s.name for s in BY_NAME.values() if s.kind is bool)  # a select, not a field

for _filter in (filters.when, filters.iso, filters.ago, filters.rate, filters.preview,
                filters.duration, filters.count, filters.zoned):
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


def _choice(name: str, choices: tuple[str, ...], default: str | None) -> str | None:
    """A page parameter that takes one of ``choices``: 400 naming it and them otherwise."""
    value = request.args.get(name) or default
    if value is not None and value not in choices:
        raise BadRequest(f"{name}: must be one of {', '.join(choices)}, got {value[:64]!r}")
    return value


@route(console, "fleet")
def fleet() -> str:
    size = _int_arg("size", 50)
    size = size if size in PAGE_SIZES else 50
    refresh_s = min(max(_int_arg("refresh", REFRESH_S), 1), 3600)
    sort = _choice("sort", SORTS, DEFAULT_SORT) or DEFAULT_SORT
    order = _choice("order", ORDERS, None)
    q = request.args.get("q", "")
    limit = runtime().settings.max_topic_length
    if len(q) > limit:
        raise BadRequest(f"q: must be at most {limit} characters (a topic name's), "
                         f"got {len(q)}")
    page = view().fleet_page(_int_arg("page", 1), size, sort, order, q)
    template = "console/fleet_table.html" if request.args.get("fragment") else "console/fleet.html"
    return render_template(template, page=page, refresh_s=refresh_s, sizes=PAGE_SIZES,
                           link=fleet_link(page))


def fleet_link(page: Any) -> Any:
    """``link(**changes)``: the URL of the topics page as shown, with ``changes`` (the sort,
    filter, size and page carry over; a new sort or filter starts at page 1)."""
    def link(**changes: Any) -> str:
        args = {"q": page.q or None, "sort": page.sort, "order": page.order,
                "size": page.size, "page": page.page}
        if "sort" in changes or "q" in changes:
            args["page"] = 1
        if "sort" in changes and "order" not in changes:
            args["order"] = None
        args.update(changes)
        query = {k: v for k, v in args.items() if v is not None}
        if query.get("sort") == DEFAULT_SORT:
            query.pop("sort")
        return url_for("console.fleet", **query)
    return link


@route(console, "nodes")
def nodes() -> str:
    rt = runtime()
    found = read_nodes(rt)
    return render_template("console/nodes.html", nodes=found, redis=read_redis(rt),
                           now=found.now_ms, this_node=rt.node_id)


@route(console, "consoleScript")
def script() -> Response:
    return send_file(STATIC / "console.js", mimetype="text/javascript",
                     max_age=STATIC_MAX_AGE_S, conditional=True, etag=True)


@route(console, "consoleStyle")
def style() -> Response:
    return send_file(STATIC / "console.css", mimetype="text/css", max_age=STATIC_MAX_AGE_S,
                     conditional=True, etag=True)


def subscriptions() -> Subscriptions:
    """The runtime's: a pushUrl set here nudges every node's push loop (on_push_change)."""
    return runtime().subscriptions


def push_settings(data: dict[str, Any], source: dict[str, str]
                  ) -> tuple[dict[str, Any], dict[str, str]]:
    """The push form's current values (pushSecretSet, never the secret) and their source,
    from the subscription's get_config."""
    return ({k: data[k] for k in ("pushUrl", "pushTimeoutMillis", "pushConcurrency",
                                  "pushSecretSet")},
            {k: v for k, v in source.items() if k.startswith("push")})


def status_name(status: int) -> str:
    return Status(status).name.lower().replace("_", " ")


@route(console, "topic")
def topic() -> str | tuple[str, int]:
    p = params()
    name = p.topic()
    rt = runtime()
    if not rt.controls.known(name):
        return render_template("console/unknown_topic.html", topic=name,
                               error=request.args.get("error")), 404
    span = _choice("span", tuple(SPANS), DEFAULT_SPAN) or DEFAULT_SPAN
    info = rt.queue.topic_info(name)
    messages = read_section(p, name, info)
    schedules = read_schedules(p, name)
    backlog = backlog_of(info)
    history = view().topic_history(name, backlog, SPANS[span])
    data, source = rt.admin.get_config(name)
    dead = rt.admin.list(name, DEAD_PAGE, request.args.get("cursor") or None)
    push_config, push_source = push_settings(*subscriptions().get_config(name, None))
    return render_template("console/topic.html", topic=name, info=info, backlog=backlog,
                           subscriptions=listing(rt.queue, name, info),
                           subscription=None, here=page_link(name, None),
                           config=data, source=source, rules=BY_NAME, booleans=BOOLEANS,
                           dead=dead, status_name=status_name, done=request.args.get("done"),
                           error=request.args.get("error"), messages=messages, tabs=TABS,
                           schedules=schedules,
                           msg_sizes=MSG_PAGE_SIZES, now=rt.clock.now_ms(),
                           purge_per_post=PURGE_PER_POST, charts=topic_charts(history),
                           history=history, span=span, spans=SPANS, span_labels=SPAN_LABELS,
                           max_intervals=MAX_INTERVALS, retention_ms=rt.monitor.retention_ms,
                           interval_s=rt.monitor.interval_ms // 1000,
                           push=push_panel(subscriptions(), name, None),
                           push_config=push_config, push_source=push_source)


def topic_charts(history: Any) -> list[tuple[str, Markup]]:
    """(caption, SVG) of each chart: rates per second (schedule occurrences beside the sends),
    failures per point, debounced sends and missed schedule fire times per point, lag,
    backlog."""
    stats, starts, point = history.stats, history.starts, history.point_ms
    per_s = [[s.counters[name] / seconds for s, seconds in zip(stats, history.seconds)]
             for name in ("sendMsg", "pullMsg", "ackMsg", "scheduleSent")]
    per_point = filters.duration(point)

    def chart(title: str, series: list[Series], unit: str, fmt: Any = number) -> Markup:
        return Markup(line_chart(title, starts, series, unit, point, fmt))

    return [
        ("Throughput", chart("Throughput", [
            Series("sent/s", per_s[0]), Series("scheduled/s", per_s[3]),
            Series("delivered/s", per_s[1]), Series("acked/s", per_s[2])], "messages/s")),
        (f"Failures (messages per {per_point})", chart("Failures", [
            Series("nacked", [s.counters["nackMsg"] for s in stats]),
            Series("ack timeouts", [s.counters["triggerMsgTimeout"] for s in stats]),
            Series("dead-lettered", [s.counters["deadLettered"] for s in stats])],
            f"messages per {per_point}")),
        (f"Debounced sends and missed fire times (per {per_point})", chart("Debounce", [
            Series("replaced", [s.counters["replaced"] for s in stats]),
            Series("deduplicated", [s.counters["deduplicated"] for s in stats]),
            Series("missed fire times", [s.counters["scheduleMissed"] for s in stats])],
            f"count per {per_point}")),
        ("Delivery lag (after triggerTime)", chart("Delivery lag", [
            Series("p50", [s.lag_p50 for s in stats]),
            Series("p99", [s.lag_p99 for s in stats])], "lag", filters.duration)),
        ("Backlog (estimated)", chart("Backlog", [Series("backlog", history.backlog)],
                                      "messages")),
    ]


@route(console, "subscription")
def subscription() -> str | tuple[str, int]:
    """A named subscription's page: the topic page's sections for its own queue."""
    p = params()
    name = p.topic()
    sub = named(p)
    rt = runtime()
    if not rt.controls.known(name):
        return render_template("console/unknown_topic.html", topic=name,
                               error=request.args.get("error")), 404
    topic_info = rt.queue.topic_info(name)        # the topic's pause, and every subscription
    try:
        info = info_of(listing(rt.queue, name, topic_info), name, sub)
    except NotFound as exc:
        return render_template("console/unknown_subscription.html", topic=name,
                               subscription=sub, reason=exc.msg,
                               error=request.args.get("error")), 404
    messages = read_section(p, name, info, sub)
    config = subscriptions().get_config(name, sub)
    data, source = own_settings(*config)
    push_config, push_source = push_settings(*config)
    dead = rt.admin.list(name, DEAD_PAGE, request.args.get("cursor") or None,
                         subscription=sub)
    return render_template("console/subscription.html", topic=name, subscription=sub,
                           info=info, backlog=backlog_of(info),
                           topic_paused=topic_info["paused"],
                           here=page_link(name, sub), config=data, source=source,
                           rules=BY_NAME, booleans=BOOLEANS, dead=dead,
                           status_name=status_name, done=request.args.get("done"),
                           error=request.args.get("error"), messages=messages, tabs=TABS,
                           msg_sizes=MSG_PAGE_SIZES, now=rt.clock.now_ms(),
                           push=push_panel(subscriptions(), name, sub),
                           push_config=push_config, push_source=push_source)


def own_settings(data: dict[str, Any], source: dict[str, str]
                 ) -> tuple[dict[str, Any], dict[str, str]]:
    """A subscription's settings form: the settings a subscription may set, nothing of the
    topic's own (its description, delay, backlog quota...)."""
    return ({k: data[k] for k in SUBSCRIPTION_SETTINGS},
            {k: source[k] for k in SUBSCRIPTION_SETTINGS})


@route(console, "message")
def message() -> str:
    topic_name = request.args.get("topic", "")
    msg_id = request.args.get("msgId", "")
    found: dict[str, Any] | None = None
    error = None
    sub = None
    if topic_name and msg_id:
        p = params()
        try:
            sub = chosen(p)
            found = runtime().queue.get(p.topic(), p.msg_id(), subscription=sub).to_json()
        except NotFound as exc:
            error = exc.msg if sub else \
                f"no message {msg_id!r} in topic {topic_name!r} (never sent, or ended " \
                "longer ago than end-life-msg-expire-millis)"
        except DelayQueueError as exc:
            error = exc.msg
    return render_template("console/message.html", topic=topic_name, msg_id=msg_id,
                           subscription=sub, message=found, error=error,
                           status_name=status_name, now=runtime().clock.now_ms())


def back(name: str, sub: str | None, done: str, key: str = "done") -> Response:
    """303 to the page the form was sent from: the subscription's (``sub``) or the topic's,
    which shows ``done`` (``key="error"``: shows it as an error)."""
    query = {"topic": name, **({"subscription": sub} if sub else {}), key: done}
    page = "console.subscription" if sub else "console.topic"
    return redirect(url_for(page) + "?" + urlencode(query), code=303)


def back_to_topic(name: str, done: str, key: str = "done") -> Response:
    return back(name, None, done, key)


def noted(sub: str | None, **fields: Any) -> None:
    """audit.note, naming the subscription the form acted on (the default's: none)."""
    if sub:
        fields["params"] = {**fields.get("params", {}), "subscription": sub}
    audit.note(**fields)


def refused(name: str, sub: str | None, exc: DelayQueueError) -> Response:
    """The service refused (an unknown topic or subscription, a bad value): logged, and said
    on the topic page (a subscription that does not exist has no page to go back to)."""
    noted(sub, code=exc.code, msg=exc.msg)
    gone = isinstance(exc, NotFound)
    return back(name, None if gone else sub, exc.msg, "error")


@route(console, "redrive")
def redrive() -> Response:
    p = params()
    name, msg_id, sub = p.topic(), p.msg_id(required=False), chosen(p)
    try:
        count = runtime().admin.redrive(name, msg_id, p.limit(1000), subscription=sub)
    except NotFound as exc:
        if sub is None:
            raise
        return refused(name, sub, exc)
    noted(sub, count=count)
    return back(name, sub, f"redriven: {count}")


@route(console, "purge")
def purge() -> Response:
    p = params()
    name, msg_id, sub = p.topic(), p.msg_id(required=False), chosen(p)
    try:
        count = runtime().admin.purge(name, msg_id, subscription=sub)
    except NotFound as exc:
        if sub is None:
            raise
        return refused(name, sub, exc)
    noted(sub, count=count)
    return back(name, sub, f"purged: {count}")


@route(console, "settings")
def settings() -> Response:
    p = params()
    name, sub = p.topic(), chosen(p)
    if is_push_form(p.values):
        return push_settings_form(name, sub, p.values)
    reset = p.boolean("reset", default=False)
    if sub is None:
        values = {k: v for k, v in p.values.items() if k in BY_NAME and v != ""
                  and k != DESCRIPTION}
        values = with_description(name, values, p.values.get(DESCRIPTION))  # "": emptied
        audit.note(settings=values)
        runtime().admin.set_config(name, values, reset)
        return back_to_topic(name, "settings saved")
    # The subscription's form shows the settings a subscription may set: those only.
    values = {k: v for k, v in p.values.items() if k in SUBSCRIPTION_SETTINGS and v != ""}
    noted(sub, settings=values)
    try:
        subscriptions().set_config(name, sub, values, reset)
    except NotFound as exc:
        return refused(name, sub, exc)
    return back(name, sub, "settings saved")


def push_settings_form(name: str, sub: str | None, sent: dict[str, Any]) -> Response:
    """The push form's post (push_view.py): the subscription's push settings; a refused
    value (a pushUrl outside push-allowed-networks...) is said on its page."""
    noted(sub, settings={})               # never the form's fields: the secret is one
    try:
        values = push_form(sent, subscriptions().push_status(name, sub)["pushUrl"])
        noted(sub, settings=audited(values))
        if values:
            subscriptions().set_config(name, sub, values)
    except DelayQueueError as exc:
        if exc.code >= 500:
            raise
        return refused(name, sub, exc)
    return back(name, sub, saved(values))


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
    p = params()
    name, sub = p.topic(), chosen(p)
    try:
        changed = runtime().controls.pause(name, subscription=sub)
        noted(sub, changed=changed)
    except NotFound as exc:
        return refused(name, sub, exc)
    return back(name, sub, "paused: nothing is handed out until resumed" if changed
                else "already paused")


@route(console, "resume")
def resume() -> Response:
    p = params()
    name, sub = p.topic(), chosen(p)
    try:
        changed = runtime().controls.resume(name, subscription=sub)
        noted(sub, changed=changed)
    except NotFound as exc:
        return refused(name, sub, exc)
    return back(name, sub, "resumed" if changed else "not paused: nothing to resume")


@route(console, "subscriptionCreate")
def subscription_create() -> Response:
    """createSubscription with the name only (its settings are set on its page): 303 to
    its page; a refused name (the pattern, ``default``, the topic's limit) is said on the
    topic page."""
    p = params()
    name = p.topic()
    try:
        sub = named(p)
        existed = sub in subscriptions().names(name)
        if not existed:
            subscriptions().create(name, sub, {})
    except DelayQueueError as exc:
        if exc.code >= 500:
            raise
        audit.note(code=exc.code, msg=exc.msg, params={"subscription": p.values.get(
            "subscription")})
        return back_to_topic(name, exc.msg, "error")
    noted(sub, changed=not existed)
    return back(name, sub, "already exists: nothing changed" if existed else
                "created: it receives every message sent to the topic from now on")


@route(console, "subscriptionDelete")
def subscription_delete() -> Response:
    """deleteSubscription: 303 to the topic page (the subscription's page is gone)."""
    p = params()
    name, sub = p.topic(), named(p)
    try:
        subscriptions().delete(name, sub)
    except NotFound as exc:
        return refused(name, sub, exc)
    noted(sub, changed=True)
    return back_to_topic(name, f"deleted subscription {sub}")


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


@route(console, "publish")
def publish() -> Response:
    """A test message: sendMsg's ``msg`` and ``delayMillis`` (the topic's settings for the
    rest); the topic page says its msgId, or why it was refused."""
    p = params()
    name = p.topic()
    try:
        test = SendRequest(p.body(), delay_ms=p.duration("delayMillis"))
        result = runtime().queue.send_batch(name, [test])[0]
    except DelayQueueError as exc:
        if exc.code >= 500:
            raise
        return back_to_topic(name, exc.msg, "error")
    if isinstance(result, DelayQueueError):
        if result.code >= 500:
            raise result
        return back_to_topic(name, result.msg, "error")
    return back_to_topic(name, f"sent: msgId {result.message.msg_id}")
