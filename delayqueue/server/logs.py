"""One log line format for every process of a node: ``serve``, gunicorn's master, its workers.

    2026-11-27T05:12:24.763Z [12370] [INFO] delayqueue.serve: delayqueue on 0.0.0.0:8080, ...

The time in UTC with milliseconds, the process id, the level, the logger's name, the
message. Our own loggers reach it through the root logger (:func:`configure`); gunicorn's
error log through :class:`GunicornLogger`, the ``logger_class`` gunicorn_conf.py names.
A ``logger_class`` rather than gunicorn's ``logconfig_dict``: gunicorn turns its access log
on whenever ``logconfig_dict`` is set, and the access log costs throughput
(docs/operations.md, "Config and logs").
"""

from __future__ import annotations

import logging
import sys
import time

from gunicorn.glogging import Logger

from delayqueue.http.redact import redact_query

LOG_FORMAT = "%(asctime)s [%(process)d] [%(levelname)s] %(name)s: %(message)s"
# The access log's own part, after the same prefix (gunicorn.access: ...): the client, the
# request line, the status, the body's bytes, the time taken and the client's user agent.
ACCESS_LOG_FORMAT = '%(h)s "%(r)s" %(s)s %(b)s %(M)sms "%(a)s"'


class LogFormatter(logging.Formatter):
    """LOG_FORMAT with an ISO 8601 UTC time: one clock for every node of a fleet."""

    converter = time.gmtime
    default_time_format = "%Y-%m-%dT%H:%M:%S"
    default_msec_format = "%s.%03dZ"

    def __init__(self) -> None:
        super().__init__(LOG_FORMAT)


def configure(level: str) -> None:
    """Our loggers (the root logger's handler) write LOG_FORMAT lines to stderr at ``level``.

    Idempotent: a second call replaces the handler the first one installed.
    """
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_delayqueue", False):
            root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LogFormatter())
    handler._delayqueue = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level.upper())


class GunicornLogger(Logger):
    """gunicorn's logger, writing its error and access logs in LOG_FORMAT.

    Set up in the master (and again on a reload); the workers it forks inherit both it and
    the root logger's handler, so our loggers in a worker write the same lines.
    """

    def setup(self, cfg) -> None:
        super().setup(cfg)
        for log in (self.error_log, self.access_log):
            for handler in log.handlers:
                # gunicorn's stream or file handler; a syslog one keeps syslog's format
                if getattr(handler, "_gunicorn", False) and isinstance(handler,
                                                                       logging.StreamHandler):
                    handler.setFormatter(LogFormatter())
        configure(cfg.loglevel)

    def atoms(self, resp, req, environ, request_time) -> dict:
        """gunicorn's access-log values, with a secret parameter's value masked wherever a
        query string shows (the request line, %(q)s, a Referer, the environ): the views
        refuse ``pushSecret`` in a URL, but the line is written all the same."""
        atoms = super().atoms(resp, req, environ, request_time)
        for key, value in atoms.items():
            if isinstance(value, str) and "=" in value:
                atoms[key] = redact_query(value)
        return atoms
