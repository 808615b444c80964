"""The failure-handling commands of the delayqueue CLI, run as subprocesses against a live
node: attributes and receipts, ack/nack with a receipt, nack --delay, change-visibility,
reschedule, topic-config and dlq."""

from __future__ import annotations

import json

import pytest

from delayqueue.cli.topic import setting_arg
from delayqueue.client import DelayMsg, DelayQueueClient, Status
from delayqueue.client.model import API_SETTINGS, TOPIC_SETTINGS

from support.cli import assert_one_line_error

EXIT_STALE = 4


def ok(result) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def dead_letters(client: DelayQueueClient, topic: str, n: int) -> list[DelayMsg]:
    sent = [client.send(topic, f"dead {i}", max_retry=0) for i in range(n)]
    for m in client.pull(topic, batch=n):
        client.nack(m)
    return sent


def test_send_attr_and_pull_and_get_show_attributes_and_the_receipt(dq, client, topic):
    sent = json.loads(ok(dq("send", topic, "body", "--attr", "lang=日本語", "--attr",
                            "eq=a=b", "--json")))
    assert sent["attributes"] == {"lang": "日本語", "eq": "a=b"}
    table = ok(dq("pull", topic, "--ack-timeout", "1m"))
    assert "RECEIPT" in table and "ATTRIBUTES" in table and "lang=日本語" in table
    got = client.get(topic, sent["msgId"])     # consuming: its latest receipt and deadline
    detail = ok(dq("get", topic, sent["msgId"]))
    assert '"lang": "日本語"' in detail and f"\nreceipt      {got.receipt}\n" in detail
    assert "\nackDeadline  " in detail and ("(in 1m)" in detail or "(in 59s)" in detail)
    result = dq("send", topic, "x", "--attr", "novalue")
    assert result.returncode == 2 and "not key=value" in result.stderr


def test_pull_json_carries_the_receipt_and_ack_with_a_stale_one_exits_4(dq, client, topic):
    client.send(topic, "x")
    [first] = json.loads(ok(dq("pull", topic, "--json")))
    assert first["receipt"]
    client.nack(first["topic"], first["msgId"])
    [second] = client.pull(topic)
    assert second.receipt != first["receipt"]
    result = dq("ack", topic, first["msgId"], "--receipt", first["receipt"])
    assert_one_line_error(result, EXIT_STALE)
    assert "stale receipt" in result.stderr
    assert "acked" in ok(dq("ack", topic, second.msg_id, "--receipt", second.receipt))
    assert client.get(topic, second.msg_id).status is Status.ACKED


def test_nack_with_delay_puts_the_message_back_to_waiting(dq, client, topic):
    sent = client.send(topic, "x")
    [m] = client.pull(topic)
    out = ok(dq("nack", topic, sent.msg_id, "--delay", "1m", "--receipt", m.receipt))
    assert "in 1m" in out
    got = client.get(topic, sent.msg_id)
    assert got.status is Status.WAITING and got.trigger_time - m.trigger_time >= 59_000


def test_change_visibility_and_its_alias_extend(dq, client, topic):
    sent = client.send(topic, "x")
    [m] = client.pull(topic, ack_timeout_ms=5_000)
    extended = json.loads(ok(dq("extend", topic, m.msg_id, "10m", "--receipt", m.receipt,
                                "--json")))
    assert extended["status"] == 3 and "receipt" not in extended
    assert "ready (2)" in ok(dq("change-visibility", topic, m.msg_id, "0"))
    assert client.get(topic, sent.msg_id).status is Status.READY
    assert_one_line_error(dq("extend", topic, m.msg_id, "10s"), 2)  # not being consumed


def test_reschedule_by_delay_or_time(dq, client, topic):
    sent = client.send(topic, "x", delay_ms=600_000)
    now = json.loads(ok(dq("reschedule", topic, sent.msg_id, "--delay", "0", "--json")))
    assert now["status"] == 2
    later = ok(dq("reschedule", topic, sent.msg_id, "--at", "2100-01-01T00:00:00+00:00"))
    assert "waiting (1)" in later
    assert "2100-01-01" in later or "2099-12-31" in later  # in local time
    assert client.get(topic, sent.msg_id).trigger_time == 4_102_444_800_000
    assert_one_line_error(dq("reschedule", topic, "absent", "--delay", "0"), 3)


def test_topic_config_table_set_reset_and_json(dq, topic):
    table = ok(dq("topic-config", topic))
    assert table.splitlines()[0].split() == ["SETTING", "VALUE", "SOURCE"]
    row = next(ln for ln in table.splitlines() if ln.startswith("ackTimeoutMillis"))
    assert row.split() == ["ackTimeoutMillis", "30000", "(30s)", "server"]
    assert len(table.splitlines()) == 2 + 14
    assert table.splitlines()[-1].split() == ["description", '""', "server"]

    table = ok(dq("topic-config", topic, "--set", "maxRetry=3", "--set", "ttl_ms=10m",
                  "--set", "dead-letter=off"))
    rows = {ln.split()[0]: ln.split()[1:] for ln in table.splitlines()[2:]}
    assert rows["maxRetry"] == ["3", "topic"]
    assert rows["ttlMillis"] == ["600000", "(10m)", "topic"]
    assert rows["deadLetter"] == ["off", "topic"]
    assert rows["ackTimeoutMillis"] == ["30000", "(30s)", "server"]

    reset = json.loads(ok(dq("topic-config", topic, "--reset", "--set",
                             "redeliveryDelayMillis=2s", "--json")))
    assert {k for k, v in reset["source"].items() if v == "topic"} == {
        "redeliveryDelayMillis"}
    assert reset["topic"] == topic and reset["data"]["redeliveryDelayMillis"] == 2_000
    assert reset["data"]["maxRetry"] == 10 and reset["data"]["deadLetter"] is True

    assert_one_line_error(dq("topic-config", topic, "--set", "noSuchSetting=1"), 2)
    refused = dq("topic-config", topic, "--set", "deadLetter=perhaps")   # refused before sending
    assert_one_line_error(refused, 2)
    assert "deadLetter: not a boolean: 'perhaps' (use on/off, true/false)" in refused.stderr
    assert_one_line_error(dq("topic-config", topic, "--set",
                             "redeliveryBackoffMultiplier=0.5"), 2)  # the server's 400


def test_topic_config_set_reads_each_setting_as_its_kind():
    # In-process: what --set hands the SDK, written out here rather than read from the table.
    given = {"ttlMillis": ("10m", 600_000), "maxRetry": ("3", 3),
             "ackTimeoutMillis": ("1500", 1_500), "redeliveryDelayMillis": ("2s", 2_000),
             "redeliveryBackoffMultiplier": (" 2.5 ", 2.5),
             "redeliveryMaxDelayMillis": ("1h", 3_600_000), "deadLetter": ("Off", False),
             "deadLetterRetentionMillis": ("1d", 86_400_000), "deadLetterMaxSize": ("7", 7),
             "delayMillis": ("2m", 120_000), "maxBacklog": ("500", 500),
             "dedupWindowMillis": ("1h", 3_600_000), "defaultSubscription": ("no", False),
             "description": (" as given\t ", " as given\t ")}
    assert set(given) == set(TOPIC_SETTINGS.values())
    for api, (text, value) in given.items():
        name, parsed = setting_arg(api, text)
        assert (API_SETTINGS[api], parsed, type(parsed)) == (name, value, type(value)), api
    with pytest.raises(ValueError, match="maxRetry: not a whole number: '1.5'"):
        setting_arg("maxRetry", "1.5")
    with pytest.raises(ValueError, match="redeliveryBackoffMultiplier: not a number: 'x'"):
        setting_arg("redeliveryBackoffMultiplier", "x")


def test_dlq_list_redrive_and_purge(dq, client, topic):
    sent = dead_letters(client, topic, 3)
    page = client.list_dead(topic, limit=2)
    table = ok(dq("dlq", "list", topic, "--limit", "2"))
    assert table.splitlines()[0].split()[:3] == ["MSG", "ID", "DIED"]
    assert all(m.msg_id in table for m in page.messages)
    assert f"(more: --cursor {page.next_cursor})" in table
    assert "dead       3" in ok(dq("topic-info", topic))

    everything = json.loads(ok(dq("dlq", "list", topic, "--limit", "2", "--all", "--json")))
    assert everything["nextCursor"] is None
    assert sorted(m["msgId"] for m in everything["delayMsgList"]) == sorted(
        s.msg_id for s in sent)
    assert all(m["deadTime"] and m["status"] == 6 for m in everything["delayMsgList"])

    oldest = page.messages[0].msg_id
    assert f"redrove {topic}/{oldest}" in ok(dq("dlq", "redrive", topic, "--msg-id", oldest))
    result = dq("dlq", "redrive", topic)
    assert ok(result).strip() == f"redrove 2 dead letter(s) of {topic}"
    assert "redriven so far: 2" in result.stderr
    assert {client.get(topic, s.msg_id).status for s in sent} == {Status.READY}
    assert client.list_dead(topic) == ([], None)

    client.pull(topic, batch=3)  # take the redriven ones out of the way
    more = dead_letters(client, topic, 2)
    assert json.loads(ok(dq("dlq", "purge", topic, "--msg-id", more[0].msg_id,
                            "--json"))) == {"topic": topic, "count": 1}
    assert ok(dq("dlq", "purge", topic)).strip() == f"purged 1 dead letter(s) of {topic}"
    assert_one_line_error(dq("dlq", "purge", topic, "--msg-id", "absent"), 3)
