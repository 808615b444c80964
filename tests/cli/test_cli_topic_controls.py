"""``topic pause|resume|purge``, ``list`` and the topic settings delayMillis, maxBacklog and
description from the command line, run as subprocesses against a live node: output, JSON,
the purge's confirmation on a terminal, paging, exit codes."""

from __future__ import annotations

import json
import os
import pty
import subprocess

from delayqueue.client import DelayQueueClient, Status

from support.cli import DELAYQUEUE, assert_one_line_error, env_for

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_BACKLOG = 0, 1, 2, 3, 5


def ok(result) -> str:
    assert result.returncode == EXIT_OK, result.stderr
    return result.stdout


def live(client: DelayQueueClient, topic: str) -> int:
    info = client.topic_info(topic)
    return info.waiting_queue_size + info.ready_queue_size + info.ack_queue_size


def on_a_terminal(url: str, *argv: str, answer: str) -> tuple[int, str]:
    """Run a command whose stdin is a terminal, typing ``answer``: (exit code, stderr)."""
    leader, terminal = pty.openpty()
    try:
        done = subprocess.Popen([str(DELAYQUEUE), *argv], env=env_for(url), stdin=terminal,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        os.write(leader, answer.encode())   # waits in the terminal until the prompt reads it
        _, err = done.communicate(timeout=30)
    finally:
        os.close(terminal)
        os.close(leader)
    return done.returncode, err


# ---- pause and resume ----------------------------------------------------------------------
def test_pause_and_resume_say_what_changed_and_show_in_topics_and_topic_info(dq, client,
                                                                             topic):
    client.send(topic, "x")
    assert ok(dq("topic", "pause", topic)).strip() == f"paused {topic}"
    assert ok(dq("topic", "pause", topic)).strip() == f"{topic} was already paused"
    assert client.pull(topic) == []
    row = next(ln for ln in ok(dq("topics")).splitlines() if ln.startswith(topic + " "))
    assert row.split()[-1] == "yes"
    assert "PAUSED" in ok(dq("topics")).splitlines()[0]
    assert "\npaused     yes" in ok(dq("topic-info", topic))
    assert json.loads(ok(dq("topic-info", topic, "--json")))["paused"] is True

    assert json.loads(ok(dq("topic", "resume", topic, "--json"))) == {
        "topic": topic, "paused": False, "changed": True}
    assert ok(dq("topic", "resume", topic)).strip() == f"{topic} was not paused"
    assert "\npaused     no" in ok(dq("topic-info", topic))
    assert len(client.pull(topic)) == 1


def test_pausing_an_unknown_topic_exits_3(dq, topic):
    result = dq("topic", "pause", topic)
    assert_one_line_error(result, EXIT_NOT_FOUND)
    assert "no topic" in result.stderr


# ---- purge ---------------------------------------------------------------------------------
def test_purge_without_a_terminal_purges_everything_showing_progress(dq, client, topic):
    for i in range(5):
        client.send(topic, f"m{i}", msg_id=f"m{i}", delay_ms=60_000 * (i % 2))
    client.pull(topic)
    result = dq("topic", "purge", topic)
    assert ok(result).strip() == f"purged 5 message(s) of {topic}"
    assert "purged so far: 5, remaining: 0" in result.stderr
    assert "[y/N]" not in result.stderr
    assert live(client, topic) == 0
    assert {client.get(topic, f"m{i}").status for i in range(5)} == {Status.DELETED}
    assert json.loads(ok(dq("topic", "purge", topic, "--json"))) == {
        "topic": topic, "count": 0, "remaining": 0}


def test_purge_limit_ends_at_most_that_many(dq, client, topic):
    for i in range(5):
        client.send(topic, f"m{i}")
    summary = json.loads(ok(dq("topic", "purge", topic, "--limit", "3", "--json")))
    assert summary["count"] == 3 and live(client, topic) == 2


def test_purge_on_a_terminal_asks_first_and_purges_only_on_yes(node, client, topic):
    client.send(topic, "keep me")
    code, err = on_a_terminal(node.url, "topic", "purge", topic, answer="n\n")
    assert code == EXIT_FAILURE, err
    assert f"purge every live message of {topic} (1 live now)? [y/N]" in err
    assert err.rstrip().endswith("delayqueue: error: not purged: not confirmed"), err
    assert live(client, topic) == 1

    code, err = on_a_terminal(node.url, "topic", "purge", topic, answer="y\n")
    assert code == EXIT_OK, err
    assert live(client, topic) == 0
    client.send(topic, "again")
    code, err = on_a_terminal(node.url, "topic", "purge", topic, "--yes", answer="")
    assert code == EXIT_OK and "[y/N]" not in err, err
    assert live(client, topic) == 0


def test_purge_refuses_an_unknown_topic_and_a_bad_limit(dq, topic):
    assert_one_line_error(dq("topic", "purge", topic), EXIT_NOT_FOUND)
    result = dq("topic", "purge", topic, "--limit", "0")
    assert result.returncode == EXIT_USAGE and "--limit: must be at least 1" in result.stderr


# ---- list ----------------------------------------------------------------------------------
def test_list_shows_a_table_of_one_status_and_json(dq, client, topic):
    for i, delay in enumerate((30_000, 10_000, 20_000)):
        client.send(topic, f"body {i}", msg_id=f"w{i}", delay_ms=delay)
    table = ok(dq("list", topic, "--status", "waiting"))
    lines = table.splitlines()
    assert lines[0].split()[:2] == ["MSG", "ID"] and "STATUS" in lines[0]
    assert [ln.split()[0] for ln in lines[2:]] == ["w1", "w2", "w0"]
    assert all("waiting (1)" in ln for ln in lines[2:])
    assert [ln.split()[0] for ln in ok(dq("list", topic, "--status", "1")).splitlines()[2:]] \
        == ["w1", "w2", "w0"]
    listed = json.loads(ok(dq("list", topic, "--status", "waiting", "--json")))
    assert [m["msgId"] for m in listed["delayMsgList"]] == ["w1", "w2", "w0"]
    assert listed["nextCursor"] is None
    assert ok(dq("list", topic, "--status", "ready")).strip() == "(no messages)"


def test_list_of_consuming_messages_shows_receipt_and_ack_deadline(dq, client, topic):
    client.send(topic, "x", msg_id="c")
    [m] = client.pull(topic, ack_timeout_ms=120_000)
    table = ok(dq("list", topic, "--status", "consuming"))
    assert "RECEIPT" in table and "ACK DEADLINE" in table and m.receipt in table
    assert "in 2m" in table or "in 1m 59s" in table
    [shown] = json.loads(ok(dq("list", topic, "--status", "3", "--json")))["delayMsgList"]
    assert shown["receipt"] == m.receipt and shown["ackDeadline"] > shown["triggerTime"]


def test_list_pages_with_cursor_and_all(dq, client, topic):
    ids = [client.send(topic, f"m{i}", msg_id=f"m{i}", delay_ms=60_000 + i).msg_id
           for i in range(5)]
    first = ok(dq("list", topic, "--status", "waiting", "--limit", "2"))
    assert [ln.split()[0] for ln in first.splitlines()[2:4]] == ids[:2]
    cursor = first.splitlines()[-1].removeprefix("(more: --cursor ").removesuffix(")")
    page = json.loads(ok(dq("list", topic, "--status", "waiting", "--limit", "2",
                            "--cursor", cursor, "--json")))
    assert [m["msgId"] for m in page["delayMsgList"]] == ids[2:4] and page["nextCursor"]
    every = json.loads(ok(dq("list", topic, "--status", "waiting", "--limit", "2", "--all",
                             "--json")))
    assert [m["msgId"] for m in every["delayMsgList"]] == ids
    assert every["nextCursor"] is None


def test_list_group_blocked(dq, client, topic):
    for i in range(3):
        client.send(topic, f"g{i}", msg_id=f"g{i}", group_id="g")
    table = ok(dq("list", topic, "--group-blocked"))
    assert "GROUP" in table.splitlines()[0]
    assert [ln.split()[0] for ln in table.splitlines()[2:]] == ["g1", "g2"]


def test_list_refuses_bad_arguments(dq, topic):
    for argv, says in ((["--status", "4"], "not a status: '4'"),
                       (["--status", "dead"], "not a status: 'dead'"),
                       ([], "one of the arguments --status --group-blocked is required"),
                       (["--status", "1", "--group-blocked"], "not allowed with argument"),
                       (["--status", "1", "--limit", "0"], "--limit: must be at least 1")):
        result = dq("list", topic, *argv)
        assert result.returncode == EXIT_USAGE and says in result.stderr, (argv, result.stderr)
    refused = dq("list", topic, "--status", "1", "--cursor", "not a cursor")
    assert_one_line_error(refused, EXIT_USAGE)
    assert "cursor" in refused.stderr
    assert_one_line_error(dq("list", topic, "--status", "1", "--limit", "5000"), EXIT_USAGE)


# ---- the topic's delay, backlog and description --------------------------------------------
def test_send_without_delay_takes_the_topics_delay_and_delay_0_overrides_it(dq, client,
                                                                            topic, tmp_path):
    table = ok(dq("topic-config", topic, "--set", "delayMillis=2m", "--set", "maxBacklog=10",
                  "--set", "description=orders of the shop"))
    rows = {ln.split()[0]: ln.split()[1:] for ln in table.splitlines()[2:]}
    assert rows["delayMillis"] == ["120000", "(2m)", "topic"]
    assert rows["maxBacklog"] == ["10", "topic"]
    assert rows["description"] == ["orders", "of", "the", "shop", "topic"]

    plain = json.loads(ok(dq("send", topic, "plain", "--json")))
    assert plain["status"] == 1 and plain["triggerTime"] - plain["produceTime"] == 120_000
    now = json.loads(ok(dq("send", topic, "now", "--delay", "0", "--json")))
    assert now["status"] == 2
    path = tmp_path / "m.jsonl"
    path.write_text('{"msg": "line", "msgId": "l1"}\n{"msg": "own", "msgId": "l2", '
                    '"delayMillis": 0}\n', encoding="utf-8")
    ok(dq("send", topic, "--file", str(path)))
    assert (client.get(topic, "l1").status, client.get(topic, "l2").status) == (
        Status.WAITING, Status.READY)
    path.write_text('{"msg": "line", "msgId": "l3"}\n', encoding="utf-8")
    ok(dq("send", topic, "--file", str(path), "--delay", "0"))   # --delay 0: its own default
    assert client.get(topic, "l3").status is Status.READY


def test_a_bad_description_is_refused_naming_it(dq, topic):
    refused = dq("topic-config", topic, "--set", "description=bell\x07")
    assert_one_line_error(refused, EXIT_USAGE)
    assert "description" in refused.stderr


def test_a_send_over_the_backlog_exits_5_and_writes_nothing(dq, client, topic, tmp_path):
    client.set_topic_config(topic, max_backlog=1)
    ok(dq("send", topic, "first"))
    full = dq("send", topic, "second", "--id", "second")
    assert_one_line_error(full, EXIT_BACKLOG)
    assert "backlog full: topic: backlog quota exceeded" in full.stderr
    assert client.get(topic, "second") is None
    path = tmp_path / "m.jsonl"
    path.write_text('{"msg": "a"}\n{"msg": "b"}\n', encoding="utf-8")
    result = dq("send", topic, "--file", str(path))
    assert result.returncode == EXIT_BACKLOG, result.stderr
    assert "line 1: topic: backlog quota exceeded" in result.stderr and "(code 429)" in \
        result.stderr


# ---- send --file --atomic ------------------------------------------------------------------
def test_send_file_atomic_writes_every_line_or_none(dq, client, topic, tmp_path):
    good = tmp_path / "good.jsonl"
    good.write_text('{"msg": "a", "msgId": "a"}\n{"msg": "b", "msgId": "b"}\n',
                    encoding="utf-8")
    assert ok(dq("send", topic, "--file", str(good), "--atomic")).startswith(
        f"sent 2 of 2 message(s) to {topic}")

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"msg": "c", "msgId": "c"}\n{"msg": "", "msgId": "e"}\n'
                   '{"msg": "d", "msgId": "d"}\n', encoding="utf-8")
    result = dq("send", topic, "--file", str(bad), "--atomic")
    assert result.returncode == EXIT_USAGE, result.stderr
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("delayqueue: line ")]
    assert len(errors) == 1 and errors[0].startswith("delayqueue: line 2: msg")
    assert result.stderr.rstrip().endswith(
        "delayqueue: error: atomic batch refused: nothing written")
    assert result.stdout.strip() == f"sent 0 of 3 message(s) to {topic}; 1 failed"
    assert [client.get(topic, i) for i in ("c", "d", "e")] == [None] * 3

    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"msg": "f", "msgId": "f"}\n{"msg": \n', encoding="utf-8")
    result = dq("send", topic, "--file", str(broken), "--atomic")
    assert result.returncode == EXIT_USAGE and "line 2: not JSON" in result.stderr
    assert "invalid lines: nothing sent" in result.stderr and client.get(topic, "f") is None

    result = dq("send", topic, "--file", str(bad), "--atomic", "--batch-size", "2")
    assert result.returncode == EXIT_USAGE and "more than 2 lines" in result.stderr
    assert client.get(topic, "c") is None


def test_send_file_atomic_refused_by_the_backlog_exits_5(dq, client, topic, tmp_path):
    client.set_topic_config(topic, max_backlog=2)
    path = tmp_path / "m.jsonl"
    path.write_text("".join(f'{{"msg": "m{i}", "msgId": "m{i}"}}\n' for i in range(3)),
                    encoding="utf-8")
    result = dq("send", topic, "--file", str(path), "--atomic")
    assert result.returncode == EXIT_BACKLOG, result.stderr
    assert "line 3: topic: backlog quota exceeded" in result.stderr
    assert live(client, topic) == 0


def test_atomic_without_file_is_refused(dq, topic):
    assert_one_line_error(dq("send", topic, "x", "--atomic"), EXIT_USAGE)
