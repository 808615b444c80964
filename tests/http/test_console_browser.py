"""The console in a real headless Chromium (Debian's chromium + chromium-driver, selenium)
against a real node (gunicorn): no console errors, the numbers match the API, the table
refreshes itself, a redrive button works, a topic's messages page through, pause / resume
and a confirmed purge work; the topics sort and filter, the charts switch span and show a
point's values under the pointer, the test-message form sends, a dead letter's own Purge asks
first, an unknown topic says so, the Nodes page shows the running node; and each page's
screenshot is not blank.

Screenshots are kept as test artefacts in <artefacts>/console/, where <artefacts> is
$CONSOLE_TEST_ARTIFACTS or build/test-artifacts in the repository: fleet.png, topic.png,
message.png, topic-messages.png, topic-paused.png, nodes.png, fleet-sorted.png,
topic-24h.png, unknown-topic.png.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from PIL import Image, ImageStat
from selenium.common.exceptions import NoAlertPresentException, WebDriverException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.expected_conditions import staleness_of

from delayqueue import __version__

from support import wait_until
from support.browser import chromium
from support.node import REPO, ServerProcess

ARTIFACTS = Path(os.environ.get("CONSOLE_TEST_ARTIFACTS", REPO / "build" / "test-artifacts")
                 ) / "console"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def node(redis_server):
    with redis_server.leased_db_url() as url, \
            ServerProcess(url, settings={"monitor-interval-seconds": 1}) as server:
        yield server


@pytest.fixture(scope="module")
def browser():
    with chromium(logs=("browser",)) as driver:
        yield driver


def console_errors(driver) -> list[str]:
    return [entry["message"] for entry in driver.get_log("browser")
            if entry["level"] in ("SEVERE", "ERROR")]


def screenshot(driver, name: str) -> Path:
    """Save the page as an artefact and check it is not blank (text, table rules, charts)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    png = driver.get_screenshot_as_png()
    path.write_bytes(png)
    image = Image.open(io.BytesIO(png)).convert("L")
    assert image.size[0] >= 1000
    stddev = ImageStat.Stat(image).stddev[0]
    dark = sum(image.histogram()[:128])
    assert stddev > 10 and dark > 2000, f"{path} looks blank (stddev {stddev:.1f}, {dark} dark)"
    return path


FLEET_TABLE = """
const rows = {};
for (const tr of document.querySelectorAll('#topics tbody tr[data-topic]')) {
  const row = {href: tr.querySelector('a').href};
  for (const td of tr.querySelectorAll('[data-field]')) row[td.dataset.field] = td.textContent;
  rows[tr.dataset.topic] = row;
}
return rows;
"""


def fleet_table(driver) -> dict[str, dict[str, str]]:
    """topic -> {field: text, "href": its link}, read in one go (the table refreshes)."""
    return driver.execute_script(FLEET_TABLE)


def test_console_pages_in_headless_chromium(node, browser):
    # Topics with something in every column: waiting, ready, consuming and dead.
    for i in range(4):
        assert node.call("sendMsg", topic="web-orders", msg=f"o{i}")["code"] == 200
    node.call("sendMsg", topic="web-orders", msg="later", delayMillis=600_000)
    node.call("pullMsg", topic="web-orders", batch=1)
    node.call("setTopicConfig", topic="web-poison", maxRetry=0)
    node.call("sendMsg", topic="web-poison", msg="bad", msgId="poison-1", groupId="cart-9")
    node.call("pullMsg", topic="web-poison")
    assert node.call("ackMsg", topic="web-poison", msgId="poison-1", ack="false")["code"] == 200

    # -- the fleet page (refreshing every second: read it in one script call, atomically) -----
    browser.get(node.url + "/dashboard/?refresh=1")
    rows = fleet_table(browser)
    infos = {i["topic"]: i for i in node.call("getTopicInfoList")["data"]}
    assert set(rows) == set(infos) == {"web-orders", "web-poison"}
    for topic, info in infos.items():
        for field in ("waitingQueueSize", "readyQueueSize", "ackQueueSize",
                      "groupBlockedSize", "deadQueueSize"):
            assert int(rows[topic][field]) == info[field], (topic, field)
    assert [rows["web-orders"][f] for f in
            ("waitingQueueSize", "readyQueueSize", "ackQueueSize")] == ["1", "3", "1"]
    screenshot(browser, "fleet")
    # It refreshes itself: two more sends show up without a reload.
    node.call("sendMsg", topic="web-orders", msg="x1")
    node.call("sendMsg", topic="web-orders", msg="x2")
    wait_until(lambda: fleet_table(browser)["web-orders"]["readyQueueSize"] == "5", 10, 0.1,
               "the fleet table did not refresh")
    assert console_errors(browser) == []

    # -- the topic page: charts, dead letters, the redrive button ----------------------------
    browser.get(rows["web-poison"]["href"])      # the link the fleet table gives
    wait_until(lambda: browser.find_elements(By.ID, "topic-name"), 10)
    # throughput 4 (sent, scheduled, delivered, acked), failures 3, debounce and missed fire
    # times 3, lag 2, backlog 1
    assert len(browser.find_elements(By.CSS_SELECTOR, "svg.chart polyline")) == 13
    assert browser.find_element(By.CSS_SELECTOR, '[data-sizes] [data-field="deadQueueSize"]'
                                ).text == "1"
    screenshot(browser, "topic")
    browser.find_element(By.CSS_SELECTOR, 'tr[data-msg-id="poison-1"] button.redrive').click()
    done = wait_until(lambda: browser.find_elements(By.ID, "done"), 10,
                      message=lambda: browser.page_source[:3000])
    assert done[0].text == "redriven: 1"
    info = node.call("getTopicInfo", topic="web-poison")["data"]
    assert info["deadQueueSize"] == 0 and info["readyQueueSize"] == 1
    assert node.call("getMsg", topic="web-poison", msgId="poison-1")["delayMsg"]["status"] == 2
    assert browser.find_element(By.CSS_SELECTOR, '[data-sizes] [data-field="readyQueueSize"]'
                                ).text == "1"
    assert console_errors(browser) == []

    # -- message lookup -----------------------------------------------------------------------
    browser.get(node.url + "/dashboard/message")
    browser.find_element(By.CSS_SELECTOR, "main input[name=topic]").send_keys("web-poison")
    browser.find_element(By.CSS_SELECTOR, "main input[name=msgId]").send_keys("poison-1")
    browser.find_element(By.CSS_SELECTOR, "main form button").click()
    status = wait_until(lambda: browser.find_elements(By.CSS_SELECTOR, '[data-field="status"]'),
                        10, message=lambda: browser.page_source[-3000:])
    assert status[0].text == "2 (ready)"
    assert browser.find_element(By.CSS_SELECTOR, '[data-field="msg"]').text == "bad"
    assert browser.find_element(By.CSS_SELECTOR, '[data-field="groupId"]').text == "cart-9"
    screenshot(browser, "message")
    assert console_errors(browser) == []


def rows_shown(driver) -> list[str]:
    return [tr.get_attribute("data-msg-id")
            for tr in driver.find_elements(By.CSS_SELECTOR, "#message-list tbody tr[data-msg-id]")]


def navigate(driver, click) -> None:
    """Click something that loads a new page, and wait until the new page has loaded.

    Asked while the old document is being replaced, chromedriver may answer "Node with
    given id does not belong to the document" (an unknown error, not a stale element): not
    yet known, asked again."""
    old = driver.find_element(By.TAG_NAME, "html")
    click()

    def gone() -> bool:
        try:
            return staleness_of(old)(driver)
        except WebDriverException as exc:
            if "does not belong to the document" in str(exc):
                return False
            raise
    wait_until(gone, 10, message="the page did not change")
    wait_until(lambda: driver.execute_script("return document.readyState") == "complete", 10)


def confirm_dialog(driver):
    def alert():
        try:
            return driver.switch_to.alert
        except NoAlertPresentException:
            return None
    return wait_until(alert, 10, message="no confirmation dialog")


def flash_text(driver) -> str:
    return driver.find_element(By.ID, "done").text


def test_topic_controls_in_headless_chromium(node, browser):
    topic = "web-controls"
    node.call("setTopicConfig", topic=topic, description="Payments <to> settle\nsecond line")
    for i in range(30):
        assert node.call("sendMsg", topic=topic, msg=f"payment {i}",
                         msgId=f"pay-{i:02d}")["code"] == 200
    expected = [m["msgId"] for m in node.call("listMsg", topic=topic, status=2,
                                              limit=100)["delayMsgList"]]
    assert sorted(expected) == [f"pay-{i:02d}" for i in range(30)]

    # -- the topic page: description, the Ready tab, paging ----------------------------------
    browser.get(f"{node.url}/dashboard/topic?topic={topic}")
    assert browser.find_element(By.ID, "description").text == \
        "Payments <to> settle\nsecond line"
    navigate(browser, browser.find_element(By.CSS_SELECTOR, '.tabs a[data-view="ready"]').click)
    assert browser.find_element(By.CSS_SELECTOR, ".tabs a[aria-current]").text == "Ready (30)"
    first = rows_shown(browser)
    assert len(first) == 25 and not browser.find_elements(By.ID, "msg-first")
    screenshot(browser, "topic-messages")
    navigate(browser, browser.find_element(By.ID, "msg-next").click)
    second = rows_shown(browser)
    assert first + second == expected
    assert not browser.find_elements(By.ID, "msg-next")
    navigate(browser, browser.find_element(By.ID, "msg-first").click)
    assert rows_shown(browser) == first
    # A msgId links to its message page.
    navigate(browser, browser.find_element(
        By.CSS_SELECTOR, f'tr[data-msg-id="{first[0]}"] a').click)
    assert browser.find_element(By.CSS_SELECTOR, '[data-field="status"]').text == "2 (ready)"
    navigate(browser, browser.back)

    # -- pause and resume --------------------------------------------------------------------
    navigate(browser, browser.find_element(By.ID, "pause").click)
    assert flash_text(browser) == "paused: nothing is handed out until resumed"
    assert browser.find_element(By.ID, "paused").text == "paused"
    assert node.call("getTopicInfo", topic=topic)["data"]["paused"] is True
    assert node.call("pullMsg", topic=topic)["delayMsgList"] == []
    screenshot(browser, "topic-paused")
    browser.get(node.url + "/dashboard/")
    assert browser.find_element(
        By.CSS_SELECTOR, f'tr[data-topic="{topic}"] [data-field="paused"]').text == "paused"
    navigate(browser, browser.find_element(By.CSS_SELECTOR, f'tr[data-topic="{topic}"] a').click)
    navigate(browser, browser.find_element(By.ID, "resume").click)
    assert flash_text(browser) == "resumed"
    assert not browser.find_elements(By.ID, "paused")
    assert node.call("getTopicInfo", topic=topic)["data"]["paused"] is False

    # -- purge, confirmed: cancelled first, then accepted ------------------------------------
    browser.find_element(By.ID, "purge-topic").click()
    dialog = confirm_dialog(browser)
    assert dialog.text.startswith(f"Purge topic {topic}? Every live message")
    dialog.dismiss()
    assert node.call("getTopicInfo", topic=topic)["data"]["readyQueueSize"] == 30
    navigate(browser, lambda: (browser.find_element(By.ID, "purge-topic").click(),
                               confirm_dialog(browser).accept()))
    assert flash_text(browser) == "purged: 30, remaining: 0"
    assert node.call("getTopicInfo", topic=topic)["data"]["readyQueueSize"] == 0
    assert rows_shown(browser) == []
    assert console_errors(browser) == []


def topics_shown(driver) -> list[str]:
    return [tr.get_attribute("data-topic")
            for tr in driver.find_elements(By.CSS_SELECTOR, "#topics tbody tr[data-topic]")]


def test_operator_console_in_headless_chromium(node, browser):
    for topic, n in (("op-alpha", 3), ("op-beta", 1), ("else-gamma", 2)):
        for i in range(n):
            assert node.call("sendMsg", topic=topic, msg=f"{topic} {i}")["code"] == 200
    node.call("pullMsg", topic="else-gamma", batch=2)            # two consuming, none ready

    # -- sort by a column, both ways, then filter: the URL carries both ----------------------
    browser.get(node.url + "/dashboard/?refresh=3600")
    navigate(browser, browser.find_element(By.CSS_SELECTOR, 'th a[data-sort="consuming"]').click)
    assert "sort=consuming" in browser.current_url
    shown = topics_shown(browser)
    assert shown[0] == "else-gamma"
    assert browser.find_element(By.CSS_SELECTOR, "th a[aria-sort]").text == "consuming ▼"
    navigate(browser, browser.find_element(By.CSS_SELECTOR, 'th a[data-sort="consuming"]').click)
    assert "order=asc" in browser.current_url and topics_shown(browser)[-1] == "else-gamma"
    navigate(browser, browser.find_element(By.CSS_SELECTOR, 'th a[data-sort="ready"]').click)
    box = browser.find_element(By.CSS_SELECTOR, '#filter input[name="q"]')
    box.send_keys("op-")
    navigate(browser, box.submit)
    assert "q=op-" in browser.current_url and "sort=ready" in browser.current_url
    assert topics_shown(browser) == ["op-alpha", "op-beta"]          # 3 ready, then 1
    assert browser.find_element(By.ID, "topic-count").text.startswith("2 of ")
    screenshot(browser, "fleet-sorted")
    assert console_errors(browser) == []

    # -- the charts: the span switch, a point's values under the pointer ---------------------
    navigate(browser, browser.find_element(By.LINK_TEXT, "op-alpha").click)
    navigate(browser, browser.find_element(By.CSS_SELECTOR, '.spans a[data-span="5m"]').click)
    assert "span=5m" in browser.current_url
    assert browser.find_element(By.CSS_SELECTOR, ".spans a[aria-current]").text == "5m"
    charts = browser.find_elements(By.CSS_SELECTOR, "svg.chart")
    assert len(charts) == 5
    # 5 min of 1 s intervals: 150 points of 2 s each.
    assert len(charts[0].find_elements(By.CSS_SELECTOR, "rect.hit")) == 150
    last = charts[0].find_elements(By.CSS_SELECTOR, "rect.hit")[-1]
    ActionChains(browser).move_to_element(last).perform()
    readout = browser.find_elements(By.CSS_SELECTOR, "figure .readout")[0]
    wait_until(lambda: "sent/s" in readout.text, 5, message="no readout under the pointer")
    assert "UTC (so far): sent/s " in readout.text and " · scheduled/s " in readout.text \
        and " · delivered/s " in readout.text
    assert browser.find_element(By.CSS_SELECTOR, "svg.chart line.marker"
                                ).get_attribute("visibility") == "visible"
    units = [t.text for t in charts[0].find_elements(By.CSS_SELECTOR, "text.axis-unit")]
    assert units == ["messages/s", "time (UTC)"]
    navigate(browser, browser.find_element(By.CSS_SELECTOR, '.spans a[data-span="24h"]').click)
    assert browser.find_element(By.ID, "span-cut").text.endswith("they cover 24 min.")
    screenshot(browser, "topic-24h")

    # -- the test-message form round trip ----------------------------------------------------
    body = browser.find_element(By.CSS_SELECTOR, '#publish-form textarea[name="msg"]')
    body.clear()
    body.send_keys("hello from the browser")
    browser.find_element(By.CSS_SELECTOR, '#publish-form input[name="delayMillis"]'
                         ).send_keys("60000")
    navigate(browser, browser.find_element(By.ID, "publish-send").click)
    done = flash_text(browser)
    assert done.startswith("sent: msgId ")
    sent = node.call("getMsg", topic="op-alpha", msgId=done.removeprefix("sent: msgId "))
    assert sent["delayMsg"]["msg"] == "hello from the browser"
    assert sent["delayMsg"]["status"] == 1                     # waiting its 60 s

    # -- a dead letter's own Purge asks first, like Purge all --------------------------------
    node.call("setTopicConfig", topic="op-alpha", maxRetry=0)
    node.call("sendMsg", topic="op-alpha", msg="bad", msgId="op-poison")
    while node.call("pullMsg", topic="op-alpha", batch=10)["delayMsgList"]:
        pass
    assert node.call("ackMsg", topic="op-alpha", msgId="op-poison", ack="false")["code"] == 200
    browser.get(f"{node.url}/dashboard/topic?topic=op-alpha")
    purge = 'tr[data-msg-id="op-poison"] button.purge'
    browser.find_element(By.CSS_SELECTOR, purge).click()
    dialog = confirm_dialog(browser)
    assert dialog.text == "Purge dead letter op-poison of topic op-alpha? It is deleted for good."
    dialog.dismiss()
    assert node.call("getTopicInfo", topic="op-alpha")["data"]["deadQueueSize"] == 1
    navigate(browser, lambda: (browser.find_element(By.CSS_SELECTOR, purge).click(),
                               confirm_dialog(browser).accept()))
    assert flash_text(browser) == "purged: 1"
    assert node.call("getTopicInfo", topic="op-alpha")["data"]["deadQueueSize"] == 0
    assert console_errors(browser) == []

    # -- an unknown topic says so, creates nothing, and links back ---------------------------
    browser.get(f"{node.url}/dashboard/topic?topic=doesnotexist")
    assert "no topic 'doesnotexist'" in browser.find_element(By.ID, "unknown-topic").text
    screenshot(browser, "unknown-topic")
    # The one console error: the browser logs the page's own HTTP 404.
    assert [("topic=doesnotexist" in e, "404" in e) for e in console_errors(browser)] == \
        [(True, True)]
    navigate(browser, browser.find_element(By.ID, "back").click)
    assert "q=doesnotexist" in browser.current_url and topics_shown(browser) == []
    assert "doesnotexist" not in [i["topic"] for i in node.call("getTopicInfoList")["data"]]

    # -- the Nodes page: the running node, Redis ---------------------------------------------
    navigate(browser, browser.find_element(By.LINK_TEXT, "Nodes").click)
    rows = browser.find_elements(By.CSS_SELECTOR, "#nodes tbody tr[data-node]")
    mine = [r for r in rows if r.get_attribute("data-node").endswith(f":{node.port}")]
    assert len(mine) == 1, [r.get_attribute("data-node") for r in rows]
    cell = {td.get_attribute("data-field"): td.text
            for td in mine[0].find_elements(By.CSS_SELECTOR, "[data-field]")}
    assert cell["state"] == "up" and cell["processes"] == "1"
    assert cell["version"] == __version__
    assert cell["lastSeen"] in ("now", *(f"{s} s ago" for s in range(1, 16)))
    assert browser.find_element(By.CSS_SELECTOR, '#redis [data-field="health"]').text == "ok"
    assert browser.find_element(By.CSS_SELECTOR, '#redis [data-field="role"]').text == "master"
    screenshot(browser, "nodes")
    assert console_errors(browser) == []
