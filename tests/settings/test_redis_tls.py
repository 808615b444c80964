"""TLS to Redis: a node on ``rediss://`` with a throwaway CA (made here with the openssl CLI)
serves; a client trusting another CA is refused."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import redis

from delayqueue.settings.redis_connection import connect_redis

from support.node import ServerProcess
from support.ports import free_port
from support.redis_server import RedisServer


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_ca(directory: Path, name: str) -> None:
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
            "-out", f"{name}.crt", "-days", "1", "-subj", f"/CN={name}", cwd=directory)


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("tls")
    make_ca(d, "ca")
    make_ca(d, "other-ca")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out",
            "server.csr", "-subj", "/CN=127.0.0.1", cwd=d)
    (d / "ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "server.crt", "-days", "1", "-extfile", "ext", cwd=d)
    return d


@pytest.fixture(scope="module")
def tls_redis(certs):
    port = free_port()
    server = RedisServer(certs / "redis", extra_args=[
        "--tls-port", str(port), "--tls-cert-file", str(certs / "server.crt"),
        "--tls-key-file", str(certs / "server.key"), "--tls-ca-cert-file", str(certs / "ca.crt"),
        "--tls-auth-clients", "no"]).start()
    yield f"rediss://127.0.0.1:{port}/0"
    server.stop()


def test_a_node_serves_over_rediss_with_the_servers_ca(tls_redis, certs):
    url = f"{tls_redis}?ssl_ca_certs={certs / 'ca.crt'}&ssl_cert_reqs=required"
    with ServerProcess(url) as node:
        sent = node.call("sendMsg", topic="tls", msg="secret-payload")
        assert sent["code"] == 200, sent
        pulled = node.call("pullMsg", topic="tls")
        assert [m["msg"] for m in pulled["delayMsgList"]] == ["secret-payload"]
        assert node.call("ackMsg", topic="tls", msgId=sent["delayMsg"]["msgId"])["code"] == 200


def test_a_client_trusting_another_ca_is_refused(tls_redis, certs):
    url = f"{tls_redis}?ssl_ca_certs={certs / 'other-ca.crt'}&ssl_cert_reqs=required"
    client = connect_redis(url, socket_timeout_ms=2000, connect_timeout_ms=2000,
                           max_connections=2)
    with pytest.raises(redis.ConnectionError) as info:
        client.ping()
    assert "certificate verify failed" in str(info.value)
    client.close()
