"""``subscription create|config --push-*`` and ``subscription push-status``, run as
subprocesses against a live node that pushes to a local receiver: the push settings set,
shown (pushSecret only as "set") and cleared, the default subscription pushed, the last
failures as a table and as JSON, consume refusing a push subscription, bad option values, and
the secret never printed by any command, on success or failure, text or JSON."""

from __future__ import annotations

import json

import pytest

from delayqueue.client import DelayQueueClient, Status, verify_signature

from support.cli import assert_one_line_error, run
from support.receiver import Answer
from support.sdk import push_node, receiver, topic  # noqa: F401 - fixtures
from support.wait import wait_until

EXIT_OK, EXIT_USAGE, EXIT_NOT_FOUND = 0, 2, 3
SECRET = "cli-s3cr3t-never-shown"


@pytest.fixture
def pq(push_node):
    """Run a command against the node that may push to 127.0.0.1."""
    return lambda *argv, **kw: run(push_node.url, *argv, **kw)


@pytest.fixture
def client(push_node):
    with DelayQueueClient(push_node.url, timeout=5) as c:
        yield c


def ok(result) -> str:
    assert result.returncode == EXIT_OK, result.stderr
    return result.stdout


def rows(table: str) -> dict[str, list[str]]:
    """A table's rows by their first cell, its header and rule left out."""
    return {line.split()[0]: line.split()[1:] for line in table.strip().splitlines()[2:]}


def fields(text: str) -> dict[str, str]:
    """``key   value`` lines (a detail view) up to the first blank line."""
    head = text.split("\n\n")[0]
    return {k: v.strip() for k, _, v in (line.partition(" ") for line in head.splitlines())}


def test_create_sets_push_and_config_shows_it_with_the_secret_only_as_set(pq, client, topic,
                                                                         receiver):
    out = ok(pq("subscription", "create", topic, "hooks", "--push-url", receiver.url("/h"),
                "--push-secret", SECRET, "--push-concurrency", "4", "--push-timeout-ms", "5s",
                "--set", "maxRetry=3"))
    assert fields(out)["pushUrl"] == receiver.url("/h")
    config = client.get_subscription_config(topic, "hooks")
    assert (config.push_url, config.push_concurrency, config.push_timeout_ms,
            config.push_secret_set, config.max_retry) == (receiver.url("/h"), 4, 5_000, True, 3)

    table = rows(ok(pq("subscription", "config", topic, "hooks")))
    assert table["pushUrl"] == [receiver.url("/h"), "subscription"]
    assert table["pushTimeoutMillis"] == ["5000", "(5s)", "subscription"]
    assert table["pushConcurrency"] == ["4", "subscription"]
    assert table["pushSecret"] == ["set", "subscription"]
    shown = json.loads(ok(pq("subscription", "config", topic, "hooks", "--json")))
    assert shown["data"]["pushSecretSet"] is True and "pushSecret" not in shown["data"]

    listed = ok(pq("subscription", "list", topic))
    assert listed.splitlines()[0].split()[-2:] == ["PUSH", "URL"]
    assert rows(listed)["hooks"][-1] == receiver.url("/h")

    client.send(topic, "x", msg_id="m1")
    [push] = receiver.wait_for(1, timeout_s=20)
    assert verify_signature(SECRET, push.headers, push.body)


def test_config_changes_and_clears_push(pq, client, topic, receiver):
    ok(pq("subscription", "create", topic, "hooks", "--push-url", receiver.url(),
          "--push-secret", SECRET))
    ok(pq("subscription", "config", topic, "hooks", "--push-concurrency", "2"))
    assert client.get_subscription_config(topic, "hooks").push_concurrency == 2
    table = rows(ok(pq("subscription", "config", topic, "hooks", "--push-url", "",
                       "--push-secret", "")))
    assert table["pushUrl"] == ["-", "server"]
    assert table["pushSecret"] == ["-"]
    config = client.get_subscription_config(topic, "hooks")
    assert not config.is_push and not config.push_secret_set


def test_the_secret_is_read_from_stdin_with_a_dash(pq, client, topic, receiver):
    ok(pq("subscription", "create", topic, "hooks", "--push-url", receiver.url(),
          "--push-secret", "-", stdin=SECRET + "\n"))
    client.send(topic, "x", msg_id="m1")
    [push] = receiver.wait_for(1, timeout_s=20)
    assert verify_signature(SECRET, push.headers, push.body)
    assert not verify_signature("-", push.headers, push.body)


def test_the_default_subscription_is_pushed_from_the_command_line(pq, client, topic, receiver):
    ok(pq("subscription", "config", topic, "--push-url", receiver.url("/d")))
    assert client.get_subscription_config(topic).push_url == receiver.url("/d")
    client.send(topic, "x", msg_id="m1")
    [push] = receiver.wait_for(1, timeout_s=20)
    assert push.headers["X-DelayQueue-Subscription"] == "default"
    wait_until(lambda: client.get(topic, "m1").status == Status.ACKED, 20)
    status = fields(ok(pq("subscription", "push-status", topic)))
    assert (status["subscription"], status["pushUrl"], status["signed"]) == \
        ("default", receiver.url("/d"), "no")
    # Its other settings are the topic's: refused, nothing written.
    result = pq("subscription", "config", topic, "default", "--set", "maxRetry=3",
                "--push-concurrency", "3")
    assert_one_line_error(result, EXIT_USAGE)
    assert client.get_subscription_config(topic).push_concurrency != 3
    ok(pq("subscription", "config", topic, "default", "--reset"))
    assert not client.get_subscription_config(topic).is_push


def test_push_status_shows_in_flight_and_the_last_failures(pq, client, topic, receiver):
    receiver.script("/push", then=Answer(500))
    client.create_subscription(topic, "flaky", push_url=receiver.url(), max_retry=1,
                               redelivery_delay_ms=0, dead_letter=True)
    client.send(topic, "x", msg_id="m1")
    wait_until(lambda: client.get(topic, "m1", subscription="flaky").status
               == Status.RETRY_EXHAUSTED, 30,
               message=lambda: f"{len(receiver.requests())} pushes")
    out = ok(pq("subscription", "push-status", topic, "flaky"))
    detail = fields(out)
    assert (detail["subscription"], detail["pushUrl"], detail["inFlight"], detail["paused"],
            detail["signed"], detail["concurrency"]) == \
        ("flaky", receiver.url(), "0", "no", "no", "16")
    header, _rule, *errors = out.split("\n\n")[1].splitlines()
    assert header.split() == ["TIME", "AGO", "MSG", "ID", "OUTCOME", "STATUS", "MILLIS",
                              "ERROR"]
    assert len(errors) == 2                                   # maxRetry 1: two deliveries
    assert all(" m1 " in e and " 5xx " in e and " 500 " in e for e in errors)
    shown = json.loads(ok(pq("subscription", "push-status", topic, "flaky", "--json")))
    assert (shown["topic"], shown["subscription"], shown["pushUrl"]) == \
        (topic, "flaky", receiver.url())
    assert [(e["msgId"], e["outcome"], e["status"]) for e in shown["lastErrors"]] == \
        [("m1", "5xx", 500)] * 2

    client.create_subscription(topic, "audit")
    out = ok(pq("subscription", "push-status", topic, "audit"))
    assert fields(out)["pushUrl"].startswith("- (not pushed")
    assert "(no failed pushes)" in out
    assert_one_line_error(pq("subscription", "push-status", topic, "nope"), EXIT_NOT_FOUND)


def test_consume_refuses_a_push_subscription_in_one_line(pq, client, topic, receiver):
    client.create_subscription(topic, "hooks", push_url=receiver.url())
    result = pq("consume", topic, "--subscription", "hooks", "--", "true")
    assert_one_line_error(result, EXIT_USAGE)
    assert "push subscription" in result.stderr and receiver.url() in result.stderr


@pytest.mark.parametrize("argv", [["--push-timeout-ms", "soon"], ["--push-concurrency", "0"],
                                  ["--push-concurrency", "many"],
                                  ["--push-url", "ftp://127.0.0.1/x"],
                                  ["--push-url", "http://10.1.2.3/x"],
                                  ["--push-timeout-ms", "50ms"]])
def test_a_bad_push_option_exits_2_and_writes_nothing(pq, client, topic, argv):
    client.create_subscription(topic, "hooks")
    result = pq("subscription", "config", topic, "hooks", *argv)
    assert result.returncode == EXIT_USAGE, result.stderr
    assert "Traceback" not in result.stderr
    assert not client.get_subscription_config(topic, "hooks").is_push


def test_no_command_ever_prints_the_secret(pq, client, topic, receiver):
    long_secret = SECRET + "x" * 300           # refused: over 256 bytes
    runs = [
        pq("subscription", "create", topic, "hooks", "--push-url", receiver.url(),
           "--push-secret", SECRET),
        pq("subscription", "create", topic, "hooks2", "--push-url", receiver.url(),
           "--push-secret", SECRET, "--json"),
        pq("subscription", "config", topic, "hooks", "--push-secret", SECRET),
        pq("subscription", "config", topic, "hooks", "--push-secret", SECRET, "--json"),
        pq("subscription", "config", topic, "hooks"),
        pq("subscription", "config", topic, "hooks", "--json"),
        pq("subscription", "list", topic), pq("subscription", "list", topic, "--json"),
        pq("subscription", "push-status", topic, "hooks"),
        pq("subscription", "push-status", topic, "hooks", "--json"),
        pq("topic-info", topic), pq("topic-info", topic, "--json"),
        # failures: the secret refused here, another value refused by the server
        pq("subscription", "config", topic, "hooks", "--push-secret", long_secret),
        pq("subscription", "config", topic, "hooks", "--push-secret", long_secret, "--json"),
        pq("subscription", "config", topic, "hooks", "--push-secret", SECRET + "\x01"),
        pq("subscription", "config", topic, "hooks", "--push-secret", SECRET,
           "--push-url", "http://10.1.2.3/x"),
        pq("subscription", "config", topic, "nope", "--push-secret", SECRET, "--json"),
    ]
    assert [r.returncode for r in runs] == [EXIT_OK] * 12 + [EXIT_USAGE] * 4 + \
        [EXIT_NOT_FOUND]
    for result in runs:
        assert SECRET not in result.stdout + result.stderr, result.args
    assert "push_secret" in runs[12].stderr
    assert client.get_subscription_config(topic, "hooks").push_secret_set
