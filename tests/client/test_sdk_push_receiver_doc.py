"""docs/client.md's Flask receiver ("Receiving pushes"), run as written: served on 127.0.0.1
for a live node's push subscription, it gets every message once, acks it and records it; a
redelivery of recorded work is answered 2xx without doing it again; a bad signature is
refused (401); a failing charge answers 503 with Retry-After."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import pytest
import requests
from werkzeug.serving import make_server

from delayqueue.client import DelayMsg, DelayQueueClient, Status
from delayqueue.core.signature import HEADER, sign

from support.sdk import push_node, topic  # noqa: F401 - fixtures
from support.wait import wait_until

DOC = Path(__file__).resolve().parents[2] / "docs" / "client.md"
SECRET = "doc-receiver-secret"


def receiver_source() -> str:
    section = DOC.read_text().split("## Receiving pushes", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.fixture
def served(tmp_path, monkeypatch):
    """The example's module namespace, its app served on a free port: (namespace, url)."""
    monkeypatch.setenv("DQ_PUSH_SECRET", SECRET)
    monkeypatch.setenv("DQ_DONE_DB", str(tmp_path / "done.db"))
    namespace: dict = {"__name__": "doc_receiver"}
    exec(compile(receiver_source(), str(DOC), "exec"), namespace)  # noqa: S102 - our doc
    charged: list[str] = []
    namespace["charge"] = charged.append       # the work, recorded
    namespace["charged"] = charged
    server = make_server("127.0.0.1", 0, namespace["app"], threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True, name="doc-receiver")
    thread.start()
    yield namespace, f"http://127.0.0.1:{server.server_port}/due"
    server.shutdown()
    namespace["db"].close()


def test_the_documented_receiver_acks_each_message_once(push_node, topic, served):
    namespace, url = served
    with DelayQueueClient(push_node.url, timeout=5) as client:
        client.create_subscription(topic, "billing", push_url=url, push_secret=SECRET)
        ids = [client.send(topic, f"order {i}", msg_id=f"o{i}").msg_id for i in range(3)]
        wait_until(lambda: all(client.get(topic, m, subscription="billing").status
                               == Status.ACKED for m in ids), 20,
                   message="the receiver did not ack every push")
    assert sorted(namespace["charged"]) == ["order 0", "order 1", "order 2"]
    rows = namespace["db"].execute("SELECT msg_id, receipt FROM done ORDER BY msg_id")
    assert [r[0] for r in rows.fetchall()] == ids


def post(url: str, msg: DelayMsg, secret: str = SECRET) -> requests.Response:
    body = json.dumps({"subscription": "billing", "delayMsg": msg.to_json()}).encode()
    stamp = int(time.time() * 1000)
    return requests.post(url, data=body, timeout=5,
                         headers={"Content-Type": "application/json",
                                  HEADER: sign(secret, stamp, body)})


def test_the_documented_receiver_refuses_dedupes_and_asks_for_a_retry(served):
    namespace, url = served
    first = DelayMsg("orders", "o1", "order 1", 1, 1, 2, 3, 1, Status.CONSUMING, receipt="r1")
    again = DelayMsg("orders", "o1", "order 1", 1, 1, 2, 3, 2, Status.CONSUMING, receipt="r2")
    assert post(url, first, secret="wrong").status_code == 401
    assert namespace["charged"] == []
    assert post(url, first).status_code == 204
    assert post(url, again).status_code == 204            # a redelivery: not charged again
    assert namespace["charged"] == ["order 1"]

    def down(order: str) -> None:
        raise ConnectionError("payment service down")
    namespace["charge"] = down
    later = post(url, DelayMsg("orders", "o2", "order 2", 1, 1, 2, 3, 1, Status.CONSUMING,
                               receipt="r3"))
    assert (later.status_code, later.headers["Retry-After"]) == (503, "60")
    assert namespace["db"].execute("SELECT COUNT(*) FROM done").fetchone()[0] == 1
