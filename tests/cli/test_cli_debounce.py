"""``delayqueue send --on-duplicate`` and the dedup window through the CLI, run as
subprocesses against a live node: what it prints, its exit codes, and --file lines."""

from __future__ import annotations

import json

from delayqueue.cli.failure import EXIT_OK, EXIT_STALE, EXIT_USAGE

from support.cli import run


def jsonl(path, *lines):
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


def test_send_on_duplicate_replace_shows_replaced_and_keep_shows_duplicate(dq, client, topic):
    assert dq("send", topic, "one", "--id", "d", "--delay", "1m").returncode == EXIT_OK
    result = dq("send", topic, "two", "--id", "d", "--delay", "2m", "--on-duplicate",
                "replace")
    assert result.returncode == EXIT_OK, result.stderr
    assert "replaced" in result.stdout and "two" in result.stdout
    sent = json.loads(dq("send", topic, "three", "--id", "d", "--json").stdout)
    assert sent["duplicate"] is True and sent["msg"] == "two" and "replaced" not in sent
    sent = json.loads(dq("send", topic, "four", "--id", "d", "--json", "--on-duplicate",
                         "replace").stdout)
    assert sent["replaced"] is True and sent["msg"] == "four"
    assert client.get(topic, "d").msg == "four"


def test_a_replace_of_a_consuming_message_exits_4_and_a_bad_value_2(dq, client, topic):
    client.send(topic, "busy", msg_id="c")
    client.pull(topic)
    result = dq("send", topic, "x", "--id", "c", "--on-duplicate", "replace")
    assert result.returncode == EXIT_STALE
    assert "being consumed" in result.stderr and result.stdout == ""
    result = dq("send", topic, "x", "--id", "c", "--on-duplicate", "later")
    assert result.returncode == EXIT_USAGE and "--on-duplicate" in result.stderr
    assert client.get(topic, "c").msg == "busy"


def test_send_file_counts_replaced_lines_and_takes_the_option_as_default(node, client, topic,
                                                                        tmp_path):
    client.send(topic, "a1", msg_id="a", delay_ms=60_000)
    client.send(topic, "b1", msg_id="b", delay_ms=60_000)
    path = jsonl(tmp_path / "d.jsonl", {"msg": "a2", "msgId": "a"},
                 {"msg": "b2", "msgId": "b", "onDuplicate": "keep"},
                 {"msg": "n", "msgId": "n"})
    result = run(node.url, "send", topic, "--file", path, "--on-duplicate", "replace",
                 "--json")
    assert result.returncode == EXIT_OK, result.stderr
    summary = json.loads(result.stdout)
    assert (summary["sent"], summary["duplicates"], summary["replaced"]) == (3, 1, 1)
    assert client.get(topic, "a").msg == "a2" and client.get(topic, "b").msg == "b1"


def test_an_atomic_file_with_a_consuming_replace_reports_that_line(node, client, topic,
                                                                  tmp_path):
    client.send(topic, "busy", msg_id="busy")
    client.pull(topic)
    path = jsonl(tmp_path / "a.jsonl", {"msg": "n", "msgId": "new"},
                 {"msg": "b", "msgId": "busy", "onDuplicate": "replace"})
    result = run(node.url, "send", topic, "--file", path, "--atomic")
    assert result.returncode == EXIT_USAGE, result.stderr
    assert "line 2: msgId: message 'busy' is being consumed" in result.stderr
    assert "line 1" not in result.stderr
    assert client.get(topic, "new") is None


def test_topic_config_sets_the_dedup_window(dq, client, topic):
    result = dq("topic-config", topic, "--set", "dedupWindowMillis=1h", "--json")
    assert result.returncode == EXIT_OK, result.stderr
    assert client.get_topic_config(topic).dedup_window_ms == 3_600_000
    client.send(topic, "once", msg_id="w")
    [delivered] = client.pull(topic)
    client.ack(delivered)
    sent = json.loads(dq("send", topic, "again", "--id", "w", "--json").stdout)
    assert sent["duplicate"] is True and sent["status"] == 4
