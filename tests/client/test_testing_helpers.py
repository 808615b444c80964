"""delayqueue.testing: the real app and Lua scripts in-process on fakeredis, a manual clock.

The example test of docs/client.md ("Testing helpers") is taken from there and run here,
through pytest and the package's pytest plugin, as a user's test file would be.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from delayqueue import testing
from delayqueue.core.scripts import Scripts
from delayqueue.testing import exercise_every_script, fake_delayqueue, fakeredis_failures

ROOT = Path(__file__).resolve().parents[2]


def test_every_script_runs_on_fakeredis():
    assert fakeredis_failures() == ()
    with fake_delayqueue(backend="fakeredis") as dq:
        assert exercise_every_script(dq) == set(Scripts.NAMES)
        assert dq.backend == "fakeredis"


def test_the_same_probe_passes_on_a_real_redis_server():
    """The probe itself is right: it passes on the embedded redis-server too."""
    with fake_delayqueue(backend="embedded") as dq:
        assert exercise_every_script(dq) == set(Scripts.NAMES)


def test_auto_falls_back_to_the_embedded_server_when_fakeredis_fails(monkeypatch):
    monkeypatch.setattr(testing, "fakeredis_failures",
                        lambda: ("ResponseError: unknown command 'ZPOPMIN'",))
    with pytest.warns(RuntimeWarning, match="ZPOPMIN.*embedded redis-server"):
        with fake_delayqueue() as dq:
            assert dq.backend == "embedded"
            assert dq.call("sendMsg", topic="t", msg="m")["code"] == 200
            assert dq.redis.info("server")["redis_version"]   # a real server answers INFO


def test_the_clock_is_the_tests(fake_delayqueue_server):
    dq = fake_delayqueue_server
    sent = dq.call("sendMsg", topic="t", msg="m", delayMillis=10_000)["delayMsg"]
    assert sent["triggerTime"] == dq.now_ms() + 10_000
    dq.advance(9_999)
    assert dq.call("getMsg", topic="t", msgId=sent["msgId"])["delayMsg"]["status"] == 1
    dq.advance(1)
    assert dq.call("getMsg", topic="t", msgId=sent["msgId"])["delayMsg"]["status"] == 2
    with pytest.raises(ValueError, match="ms must be >= 0"):
        dq.advance(-1)


def test_settings_are_keyword_arguments_and_validated():
    with fake_delayqueue(backend="fakeredis", max_retry=0) as dq:
        dq.call("sendMsg", topic="t", msg="m", msgId="a")
        dq.call("pullMsg", topic="t")
        dq.call("ackMsg", topic="t", msgId="a", ack=False)
        assert dq.call("getMsg", topic="t", msgId="a")["delayMsg"]["status"] == 6
    with pytest.raises(TypeError):
        with fake_delayqueue(no_such_setting=1):
            pass
    with pytest.raises(ValueError, match="backend"):
        with fake_delayqueue(backend="memory"):
            pass


def documented_example() -> str:
    text = (ROOT / "docs" / "client.md").read_text(encoding="utf-8")
    section = re.search(r"^## Testing helpers\n(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    assert section, "docs/client.md has no '## Testing helpers' section"
    code = re.search(r"```python\n(.*?)```", section.group(1), re.DOTALL)
    assert code, "the Testing helpers section has no python example"
    return code.group(1)


def test_the_documented_example_passes_as_a_users_test_file(tmp_path):
    example = documented_example()
    assert len(example.strip().splitlines()) <= 14
    (tmp_path / "test_example.py").write_text(example + FIXTURE_USE)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(tmp_path)], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "2 passed" in run.stdout, run.stdout[-2000:]


# The plugin's fixture, as a user's test would take it (appended to the documented example).
FIXTURE_USE = '''

def test_the_plugin_fixture(fake_delayqueue_server):
    dq = fake_delayqueue_server
    dq.call("sendMsg", topic="t", msg="m", delayMillis=5_000)
    dq.advance(5_000)
    assert len(dq.call("pullMsg", topic="t")["delayMsgList"]) == 1
'''


def scripted_session(backend: str) -> list:
    """The same requests, at the same manual times, on one backend; every answer."""
    answers = []
    with fake_delayqueue(backend=backend, ack_timeout_millis=1000) as dq:
        def call(endpoint, **params):
            body = dq.call(endpoint, **params)
            answers.append((endpoint, strip_receipts(body)))
        call("setTopicConfig", topic="d", maxRetry=1, redeliveryDelayMillis=100)
        for i in range(5):
            call("sendMsg", topic="t", msg=f"m{i}", msgId=f"m{i}", delayMillis=i * 1000)
        call("sendMsg", topic="t", msg="dup", msgId="m0")
        call("sendMsg", topic="d", msg="poison", msgId="p", attributes='{"a":"b"}')
        call("pullMsg", topic="t", batch=10)
        for step in range(6):
            dq.advance(700)
            call("pullMsg", topic="t", batch=2)
            call("pullMsg", topic="d")
            call("ackMsg", topic="d", msgId="p", ack=False)
            call("getTopicInfo", topic="t")
        call("ackMsg", topic="t", msgId="m1")
        call("rescheduleMsg", topic="t", msgId="m4", delayMillis=5000)
        call("deleteMsg", topic="t", msgId="m3", release=True)
        call("listDeadMsg", topic="d")
        call("redriveDeadMsg", topic="d")
        call("getMsg", topic="d", msgId="p")
        call("getTopicInfoList")
    return answers


def strip_receipts(value):
    if isinstance(value, dict):
        return {k: strip_receipts(v) for k, v in value.items() if k != "receipt"}
    if isinstance(value, list):
        return [strip_receipts(v) for v in value]
    return value


def test_fakeredis_answers_exactly_as_a_real_redis_server():
    fake, real = scripted_session("fakeredis"), scripted_session("embedded")
    assert len(fake) == len(real) == 40
    for (endpoint, on_fake), (_, on_real) in zip(fake, real):
        assert on_fake == on_real, endpoint
    assert any(body.get("duplicate") for _, body in fake)
    assert any(body.get("delayMsgList") for e, body in fake if e == "listDeadMsg")
