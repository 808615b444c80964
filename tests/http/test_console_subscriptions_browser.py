"""Subscriptions in the console in a real headless Chromium (Debian's chromium +
chromium-driver, selenium) against a real node (gunicorn): two subscriptions created with
the topic page's form; the topic page lists them, the default first, with the sizes the core
gives; a subscription's page shows its own dead letter only and redrives it; its settings
form sets ackTimeoutMillis with source "subscription"; a confirmed delete removes one; no
console errors; the pages' screenshots are not blank.

The deliveries (a pull and a nack by subscription) are made through the core on the node's
Redis, so the test reads the console and nothing else of the HTTP API's subscription routes.
Screenshots: <artefacts>/console/topic-subscriptions.png and subscription.png
(test_console_browser.py says where <artefacts> is).
"""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from test_console_browser import confirm_dialog, console_errors, navigate, screenshot

from delayqueue.background.runtime import Runtime
from delayqueue.core.subscriptions import Subscriptions
from delayqueue.settings.config import load_settings

from support.browser import chromium
from support.node import ServerProcess

pytestmark = pytest.mark.slow
SIZES = ("waitingQueueSize", "readyQueueSize", "ackQueueSize", "groupBlockedSize",
         "deadQueueSize")


@pytest.fixture(scope="module")
def node(redis_server):
    with redis_server.leased_db_url() as url, ServerProcess(url) as server:
        yield server


@pytest.fixture(scope="module")
def core(node):
    """The core on the node's Redis (its keys: the same default prefix and namespace)."""
    return Runtime(load_settings(overrides={"redis_url": node.redis_url, "snapshot_dir": ""}))


@pytest.fixture(scope="module")
def browser():
    with chromium(logs=("browser",)) as driver:
        yield driver


def table(driver, table_id: str, key: str) -> dict[str, dict[str, str]]:
    """``data-<key>`` -> {field: text} of a table's rows in page order, read in one script
    call (as pairs: the driver hands an object back with its keys sorted)."""
    return dict(driver.execute_script("""
const rows = [];
for (const tr of document.querySelectorAll(`#${arguments[0]} tbody tr[data-${arguments[1]}]`)) {
  const row = {};
  for (const td of tr.querySelectorAll('[data-field]')) row[td.dataset.field] = td.innerText;
  rows.push([tr.getAttribute(`data-${arguments[1]}`), row]);
}
return rows;
""", table_id, key))


def done(driver) -> str:
    return driver.find_element(By.ID, "done").text


def test_subscriptions_in_the_console_in_headless_chromium(node, core, browser):
    topic = "web-subs"
    assert node.call("setTopicConfig", topic=topic, maxRetry=0)["code"] == 200
    assert node.call("sendMsg", topic=topic, msg="before", msgId="before")["code"] == 200

    # -- two subscriptions, made with the topic page's form ---------------------------------
    browser.get(f"{node.url}/dashboard/topic?topic={topic}")
    for name in ("audit", "billing"):
        browser.find_element(By.CSS_SELECTOR, "#create-subscription input[name=subscription]"
                             ).send_keys(name)
        navigate(browser, browser.find_element(By.ID, "create-subscription-button").click)
        assert browser.find_element(By.ID, "subscription-name").text == name
        assert done(browser).startswith("created")
        navigate(browser, browser.find_element(By.ID, "topic-name").click)
    subs = Subscriptions(core.queue)
    assert sorted(subs.names(topic)) == ["audit", "billing"]

    # Each its own dead letter: audit "first", billing "second".
    for msg_id in ("first", "second", "third"):
        assert node.call("sendMsg", topic=topic, msg=f"body {msg_id}", msgId=msg_id
                         )["code"] == 200
    [first] = core.queue.pull(topic, 1, subscription="audit").messages
    core.queue.nack(topic, "first", first.receipt, subscription="audit")
    pulled = core.queue.pull(topic, 2, subscription="billing").messages
    assert [m.msg_id for m in pulled] == ["first", "second"]
    core.queue.ack(topic, "first", pulled[0].receipt, subscription="billing")
    core.queue.nack(topic, "second", pulled[1].receipt, subscription="billing")

    # -- the topic page: every subscription, the default first, with the core's sizes -------
    browser.get(f"{node.url}/dashboard/topic?topic={topic}")
    shown = table(browser, "subscription-list", "subscription")
    listed = subs.list(topic)
    assert list(shown) == [s["subscription"] for s in listed]
    assert list(shown)[0] == "default" and set(shown) == {"default", "audit", "billing"}
    for entry in listed:
        for field in SIZES:
            assert int(shown[entry["subscription"]][field]) == entry[field], \
                (entry["subscription"], field)
    assert [shown["audit"][f] for f in ("readyQueueSize", "deadQueueSize")] == ["2", "1"]
    assert [shown["billing"][f] for f in ("readyQueueSize", "deadQueueSize")] == ["1", "1"]
    assert [shown["default"][f] for f in ("readyQueueSize", "deadQueueSize")] == ["4", "0"]
    browser.find_element(By.ID, "subscriptions").location_once_scrolled_into_view  # noqa: B018
    screenshot(browser, "topic-subscriptions")
    assert console_errors(browser) == []

    # -- audit's page: its own dead letter only, redriven there -----------------------------
    navigate(browser, browser.find_element(
        By.CSS_SELECTOR, 'tr[data-subscription="audit"] a').click)
    assert browser.find_element(By.ID, "subscription-name").text == "audit"
    assert list(table(browser, "dead", "msg-id")) == ["first"]
    assert browser.find_element(By.CSS_SELECTOR, '[data-sizes] [data-field="deadQueueSize"]'
                                ).text == "1"
    screenshot(browser, "subscription")
    navigate(browser, browser.find_element(
        By.CSS_SELECTOR, 'tr[data-msg-id="first"] button.redrive').click)
    assert done(browser) == "redriven: 1"
    assert list(table(browser, "dead", "msg-id")) == []
    assert core.queue.get(topic, "first", subscription="audit").status == 2
    assert core.queue.get(topic, "second", subscription="billing").status == 6

    # -- its settings form: ackTimeoutMillis, its own value -----------------------------------
    field = browser.find_element(By.CSS_SELECTOR, '#settings input[name="ackTimeoutMillis"]')
    field.send_keys("45000")
    navigate(browser, browser.find_element(By.ID, "save-settings").click)
    assert done(browser) == "settings saved"
    assert browser.find_element(By.CSS_SELECTOR, '[data-setting="ackTimeoutMillis"]'
                                ).text == "45000"
    assert browser.find_element(By.CSS_SELECTOR, '[data-source="ackTimeoutMillis"]'
                                ).text == "subscription"
    values, source = subs.get_config(topic, "audit")
    assert (values["ackTimeoutMillis"], source["ackTimeoutMillis"]) == (45000, "subscription")
    assert console_errors(browser) == []

    # -- billing deleted from its page, after a confirmation ----------------------------------
    browser.get(f"{node.url}/dashboard/subscription?topic={topic}&subscription=billing")
    browser.find_element(By.ID, "delete-subscription").click()
    dialog = confirm_dialog(browser)
    assert dialog.text.startswith("Delete subscription billing of topic web-subs?")
    dialog.dismiss()
    assert sorted(subs.names(topic)) == ["audit", "billing"]
    navigate(browser, lambda: (browser.find_element(By.ID, "delete-subscription").click(),
                               confirm_dialog(browser).accept()))
    assert done(browser) == "deleted subscription billing"
    assert subs.names(topic) == ["audit"]
    assert list(table(browser, "subscription-list", "subscription")) == ["default", "audit"]
    assert console_errors(browser) == []
