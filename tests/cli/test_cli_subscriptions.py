"""``subscription list|create|delete|config`` and ``--subscription`` on the consuming commands,
run as subprocesses against a live node: tables and JSON, settings with their sources, fan-out
seen from the command line (pull, ack, get, list, dlq, topic pause, consume in a subscription),
and the exit codes of an unknown subscription and a refused name."""

from __future__ import annotations

import json

from delayqueue.client import Status

from support.cli import assert_one_line_error

EXIT_OK, EXIT_USAGE, EXIT_NOT_FOUND = 0, 2, 3


def ok(result) -> str:
    assert result.returncode == EXIT_OK, result.stderr
    return result.stdout


def rows(table: str) -> dict[str, list[str]]:
    """A table's rows by their first cell, its header and rule left out."""
    return {line.split()[0]: line.split()[1:] for line in table.strip().splitlines()[2:]}


# ---- subscription list|create|delete|config --------------------------------------------------
def test_create_list_config_and_delete_from_the_command_line(dq, client, topic):
    out = ok(dq("subscription", "create", topic, "audit", "--set", "maxRetry=3",
                "--set", "ack_timeout_ms=5s"))
    assert "subscription  audit" in out and f"topic         {topic}" in out
    assert "paused        no" in out

    client.send(topic, "x")
    table = ok(dq("subscriptions", "list", topic))     # the alias the brief names
    assert table.splitlines()[0].split()[:3] == ["SUBSCRIPTION", "CREATED", "WAITING"]
    assert list(rows(table)) == ["default", "audit"]
    assert rows(table)["audit"][2:5] == ["1", "0", "0"]   # ready, consuming, dead
    listed = json.loads(ok(dq("subscription", "list", topic, "--json")))
    assert [s["subscription"] for s in listed] == ["default", "audit"]

    config = rows(ok(dq("subscription", "config", topic, "audit")))
    assert config["maxRetry"] == ["3", "subscription"]
    assert config["ackTimeoutMillis"] == ["5000", "(5s)", "subscription"]
    changed = json.loads(ok(dq("subscription", "config", topic, "audit", "--set",
                               "deadLetter=off", "--json")))
    assert (changed["topic"], changed["subscription"]) == (topic, "audit")
    assert changed["data"]["deadLetter"] is False
    assert changed["source"]["deadLetter"] == "subscription"
    reset = rows(ok(dq("subscription", "config", topic, "audit", "--reset")))
    assert reset["maxRetry"][-1] in ("topic", "server")

    assert ok(dq("subscription", "delete", topic, "audit")).strip() == \
        f"deleted subscription audit of {topic}"
    assert list(rows(ok(dq("subscription", "list", topic)))) == ["default"]
    assert_one_line_error(dq("subscription", "delete", topic, "audit"), EXIT_NOT_FOUND)


def test_a_refused_name_or_setting_exits_2_in_one_line(dq, topic):
    for name in ("default", "a b", "x" * 65):
        result = dq("subscription", "create", topic, name)
        assert_one_line_error(result, EXIT_USAGE)
        assert "subscription" in result.stderr
    assert_one_line_error(dq("subscription", "create", topic, "s", "--set", "colour=blue"),
                          EXIT_USAGE)


def test_an_unknown_subscription_exits_3_in_one_line_for_each_command(dq, client, topic):
    client.send(topic, "x", msg_id="m1")
    for argv in (["pull", topic], ["long-poll", topic, "--wait", "100"], ["ack", topic, "m1"],
                 ["nack", topic, "m1"], ["extend", topic, "m1", "10s"], ["get", topic, "m1"],
                 ["dlq", "list", topic], ["dlq", "redrive", topic], ["dlq", "purge", topic],
                 ["list", topic, "--status", "ready"], ["topic", "pause", topic],
                 ["topic", "resume", topic], ["subscription", "config", topic, "nope"]):
        result = dq(*argv, "--subscription", "nope") if argv[0] != "subscription" else dq(*argv)
        assert_one_line_error(result, EXIT_NOT_FOUND)
        assert "not found" in result.stderr or "no subscription" in result.stderr, argv
    # consume checks before it starts, rather than retry its pulls for ever.
    assert_one_line_error(dq("consume", topic, "--subscription", "nope", "--", "true"),
                          EXIT_NOT_FOUND)


# ---- consuming in a subscription --------------------------------------------------------------
def test_pull_ack_and_get_in_a_subscription_leave_the_default_alone(dq, client, topic):
    client.create_subscription(topic, "s1")
    client.send(topic, "hello", msg_id="m1")
    pulled = json.loads(ok(dq("pull", topic, "--subscription", "s1", "--json")))
    assert [m["msgId"] for m in pulled] == ["m1"]
    receipt = pulled[0]["receipt"]
    assert ok(dq("ack", topic, "m1", "--subscription", "s1", "--receipt", receipt)).strip() == \
        f"acked {topic}/m1 in subscription s1"
    assert "acked (4)" in ok(dq("get", topic, "m1", "--subscription", "s1"))
    detail = ok(dq("get", topic, "m1"))
    assert "ready (2)" in detail
    assert "s1: acked (4) (retry 1)" in detail
    assert json.loads(ok(dq("get", topic, "m1", "--json")))["subscriptions"] == {
        "s1": {"status": 4, "retry": 1}}
    assert client.get(topic, "m1").status is Status.READY


def test_list_dlq_and_pause_act_in_the_subscription(dq, client, topic):
    client.create_subscription(topic, "s1", max_retry=0)
    client.send(topic, "x", msg_id="m1")
    listed = json.loads(ok(dq("list", topic, "--status", "ready", "--subscription", "s1",
                              "--json")))
    assert [m["msgId"] for m in listed["delayMsgList"]] == ["m1"]

    assert ok(dq("topic", "pause", topic, "--subscription", "s1")).strip() == \
        f"paused subscription s1 of {topic}"
    assert json.loads(ok(dq("pull", topic, "--subscription", "s1", "--json"))) == []
    assert ok(dq("topic", "resume", topic, "--subscription", "s1")).strip() == \
        f"resumed subscription s1 of {topic}"

    [m] = client.pull(topic, subscription="s1")
    assert ok(dq("nack", topic, "m1", "--subscription", "s1")).strip() == \
        f"nacked {topic}/m1 in subscription s1"
    assert "m1" in ok(dq("dlq", "list", topic, "--subscription", "s1"))
    assert "m1" not in ok(dq("dlq", "list", topic))
    assert ok(dq("dlq", "redrive", topic, "--subscription", "s1")).strip().endswith(
        f"redrove 1 dead letter(s) of {topic} in subscription s1")
    assert client.get(topic, "m1", subscription="s1").status is Status.READY
    assert client.get(topic, "m1").status is Status.READY


def test_consume_in_a_subscription_acks_there_and_names_it_to_the_command(dq, client, topic,
                                                                          tmp_path):
    client.create_subscription(topic, "s1")
    for i in range(3):
        client.send(topic, f"b{i}", msg_id=f"m{i}")
    out = tmp_path / "out"
    script = f'b=$(cat); echo "$b $DELAYQUEUE_MSG_SUBSCRIPTION" >> {out}'
    result = dq("consume", topic, "--subscription", "s1", "--max-messages", "3", "--",
                "sh", "-c", script)
    assert result.returncode == EXIT_OK, result.stderr
    assert "3 acked, 0 nacked" in result.stderr
    assert sorted(out.read_text().splitlines()) == ["b0 s1", "b1 s1", "b2 s1"]
    for i in range(3):
        assert client.get(topic, f"m{i}", subscription="s1").status is Status.ACKED
        assert client.get(topic, f"m{i}").status is Status.READY
