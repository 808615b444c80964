"""gunicorn worker classes: gunicorn's own, with each response written in one send.

gunicorn's HTTP/1 ``Response`` writes the status line and headers with one ``sendall`` and
the body with another. A delay-queue response is a few hundred bytes, so that is two system
calls (and two loopback/TCP segments) per request where one does — measured on the HTTP
path as the largest single cost after Flask itself (docs/benchmarks.md). ``OneSendResponse``
holds the header block back and sends it together with the first body bytes; a response
without a body (HEAD, 204) still sends its headers when gunicorn closes it.

``worker-class: gevent`` / ``gthread`` / ``sync`` in our settings select these subclasses;
they differ from gunicorn's only in that response class.
"""

from __future__ import annotations

from gunicorn.http import wsgi
from gunicorn.workers.ggevent import GeventWorker
from gunicorn.workers.gthread import ThreadWorker
from gunicorn.workers.sync import SyncWorker


class _HeaderBuffer:
    """Stands in for the socket while gunicorn writes the header block."""

    def __init__(self) -> None:
        self.data = b""

    def sendall(self, data: bytes) -> None:
        self.data += data


class OneSendResponse(wsgi.Response):
    _pending = b""

    def send_headers(self) -> None:
        if self.headers_sent:
            return
        sock, self.sock = self.sock, _HeaderBuffer()
        try:
            super().send_headers()
        finally:
            self._pending, self.sock = self.sock.data, sock

    def _flush_headers(self) -> None:
        if self._pending:
            pending, self._pending = self._pending, b""
            self.sock.sendall(pending)

    def _emit_body(self, data: bytes) -> None:
        if self._pending and not self.chunked:
            pending, self._pending = self._pending, b""
            self.sock.sendall(pending + data)
            return
        self._flush_headers()
        super()._emit_body(data)

    def sendfile(self, respiter) -> bool:
        self._flush_headers()
        return super().sendfile(respiter)

    def close(self) -> None:
        self.send_headers()
        self._flush_headers()
        super().close()


def _install() -> None:
    # wsgi.create() resolves ``Response`` from its module at call time (HTTP/2 passes its own
    # class and is not affected). A gunicorn without the ``_emit_body`` hook (< 27) writes the
    # body past it, so it keeps its own Response: two sends, but never body before headers.
    if hasattr(wsgi.Response, "_emit_body"):
        wsgi.Response = OneSendResponse


class OneSendGeventWorker(GeventWorker):
    def init_process(self) -> None:
        _install()
        super().init_process()


class OneSendThreadWorker(ThreadWorker):
    def init_process(self) -> None:
        _install()
        super().init_process()


class OneSendSyncWorker(SyncWorker):
    def init_process(self) -> None:
        _install()
        super().init_process()


GUNICORN_WORKERS = {
    "gevent": "delayqueue.gunicorn_workers.OneSendGeventWorker",
    "gthread": "delayqueue.gunicorn_workers.OneSendThreadWorker",
    "sync": "delayqueue.gunicorn_workers.OneSendSyncWorker",
}
