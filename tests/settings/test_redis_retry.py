"""A Redis command whose reply timed out is never sent again: the script already ran, and a
second run is a second transition (found by the fault campaign: a sendMsg whose worker was
SIGSTOPped timed out reading its reply, redis-py retried it after the message had been acked,
and the re-run re-created the message, delivered again after its 200 ack)."""

from __future__ import annotations

import threading

import redis
import requests

from support.node import ServerProcess
from support.tcp_proxy import ReplyHoldingProxy
from support.wait import wait_until


def test_a_send_whose_reply_timed_out_answers_500_and_runs_once(redis_server, redis_url):
    proxy = ReplyHoldingProxy(redis_server.port).start()
    db = redis_url.rsplit("/", 1)[1]
    seen: list[str] = []
    watching = threading.Event()

    def watch() -> None:
        client = redis.Redis(port=redis_server.port, decode_responses=True)
        try:
            with client.monitor() as monitor:
                watching.set()
                while watching.is_set():
                    command = monitor.next_command()["command"]
                    # The send of "retry-probe" (its msgId, then its body "x"), not getMsg's
                    # own script call, which names the msgId too.
                    if " retry-probe x " in command and command.lower().startswith("eval"):
                        seen.append(command)
        except redis.ConnectionError:
            pass                        # closed at the end of the test

    try:
        with ServerProcess(f"redis://127.0.0.1:{proxy.port}/{db}",
                           settings={"redis-socket-timeout-millis": 300}) as node:
            assert node.call("sendMsg", topic="t", msg="warm-up")["code"] == 200  # scripts loaded
            threading.Thread(target=watch, daemon=True).start()
            wait_until(watching.is_set, 5)
            proxy.hold()
            answer = requests.post(node.url + "/camellia/delayQueue/sendMsg",
                                   data={"topic": "t", "msg": "x", "msgId": "retry-probe"},
                                   timeout=10).json()
            proxy.release()
            assert answer["code"] == 500 and "Timeout" in answer["msg"], answer
            stored = wait_until(lambda: node.call("getMsg", topic="t", msgId="retry-probe")
                                ["code"] == 200, 5)
            assert stored, "the script ran once although its reply was lost"
            # The monitor sees the first run before getMsg can; a retry would come 300 ms on.
            assert wait_until(lambda: len(seen) >= 1, 5) and len(seen) == 1, seen
    finally:
        watching.clear()
        proxy.close()
