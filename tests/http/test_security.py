"""Security with authentication on: the SDK and CLI send their token, per-token limits answer
429 with Retry-After, a huge chunked body is refused without being read into memory, the
config is parsed with yaml.safe_load, and no secret ever reaches the logs."""

from __future__ import annotations

import json
import threading

import psutil
import pytest
import requests

from delayqueue.cli import main as cli_main
from delayqueue.client import AccessDeniedError, DelayQueueClient, RateLimitedError
from delayqueue.settings.config import ConfigError, load_settings

from support.fleet import wait_until_held
from support.node import ServerProcess

Q = "/camellia/delayQueue/"
RATE = 20
LONG_POLLS = 2
SECRETS = {"app": "application-secret-001", "burst": "burst-secret-00000002",
           "poller": "poller-secret-0000003", "reader": "read-only-secret-0004"}
TOKENS = [
    {"name": "app", "secret": SECRETS["app"], "roles": ["produce", "consume"]},
    {"name": "burst", "secret": SECRETS["burst"], "roles": ["produce"]},
    {"name": "poller", "secret": SECRETS["poller"], "roles": ["consume"]},
    {"name": "reader", "secret": SECRETS["reader"], "roles": ["consume"], "topics": ["r-*"]},
]


@pytest.fixture(scope="module")
def node(redis_server, tmp_path_factory):
    log = tmp_path_factory.mktemp("security") / "node.log"
    log.touch()
    settings = {"auth-tokens": json.dumps(TOKENS), "token-rate-limit": RATE,
                "token-max-long-polls": LONG_POLLS, "log-level": "debug"}
    with redis_server.leased_db_url() as url:
        with ServerProcess(url, settings=settings, log_path=log) as server:
            yield server


def bearer(name: str) -> dict:
    return {"Authorization": f"Bearer {SECRETS[name]}"}


def test_the_sdk_sends_its_token_and_reports_401_and_403(node):
    with DelayQueueClient(node.url, token=SECRETS["app"]) as client:
        sent = client.send("s-1", "hello")
        assert client.get("s-1", sent.msg_id).msg == "hello"
    with DelayQueueClient(node.url) as anonymous, pytest.raises(AccessDeniedError) as info:
        anonymous.send("s-1", "hello")
    assert info.value.code == 401
    with DelayQueueClient(node.url, token=SECRETS["reader"]) as reader:
        with pytest.raises(AccessDeniedError) as info:
            reader.pull("s-1")
    assert info.value.code == 403 and "'s-1' is outside token 'reader'" in info.value.msg


def test_the_cli_takes_a_token_from_its_option_or_the_environment(node, monkeypatch, capsys):
    assert cli_main(["send", "c-1", "hi", "--url", node.url, "--token", SECRETS["app"]]) == 0
    monkeypatch.setenv("DELAYQUEUE_TOKEN", SECRETS["app"])
    assert cli_main(["send", "c-1", "hi", "--url", node.url]) == 0
    monkeypatch.delenv("DELAYQUEUE_TOKEN")
    assert cli_main(["send", "c-1", "hi", "--url", node.url]) != 0
    assert "Authorization: missing" in capsys.readouterr().err


def test_over_its_rate_a_token_gets_429_with_retry_after_and_others_are_not_slowed(node):
    session = requests.Session()
    answers = [session.post(node.url + Q + "getTopicInfo", data={"topic": "b"},
                            headers=bearer("burst"), timeout=10) for _ in range(3 * RATE)]
    limited = [a for a in answers if a.status_code == 429]
    assert limited and len(limited) < len(answers), [a.status_code for a in answers]
    assert all(a.status_code in (200, 429) for a in answers)
    first = limited[0]
    assert int(first.headers["Retry-After"]) >= 1
    assert first.json() == {"code": 429, "msg": f"rate: token 'burst' is over token-rate-limit "
                                                 f"({RATE} requests/s)"}
    with DelayQueueClient(node.url, token=SECRETS["burst"]) as client:
        with pytest.raises(RateLimitedError):
            for _ in range(RATE + 1):
                client.topic_info("b")
    other = session.post(node.url + Q + "getTopicInfo", data={"topic": "b"},
                         headers=bearer("app"), timeout=10)
    assert other.status_code == 200


def test_a_token_holding_its_long_polls_gets_429_for_one_more(node, redis_server):
    held = []
    for i in range(LONG_POLLS):
        thread, result = hold_long_poll_with(node, f"lp-{i}")
        held.append((thread, result))
    extra = requests.post(node.url + Q + "longPollingMsg", headers=bearer("poller"),
                          data={"topic": "lp-x", "longPollingTimeoutMillis": 3000}, timeout=10)
    assert extra.status_code == 429 and extra.headers["Retry-After"] == "1"
    assert extra.json()["msg"] == ("longPollingMsg: token 'poller' already holds 2 long polls "
                                   "(token-max-long-polls 2)")
    for thread, result in held:
        thread.join(10)
        assert result["answer"]["code"] == 200
    again = requests.post(node.url + Q + "longPollingMsg", headers=bearer("poller"),
                          data={"topic": "lp-x", "longPollingTimeoutMillis": 1}, timeout=10)
    assert again.json()["code"] == 200


def hold_long_poll_with(node, topic: str):
    result: dict = {}

    def poll() -> None:
        result["answer"] = requests.post(
            node.url + Q + "longPollingMsg", headers=bearer("poller"),
            data={"topic": topic, "longPollingTimeoutMillis": 1500}, timeout=10).json()

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    wait_until_held(node.redis_url, topic, thread, result)
    return thread, result


def test_a_10_mb_chunked_body_is_refused_without_reading_it_into_memory(node):
    worker = node.workers()[0]
    before = worker.memory_info().rss

    def body():
        chunk = b"m" * 65536
        for _ in range(160):             # 10 MiB, no Content-Length: chunked
            yield chunk

    answer = requests.post(node.url + Q + "sendMsg?topic=big", data=body(),
                           headers={**bearer("app"),
                                    "Content-Type": "application/x-www-form-urlencoded"},
                           timeout=30)
    assert answer.status_code == 413 and answer.json()["code"] == 413
    grown = psutil.Process(worker.pid).memory_info().rss - before
    assert grown <= 20 * 1024 * 1024, f"worker RSS grew {grown / 1e6:.1f} MB"


def test_a_python_object_tag_in_the_config_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    config = tmp_path / "delayqueue.yaml"
    config.write_text(f'namespace: !!python/object/apply:os.system ["touch {marker}"]\n')
    with pytest.raises(ConfigError) as info:
        load_settings(path=config, env={})
    assert "cannot read config file" in str(info.value)
    assert not marker.exists()


def test_no_secret_reaches_the_log(node):
    # Runs last in this module: the log holds every request above, at log-level debug.
    requests.post(node.url + Q + "sendMsg", data={"topic": "z", "msg": "x"},
                  headers={"Authorization": "Bearer never-logged-unknown-secret"}, timeout=10)
    text = node.log_path.read_text(errors="replace")
    assert "took lease" in text, "the node's log is not the one written"
    for secret in [*SECRETS.values(), "never-logged-unknown-secret"]:
        assert secret not in text
