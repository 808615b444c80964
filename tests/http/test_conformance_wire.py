"""The transport: JSON, multipart and form bodies, GET and POST, boolean spellings, and one
send per response on a keep-alive connection (delayqueue/server/gunicorn_workers.py)."""

from __future__ import annotations

import pytest
import requests

from support import conformance as api

pytestmark = pytest.mark.every_topology


def test_json_body_is_accepted(node, topic):
    response = requests.post(node.url + api.API + "sendMsg", timeout=10,
                             json={"topic": topic, "msg": "j", "msgId": "j", "delayMillis": 0,
                                   "maxRetry": 2})
    reply = response.json()
    assert reply["code"] == 200 and reply["delayMsg"]["maxRetry"] == 2
    response = requests.post(node.url + api.API + "pullMsg", timeout=10,
                             json={"topic": topic, "batch": 5})
    assert [m["msgId"] for m in response.json()["delayMsgList"]] == ["j"]
    response = requests.post(node.url + api.API + "ackMsg", timeout=10,
                             json={"topic": topic, "msgId": "j", "ack": True})
    assert response.json()["code"] == 200
    assert api.status(node, topic, "j") == 4


@pytest.mark.parametrize("endpoint", ["sendMsg", "pullMsg", "getMsg", "getTopicInfo",
                                      "getTopicInfoList", "getMonitorData"])
def test_get_and_post_are_both_accepted(node, topic, endpoint):
    params = {"topic": topic, "msg": "x", "msgId": "x"}
    if endpoint == "getMsg":
        api.send(node, topic, msgId="x")
    for method in (requests.get, requests.post):
        kwargs = {"params": params} if method is requests.get else {"data": params}
        response = method(node.url + api.API + endpoint, timeout=10, **kwargs)
        assert response.status_code == 200, (method, response.text)
        assert response.json()["code"] == 200


@pytest.mark.parametrize("spelling,acks", [
    ("true", True), ("TRUE", True), ("1", True), ("yes", True), ("Yes", True), ("on", True),
    ("ON", True), ("false", False), ("False", False), ("0", False), ("no", False),
    ("NO", False), ("off", False), ("oFf", False)])
def test_boolean_spellings_are_accepted_in_any_case(node, topic, spelling, acks):
    api.send(node, topic, msgId="b")
    api.pull(node, topic)
    reply = node.call("ackMsg", topic=topic, msgId="b", ack=spelling)
    assert reply["code"] == 200
    assert api.status(node, topic, "b") == (4 if acks else 2)


def test_unknown_boolean_spelling_is_http_400(node, topic):
    api.send(node, topic, msgId="b")
    api.pull(node, topic)
    status_code, reply = api.post(node, "ackMsg", topic=topic, msgId="b", ack="maybe")
    assert status_code == 400 and reply["code"] == 400 and "ack" in reply["msg"]
    assert api.status(node, topic, "b") == 3


def test_non_object_json_body_is_rejected(node):
    response = requests.post(node.url + api.API + "sendMsg", timeout=10, json=["topic", "msg"])
    assert response.json()["code"] == 400
    assert "body" in response.json()["msg"]


def test_multipart_form_body_up_to_the_limit_is_accepted_and_beyond_it_refused(node, topic):
    url = f"{node.url}/camellia/delayQueue/sendMsg"
    ok = requests.post(url, files={"topic": (None, topic), "msg": (None, "x" * 900_000)}).json()
    assert ok["code"] == 200, ok
    too_big = requests.post(
        url, files={"topic": (None, topic), "msg": (None, "x" * (1_048_576 + 1))}).json()
    assert too_big["code"] == 400 and too_big["msg"].startswith("msg:"), too_big


def test_responses_with_and_without_body_keep_a_keep_alive_connection_in_step(node):
    """Headers travel with the body in one send; a HEAD answer (no body) still gets its
    headers, and the next request on the same connection is answered correctly."""
    import http.client
    from urllib.parse import urlsplit

    url = urlsplit(node.url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=5)
    try:
        for method in ("GET", "HEAD", "POST", "HEAD", "GET"):
            conn.request(method, "/camellia/health/check")
            response = conn.getresponse()
            body = response.read()
            assert response.status == 200
            assert response.getheader("Content-Type") == "application/json"
            assert body == (b"" if method == "HEAD" else b'{"code":200}\n')
            assert int(response.getheader("Content-Length")) == len(b'{"code":200}\n')
    finally:
        conn.close()
