"""The client commands of the delayqueue CLI, run as subprocesses against a live node."""

from __future__ import annotations

import json
import re
import signal
import subprocess

from delayqueue.client import Status

from support import wait_until
from support.cli import DELAYQUEUE, assert_one_line_error, popen, run


def test_the_console_script_is_the_installed_entry_point():
    assert DELAYQUEUE.is_file(), f"{DELAYQUEUE} missing: install the project (make install)"
    result = subprocess.run([str(DELAYQUEUE), "--help"], capture_output=True, text=True,
                            timeout=30)
    assert result.returncode == 0, result.stderr
    listed = re.findall(r"^    (\S+)", result.stdout, re.MULTILINE)
    assert listed == ["serve", "report", "send", "pull", "long-poll", "ack", "nack",
                      "change-visibility", "reschedule", "get", "delete", "topics", "topic-info",
                      "topic-config", "topic", "list", "subscription", "schedule", "dlq",
                      "monitor", "consume",
                      "migrate-storage"], \
        result.stdout


def test_send_shows_status_name_iso_times_and_relative_delay(dq, topic):
    result = dq("send", topic, "hello", "--delay", "4m10s", "--id", "m1")
    assert result.returncode == 0, result.stderr
    assert "waiting (1)" in result.stdout
    assert "in 4m 10s" in result.stdout or "in 4m 9s" in result.stdout
    assert "m1" in result.stdout and "hello" in result.stdout
    assert "T" in result.stdout.split("triggerTime", 1)[1].split()[0]  # an ISO date-time


def test_send_json_reads_the_body_from_stdin(dq, client, topic):
    result = dq("send", topic, "-", "--json", "--max-retry", "2", stdin="from stdin")
    assert result.returncode == 0, result.stderr
    sent = json.loads(result.stdout)
    assert sent["status"] == 2 and sent["maxRetry"] == 2
    assert client.get(topic, sent["msgId"]).msg == "from stdin"


def test_pull_then_ack_by_command(dq, client, topic):
    sent = client.send(topic, "x")
    pulled = json.loads(dq("pull", topic, "--json", "--batch", "5").stdout)
    assert [m["msgId"] for m in pulled] == [sent.msg_id] and pulled[0]["status"] == 3
    result = dq("ack", topic, sent.msg_id)
    assert result.returncode == 0 and "acked" in result.stdout
    assert "acked (4)" in dq("get", topic, sent.msg_id).stdout


def test_pull_table_names_the_status_and_says_when_empty(dq, client, topic):
    assert dq("pull", topic).stdout.strip() == "(no messages)"
    client.send(topic, "body text")
    table = dq("pull", topic).stdout
    assert "MSG ID" in table and "consuming (3)" in table and "body text" in table


def test_long_poll_waits_for_a_message_to_become_due(dq, client, topic):
    sent = client.send(topic, "soon", delay_ms=300)
    result = dq("long-poll", topic, "--wait", "5s", "--json")
    assert result.returncode == 0, result.stderr
    assert [m["msgId"] for m in json.loads(result.stdout)] == [sent.msg_id]


def test_nack_by_command_makes_the_message_ready(dq, client, topic):
    sent = client.send(topic, "x")
    client.pull(topic)
    assert dq("nack", topic, sent.msg_id).returncode == 0
    assert client.get(topic, sent.msg_id).status is Status.READY


def test_get_of_an_absent_message_exits_3_with_one_line(dq, topic):
    assert_one_line_error(dq("get", topic, "absent"), 3)


def test_ack_of_unknown_message_exits_3(dq, topic):
    assert_one_line_error(dq("ack", topic, "absent"), 3)


def test_delete_with_release_removes_the_message(dq, client, topic):
    sent = client.send(topic, "x", delay_ms=60_000)
    result = dq("delete", topic, sent.msg_id, "--release")
    assert result.returncode == 0, result.stderr
    assert client.get(topic, sent.msg_id) is None


def test_topics_and_topic_info_show_queue_sizes(dq, client, topic):
    client.send(topic, "w", delay_ms=120_000)
    client.send(topic, "r")
    topics = dq("topics").stdout
    line = next(ln for ln in topics.splitlines() if ln.startswith(topic))
    assert topics.splitlines()[0].split() == ["TOPIC", "WAITING", "READY", "CONSUMING", "DEAD"]
    assert line.split()[1:] == ["1", "1", "0", "0"]
    info = dq("topic-info", topic)
    assert "waiting    1" in info.stdout and "1min – 10min" in info.stdout
    assert json.loads(dq("topic-info", topic, "--json").stdout)["readyQueueSize"] == 1


def test_monitor_prints_the_last_interval(dq):
    result = dq("monitor")
    assert result.returncode == 0, result.stderr
    assert json.loads(dq("monitor", "--json").stdout).keys() >= {"requestStatsList"}


def test_server_down_prints_one_line_and_exits_1(dead_url, topic):
    result = run(dead_url, "get", topic, "x")
    assert_one_line_error(result, 1)
    assert "no server reachable" in result.stderr


def test_url_option_overrides_the_environment_variable(node, dead_url, topic):
    result = run(dead_url, "topics", "--url", node.url)
    assert result.returncode == 0, result.stderr


def test_bad_arguments_exit_2(dq, topic):
    result = dq("send", topic, "x", "--delay", "soon")
    assert result.returncode == 2 and "not a duration" in result.stderr
    assert "Traceback" not in result.stderr
    assert_one_line_error(dq("send", "bad{topic}", "x"), 2)  # the server's code 400


def test_consume_acks_on_exit_0_and_nacks_on_failure(dq, client, topic, tmp_path):
    out = tmp_path / "out"
    ok1 = client.send(topic, "ok1")
    bad = client.send(topic, "fail", max_retry=0)
    ok2 = client.send(topic, "ok2")
    script = f'b=$(cat); echo "$b $DELAYQUEUE_MSG_ID" >> {out}; test "$b" != fail'
    result = dq("consume", topic, "--max-messages", "3", "--", "sh", "-c", script)
    assert result.returncode == 0, result.stderr
    assert "2 acked, 1 nacked" in result.stderr
    assert sorted(out.read_text().splitlines()) == sorted(
        [f"ok1 {ok1.msg_id}", f"fail {bad.msg_id}", f"ok2 {ok2.msg_id}"])
    assert client.get(topic, ok1.msg_id).status is Status.ACKED
    assert client.get(topic, ok2.msg_id).status is Status.ACKED
    assert client.get(topic, bad.msg_id).status is Status.RETRY_EXHAUSTED


def test_consume_stops_on_sigterm_after_the_running_command_finishes(node, client, topic,
                                                                     tmp_path):
    started = tmp_path / "started"
    sent = client.send(topic, "slow")
    proc = popen(node.url, "consume", topic, "--", "sh", "-c",
                 f"touch {started}; sleep 1; cat > /dev/null")
    try:
        wait_until(started.exists, 10, interval_s=0.05, message="the command never ran")
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=15)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr
    assert "1 acked" in stderr
    assert client.get(topic, sent.msg_id).status is Status.ACKED


def test_consume_of_a_missing_command_exits_2(dq, topic):
    assert_one_line_error(dq("consume", topic, "--", "no-such-command-here"), 2)
