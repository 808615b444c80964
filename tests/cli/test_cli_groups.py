"""Message groups in the delayqueue CLI, run as subprocesses against a live node: ``send
--group``, groupId in ``send --file`` lines, the group shown wherever messages are, the
topic's blocked count, and the group of a consumed message in the command's environment."""

from __future__ import annotations

import json

from delayqueue.client import Status

from support.cli import assert_one_line_error

EXIT_OK, EXIT_USAGE = 0, 2


def ok(result) -> str:
    assert result.returncode == EXIT_OK, result.stderr
    return result.stdout


def test_send_group_shows_the_group_in_the_detail_the_json_and_the_pull_table(dq, client,
                                                                               topic):
    detail = ok(dq("send", topic, "first", "--group", "order-42", "--id", "a"))
    assert "groupId      order-42\n" in detail
    sent = json.loads(ok(dq("send", topic, "second", "--group", "order-42", "--json")))
    assert sent["groupId"] == "order-42" and sent["status"] == 2
    assert client.get(topic, "a").group_id == "order-42"
    assert "groupId      order-42" in ok(dq("get", topic, sent["msgId"]))
    table = ok(dq("pull", topic, "--batch", "5"))       # one of the group at a time
    header, _, row = table.splitlines()
    assert header.split()[:4] == ["MSG", "ID", "GROUP", "STATUS"]
    assert row.split()[:3] == ["a", "order-42", "consuming"]
    plain = ok(dq("send", topic, "no group", "--id", "p"))
    assert "groupId" not in plain
    assert "GROUP" not in ok(dq("pull", topic)).splitlines()[0]


def test_a_bad_group_exits_2_with_one_line_naming_group_id(dq, topic):
    result = dq("send", topic, "x", "--group", "g" * 257)
    assert_one_line_error(result, EXIT_USAGE)
    assert "groupId: must be at most 256 characters" in result.stderr


def test_send_file_lines_carry_group_id_and_group_fills_in_the_rest(node, dq, client, topic,
                                                                   tmp_path):
    path = tmp_path / "msgs.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in [
        {"msg": "own", "msgId": "own", "groupId": "mine"},
        {"msg": "default", "msgId": "default"},
        {"msg": "bad", "msgId": "bad", "groupId": 7},
    ]) + "\n", encoding="utf-8")
    result = dq("send", topic, "--file", str(path), "--group", "theirs")
    assert result.returncode == EXIT_USAGE, result.stderr
    assert "delayqueue: line 3: groupId: must be a string, got 7" in result.stderr
    assert result.stdout.strip() == f"sent 2 of 3 message(s) to {topic}; 1 failed"
    assert (client.get(topic, "own").group_id, client.get(topic, "default").group_id) == \
        ("mine", "theirs")
    assert client.get(topic, "bad") is None


def test_topics_and_topic_info_show_the_messages_blocked_behind_their_group_head(dq, client,
                                                                                topic):
    for i in range(3):
        client.send(topic, f"m{i}", group_id="g")
    info = ok(dq("topic-info", topic))
    assert "ready      1\n" in info and "blocked    2  (due, behind their group's head)" in info
    assert json.loads(ok(dq("topic-info", topic, "--json")))["groupBlockedSize"] == 2
    table = ok(dq("topics")).splitlines()
    assert table[0].split()[:7] == ["TOPIC", "WAITING", "READY", "CONSUMING", "DEAD",
                                    "GROUP", "BLOCKED"]
    row = next(ln for ln in table if ln.startswith(topic + " "))
    assert row.split()[1:6] == ["0", "1", "0", "0", "2"]


def test_dead_letters_show_their_group(dq, client, topic):
    client.send(topic, "dies", group_id="g", max_retry=0, msg_id="d")
    [m] = client.pull(topic)
    client.nack(m)
    table = ok(dq("dlq", "list", topic))
    assert table.splitlines()[0].split()[:4] == ["MSG", "ID", "GROUP", "DIED"]
    assert table.splitlines()[2].split()[:2] == ["d", "g"]


def test_consume_gives_the_command_the_group_and_runs_the_group_in_order(dq, client, topic,
                                                                         tmp_path):
    out = tmp_path / "out"
    for i in range(4):
        client.send(topic, f"g{i}", group_id="g", msg_id=f"g{i}")
    client.send(topic, "alone", msg_id="alone")
    script = f'b=$(cat); echo "$b ${{DELAYQUEUE_MSG_GROUP_ID:-none}}" >> {out}'
    result = dq("consume", topic, "--consume-threads", "4", "--max-messages", "5", "--",
                "sh", "-c", script)
    assert result.returncode == EXIT_OK, result.stderr
    lines = out.read_text().splitlines()
    assert sorted(lines) == sorted([f"g{i} g" for i in range(4)] + ["alone none"])
    assert [ln for ln in lines if ln.endswith(" g")] == [f"g{i} g" for i in range(4)]
    assert {client.get(topic, f"g{i}").status for i in range(4)} == {Status.ACKED}
