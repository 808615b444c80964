"""The audit trail: one line on the logger ``delayqueue.audit`` for every write to a topic's
configuration or bulk state, through the API or the console, and a fleet-wide count of them.

Audited (``AUDITED``): the topic settings, pause and resume, the purges, redrive, deleting
or rescheduling a message, creating, deleting, pausing or resuming a recurring schedule,
creating, deleting or configuring a subscription, the console's forms, a node taken offline
or put back online. Not the data path (sendMsg, pulls, acks, visibility changes): a line per
message would cost more than the message and drown the lines that matter.

A line is one JSON object (the logger's record message; the handler adds the house's
prefix), its keys in this order, absent when they do not apply::

    {"at": "2026-11-27T05:40:01.123Z", "who": "ops", "roles": ["admin"],
     "remote": "10.0.0.7", "forwardedFor": "...", "route": "purgeTopic", "method": "POST",
     "topic": "orders", "msgId": "...", "params": {"limit": "500"}, "code": 200,
     "msg": "...", "result": {"count": 232, "remaining": 0}}

``who``: the token's name (``roles``: its roles) while ``auth-tokens`` is set,
``unauthenticated`` when the request had no valid token, ``anonymous`` while authentication
is off. ``params``: the request's key parameters as sent (only the names in ``PARAMS`` and
the topic settings and the push settings: never a body, never the Authorization header),
strings cut at ``MAX_VALUE_CHARS``; a push setting sent empty (it clears) as ``""``, and
``pushSecret`` only as ``"(set)"`` or ``"(cleared)"``: never the secret, nor its length,
whichever way it came (a console form notes the same words). ``code``: the answer's
envelope code (a console form's redirect: 200, or the refusal's code); ``msg`` with it when
not 200. ``result``: what the write did, from the answer (``count``, ``remaining``,
``changed``; a batch's entries ``ok`` and ``refused``) or, for a console form, from the
view (``note``).

A refused attempt (400, 401, 403, 404, 429) is logged and counted too: who tried is the
point. Each line also adds one to the Monitor's ``"\\taudit\\t<route>"`` count, which
/metrics shows fleet-wide as ``delayqueue_audit_events_total{route}``.

The logger has its own level, INFO, so a server at ``log-level: warning`` still writes the
trail; an operator routes it (or silences it) by configuring the logger named
``delayqueue.audit``.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any

from flask import Flask, Response, g, request
from werkzeug.exceptions import HTTPException

from delayqueue.settings.topic_setting import BY_NAME as SETTING_BY_NAME
from delayqueue.settings.topic_setting import PUSH_BY_NAME

from .endpoints import BY_PATH, FORM, Endpoint
from .jsonio import dumps_bytes
from .redact import CLEARED, SECRETS, SET
from .request import runtime

AUDIT_LOGGER = "delayqueue.audit"
logger = logging.getLogger(AUDIT_LOGGER)
logger.setLevel(logging.INFO)
problems = logging.getLogger(__name__)

AUDITED = frozenset({
    "setTopicConfig", "pauseTopic", "resumeTopic", "purgeTopic", "purgeDeadMsg",
    "redriveDeadMsg", "deleteMsg", "deleteMsgBatch", "rescheduleMsg",
    "createSchedule", "deleteSchedule", "pauseSchedule", "resumeSchedule",
    "createSubscription", "deleteSubscription", "setSubscriptionConfig",
    "settings", "pause", "resume", "purge", "purgeMessages", "redrive",  # the console's forms
    "subscriptionCreate", "subscriptionDelete",                         # the console's too
    "offline", "online",
})
# The parameters a line names, besides topic and msgId and the topic settings.
PARAMS = ("subscription", "limit", "reset", "release", "delayMillis", "triggerTime",
          "scheduleId", "cron", "everyMillis")
RESULTS = ("count", "remaining", "changed")
MAX_VALUE_CHARS = 200
_NOTE = "audit_note"


def note(**fields: Any) -> None:
    """What a console form did (``result``), or, with ``code`` and ``msg``, why it was
    refused; ``settings``: the settings it wrote (instead of the form's fields);
    ``params``: parameters of its own. For the view to call: its answer is a redirect that
    says it in words."""
    noted = g.get(_NOTE)
    if noted is None:
        noted = {}
        setattr(g, _NOTE, noted)
    noted.update(fields)


def _short(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_VALUE_CHARS:
        return value[:MAX_VALUE_CHARS] + "..."
    return value if isinstance(value, (str, int, float, bool)) or value is None else \
        _short(str(value))


def _sent() -> dict[str, Any]:
    """The request's parameters as params() reads them: the query string, then the body's
    form or JSON object (none from a body refused as too large: only what the URL says)."""
    values: dict[str, Any] = request.args.to_dict() if request.query_string else {}
    try:
        if request.is_json:
            body = request.get_json(silent=True)
            if isinstance(body, dict):
                values.update(body)
        else:
            values.update(request.form.to_dict())
    except HTTPException:
        pass
    return values


def _who() -> dict[str, Any]:
    token = g.get("token")
    if token is not None:
        return {"who": token.name, "roles": sorted(token.roles)}
    return {"who": "unauthenticated" if runtime().settings.auth_tokens else "anonymous"}


def _outcome(response: Response, form: bool) -> dict[str, Any]:
    """code, msg and result of the answer (a form's from its note)."""
    noted = dict(g.get(_NOTE) or {})
    noted.pop("settings", None)
    noted.pop("params", None)
    if response.is_json and not response.is_streamed:
        body = response.get_json(silent=True)
        if isinstance(body, dict):
            out: dict[str, Any] = {"code": body.get("code", response.status_code)}
            if out["code"] != 200:
                out["msg"] = _short(body.get("msg"))
            result = {k: body[k] for k in RESULTS if k in body}
            if isinstance(body.get("results"), list):
                ok = sum(1 for r in body["results"] if isinstance(r, dict) and r.get("code") == 200)
                result = {"ok": ok, "refused": len(body["results"]) - ok}
            if result:
                out["result"] = result
            return out
    if form and response.status_code in (302, 303):
        code = noted.pop("code", 200)
        msg = noted.pop("msg", None)
        out = {"code": code, **({"msg": _short(msg)} if msg is not None else {})}
        return {**out, **({"result": noted} if noted else {})}
    return {"code": response.status_code}


def record(endpoint: Endpoint, response: Response) -> dict[str, Any]:
    """The audit line of this request, answered with ``response``."""
    sent = _sent()
    line: dict[str, Any] = {
        "at": datetime.now(timezone.utc).isoformat(timespec="milliseconds")
                                          .replace("+00:00", "Z"),
        **_who(), "remote": request.remote_addr}
    forwarded = request.headers.get("X-Forwarded-For")
    if forwarded:
        line["forwardedFor"] = _short(forwarded)
    line.update(route=endpoint.name, method=request.method)
    for name in ("topic", "msgId"):
        if sent.get(name) not in (None, ""):
            line[name] = _short(sent[name])
    params = {k: _short(sent[k]) for k in PARAMS if sent.get(k) not in (None, "")}
    if endpoint.name == "deleteMsgBatch" and isinstance(sent.get("msgIds"), list):
        params["msgIds"] = len(sent["msgIds"])      # how many, not which
    noted = g.get(_NOTE) or {}
    settings = noted.get("settings")
    if settings is None:
        settings = {k: v for k, v in sent.items() if k in SETTING_BY_NAME and v != ""}
        # A push setting sent empty clears it: that is a write worth a line.
        settings.update({k: v for k, v in sent.items() if k in PUSH_BY_NAME and v is not None})
    params.update({k: _short(v) for k, v in settings.items()})
    params.update(noted.get("params") or {})
    for name in SECRETS & params.keys():
        params[name] = CLEARED if params[name] in ("", CLEARED) else SET
    if params:
        line["params"] = params
    line.update(_outcome(response, endpoint.kind == FORM))
    return line


def register_audit(app: Flask) -> None:
    audited = {path: e for path, e in BY_PATH.items() if e.name in AUDITED}

    @app.after_request
    def audit(response: Response) -> Response:
        req = request._get_current_object()    # one context lookup, not one per attribute
        rule = req.url_rule
        endpoint = audited.get(rule.rule) if rule is not None else None
        # OPTIONS is Flask's own answer; any other method reached the view (HEAD runs GET's).
        if endpoint is None or req.method == "OPTIONS":
            return response
        try:
            logger.info("%s", dumps_bytes(record(endpoint, response)).decode())
            runtime().monitor.count_audit(endpoint.name)
        except Exception:  # noqa: BLE001 - the write is done: answer it, and say why no line
            problems.exception("audit: no line for %s", endpoint.name)
        return response
