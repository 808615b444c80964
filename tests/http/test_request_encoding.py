"""Compressed request bodies (delayqueue/http/body_encoding.py) and malformed JSON bodies.

A ``Content-Encoding: gzip`` (or ``x-gzip``) body is answered as if its decoded body had been
sent, every limit holding for the decoded size; a bomb is refused with 413 having inflated no
more than the body limit + 1 bytes; a corrupt stream is 400, any other coding 415; a
topic-scoped token cannot reach another topic through a compressed body. A JSON body that
does not parse, or is not an object, is HTTP 400 on every endpoint.

Through the real app and Lua scripts on a real redis-server, and through real gunicorn (the
conformance ``node``) for the wire: a Content-Length body, a chunked one, a 415.
"""

from __future__ import annotations

import gzip
import io
import json
import tracemalloc
import zlib
from urllib.parse import urlencode

import pytest
import requests

from delayqueue.core.errors import PayloadTooLarge
from delayqueue.http import body_encoding
from delayqueue.http.app import create_app
from delayqueue.http.body_encoding import decode_gzip
from delayqueue.http.openapi import document

from support.conformance import API

MAX_MSG_BYTES = 1024 * 1024                 # the default max-msg-bytes
LIMIT = 4 * MAX_MSG_BYTES + 65536           # app.py: MAX_CONTENT_LENGTH, 4,259,840 bytes
LIMIT_RULE = f"4 x max-msg-bytes + 65536, max-msg-bytes {MAX_MSG_BYTES}"
FORM = "application/x-www-form-urlencoded"
JSON = "application/json"
NARROW = "narrow-topic-secret6"
TOKENS = [{"name": "narrow", "secret": NARROW, "roles": ["produce", "consume"],
           "topics": ["orders-*"]}]


@pytest.fixture(scope="module")
def app(redis_server):
    with redis_server.leased_db_url() as url:
        yield create_app(overrides={"redis-url": url, "snapshot-dir": ""})


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture(scope="module")
def bomb() -> bytes:
    """100 MB of zeros, gzip-compressed (about 100 KB), built without holding the 100 MB."""
    deflater = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = bytes(1 << 20)
    return b"".join([*(deflater.compress(zeros) for _ in range(100)), deflater.flush()])


def post(client, path, body: bytes, content_type=FORM, coding="gzip", **headers):
    if coding is not None:
        headers["Content-Encoding"] = coding
    return client.post(API + path, data=body, content_type=content_type, headers=headers)


def form(**params) -> bytes:
    return urlencode(params).encode()


def assert_refused(response, status: int, msg_start: str) -> dict:
    body = response.get_json()
    assert (response.status_code, body["code"]) == (status, status), body
    assert set(body) == {"code", "msg"} and body["msg"].startswith(msg_start), body
    return body


def stored(client, topic: str, msg_id: str) -> str:
    answer = client.post(API + "getMsg", data={"topic": topic, "msgId": msg_id}).get_json()
    assert answer["code"] == 200, answer
    return answer["delayMsg"]["msg"]


# -- decoded as if sent plain --------------------------------------------------------------
def test_a_gzip_form_body_is_read_as_the_form_it_decodes_to(client):
    answer = post(client, "sendMsg", gzip.compress(form(topic="gz-form", msgId="m1",
                                                        msg="héllo")))
    assert answer.status_code == 200 and answer.get_json()["code"] == 200, answer.get_json()
    assert stored(client, "gz-form", "m1") == "héllo"


def test_a_gzip_json_body_is_read_as_the_json_object_it_decodes_to(client):
    body = json.dumps({"topic": "gz-json", "msgId": "m1", "msg": "x", "delayMillis": 0})
    answer = post(client, "sendMsg", gzip.compress(body.encode()), JSON)
    assert answer.get_json()["code"] == 200, answer.get_json()
    assert stored(client, "gz-json", "m1") == "x"


def test_a_gzip_batch_body_sends_every_entry(client):
    body = {"topic": "gz-batch", "msgs": [{"msgId": f"m{i}", "msg": f"v{i}"} for i in range(50)]}
    answer = post(client, "sendMsgBatch", gzip.compress(json.dumps(body).encode()), JSON)
    assert answer.status_code == 200, answer.get_json()
    assert [r["code"] for r in answer.get_json()["results"]] == [200] * 50
    assert stored(client, "gz-batch", "m49") == "v49"


@pytest.mark.parametrize("coding", ["x-gzip", "GZip", " gzip "])
def test_x_gzip_and_any_case_are_gzip(client, coding):
    answer = post(client, "sendMsg", gzip.compress(form(topic="gz-names", msg="x")),
                  coding=coding)
    assert answer.get_json()["code"] == 200, answer.get_json()


@pytest.mark.parametrize("coding", ["identity", "IDENTITY", ""])
def test_identity_is_no_coding(client, coding):
    answer = post(client, "sendMsg", form(topic="gz-identity", msg="x"), coding=coding)
    assert answer.get_json()["code"] == 200, answer.get_json()


def test_concatenated_gzip_members_decode_to_their_concatenation(client):
    body = gzip.compress(b"topic=gz-members&msgId=m1") + gzip.compress(b"&msg=two-members")
    assert post(client, "sendMsg", body).get_json()["code"] == 200
    assert stored(client, "gz-members", "m1") == "two-members"


def test_an_empty_gzip_body_is_an_empty_body(client):
    answer = post(client, "sendMsg?topic=gz-empty", b"")
    assert_refused(answer, 400, "msg: required parameter is missing")


# -- every limit holds for the decoded size -----------------------------------------------
def test_a_decoded_body_at_the_limit_is_read_and_one_byte_over_is_413(client):
    head = form(topic="gz-limit", msg="x") + b"&pad="
    at_limit = head + b"p" * (LIMIT - len(head))
    answer = post(client, "sendMsg", gzip.compress(at_limit))
    assert answer.get_json()["code"] == 200, answer.get_json()
    over = post(client, "sendMsg", gzip.compress(at_limit + b"p"))
    body = assert_refused(over, 413, "body: decoded (gzip) body larger than")
    assert body["msg"] == f"body: decoded (gzip) body larger than {LIMIT} bytes ({LIMIT_RULE})"


def test_a_decoded_msg_over_max_msg_bytes_is_the_msg_rule(client):
    answer = post(client, "sendMsg", gzip.compress(form(topic="gz-msg",
                                                        msg="m" * (MAX_MSG_BYTES + 1))))
    assert answer.get_json()["code"] == 400
    assert answer.get_json()["msg"].startswith("msg: "), answer.get_json()


def test_a_compressed_body_over_the_limit_on_the_wire_is_the_usual_413(client):
    body = bytes(LIMIT + 1)                     # not even read: Content-Length is enough
    assert_refused(post(client, "sendMsg", body), 413, f"body: larger than {LIMIT} bytes")


def test_a_bomb_is_413_without_the_worker_holding_its_decoded_size(client, bomb):
    assert len(bomb) < 200_000
    tracemalloc.start()
    try:
        answer = post(client, "sendMsg", bomb)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert_refused(answer, 413, f"body: decoded (gzip) body larger than {LIMIT} bytes")
    # The decoded body is held up to LIMIT + 1 bytes (4.3 MB), never its 100 MB.
    print(f"peak {peak / 1e6:.2f} MB while refusing the bomb")
    assert peak < 1.5 * LIMIT, f"peak {peak / 1e6:.1f} MB while refusing the bomb"


def test_decoding_a_bomb_stops_at_limit_plus_one_decoded_bytes(bomb, monkeypatch):
    produced = []
    real = zlib.decompressobj

    class Counting:
        def __init__(self, wbits):
            self._inflater = real(wbits)

        def decompress(self, data, max_length):
            piece = self._inflater.decompress(data, max_length)
            produced.append(len(piece))
            return piece

        def __getattr__(self, name):
            return getattr(self._inflater, name)

    monkeypatch.setattr(body_encoding.zlib, "decompressobj", Counting)
    with pytest.raises(PayloadTooLarge):
        decode_gzip(io.BytesIO(bomb), 1_000_000, "rule")
    assert sum(produced) == 1_000_001


# -- what is not a gzip body --------------------------------------------------------------
def _corrupt() -> dict[str, tuple[bytes, str]]:
    """Each case: the body, and the reason its 400 gives."""
    good = gzip.compress(form(topic="gz-bad", msg="x"))
    crc = bytearray(good)
    crc[-8] ^= 0xFF                             # the trailer's CRC-32
    not_gzip = "no gzip header: the body is not gzip"
    truncated = "truncated: it ends before the gzip trailer"
    return {"bad magic": (b"PK" + good[2:], not_gzip),
            "plain text": (form(topic="gz-bad", msg="x"), not_gzip),
            "truncated": (good[:-5], truncated), "only the header": (good[:10], truncated),
            "crc error": (bytes(crc), "CRC-32 mismatch in the gzip trailer"),
            "trailing garbage": (good + b"garbage", "data after the end of the gzip stream")}


@pytest.mark.parametrize("case", list(_corrupt()))
def test_a_corrupt_gzip_stream_is_400_naming_why_and_nothing_is_sent(client, case, app):
    body, reason = _corrupt()[case]
    answer = post(client, "sendMsg", body)
    assert answer.get_json() == {"code": 400, "msg": f"body: not a valid gzip stream "
                                                     f"({reason})"}
    assert answer.status_code == 400
    runtime = app.extensions["delayqueue"]
    assert runtime.client.keys("*gz-bad*") == []


@pytest.mark.parametrize("coding", ["deflate", "br", "compress", "zstd", "gzip, identity",
                                    "gzip, gzip", "identity, gzip"])
def test_any_other_content_encoding_is_415_naming_what_is_accepted(client, coding):
    answer = post(client, "sendMsg", gzip.compress(form(topic="gz-415", msg="x")),
                  coding=coding)
    body = assert_refused(answer, 415, "Content-Encoding: ")
    assert body["msg"] == (f"Content-Encoding: {coding!r} is not accepted; send one of gzip, "
                           "x-gzip or identity (a single coding)")
    assert answer.headers["Accept-Encoding"] == "gzip, identity"


# -- the access check reads the decoded body ----------------------------------------------
@pytest.fixture(scope="module")
def guarded(redis_server):
    with redis_server.leased_db_url() as url:
        yield create_app(overrides={"redis-url": url, "snapshot-dir": "",
                                    "auth-tokens": json.dumps(TOKENS)}).test_client()


@pytest.mark.parametrize("content_type, body", [
    (FORM, form(topic="payments", msg="x")),
    (JSON, json.dumps({"topic": "payments", "msg": "x"}).encode()),
])
def test_a_topic_scoped_token_cannot_reach_another_topic_through_a_gzip_body(
        guarded, content_type, body):
    headers = {"Authorization": f"Bearer {NARROW}"}
    for path in ("sendMsg?topic=orders-1", "sendMsg"):
        answer = post(guarded, path, gzip.compress(body), content_type, **headers)
        assert answer.status_code == 403, answer.get_json()
        assert answer.get_json() == {"code": 403, "msg": "topic: 'payments' is outside "
                                                         "token 'narrow''s topics"}
    own = body.replace(b"payments", b"orders-1")
    answer = post(guarded, "sendMsg", gzip.compress(own), content_type, **headers)
    assert answer.get_json()["code"] == 200, answer.get_json()


# -- malformed JSON: HTTP 400 -------------------------------------------------------------
@pytest.mark.parametrize("path", ["sendMsg", "pullMsg", "sendMsgBatch"])
@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]", b'"text"', b"null", b""])
def test_a_malformed_json_body_is_http_400(client, path, body):
    answer = post(client, path, body, JSON, coding=None)
    assert_refused(answer, 400, "body: ")
    compressed = post(client, path, gzip.compress(body), JSON)
    assert compressed.get_json() == answer.get_json()


def test_camellias_form_bodies_answer_as_before(client):
    """Empty msg: camellia's HTTP 200, code 400; absent: HTTP 400; valid: 200."""
    empty = post(client, "sendMsg", form(topic="gz-camellia", msg=""), coding=None)
    assert (empty.status_code, empty.get_json()) == (200, {"code": 400,
                                                           "msg": "msg: must not be empty"})
    absent = post(client, "sendMsg", form(topic="gz-camellia"), coding=None)
    assert absent.status_code == 400
    ok = post(client, "pullMsg", form(topic="gz-camellia"), coding=None)
    assert (ok.status_code, ok.get_json()["code"]) == (200, 200)


# -- through gunicorn ----------------------------------------------------------------------
def test_gunicorn_decodes_a_gzip_body_with_a_length_and_a_chunked_one(node, topic):
    body = gzip.compress(form(topic=topic, msgId="m1", msg="over the wire"))
    headers = {"Content-Encoding": "gzip", "Content-Type": FORM}
    answer = requests.post(node.url + API + "sendMsg", data=body, headers=headers, timeout=15)
    assert answer.status_code == 200 and answer.json()["code"] == 200, answer.text
    chunked = gzip.compress(form(topic=topic, msgId="m2", msg="chunked"))
    answer = requests.post(node.url + API + "sendMsg", data=iter([chunked[:7], chunked[7:]]),
                           headers=headers, timeout=15)
    assert answer.status_code == 200 and answer.json()["code"] == 200, answer.text
    for msg_id, msg in (("m1", "over the wire"), ("m2", "chunked")):
        got = requests.post(node.url + API + "getMsg", data={"topic": topic, "msgId": msg_id},
                            timeout=15).json()
        assert got["delayMsg"]["msg"] == msg


def test_gunicorn_answers_a_bomb_413_and_another_coding_415(node, topic, bomb):
    headers = {"Content-Encoding": "gzip", "Content-Type": FORM}
    answer = requests.post(node.url + API + f"sendMsg?topic={topic}", data=bomb,
                           headers=headers, timeout=30)
    assert answer.status_code == 413
    assert answer.json()["msg"].startswith("body: decoded (gzip) body larger than")
    answer = requests.post(node.url + API + "sendMsg", data=zlib.compress(b"msg=x"),
                           headers={**headers, "Content-Encoding": "deflate"}, timeout=15)
    assert answer.status_code == 415 and answer.json()["code"] == 415, answer.text
    assert answer.headers["Accept-Encoding"] == "gzip, identity"


# -- /openapi.json -------------------------------------------------------------------------
def test_openapi_gives_every_envelope_operation_the_413_and_415_the_server_answers(client):
    spec = document()
    assert "**Compressed bodies.**" in spec["info"]["description"]
    assert 415 in spec["components"]["schemas"]["Error"]["properties"]["code"]["enum"]
    answer = post(client, "sendMsg", form(topic="gz-doc", msg="x"), coding="br")
    operations = [op for ops in spec["paths"].values() for op in ops.values()
                  if "413" in op["responses"]]
    assert len(operations) > 30
    for op in operations:
        shown = op["responses"]["415"]["content"]["application/json"]["examples"]["br"]
        assert shown["value"] == answer.get_json()
        too_large = op["responses"]["413"]["content"]["application/json"]["examples"]
        assert too_large["decoded-too-large"]["value"]["msg"].startswith(
            f"body: decoded (gzip) body larger than {LIMIT} bytes ({LIMIT_RULE})")
