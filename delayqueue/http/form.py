"""Flask's Request with a shorter way to a small form: ``app.request_class`` (app.py).

Every camellia call (sendMsg, pullMsg, ackMsg, ...) is an ``application/x-www-form-urlencoded``
body of a few fields. Werkzeug reads it with ``urllib.parse.parse_qsl`` too, but builds a
form parser, its options and a wrapped stream for each request first: most of the form's
cost (docs/benchmarks.md, "Single-message path"). ``FormRequest`` reads such a body with
that same call, at the same size limits, into the same ``MultiDict``: repeated keys keep
every value (``request.form[k]`` and ``to_dict()`` the first), ``+`` is a space,
percent-escapes are UTF-8, an empty value is ``""``, and a body that is not UTF-8 is an
empty form, as Werkzeug's parser reads it. Multipart bodies, and a body already read by
``get_data``, go to Werkzeug unchanged.
"""

from __future__ import annotations

import io
from urllib.parse import parse_qsl

from flask import Request
from werkzeug.exceptions import RequestEntityTooLarge

URLENCODED = "application/x-www-form-urlencoded"


class FormRequest(Request):
    def _load_form_data(self) -> None:
        if "form" in self.__dict__:
            return
        if (self.mimetype != URLENCODED or self.content_length is None
                or hasattr(self, "_cached_data")):
            super()._load_form_data()
            return
        # Content-Length bytes, no more, as Werkzeug's limited stream reads them; one over
        # MAX_CONTENT_LENGTH is refused unread (413), as Werkzeug refuses it.
        length, limit = self.content_length, self.max_content_length
        if limit is not None and length > limit:
            raise RequestEntityTooLarge()
        body = self.environ["wsgi.input"].read(length) if length else b""
        storage = self.parameter_storage_class
        try:
            form = storage(parse_qsl(body.decode(), keep_blank_values=True,
                                     errors="werkzeug.url_quote"))
        except ValueError:   # not UTF-8: Werkzeug's (silent) parser answers an empty form
            form = storage()
        d = self.__dict__
        d["stream"], d["form"], d["files"] = io.BytesIO(), form, storage()
