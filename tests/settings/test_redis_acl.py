"""The server runs under the restricted Redis user of config/delayqueue.acl: its key prefix,
its channels, only the commands it sends. The conformance suite passes through that user, and
the user is refused FLUSHALL, CONFIG, KEYS and everything outside its prefix."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import redis

from delayqueue.core.keys import NamespaceKeys

from support.node import ACLFILE_ENV_VAR, REPO, USER_ENV_VAR
from support.redis_server import RedisServer

ACL = REPO / "config" / "delayqueue.acl"
PASSWORD = "acl-test-password-1"
NS = NamespaceKeys("dq", "default")     # the keys and channel of a node's default namespace
# The HTTP conformance modules that make test runs on every topology (tests/http/conftest.py).
CONFORMANCE = sorted(str(path.relative_to(REPO))
                     for path in (REPO / "tests" / "http").glob("test_conformance_*.py")
                     if "pytest.mark.every_topology" in path.read_text())


def acl_file(directory) -> str:
    path = directory / "users.acl"
    path.write_text(ACL.read_text().replace(">CHANGE-ME", ">" + PASSWORD))
    return str(path)


@pytest.fixture(scope="module")
def acl_redis(tmp_path_factory):
    d = tmp_path_factory.mktemp("acl")
    server = RedisServer(d, extra_args=["--aclfile", acl_file(d)]).start()
    client = redis.Redis(port=server.port, username="delayqueue", password=PASSWORD,
                         decode_responses=True)
    yield client
    client.close()
    server.stop()


@pytest.mark.parametrize("command", [
    ("FLUSHALL",), ("FLUSHDB",), ("CONFIG", "GET", "maxmemory"), ("KEYS", "*"),
    ("SCRIPT", "FLUSH"), ("SHUTDOWN",), ("ACL", "LIST"), ("SET", "other:key", "1"),
    ("GET", "other:key"), ("PUBLISH", "other-channel", "x"), ("CLIENT", "KILL", "TYPE", "normal"),
])
def test_the_acl_user_is_refused_what_the_server_never_needs(acl_redis, command):
    with pytest.raises(redis.exceptions.NoPermissionError):
        acl_redis.execute_command(*command)


def test_the_acl_user_may_use_its_own_prefix_and_channels(acl_redis):
    assert acl_redis.set(NS.base + ":probe", "1")
    assert acl_redis.publish(NS.hint_channel, "0 t") == 0


def test_nodes_log_in_as_the_test_user_when_a_suite_runs_under_the_acl(server, redis_client):
    # Under the ACL run below, the node's connections must be the restricted user's.
    expected = os.environ.get(USER_ENV_VAR, "default:").split(":")[0]
    server.call("sendMsg", topic="who", msg="x")
    users = {c["user"] for c in redis_client.client_list() if c.get("name", "") == ""
             and c["id"] != str(redis_client.client_id())}
    assert expected in users, users


@pytest.mark.slow
def test_the_conformance_suite_passes_through_the_acl_user(tmp_path):
    env = {**os.environ, USER_ENV_VAR: f"delayqueue:{PASSWORD}",
           ACLFILE_ENV_VAR: acl_file(tmp_path)}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         *CONFORMANCE,
         "tests/settings/test_redis_acl.py::test_nodes_log_in_as_the_test_user_when_a_suite_runs_under_"
         "the_acl"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "failed" not in run.stdout


def test_push_delivery_runs_under_the_acl_user(acl_redis):
    """The push loop's own commands (the registry set, the last-errors list) are the user's:
    one message answered 500, then 204, ends acked with its failure on record."""
    import threading
    import time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from delayqueue.background.runtime import Runtime
    from delayqueue.settings.config import load_settings

    answers = [500, 204]

    class Receiver(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(answers.pop(0) if len(answers) > 1 else answers[0])
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    receiver = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    port = acl_redis.connection_pool.connection_kwargs["port"]
    settings = load_settings(overrides={
        "redis_url": f"redis://delayqueue:{PASSWORD}@127.0.0.1:{port}/0", "snapshot_dir": "",
        "push_allowed_networks": "127.0.0.0/8", "redelivery_delay_millis": 50})
    rt = Runtime(settings)
    rt.start()
    try:
        rt.subscriptions.set_config("acl-push", None, {
            "pushUrl": f"http://127.0.0.1:{receiver.server_address[1]}/h"})
        rt.queue.send("acl-push", "x", msg_id="m1")
        deadline = time.monotonic() + 20
        while rt.queue.get("acl-push", "m1").status != 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert rt.queue.get("acl-push", "m1").status == 4
        assert [e["status"] for e in rt.subscriptions.push_status("acl-push", None)
                ["lastErrors"]] == [500]
    finally:
        rt.stop()
        receiver.shutdown()
