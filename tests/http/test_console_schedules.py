"""The topic page's schedules in-process (the real app and Lua scripts on a real
redis-server): each schedule's rule, zone, next fire times, counts and state as the API
answers them, paging by the cursor, a bad cursor named, ids escaped.

The browser side (a screenshot, the paging links clicked) is
tests/http/test_console_schedules_browser.py.
"""

from __future__ import annotations

import re
import time
from html import unescape

import pytest

from delayqueue.http.app import create_app
from delayqueue.http.console.filters import iso, zoned
from delayqueue.http.console.schedules_view import NEXT_SHOWN, SCHEDULE_PAGE

Q = "/camellia/delayQueue/"
MINUTE = 60_000


@pytest.fixture
def http(redis_url):
    return create_app(overrides={"redis_url": redis_url, "snapshot_dir": "",
                                 "monitor_interval_seconds": 1}).test_client()


def call(http, endpoint, **params):
    body = http.post(Q + endpoint, data=params).get_json()
    assert body["code"] == 200, body
    return body


def later(minutes: int = 10) -> int:
    return (int(time.time()) + minutes * 60) * 1000


def rows(html: str) -> dict[str, dict[str, str]]:
    """scheduleId -> {field: the cell's inner HTML} of the schedule list, in page order."""
    table = re.search(r'<table id="schedule-list".*?</table>', html, re.DOTALL)
    assert table, "no schedule list"
    found = {}
    for sid, body in re.findall(r'<tr data-schedule-id="([^"]*)">(.*?)</tr>', table.group(0),
                                re.DOTALL):
        found[unescape(sid)] = dict(re.findall(r'data-field="(\w+)">(.*?)</td>', body,
                                               re.DOTALL))
    return found


def times(cell: str) -> list[tuple[int, str]]:
    """The <time> elements of a cell: (datetime attribute, text)."""
    return re.findall(r'<time datetime="([^"]+)" title="[^"]+">([^<]*)</time>', cell)


def link(html: str, anchor_id: str) -> str | None:
    found = re.search(rf'<a id="{anchor_id}" href="([^"]+)"', html)
    return unescape(found.group(1)) if found else None


def test_the_topic_page_shows_each_schedule_as_the_api_answers_it(http):
    topic = "nightly"
    start = later()
    call(http, "createSchedule", topic=topic, scheduleId="paris", msg="x", cron="30 2 * * *",
         timezone="Europe/Paris")
    call(http, "createSchedule", topic=topic, scheduleId="twice", msg="y", everyMillis=90_000,
         startTime=start, limit=2)
    call(http, "createSchedule", topic=topic, scheduleId="held", msg="z", everyMillis=MINUTE,
         startTime=start)
    call(http, "pauseSchedule", topic=topic, scheduleId="held")
    html = http.get(f"/dashboard/topic?topic={topic}").get_data(as_text=True)
    shown = rows(html)
    assert list(shown) == ["held", "paris", "twice"]            # listSchedules's order

    paris = call(http, "getSchedule", topic=topic, scheduleId="paris")["data"]
    cell = shown["paris"]
    assert (cell["rule"], cell["timezone"]) == ("<code>30 2 * * *</code>", "Europe/Paris")
    fires = paris["nextFireTimes"][:NEXT_SHOWN]
    assert [t for t, _ in times(cell["nextFireTimes"])] == [iso(t) for t in fires]
    for (_, text), t in zip(times(cell["nextFireTimes"]), fires):
        assert text.startswith(zoned(t, "Europe/Paris") + " (in ")
        assert re.match(r"\d{4}-\d\d-\d\d 02:30:00 \+0[12]:00 \(in ", text), text
    assert (cell["sentCount"], cell["missedCount"], cell["state"]) == \
        (str(paris["sentCount"]), "0", "active")
    # The first fire time links to its waiting occurrence's message page, which finds it.
    occurrence = unescape(re.search(r'<a class="occurrence" href="([^"]+)"',
                                    cell["nextFireTimes"]).group(1))
    assert occurrence == f"/dashboard/message?topic={topic}&msgId=paris:{fires[0]}"
    page = http.get(occurrence).get_data(as_text=True)
    assert re.search(r'data-field="status">1 \(waiting\)<', page), page[-2000:]

    twice = shown["twice"]
    assert (twice["rule"], twice["timezone"]) == ("every 1 min 30 s", "")
    assert [t for t, _ in times(twice["nextFireTimes"])] == \
        [iso(start), iso(start + 90_000)]                    # its limit: two in all
    assert times(twice["nextFireTimes"])[0][1].startswith(zoned(start, None) + " (in ")

    held = shown["held"]
    assert 'class="badge paused">paused<' in held["state"]
    assert times(held["nextFireTimes"]) == [] and held["nextFireTimes"] == "&ndash;"


def test_a_finished_schedule_says_so_and_a_topic_without_any_says_none(http):
    call(http, "sendMsg", topic="plain", msg="x")
    html = http.get("/dashboard/topic?topic=plain").get_data(as_text=True)
    assert rows(html) == {} and "No schedules." in html
    assert link(html, "sched-next") is None and link(html, "sched-first") is None
    # Its end passed before it was created: no fire time left, finished at once.
    now = int(time.time() * 1000)
    done = call(http, "createSchedule", topic="plain", scheduleId="over", msg="x",
                everyMillis=MINUTE, startTime=now - 3_600_000, endTime=now - 1_800_000)
    assert done["data"]["nextFireTime"] is None
    cell = rows(http.get("/dashboard/topic?topic=plain").get_data(as_text=True))["over"]
    assert (cell["state"], cell["nextFireTimes"], cell["sentCount"]) == \
        ("finished", "&ndash;", "0")


def test_the_schedules_page_through_by_the_cursor(http):
    topic = "many"
    ids = [f"s-{i:02d}" for i in range(SCHEDULE_PAGE + 5)]
    for sid in ids:
        call(http, "createSchedule", topic=topic, scheduleId=sid, msg="x",
             everyMillis=MINUTE, startTime=later())
    url, pages = f"/dashboard/topic?topic={topic}", []
    for _ in range(5):
        html = http.get(url).get_data(as_text=True)
        pages.append(list(rows(html)))
        assert (link(html, "sched-first") is None) == (len(pages) == 1)
        url = link(html, "sched-next")
        if url is None:
            break
    assert [len(p) for p in pages] == [SCHEDULE_PAGE, 5]
    assert [s for p in pages for s in p] == ids
    assert "schedCursor=" in link(http.get(f"/dashboard/topic?topic={topic}"
                                           ).get_data(as_text=True), "sched-next")


def test_a_bad_schedule_cursor_names_itself_and_its_rule(http):
    call(http, "sendMsg", topic="t", msg="x")
    body = http.get("/dashboard/topic?topic=t&schedCursor=bad!").get_json()
    assert body == {"code": 400,
                    "msg": "schedCursor: not a nextCursor of a listSchedules page, got 'bad!'"}


def test_schedule_ids_and_rules_are_escaped(http):
    hostile = '<img src=x onerror="alert(1)">'
    call(http, "createSchedule", topic="hostile", scheduleId=hostile, msg="x",
         everyMillis=MINUTE, startTime=later())
    html = http.get("/dashboard/topic?topic=hostile").get_data(as_text=True)
    assert hostile not in html and "&lt;img src=x" in html
    assert list(rows(html)) == [hostile]
