"""gunicorn settings, derived from delayqueue's own settings.

Used as ``gunicorn -c python:delayqueue.gunicorn_conf delayqueue.wsgi:app`` by both
``delayqueue serve`` and the Dockerfile. gunicorn executes this module as its config file, so
reading the settings here, at import, is the point of it (no other module does that).

gunicorn's master runs this, so it imports nothing that imports redis-py: a worker forked
from a master holding redis-py is monkey-patched by gevent too late, and gevent warns
(``MonkeyPatchWarning``). The storage check, which talks to Redis, runs in a forked child
(server/startup.py), from ``on_starting``; tests/server/test_startup.py holds the master to
that.
"""

from __future__ import annotations

import sys

from delayqueue.server import startup
from delayqueue.server.gunicorn_workers import GUNICORN_WORKERS
from delayqueue.server.logs import ACCESS_LOG_FORMAT
from delayqueue.settings.config import ConfigError, load_settings

try:
    _settings = load_settings()  # $DELAYQUEUE_CONFIG / ./config / packaged, then DELAYQUEUE_*
except ConfigError as _exc:
    # SystemExit passes through gunicorn's config loader: one clear line, no traceback.
    print(f"delayqueue: config error: {_exc}", file=sys.stderr)
    sys.exit(2)
if not _settings.redis_url:
    print("delayqueue: config error: redis-url: is empty; set DELAYQUEUE_REDIS_URL, or start "
          "with `delayqueue serve`, which runs an embedded Redis", file=sys.stderr)
    sys.exit(2)

proc_name = "delayqueue"
bind = f"{_settings.host}:{_settings.port}"
workers = _settings.workers
# gunicorn's worker of that name, writing each response in one send and its own error
# answers as the JSON envelope (delayqueue/server/gunicorn_workers.py).
worker_class = GUNICORN_WORKERS.get(_settings.worker_class, _settings.worker_class)
worker_connections = _settings.worker_connections  # gevent: concurrent requests per worker
# gunicorn silently turns "sync" with threads > 1 into gthread, so threads only for gthread.
threads = _settings.threads if _settings.worker_class == "gthread" else 1
graceful_timeout = _settings.graceful_timeout_seconds
# For gevent/gthread this is only the worker heartbeat; a sync worker is busy for the whole
# of a long poll, so it must be allowed the longest one.
timeout = 30
if _settings.worker_class == "sync":
    timeout = max(timeout, _settings.max_long_polling_timeout_millis // 1000 + 10)
keepalive = 5
# What gunicorn refuses before the app sees a request, answered as the JSON envelope by our
# workers (delayqueue/server/gunicorn_workers.py): a request line over 4094 bytes (414), more than
# 100 header fields or one over 8190 bytes (431). gunicorn's defaults, stated here because
# the API documentation names them.
limit_request_line = 4094
# gunicorn's pure-Python request parser, on purpose. gunicorn 27 can parse with its C parser
# (gunicorn_h1c, the `fast` extra; "auto" takes it whenever it is importable), but gunicorn
# 27.0.1's extra asks for gunicorn_h1c >= 0.6.14 and the newest the package index offers is
# 0.6.10, which answers an unsupported Transfer-Encoding with 400 instead of 501 and reports
# a header-count or header-size overrun as a whole-section one (tests/http/test_http_limits.py).
# Revisit with gunicorn_h1c >= 0.6.14: "auto", and the package in the server extra.
http_parser = "python"
limit_request_fields = 100
limit_request_field_size = 8190
loglevel = _settings.log_level
errorlog = "-"
# Every line, gunicorn's and ours, in one format (delayqueue/server/logs.py).
logger_class = "delayqueue.server.logs.GunicornLogger"
# Access logging costs throughput; enable with --access-logfile - (gunicorn's CLI) or
# GUNICORN_CMD_ARGS="--access-logfile -". Its lines: the same prefix, then this.
accesslog = None
access_log_format = ACCESS_LOG_FORMAT
# Each worker imports the app after fork, so gevent's monkey-patching runs before any socket
# (Redis pool, pub/sub) exists, and no connection is shared between processes.
preload_app = False
# gunicorn >= 27 opens a control socket at one fixed per-user path; two nodes on one machine
# (tests, benchmarks) would fight over it. Older gunicorn ignores the unknown name.
control_socket_disable = True


def on_starting(server) -> None:
    """Once per master start, before it binds and forks workers: the port, then the storage.

    A port already in use stops the node at once, where gunicorn would retry its bind for
    five seconds and then exit with a traceback-like line; sockets handed over by a USR2
    re-exec or systemd are in use by design. Then a namespace written in an older storage
    format must be migrated first (core/storage.py): checked after the port, since the check
    waits on Redis (up to its timeouts when Redis does not answer).
    """
    if not startup.sockets_inherited() and startup.port_in_use(_settings.host, _settings.port):
        print(startup.port_in_use_message(_settings.port, "DELAYQUEUE_PORT"), file=sys.stderr)
        sys.exit(2)
    code = startup.check_storage_apart(_settings)
    if code:
        sys.exit(code)


def when_ready(server) -> None:
    """Once per node, in the master, with the port bound: where the console and the docs
    are, and a loud warning when anyone who reaches the port may use it."""
    startup.announce(server, _settings)


def worker_exit(server, worker) -> None:
    """Release this worker's leases on exit: stop the app's background loops if it loaded."""
    app = getattr(worker, "wsgi", None)  # unset when the app failed to load
    extensions = getattr(app, "extensions", None)
    service = extensions.get("delayqueue") if isinstance(extensions, dict) else None
    stop = getattr(service, "stop", None)
    if callable(stop):
        try:
            stop()
        except Exception:  # noqa: BLE001 - the worker is exiting anyway; say why
            server.log.exception("delayqueue: stopping background work failed")
