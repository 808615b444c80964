"""How the client commands report what the server refused (issue 28's rough edges), run as
subprocesses against the shared node: receipts stale or malformed, each said once; --json
failures as one JSON object on stdout with the exit code of the text line; the DEAD column
of topics; --version from the installed command."""

from __future__ import annotations

import json
import subprocess

from delayqueue import __version__

from support.cli import DELAYQUEUE, assert_one_line_error

EXIT_USAGE, EXIT_NOT_FOUND, EXIT_STALE, EXIT_BACKLOG = 2, 3, 4, 5


def json_error(result, exit_code: int) -> dict:
    """The --json failure: exit ``exit_code``, nothing on stderr, {"error": ...} on stdout."""
    assert result.returncode == exit_code, (result.stdout, result.stderr)
    assert result.stderr == ""
    document = json.loads(result.stdout)
    assert list(document) == ["error"] and document["error"]["exitCode"] == exit_code
    return document["error"]


def test_version_of_the_installed_command():
    done = subprocess.run([str(DELAYQUEUE), "--version"], capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 0 and done.stdout == f"delayqueue {__version__}\n"


def test_a_stale_receipt_is_said_once_and_exits_4(dq, client, topic):
    client.send(topic, "x", msg_id="m")
    [first] = client.pull(topic)
    client.nack(first)
    [second] = client.pull(topic)
    result = dq("ack", topic, "m", "--receipt", first.receipt)
    assert_one_line_error(result, EXIT_STALE)
    assert result.stderr.startswith(
        "delayqueue: error: receipt: stale receipt: message 'm' was delivered again since")
    assert result.stderr.count("stale receipt") == 1
    error = json_error(dq("ack", topic, "m", "--receipt", first.receipt, "--json"), EXIT_STALE)
    assert error["kind"] == "stale_receipt" and error["code"] == 409
    assert error["message"].startswith("receipt: stale receipt: message 'm' ")
    assert client.get(topic, "m").receipt == second.receipt


def test_a_malformed_receipt_is_reported_as_malformed_and_exits_2(dq, client, topic):
    client.send(topic, "x", msg_id="m")
    [m] = client.pull(topic)
    for argv in (["ack", topic, "m"], ["nack", topic, "m"], ["extend", topic, "m", "1m"]):
        result = dq(*argv, "--receipt", "garbage")
        assert_one_line_error(result, EXIT_USAGE)
        assert result.stderr.startswith("delayqueue: error: rejected: receipt: malformed: "
                                        "'garbage' is not a receipt"), result.stderr
        assert "stale" not in result.stderr
    error = json_error(dq("ack", topic, "m", "--receipt", "garbage", "--json"), EXIT_USAGE)
    assert error["kind"] == "bad_request" and error["code"] == 400
    assert error["message"].startswith("receipt: malformed: ")
    assert client.get(topic, "m").receipt == m.receipt      # nothing changed


def test_json_errors_keep_the_exit_codes(dq, client, topic):
    error = json_error(dq("get", topic, "absent", "--json"), EXIT_NOT_FOUND)
    assert error == {"kind": "not_found", "message": f"no message {topic}/absent",
                     "code": None, "exitCode": EXIT_NOT_FOUND}
    error = json_error(dq("ack", topic, "absent", "--json"), EXIT_NOT_FOUND)
    assert error["kind"] == "not_found" and error["code"] == 404
    error = json_error(dq("send", "bad{topic}", "x", "--json"), EXIT_USAGE)
    assert error["kind"] == "bad_request" and error["message"].startswith("topic: ")
    error = json_error(dq("send", topic, "x", "--delay", "soon", "--json"), EXIT_USAGE)
    assert error["kind"] == "usage" and "not a duration: 'soon'" in error["message"]
    error = json_error(dq("send", topic, "x", "--atomic", "--json"), EXIT_USAGE)
    assert error["message"] == "--atomic goes with --file"
    client.set_topic_config(topic, max_backlog=1)
    client.send(topic, "first")
    error = json_error(dq("send", topic, "second", "--json"), EXIT_BACKLOG)
    assert error["kind"] == "backlog_full" and error["code"] == 429


def test_send_file_json_failure_is_its_summary_with_an_error(dq, topic, tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text('{"msg": "a"}\n{"msg": ""}\n', encoding="utf-8")
    result = dq("send", topic, "--file", str(path), "--json")
    assert result.returncode == EXIT_USAGE
    summary = json.loads(result.stdout)
    assert (summary["sent"], summary["failed"]) == (1, 1)
    assert summary["error"] == {"kind": "usage", "message": "1 of 2 line(s) refused",
                                "code": None, "exitCode": EXIT_USAGE}
    atomic = dq("send", topic, "--file", str(path), "--atomic", "--json")
    assert atomic.returncode == EXIT_USAGE
    assert json.loads(atomic.stdout)["error"]["message"] == \
        "atomic batch refused: nothing written"
    path.write_text('{"msg": "b"}\n', encoding="utf-8")
    assert "error" not in json.loads(dq("send", topic, "--file", str(path), "--json").stdout)


def test_topics_always_has_a_dead_column(dq, client, topic):
    client.send(topic, "dies", max_retry=0, msg_id="d")
    [m] = client.pull(topic)
    client.nack(m)
    assert client.topic_info(topic).dead_queue_size == 1
    lines = dq("topics").stdout.splitlines()
    assert lines[0].split()[:5] == ["TOPIC", "WAITING", "READY", "CONSUMING", "DEAD"]
    row = next(ln for ln in lines if ln.startswith(topic + " "))
    assert row.split()[1:5] == ["0", "0", "0", "1"]
