"""The security headers (delayqueue/http/headers.py): nosniff, frame DENY and
Referrer-Policy on every answer (JSON, text, files, errors, gunicorn's own error answers),
and on HTML (the console, /docs) a Content-Security-Policy with frame-ancestors 'none' and
no 'unsafe-inline': the console has no inline block, /docs' two carry the answer's nonce.

In-process against a real redis-server for what the pages hold; a real node and headless
Chromium for what the browser does with it: the console and /docs run without one
violation of the policy, an inline script without the nonce does not run, and another
site cannot frame the console (the frame holds Chromium's error page).
"""

from __future__ import annotations

import re
import socket
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import pytest
import requests

from delayqueue.http.app import create_app
from delayqueue.http.headers import COMMON

from support import wait_until
from support.browser import chromium
from support.node import ServerProcess

Q = "/camellia/delayQueue/"
SAME_ORIGIN = {"Sec-Fetch-Site": "same-origin"}
PAGES = ("/dashboard/", "/dashboard/nodes", "/dashboard/topic?topic=shop",
         "/dashboard/message?topic=shop&msgId=m1", "/dashboard/message", "/docs")


@pytest.fixture
def http(redis_url):
    app = create_app(overrides={"redis_url": redis_url, "snapshot_dir": ""})
    client = app.test_client()
    # A topic whose page shows every form: messages, a dead letter, paused.
    client.post(Q + "setTopicConfig", data={"topic": "shop", "maxRetry": 0,
                                            "description": "the shop"})
    client.post(Q + "sendMsg", data={"topic": "shop", "msg": "x", "msgId": "poison"})
    [pulled] = client.post(Q + "pullMsg", data={"topic": "shop"}).get_json()["delayMsgList"]
    client.post(Q + "ackMsg", data={"topic": "shop", "msgId": "poison", "ack": "false",
                                    "receipt": pulled["receipt"]})
    client.post(Q + "sendMsg", data={"topic": "shop", "msg": "x", "msgId": "m1"})
    client.post(Q + "pauseTopic", data={"topic": "shop"})
    return client


def assert_common(headers, where):
    for name, value in COMMON:
        assert headers.get(name) == value, (where, name, headers.get(name))


def csp(headers) -> dict[str, str]:
    """directive -> its sources."""
    text = headers["Content-Security-Policy"]
    return dict(part.strip().partition(" ")[::2] for part in text.split(";"))


def test_every_kind_of_answer_carries_the_common_headers(http):
    answers = {
        "JSON": http.get(Q + "getTopicInfo?topic=shop"),
        "JSON error envelope": http.post(Q + "purgeTopic", data={"topic": "shop", "limit": 0}),
        "no such route": http.get("/nowhere"),
        "health": http.get("/camellia/health/check"),
        "openapi": http.get("/openapi.json"),
        "metrics text": http.get("/metrics"),
        "plain text": http.get(Q + "getMonitorString"),
        "a form's redirect": http.post("/dashboard/topic/resume", data={"topic": "shop"},
                                       headers=SAME_ORIGIN),
        "a refused cross-site form": http.post("/dashboard/topic/pause",
                                               data={"topic": "shop"}),
        "a file": http.get("/docs/swagger-ui.css"),
        "413": http.post(Q + "sendMsg", data="x" * (5 << 22),
                         content_type="application/x-www-form-urlencoded"),
    }
    etag = answers["a file"].headers["ETag"]
    answers["304"] = http.get("/docs/swagger-ui.css", headers={"If-None-Match": etag})
    assert answers["304"].status_code == 304 and answers["413"].status_code == 413
    for where, answer in answers.items():
        assert_common(answer.headers, where)
        # The policy goes with HTML (here a redirect's little page) only.
        assert ("Content-Security-Policy" in answer.headers) == (answer.mimetype
                                                                 == "text/html"), where


@pytest.mark.parametrize("path", PAGES)
def test_an_html_page_has_a_strict_policy_and_its_inline_blocks_carry_its_nonce(http, path):
    answer = http.get(path)
    assert answer.status_code == 200 and answer.mimetype == "text/html"
    assert_common(answer.headers, path)
    policy = csp(answer.headers)
    assert policy["frame-ancestors"] == "'none'" and policy["default-src"] == "'self'"
    assert policy["object-src"] == "'none'" and policy["base-uri"] == "'none'"
    assert policy["form-action"] == "'self'"
    assert "unsafe" not in answer.headers["Content-Security-Policy"]
    html = answer.get_data(as_text=True)
    inline = [attributes for tag, attributes in re.findall(r"<(script|style)\b([^>]*)>", html)
              if "src=" not in attributes]
    if path.startswith("/dashboard/"):
        # The console's script and style are files: its policy names no nonce at all.
        assert inline == [] and "script-src" not in policy, path
        assert re.search(r'<script src="/dashboard/console.js', html)
    else:
        nonce = re.fullmatch(r"'self' 'nonce-([\w-]{20,})'", policy["script-src"]).group(1)
        assert policy["style-src"] == policy["script-src"]
        assert len(inline) == 2 and all(f'nonce="{nonce}"' in a for a in inline), inline
        again = csp(http.get(path).headers)["script-src"]
        assert again != policy["script-src"], "the nonce must change with every answer"
    # What a nonce cannot allow: inline event handlers and style attributes.
    assert not re.search(r"<[^>]*\son[a-z]+\s*=", html), "an inline event handler"
    assert not re.search(r"<[^>]*\sstyle\s*=", html), "a style attribute"


def test_the_topic_page_confirms_its_purges_with_data_confirm(http):
    html = http.get("/dashboard/topic?topic=shop").get_data(as_text=True)
    forms = re.findall(r'<form method="post" action="([^"]+)"[^>]*data-confirm="([^"]+)"', html)
    assert {action for action, _ in forms} == {"/dashboard/topic/purgeMessages",
                                               "/dashboard/topic/purge"}


# -- a real node ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def node(redis_server):
    with redis_server.leased_db_url() as url, ServerProcess(url) as server:
        yield server


def test_a_real_node_sends_them_and_so_do_gunicorns_own_error_answers(node):
    for path in (Q + "getTopicInfo?topic=x", "/dashboard/", "/docs"):
        answer = requests.get(node.url + path, timeout=10)
        assert_common(answer.headers, path)
        assert ("Content-Security-Policy" in answer.headers) == path.startswith(("/dash", "/docs"))
    # A request line over 4094 bytes: answered by gunicorn itself (server/gunicorn_workers.py).
    with socket.create_connection(("127.0.0.1", node.port), timeout=10) as conn:
        conn.sendall(f"GET /{'a' * 5000} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        raw = b""
        while b"\r\n\r\n" not in raw:
            chunk = conn.recv(65536)
            if not chunk:
                break
            raw += chunk
    head = raw.partition(b"\r\n\r\n")[0].decode("latin-1")
    assert head.startswith("HTTP/1.1 414 ")
    for name, value in COMMON:
        assert f"\r\n{name}: {value}" in head


# Installed before any of the page's own scripts run (Chromium's DevTools protocol): every
# violation of the page's policy is kept in window.__violations.
WATCH = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) => window.__violations.push(
  e.violatedDirective + " " + (e.blockedURI || "inline") + " " + (e.sample || "")));
"""


@pytest.mark.slow
def test_in_chromium_the_pages_run_under_the_policy_and_nothing_else_does(node, redis_server):
    requests.post(node.url + Q + "sendMsg", data={"topic": "shop", "msg": "x", "msgId": "m1"},
                  timeout=10)
    with chromium(logs=("browser",)) as driver:
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": WATCH})
        for path in ("/dashboard/", "/dashboard/nodes", "/dashboard/topic?topic=shop",
                     "/dashboard/message?topic=shop&msgId=m1", "/docs"):
            driver.get(node.url + path)
            if path == "/docs":
                wait_until(lambda: driver.find_elements("css selector", ".opblock"), 30, 0.2,
                           message="/docs rendered no operation")
            assert driver.execute_script("return window.__violations") == [], path
        # An inline script without the nonce is refused, and says so.
        driver.get(node.url + "/dashboard/")
        driver.execute_script("""
            const s = document.createElement("script");
            s.textContent = "window.__ran = true";
            document.body.appendChild(s);""")
        violations = wait_until(lambda: driver.execute_script("return window.__violations"),
                                5, 0.1, message="no violation reported for an inline script")
        assert violations[0].startswith("script-src")
        assert driver.execute_script("return window.__ran === undefined")
        # Another site (another port: another origin) cannot frame the console; a page
        # without the headers, from that site, can.
        with framing_site(node.url + "/dashboard/") as site:
            driver.get(site + "/control")
            driver.switch_to.frame("framed")
            assert wait_until(lambda: driver.find_elements("css selector", "#framed-ok"),
                              10, 0.2, message="the control page was not framed")
            driver.switch_to.default_content()
            driver.get(site + "/console")
            driver.switch_to.frame("framed")

            def framed_page() -> str:
                return driver.execute_script("return location.href")
            assert wait_until(lambda: framed_page().startswith("chrome-error:"), 10, 0.2,
                              message=lambda: f"the frame shows {framed_page()}")
            assert not driver.find_elements("css selector", "#fleet")


@contextmanager
def framing_site(console_url: str) -> Iterator[str]:
    """A site of its own on a free port: ``/console`` frames ``console_url``, ``/control``
    frames ``/framed`` (its own page, no headers)."""

    class Pages(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            framed = console_url if self.path == "/console" else "/framed"
            body = (b"<p id='framed-ok'>framed</p>" if self.path == "/framed" else
                    f"<iframe id='framed' src='{framed}'></iframe>".encode())
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
