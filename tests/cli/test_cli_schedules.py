"""``schedule create|list|get|delete|pause|resume`` run as subprocesses against a live node:
fire times as dates (in the schedule's zone for a cron), the JSON answers, paging, and exit
codes for a missing schedule and a refused value."""

from __future__ import annotations

import json
import time
from datetime import datetime
from zoneinfo import ZoneInfo

from delayqueue.client import Status

from support.cli import assert_one_line_error

EXIT_OK, EXIT_USAGE, EXIT_NOT_FOUND = 0, 2, 3
MINUTE = 60_000


def ok(result) -> str:
    assert result.returncode == EXIT_OK, result.stderr
    return result.stdout


def later(minutes: int = 10) -> int:
    return (int(time.time()) + minutes * 60) * 1000


def local(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000).astimezone().isoformat(timespec="seconds")


def fields(text: str) -> dict[str, str]:
    """``name  value`` lines of a detail, up to its first blank line."""
    head = text.split("\n\n")[0]
    return dict(line.split(None, 1) for line in head.splitlines() if len(line.split(None, 1)) == 2)


def fire_lines(text: str) -> list[str]:
    """The dates under ``next fire times``."""
    tail = text.split("next fire times\n", 1)[1]
    return [line.split()[0] for line in tail.splitlines() if line.startswith("  ")]


def test_create_every_shows_the_next_fire_times_as_dates_and_the_occurrence_waits(dq, client,
                                                                                  topic):
    start = later()
    out = ok(dq("schedule", "create", topic, "tick", "tock", "--every", "1m",
                "--start", str(start), "--limit", "10", "--attr", "kind=tick",
                "--group", "g-1", "--max-retry", "2"))
    shown = fields(out)
    assert shown["scheduleId"] == "tick" and shown["everyMillis"] == "60000 (1m)"
    assert shown["state"] == "active" and shown["limit"] == "10 occurrences"
    assert shown["maxRetry"] == "2" and shown["ttlMillis"] == "the topic's"
    assert shown["groupId"] == "g-1" and shown["attributes"] == '{"kind": "tick"}'
    assert shown["nextFireTime"].startswith(local(start) + "  (in ")
    assert shown["msg"] == "tock"
    assert fire_lines(out) == [local(start + k * MINUTE) for k in range(5)]
    m = client.get(topic, f"tick:{start}")
    assert (m.status, m.msg, m.group_id, m.attributes) == (Status.WAITING, "tock", "g-1",
                                                           {"kind": "tick"})


def test_a_cron_schedule_shows_its_dates_in_its_own_zone(dq, client, topic):
    out = ok(dq("schedule", "create", topic, "ny", "-", "--cron", "30 8 * * *",
                "--tz", "America/New_York", stdin="body from stdin"))
    shown = fields(out)
    assert (shown["cron"], shown["timezone"], shown["msg"]) == \
        ("30 8 * * *", "America/New_York", "body from stdin")
    dates = fire_lines(out)
    assert len(dates) == 5
    for text in dates:
        at = datetime.fromisoformat(text)
        assert (at.hour, at.minute) == (8, 30)
        assert at.utcoffset() == datetime.fromtimestamp(
            at.timestamp(), ZoneInfo("America/New_York")).utcoffset()
    expected = client.get_schedule(topic, "ny").next_fire_times
    assert [int(datetime.fromisoformat(d).timestamp() * 1000) for d in dates] == \
        list(expected)


def test_json_answers_are_the_servers_objects(dq, client, topic):
    start = later()
    created = json.loads(ok(dq("schedule", "create", topic, "j", "x", "--every", "90s",
                               "--start", str(start), "--misfire", "skip", "--json")))
    assert (created["scheduleId"], created["everyMillis"], created["misfire"]) == \
        ("j", 90_000, "skip")
    assert created["nextFireTimes"] == [start + k * 90_000 for k in range(5)]
    got = json.loads(ok(dq("schedule", "get", topic, "j", "--json")))
    assert got == client.get_schedule(topic, "j").raw
    assert json.loads(ok(dq("schedule", "pause", topic, "j", "--json"))) == {
        "topic": topic, "scheduleId": "j", "paused": True, "changed": True}
    assert json.loads(ok(dq("schedule", "resume", topic, "j", "--json"))) == {
        "topic": topic, "scheduleId": "j", "paused": False, "changed": True}
    assert client.get_schedule(topic, "j").next_fire_time == start
    assert json.loads(ok(dq("schedule", "delete", topic, "j", "--json"))) == {
        "topic": topic, "scheduleId": "j", "result": "deleted", "occurrenceDeleted": True}
    assert client.get_schedule(topic, "j") is None


def test_list_shows_a_page_with_its_cursor_or_every_page(dq, client, topic):
    starts = {f"s{i}": later(i + 1) for i in range(3)}
    for sid, start in starts.items():
        client.create_schedule(topic, sid, "x", every_ms=MINUTE, start_time=start)
    out = ok(dq("schedule", "list", topic))
    lines = out.splitlines()
    assert lines[0].split() == ["SCHEDULE", "ID", "RULE", "NEXT", "FIRE", "IN", "SENT",
                                "MISSED", "STATE"]
    rows = {ln.split()[0]: ln for ln in lines[2:]}
    assert set(rows) == {"s0", "s1", "s2"}
    assert local(starts["s0"]) in rows["s0"] and rows["s0"].rstrip().endswith("active")
    assert "every 1m" in rows["s1"]

    first = json.loads(ok(dq("schedule", "list", topic, "--limit", "2", "--json")))
    ids = [s["scheduleId"] for s in first["data"]]
    assert first["nextCursor"]
    text = ok(dq("schedule", "list", topic, "--limit", "2"))
    assert text.rstrip().endswith(f"(more: --cursor {first['nextCursor']})")
    rest = json.loads(ok(dq("schedule", "list", topic, "--limit", "2", "--cursor",
                            first["nextCursor"], "--all", "--json")))
    ids += [s["scheduleId"] for s in rest["data"]]
    assert sorted(ids) == ["s0", "s1", "s2"] and len(ids) == 3 and rest["nextCursor"] is None
    every = json.loads(ok(dq("schedule", "list", "--all", "--json")))["data"]
    assert {(s["topic"], s["scheduleId"]) for s in every} >= {(topic, "s0"), (topic, "s1")}
    assert ok(dq("schedule", "list", "--all")).splitlines()[0].split()[0] == "TOPIC"


def test_pause_resume_and_delete_say_what_they_did(dq, client, topic):
    start = later()
    client.create_schedule(topic, "p", "x", every_ms=MINUTE, start_time=start)
    assert ok(dq("schedule", "pause", topic, "p")).strip() == f"paused schedule {topic}/p"
    assert ok(dq("schedule", "pause", topic, "p")).strip() == \
        f"schedule {topic}/p was already paused"
    assert fields(ok(dq("schedule", "get", topic, "p")))["state"] == "paused"
    assert client.get(topic, f"p:{start}").status == Status.DELETED
    out = ok(dq("schedule", "resume", topic, "p")).strip()
    assert out.startswith(f"resumed schedule {topic}/p; next fire: {local(start)} (in ")
    assert client.get(topic, f"p:{start}").status == Status.WAITING
    assert ok(dq("schedule", "resume", topic, "p")).strip() == \
        f"schedule {topic}/p was not paused"
    assert ok(dq("schedule", "delete", topic, "p")).strip() == f"deleted schedule {topic}/p"
    assert ok(dq("schedule", "list", topic)).strip() == "(no schedules)"


def test_a_missing_schedule_exits_3_and_a_refused_value_2(dq, topic):
    result = dq("schedule", "get", topic, "ghost")
    assert_one_line_error(result, EXIT_NOT_FOUND)
    assert f"no schedule {topic}/ghost" in result.stderr
    for action in ("delete", "pause", "resume"):
        assert_one_line_error(dq("schedule", action, topic, "ghost"), EXIT_NOT_FOUND)
    error = json.loads(dq("schedule", "pause", topic, "ghost", "--json").stdout)["error"]
    assert (error["kind"], error["code"], error["exitCode"]) == ("not_found", 404, 3)

    result = dq("schedule", "create", topic, "bad", "x", "--cron", "0 9 * *")
    assert_one_line_error(result, EXIT_USAGE)
    assert "rejected: cron" in result.stderr
    result = dq("schedule", "create", topic, "bad", "x", "--cron", "0 9 * * *", "--tz",
                "Nowhere/Special")
    assert_one_line_error(result, EXIT_USAGE)
    assert "rejected: timezone" in result.stderr
    result = dq("schedule", "create", topic, "bad", "x")                  # neither rule
    assert result.returncode == EXIT_USAGE and "--cron --every is required" in result.stderr
    result = dq("schedule", "create", topic, "bad", "x", "--every", "1m", "--misfire", "later")
    assert result.returncode == EXIT_USAGE and "--misfire" in result.stderr
