"""TrustCachedRequest (server/gunicorn_workers.py) decides forwarded_allow_ips trust as
gunicorn does, once per peer address."""

from __future__ import annotations

from gunicorn.config import Config
from gunicorn.http import message

from delayqueue.server import gunicorn_workers
from delayqueue.server.gunicorn_workers import TrustCachedRequest


def decide(cls, cfg, peer):
    request = cls.__new__(cls)        # only the policy's inputs: no socket to parse
    request.cfg, request.peer_addr = cfg, peer
    return request._peer_is_trusted_proxy()


def test_same_decisions_as_gunicorn_and_cached_per_peer(monkeypatch):
    monkeypatch.setattr(gunicorn_workers, "_trusted_peers", {})
    cfg = Config()
    cfg.set("forwarded_allow_ips", "127.0.0.1,10.0.0.0/8,::1")
    peers = [("127.0.0.1", 1), ("10.1.2.3", 2), ("192.0.2.1", 3), ("::1", 4), ("bad", 5),
             "/run/dq.sock"]
    for peer in peers:
        assert decide(TrustCachedRequest, cfg, peer) == decide(message.Request, cfg, peer)
    calls = []
    monkeypatch.setattr(message.Request, "_peer_is_trusted_proxy",
                        lambda self: calls.append(self.peer_addr) or False)
    assert decide(TrustCachedRequest, cfg, ("10.1.2.3", 9)) is True   # cached: no new check
    assert decide(TrustCachedRequest, cfg, ("10.9.9.9", 9)) is False  # new peer: checked
    assert calls == [("10.9.9.9", 9)]
