"""FormRequest (http/form.py) reads an urlencoded body as Werkzeug's own parser does: the
same MultiDict for every camellia parameter and the awkward spellings, the same limits."""

from __future__ import annotations

import io
from urllib.parse import quote_plus

import pytest
from flask import Flask, Request

from delayqueue.http.endpoints import CAMELLIA, ENDPOINTS
from delayqueue.http.form import FormRequest

FORM = "application/x-www-form-urlencoded"
LIMIT = 4096


def environ(body: bytes, content_type: str = FORM, length: int | None = None) -> dict:
    return {"REQUEST_METHOD": "POST", "PATH_INFO": "/x", "QUERY_STRING": "",
            "SERVER_NAME": "t", "SERVER_PORT": "80", "SERVER_PROTOCOL": "HTTP/1.1",
            "CONTENT_TYPE": content_type,
            "CONTENT_LENGTH": str(len(body) if length is None else length),
            "wsgi.input": io.BytesIO(body), "wsgi.url_scheme": "http"}


@pytest.fixture
def app():
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = LIMIT
    with app.app_context():
        yield app


def both(body: bytes, **kwargs):
    """(ours, Werkzeug's) form of the same request, as lists per key."""
    ours = FormRequest(environ(body, **kwargs)).form
    theirs = Request(environ(body, **kwargs)).form
    return ours.to_dict(flat=False), theirs.to_dict(flat=False)


CAMELLIA_PARAMS = sorted({p.name for e in ENDPOINTS if e.origin == CAMELLIA for p in e.params})


def test_every_camellia_parameter_reads_as_werkzeug_reads_it(app):
    assert {"topic", "msgId", "msg", "delayMillis", "ttlMillis"} <= set(CAMELLIA_PARAMS)
    body = "&".join(f"{name}={quote_plus(f'{name} value/é+%')}"
                    for name in CAMELLIA_PARAMS).encode()
    ours, theirs = both(body)
    assert ours == theirs
    assert set(ours) == set(CAMELLIA_PARAMS)
    assert ours["msg"] == ["msg value/é+%"]


@pytest.mark.parametrize("body, expected", [
    (b"topic=a&topic=b", {"topic": ["a", "b"]}),                  # repeated: all kept, in order
    (b"msg=a%20b%2Bc%26d%3D", {"msg": ["a b+c&d="]}),            # percent-encoding
    (b"msg=%E4%BD%A0%E5%A5%BD", {"msg": ["你好"]}),                # UTF-8 escapes
    (b"msg=a+b++c", {"msg": ["a b  c"]}),                          # '+' is a space
    (b"msg=&topic=t&empty", {"msg": [""], "topic": ["t"], "empty": [""]}),  # empty values
    (b"", {}),
    (b"msg=%ZZ&bad=%", {"msg": ["%ZZ"], "bad": ["%"]}),            # broken escapes as sent
    (b"msg=\xff\xfe", {}),                                         # not UTF-8: no form
    (b"a=1;b=2", {"a": ["1;b=2"]}),                                # ';' is not a separator
])
def test_spellings_read_as_werkzeug_reads_them(app, body, expected):
    ours, theirs = both(body)
    assert ours == theirs == expected


def test_first_value_wins_as_in_werkzeug(app):
    assert FormRequest(environ(b"topic=a&topic=b")).form["topic"] == "a"
    assert FormRequest(environ(b"topic=a&topic=b")).form.to_dict() == {"topic": "a"}


def test_reads_no_more_than_content_length(app):
    ours, theirs = both(b"topic=abc&msg=tail", length=9)
    assert ours == theirs == {"topic": ["abc"]}


def test_a_body_over_the_limit_is_refused_unread(app):
    from werkzeug.exceptions import RequestEntityTooLarge

    body = b"msg=" + b"x" * LIMIT
    for cls in (FormRequest, Request):
        with pytest.raises(RequestEntityTooLarge):
            cls(environ(body)).form  # noqa: B018 - the read is the test


def test_multipart_and_other_types_go_to_werkzeug(app):
    boundary = "b0undary"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"topic\"\r\n\r\nt1\r\n"
            f"--{boundary}--\r\n").encode()
    kind = f"multipart/form-data; boundary={boundary}"
    assert both(body, content_type=kind) == ({"topic": ["t1"]}, {"topic": ["t1"]})
    assert both(b"{}", content_type="application/json") == ({}, {})


def test_body_still_readable_as_get_data_first(app):
    request = FormRequest(environ(b"topic=t"))
    assert request.get_data() == b"topic=t"
    assert request.form.to_dict() == {"topic": "t"}
