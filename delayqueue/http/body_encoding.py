"""Compressed request bodies: a ``Content-Encoding: gzip`` body is decoded before the app
sees it, as if the decoded body had been sent.

Decoding happens in WSGI middleware, ahead of routing and of every ``before_request`` hook,
because the access check (access.py) reads the topic from the body: a topic-scoped token must
not reach another topic by compressing the body. The decoded body replaces ``wsgi.input``
with its length as ``Content-Length`` and no ``Content-Encoding``, so every limit that
holds for a plain body (the whole-body limit, max-msg-bytes, a batch's size) holds for the
decoded one.

A gzip bomb cannot grow the worker: the stream is inflated incrementally and never beyond
the body limit + 1 bytes, the first byte over it ending the decoding with 413. What the
middleware refuses it cannot answer itself (it is outside Flask's error handlers): it leaves
the error in the environ with an empty body, and the app's first ``before_request`` hook
raises it, so the answer is the usual envelope.
"""

from __future__ import annotations

import io
import zlib
from typing import IO, Callable, Iterable

from flask import Flask, request
from werkzeug.wsgi import get_input_stream

from delayqueue.core.errors import (
    DelayQueueError,
    MissingParameter,
    PayloadTooLarge,
    UnsupportedMediaType,
)

GZIP = ("gzip", "x-gzip")                  # x-gzip: the old name, RFC 9110 8.4.1.3
IDENTITY = ("", "identity")
ACCEPTED = "gzip, x-gzip or identity"
GZIP_WBITS = 16 + zlib.MAX_WBITS           # a gzip header and trailer around deflate
READ_BYTES = 65536
# zlib's reasons, as a client can act on them.
WHY = {"incorrect header check": "no gzip header: the body is not gzip",
       "incorrect data check": "CRC-32 mismatch in the gzip trailer",
       "incorrect length check": "length mismatch in the gzip trailer"}
# Set in the WSGI environ by DecodedBody when it refused the body; raised by the app's hook.
_BODY_ERROR = "delayqueue.body_error"


def decode_gzip(stream: IO[bytes], limit: int, limit_rule: str) -> io.BytesIO:
    """The gzip stream read from ``stream``, inflated: at most ``limit`` bytes, else 413.

    Inflated 64 KiB at a time (``max_length``), so what is held is the decoded body so far
    and one piece, never more than ``limit`` + 1 bytes of it: a bomb stops at byte limit + 1.
    Concatenated gzip members (RFC 1952 2.2) decode to their concatenation; anything after a
    member that is not another member, a stream cut short, or a CRC or length mismatch in
    the trailer is a 400. An empty body stays empty: there is nothing to decode.

    Raises:
        PayloadTooLarge: the decoded body is over ``limit`` bytes.
        MissingParameter: not a valid gzip stream.
    """
    out, size, members = io.BytesIO(), 0, 0
    inflater = None
    try:
        while chunk := stream.read(READ_BYTES):
            data = chunk
            while True:
                if inflater is None or inflater.eof:    # a (next) member starts here
                    inflater = zlib.decompressobj(GZIP_WBITS)
                    members += 1
                asked = min(READ_BYTES, limit + 1 - size)     # never 0: that means no limit
                piece = inflater.decompress(data, asked)
                size += len(piece)
                if size > limit:
                    raise PayloadTooLarge(f"body: decoded (gzip) body larger than {limit} "
                                          f"bytes ({limit_rule})")
                out.write(piece)
                data = inflater.unused_data if inflater.eof else inflater.unconsumed_tail
                # A full piece may leave output pending inside the inflater: ask again.
                if not data and (inflater.eof or len(piece) < asked):
                    break
    except zlib.error as exc:
        reason = str(exc).rpartition(": ")[2]
        if members > 1 and reason == "incorrect header check":
            reason = "data after the end of the gzip stream"
        raise MissingParameter(f"body: not a valid gzip stream ({WHY.get(reason, reason)})"
                               ) from None
    if inflater is not None and not inflater.eof:
        raise MissingParameter("body: not a valid gzip stream (truncated: it ends before "
                               "the gzip trailer)")
    out.seek(0)
    return out


def content_coding(environ: dict) -> str:
    """The request's Content-Encoding, as one lower-case token ("" without one)."""
    return environ.get("HTTP_CONTENT_ENCODING", "").strip().lower()


class DecodedBody:
    """WSGI middleware: decodes a gzip body (``decode_gzip``) and hands the request on as if
    the decoded body had been sent; refuses any other coding but identity with 415.

    ``limit`` is the whole-body limit (MAX_CONTENT_LENGTH), ``limit_rule`` how the 413's
    message explains it. A body already over the limit on the wire is left alone: the app's
    body limit answers it (413) without it being read.
    """

    def __init__(self, wsgi_app: Callable[..., Iterable[bytes]], limit: int,
                 limit_rule: str) -> None:
        self.wsgi_app = wsgi_app
        self.limit = limit
        self.limit_rule = limit_rule

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        coding = content_coding(environ)
        if coding in IDENTITY:
            environ.pop("HTTP_CONTENT_ENCODING", None)
        elif not self._over_the_limit(environ):
            try:
                if coding not in GZIP:
                    raise UnsupportedMediaType(
                        f"Content-Encoding: {coding!r} is not accepted; send one of "
                        f"{ACCEPTED} (a single coding)", {"Accept-Encoding": "gzip, identity"})
                self._hand_on(environ, decode_gzip(self._body(environ), self.limit,
                                                   self.limit_rule))
            except DelayQueueError as exc:
                environ[_BODY_ERROR] = exc
                self._hand_on(environ, io.BytesIO())
        return self.wsgi_app(environ, start_response)

    def _over_the_limit(self, environ: dict) -> bool:
        """A Content-Length over the limit (a chunked body over it was already emptied and
        marked by app.StreamedBodyLimit, which runs first)."""
        length = environ.get("CONTENT_LENGTH", "")
        return length.isdigit() and int(length) > self.limit

    def _body(self, environ: dict) -> IO[bytes]:
        """The body as sent, read no further than Werkzeug would read it for the app."""
        return get_input_stream(environ, max_content_length=self.limit)

    @staticmethod
    def _hand_on(environ: dict, body: io.BytesIO) -> None:
        """The request as if ``body`` had been sent with a Content-Length and no coding."""
        environ["wsgi.input"] = body
        environ["CONTENT_LENGTH"] = str(body.getbuffer().nbytes)
        environ.pop("HTTP_CONTENT_ENCODING", None)
        environ.pop("HTTP_TRANSFER_ENCODING", None)


def register_body_encoding(app: Flask, limit_rule: str) -> None:
    """Decode bodies ahead of the app; answer what the decoding refused first of all."""
    app.wsgi_app = DecodedBody(app.wsgi_app,  # type: ignore[method-assign]
                               app.config["MAX_CONTENT_LENGTH"], limit_rule)

    @app.before_request
    def refuse_undecodable_body() -> None:
        error = request.environ.get(_BODY_ERROR)
        if error is not None:
            raise error
