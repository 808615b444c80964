"""Push delivery in the console, in a real headless Chromium against a real node (gunicorn,
its push loop running) that pushes to a local receiver (allowed by push-allowed-networks
127.0.0.0/8): the topic page's push form makes the default subscription a push one; the
receiver answers 500 to one message (maxRetry 0: one failure, then dead) and holds the
other unanswered; the push panel shows the URL, one delivery in flight and the failure's
row (status 500, its msgId, outcome 5xx, the answer's excerpt escaped); once the held POST
is answered 200, nothing is in flight. A pull subscription has no push panel and is listed
as pull; a URL with <>&" in it is shown as text, on its page and in the list, never as
markup. No console errors; the pages' screenshots are not blank.

Screenshots: <artefacts>/console/topic-push.png and subscription-push-escaped.png
(test_console_browser.py says where <artefacts> is).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from selenium.webdriver.common.by import By
from test_console_browser import console_errors, navigate, screenshot

from delayqueue.background.runtime import Runtime
from delayqueue.settings.config import load_settings

from support import wait_until
from support.browser import chromium
from support.node import ServerProcess

pytestmark = pytest.mark.slow
HOLD_S = 120          # the held POST's bound: released by the test long before
FAILURE_BODY = "boom <&> \"quoted\""


class Receiver:
    """A local push receiver: 500 to msgId "fail", "hold" kept unanswered until
    ``release()`` (then 200), 200 to the rest; ``seen``: the msgIds POSTed, in order."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.held = threading.Event()
        self.released = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                msg_id = body["delayMsg"]["msgId"]
                owner.seen.append(msg_id)
                if msg_id == "hold":
                    owner.held.set()
                    owner.released.wait(HOLD_S)
                status, text = (500, FAILURE_BODY) if msg_id == "fail" else (200, "ok")
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "Receiver":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def receiver():
    with Receiver() as found:
        yield found


@pytest.fixture(scope="module")
def node(redis_server):
    with redis_server.leased_db_url() as url, ServerProcess(
            url, settings={"push-allowed-networks": "127.0.0.0/8"}) as server:
        yield server


@pytest.fixture(scope="module")
def core(node):
    """The core on the node's Redis (its keys: the same default prefix and namespace)."""
    return Runtime(load_settings(overrides={"redis_url": node.redis_url, "snapshot_dir": "",
                                            "push_allowed_networks": "127.0.0.0/8"}))


@pytest.fixture(scope="module")
def browser():
    with chromium(logs=("browser",)) as driver:
        yield driver


PANEL = """
const panel = document.getElementById('push');
if (!panel) return null;
const fields = {};
for (const dd of panel.querySelectorAll('[data-push]')) fields[dd.dataset.push] = dd.innerText;
const errors = [];
for (const tr of panel.querySelectorAll('#push-errors tbody tr[data-push-error]')) {
  const row = {};
  for (const td of tr.querySelectorAll('[data-field]')) row[td.dataset.field] = td.innerText;
  row.datetime = tr.querySelector('time').getAttribute('datetime');
  errors.push(row);
}
return {fields: fields, errors: errors,
        none: panel.querySelector('#push-no-errors') ? 'yes' : 'no'};
"""


def panel(driver) -> dict | None:
    """The push panel as the browser shows it (None: the page has none)."""
    return driver.execute_script(PANEL)


def delivery(driver) -> dict[str, str]:
    """subscription -> its list row's delivery cell, as shown."""
    return dict(driver.execute_script("""
return Array.from(document.querySelectorAll('#subscription-list tbody tr[data-subscription]'),
  tr => [tr.dataset.subscription, tr.querySelector('[data-field="delivery"]').innerText]);
"""))


def push_form(driver, **fields: str) -> None:
    for name, value in fields.items():
        field = driver.find_element(By.CSS_SELECTOR, f'#push-settings input[name="{name}"]')
        field.clear()
        field.send_keys(value)
    navigate(driver, driver.find_element(By.ID, "save-push").click)


def test_push_delivery_in_the_console_in_headless_chromium(node, core, receiver, browser):
    topic = "web-push"
    assert node.call("setTopicConfig", topic=topic, maxRetry=0)["code"] == 200
    for msg_id in ("fail", "hold"):
        assert node.call("sendMsg", topic=topic, msg=f"body {msg_id}", msgId=msg_id
                         )["code"] == 200

    # -- a pull topic: no panel; its push form makes the default subscription a push one --
    browser.get(f"{node.url}/dashboard/topic?topic={topic}")
    assert panel(browser) is None
    assert browser.find_elements(By.ID, "push-off")
    assert delivery(browser) == {"default": "pull"}
    push_form(browser, pushUrl=receiver.url, pushTimeoutMillis="60000")
    assert browser.find_element(By.ID, "done").text == "push settings saved"

    def pushed() -> dict | None:
        status = core.subscriptions.push_status(topic, None)
        return status if (receiver.held.is_set() and status["lastErrors"]
                          and status["inFlight"] == 1) else None
    status = wait_until(pushed, 60, interval_s=0.2, message=lambda: (
        f"receiver saw {receiver.seen}; {core.subscriptions.push_status(topic, None)}"))
    [failure] = status["lastErrors"]           # maxRetry 0: one 500, then a dead letter
    assert (failure["msgId"], failure["outcome"], failure["status"]) == ("fail", "5xx", 500)

    # -- its panel: URL, settings, one delivery in flight, the failure's row ---------------
    browser.get(f"{node.url}/dashboard/topic?topic={topic}")
    shown = panel(browser)
    assert shown["fields"] == {"pushUrl": receiver.url, "pushTimeoutMillis": "1 min",
                               "pushConcurrency": "16", "pushSecretSet": "no",
                               "paused": "no", "inFlight": "1"}
    [row] = shown["errors"]
    assert (row["msgId"], row["outcome"], row["status"]) == ("fail", "5xx", "500")
    assert row["error"] == f"HTTP 500: {FAILURE_BODY}"      # as text: escaped in the HTML
    assert row["time"].endswith(" ago") or row["time"] == "now"
    assert shown["none"] == "no"
    assert delivery(browser) == {"default": f"push {receiver.url}"}
    browser.find_element(By.ID, "push-title").location_once_scrolled_into_view  # noqa: B018
    screenshot(browser, "topic-push")
    assert console_errors(browser) == []

    # -- the held POST answered 200: acked, nothing in flight ------------------------------
    receiver.released.set()
    wait_until(lambda: core.subscriptions.push_status(topic, None)["inFlight"] == 0, 60,
               interval_s=0.2, message="the held push is still in flight")
    browser.get(f"{node.url}/dashboard/topic?topic={topic}")
    assert panel(browser)["fields"]["inFlight"] == "0"
    assert core.queue.get(topic, "hold").status == 4 and \
        core.queue.get(topic, "fail").status == 6

    # -- a pull subscription: no panel, listed as pull -------------------------------------
    core.subscriptions.create(topic, "puller", {})
    odd_url = receiver.url + '?a=<b>x</b>&c="d"'
    core.subscriptions.create(topic, "odd", {})
    browser.get(f"{node.url}/dashboard/subscription?topic={topic}&subscription=puller")
    assert panel(browser) is None and browser.find_elements(By.ID, "push-off")

    # -- a URL with <>&" in it, set with its page's form: shown as text, never markup ------
    browser.get(f"{node.url}/dashboard/subscription?topic={topic}&subscription=odd")
    push_form(browser, pushUrl=odd_url)
    assert browser.find_element(By.ID, "done").text == "push settings saved"
    assert core.subscriptions.push_status(topic, "odd")["pushUrl"] == odd_url
    assert panel(browser)["fields"]["pushUrl"] == odd_url
    assert browser.find_element(By.CSS_SELECTOR, '#push-settings input[name="pushUrl"]'
                                ).get_attribute("value") == odd_url
    assert browser.execute_script("return document.querySelectorAll('main b').length") == 0
    screenshot(browser, "subscription-push-escaped")
    browser.get(f"{node.url}/dashboard/topic?topic={topic}")
    assert delivery(browser) == {"default": f"push {receiver.url}", "odd": f"push {odd_url}",
                                 "puller": "pull"}
    assert browser.find_element(
        By.CSS_SELECTOR, 'tr[data-subscription="odd"] .push-url').get_attribute("title") == \
        odd_url
    assert browser.execute_script("return document.querySelectorAll('main b').length") == 0
    assert console_errors(browser) == []
