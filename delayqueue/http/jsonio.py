"""JSON in and out of the app through orjson: Flask's JSON provider, set in ``app.py``.

orjson encodes our answers several times faster than the standard library and decodes the
batch endpoints' bodies faster too (docs/benchmarks.md, "Batches, a leaner request path,
compact storage"); it writes UTF-8, keeps key order, and refuses what is not JSON (NaN,
lone surrogates) instead of passing it on.
"""

from __future__ import annotations

from typing import Any

import orjson
from flask import Response
from flask.json.provider import JSONProvider

OPTIONS = orjson.OPT_NON_STR_KEYS     # getMonitorData's histogram buckets are int keys


def dumps_bytes(obj: Any) -> bytes:
    return orjson.dumps(obj, option=OPTIONS)


class OrjsonProvider(JSONProvider):
    """``jsonify`` and ``request.get_json`` through orjson."""

    def dumps(self, obj: Any, **kwargs: Any) -> str:
        return dumps_bytes(obj).decode()

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        return orjson.loads(s)

    def response(self, *args: Any, **kwargs: Any) -> Response:
        obj = self._prepare_response_obj(args, kwargs)
        # A trailing newline, as Flask's own provider writes (curl output ends its line).
        return self._app.response_class(dumps_bytes(obj) + b"\n", mimetype="application/json")
