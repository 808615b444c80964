"""``delayqueue send --file``: a JSON Lines file sent in batches, run as a subprocess against
a live node: per-line errors, progress and summary, defaults from the options, exit codes."""

from __future__ import annotations

import json

from delayqueue.cli import main
from delayqueue.client import DelayQueueClient, Status

from support.cli import run
from support.ports import refused_port

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


def jsonl(path, *lines) -> str:
    path.write_text("".join((ln if isinstance(ln, str) else json.dumps(ln)) + "\n"
                            for ln in lines), encoding="utf-8")
    return str(path)


def test_send_file_reports_each_bad_line_by_number_and_exits_non_zero(node, client, topic,
                                                                      tmp_path):
    client.send(topic, "live", msg_id="dup", delay_ms=60_000)
    path = jsonl(tmp_path / "msgs.jsonl",
                 {"msg": "first", "msgId": "a"},
                 '{"msg": "broken',                                        # line 2: not JSON
                 "",                                                       # blank: skipped
                 {"msg": "", "msgId": "empty"},                            # line 4: server 400
                 {"msg": "again", "msgId": "dup"},                         # duplicate: fine
                 {"msg": "later", "msgId": "b", "delayMillis": 60_000,
                  "attributes": {"lang": "日本語"}},
                 ["not", "an", "object"],                                  # line 7
                 {"msg": "x", "delay": 5})                                 # line 8: unknown
    result = run(node.url, "send", topic, "--file", path)
    assert result.returncode == EXIT_USAGE, result.stderr
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("delayqueue: line ")]
    assert [ln.split(":")[1].strip() for ln in errors] == ["line 2", "line 4", "line 7",
                                                           "line 8"], result.stderr
    assert "not JSON" in errors[0] and "(code 400)" in errors[1] and "msg" in errors[1]
    assert "JSON object" in errors[2] and "delay: unknown field" in errors[3]
    assert "7 line(s) read" in result.stderr                              # progress
    assert result.stdout.strip() == (f"sent 3 of 7 message(s) to {topic} (1 duplicate(s), "
                                     "nothing enqueued); 4 failed")
    assert client.get(topic, "a").status is Status.READY
    assert client.get(topic, "b").attributes == {"lang": "日本語"}
    assert client.get(topic, "dup").msg == "live"
    assert client.get(topic, "empty") is None


def test_send_file_sends_in_batches_with_defaults_from_the_options(node, client, topic,
                                                                   tmp_path):
    lines = [{"msg": f"m{i}", "msgId": f"m{i}"} for i in range(2_300)]
    lines[7] = {"msg": "own delay", "msgId": "m7", "delayMillis": 0,
                "attributes": {"own": "1"}}
    path = jsonl(tmp_path / "many.jsonl", *lines)
    result = run(node.url, "send", topic, "--file", path, "--delay", "1h", "--max-retry", "2",
                 "--attr", "tenant=acme", "--batch-size", "1000", "--json")
    assert result.returncode == EXIT_OK, result.stderr
    summary = json.loads(result.stdout)
    assert summary == {"topic": topic, "lines": 2_300, "sent": 2_300, "duplicates": 0,
                       "replaced": 0, "failed": 0, "aborted": None, "errors": []}
    info = client.topic_info(topic)
    assert (info.waiting_queue_size, info.ready_queue_size) == (2_299, 1)
    m0, m7 = client.get(topic, "m0"), client.get(topic, "m7")
    assert m0.status is Status.WAITING and m0.max_retry == 2
    assert m0.attributes == {"tenant": "acme"}
    assert m7.status is Status.READY and m7.attributes == {"tenant": "acme", "own": "1"}


def test_send_file_from_stdin(node, client, topic):
    result = run(node.url, "send", topic, "--file", "-",
                 stdin='{"msg": "one", "msgId": "s1"}\n{"msg": "two", "msgId": "s2"}\n')
    assert result.returncode == EXIT_OK, result.stderr
    assert result.stdout.startswith("sent 2 of 2 message(s)")
    assert client.get(topic, "s2").msg == "two"


def test_send_file_stops_at_a_request_refused_or_failed_as_a_whole(node, topic, tmp_path):
    path = jsonl(tmp_path / "m.jsonl", *({"msg": f"m{i}"} for i in range(3)))
    with refused_port() as port:
        result = run(f"http://127.0.0.1:{port}", "send", topic, "--file", path)
    assert result.returncode == EXIT_FAILURE, result.stderr
    assert "Traceback" not in result.stderr
    assert "stopped after line 3" in result.stderr
    assert result.stdout.strip() == f"sent 0 of 3 message(s) to {topic}; 3 failed"
    refused = run(node.url, "send", "bad{" + topic, "--file", path)  # an invalid topic: 400
    assert refused.returncode == EXIT_USAGE, refused.stderr
    assert "stopped after line 3: topic" in refused.stderr, refused.stderr


def test_send_file_argument_errors_are_one_line(node, topic, tmp_path, capsys):
    path = jsonl(tmp_path / "m.jsonl", {"msg": "x"})
    for argv in (["send", topic, "body", "--file", path],
                 ["send", topic, "--file", path, "--id", "x"],
                 ["send", topic, "--file", str(tmp_path / "absent.jsonl")],
                 ["send", topic, "--file", path, "--batch-size", "1001"],
                 ["send", topic]):
        code = main([*argv, "--url", node.url])  # in-process: the checks come before any I/O
        err = capsys.readouterr().err
        assert code == EXIT_USAGE, (argv, err)
        assert len(err.strip().splitlines()) == 1 and err.startswith("delayqueue: error:"), err
    with DelayQueueClient(node.url) as client:
        assert client.get(topic, "x") is None and client.topic_info(topic).ready_queue_size == 0
