"""The topic page's schedules in a real headless Chromium (Debian's chromium +
chromium-driver, selenium) against a real node (gunicorn, its schedules loop running): the
rows match the API (one schedule run to its end by the loop), the paging links follow the
cursor, no console errors; and the page's screenshot is not blank.

The screenshot is kept as a test artefact: <artefacts>/console/topic-schedules.png
(test_console_browser.py says where <artefacts> is).
"""

from __future__ import annotations

import time

import pytest
from selenium.webdriver.common.by import By
from test_console_browser import console_errors, navigate, screenshot

from support import wait_until
from support.browser import chromium
from support.node import ServerProcess

pytestmark = pytest.mark.slow
MINUTE = 60_000


@pytest.fixture(scope="module")
def node(redis_server):
    with redis_server.leased_db_url() as url, ServerProcess(url) as server:
        yield server


@pytest.fixture(scope="module")
def browser():
    with chromium(logs=("browser",)) as driver:
        yield driver


def create(node, **params) -> dict:
    body = node.call("createSchedule", **params)
    assert body["code"] == 200, body
    return body["data"]


def shown(driver) -> dict[str, dict[str, str]]:
    """scheduleId -> {field: text} of the schedule list, read in one script call."""
    return driver.execute_script("""
const rows = {};
for (const tr of document.querySelectorAll('#schedule-list tbody tr[data-schedule-id]')) {
  const row = {};
  for (const td of tr.querySelectorAll('[data-field]')) row[td.dataset.field] = td.innerText;
  rows[tr.dataset.scheduleId] = row;
}
return rows;
""")


def test_the_topic_page_lists_its_schedules_in_headless_chromium(node, browser):
    topic = "web-schedules"
    soon = (int(time.time()) + 1) * 1000
    create(node, topic=topic, scheduleId="a-ran", msg="beat", everyMillis=1000,
           startTime=soon, limit=2)
    paris = create(node, topic=topic, scheduleId="b-paris", msg="report", cron="30 2 * * 1-5",
                   timezone="Europe/Paris")
    create(node, topic=topic, scheduleId="c-held", msg="x", everyMillis=MINUTE,
           startTime=soon + 600_000)
    assert node.call("pauseSchedule", topic=topic, scheduleId="c-held")["changed"] is True
    for i in range(25):
        create(node, topic=topic, scheduleId=f"d-{i:02d}", msg="x", everyMillis=MINUTE,
               startTime=soon + 600_000)
    # The node's loop writes a-ran's second occurrence when the first fires, then it is done.
    ran = wait_until(lambda: (lambda s: s if s["nextFireTime"] is None else None)(
        node.call("getSchedule", topic=topic, scheduleId="a-ran")["data"]), 20, 0.2,
        "the schedule did not run to its limit")
    assert (ran["sentCount"], ran["lastFireTime"]) == (2, soon + 1000)

    browser.get(f"{node.url}/dashboard/topic?topic={topic}")
    rows = shown(browser)
    assert list(rows) == ["a-ran", "b-paris", "c-held"] + [f"d-{i:02d}" for i in range(22)]
    assert (rows["a-ran"]["state"], rows["a-ran"]["sentCount"],
            rows["a-ran"]["nextFireTimes"]) == ("finished", "2", "–")
    assert rows["b-paris"]["rule"] == "30 2 * * 1-5"
    assert rows["b-paris"]["timezone"] == "Europe/Paris"
    lines = rows["b-paris"]["nextFireTimes"].splitlines()
    assert len(lines) == 3 and all(" 02:30:00 +0" in line for line in lines)
    datetimes = [t.get_attribute("datetime") for t in browser.find_elements(
        By.CSS_SELECTOR, 'tr[data-schedule-id="b-paris"] time')]
    assert [d[:19] for d in datetimes] == [
        time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t / 1000))
        for t in paris["nextFireTimes"][:3]]
    assert rows["c-held"]["state"] == "paused" and rows["c-held"]["rule"] == "every 1 min"
    browser.find_element(By.ID, "schedules").location_once_scrolled_into_view  # noqa: B018
    screenshot(browser, "topic-schedules")
    assert console_errors(browser) == []

    navigate(browser, browser.find_element(By.ID, "sched-next").click)
    assert list(shown(browser)) == ["d-22", "d-23", "d-24"]
    assert not browser.find_elements(By.ID, "sched-next")
    navigate(browser, browser.find_element(By.ID, "sched-first").click)
    assert list(shown(browser))[0] == "a-ran"
    assert console_errors(browser) == []
