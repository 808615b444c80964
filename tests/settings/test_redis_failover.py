"""Sentinel and Cluster: failovers under load, CROSSSLOT-free keys, redis-wait-replicas.

Short versions of the campaign of bench/ha_campaign.py (``make ha``, figures in
docs/reliability.md): one graceful failover of each kind under a steady load, checked for
lost and early messages. Nodes take a namespace of their own on the session's topologies.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis
import requests
from redis.cluster import key_slot

from delayqueue.background.runtime import Runtime
from delayqueue.core.keys import NamespaceKeys
from delayqueue.core.outcome import Outcome
from delayqueue.core.script_runner import ReplicaWaitTimeout
from delayqueue.core.scripts import SendArgs
from delayqueue.settings.config import Settings
from delayqueue.settings.redis_connection import connect_redis

from support import wait_until
from support.failover import run_under_load
from support.node import ServerProcess
from support.ports import free_port
from support.redis_server import RedisServer
from support.tcp_proxy import ReplyHoldingProxy
from support.topologies import unique_namespace, wait_serving

# The longest a client may see sends fail around one graceful failover (measured: well under
# a second on this machine; see docs/reliability.md). Beyond it the test fails.
FAILOVER_WINDOW_BOUND_MS = 10_000


def call(node, endpoint, **params):
    return requests.post(f"{node.url}/camellia/delayQueue/{endpoint}", data=params,
                         timeout=15).json()


@pytest.mark.slow
def test_cluster_failover_under_load_loses_nothing_and_is_never_early(redis_cluster):
    namespace = unique_namespace()
    # The namespace's own slot (registry, due index, leases) moves: the scheduler must follow.
    master = redis_cluster.master_of_slot(key_slot(NamespaceKeys("dq", namespace).base.encode()))
    with ServerProcess(redis_cluster.url, settings={"namespace": namespace}) as node:
        checker = run_under_load(node.url, lambda: redis_cluster.failover(master))
    print("cluster failover:", checker.summary())
    redis_cluster.wait_healthy()
    assert checker.lost == [] and checker.early == 0, checker.summary()
    assert checker.longest_send_ms < FAILOVER_WINDOW_BOUND_MS, checker.summary()


@pytest.mark.slow
def test_sentinel_failover_under_load_loses_nothing_and_is_never_early(redis_sentinel):
    with ServerProcess(redis_sentinel.url, settings={"namespace": unique_namespace()}) as node:
        checker = run_under_load(node.url, redis_sentinel.failover)
    print("sentinel failover:", checker.summary())
    # The old master stays a master until a sentinel converts it (~10 s: the sentinels'
    # INFO period), then resyncs as a replica (~5 s more, measured idle): the session's next
    # user of the topology (redis-wait-replicas 2 in the serve test below) needs both back.
    redis_sentinel.wait_healthy(60)
    assert checker.lost == [] and checker.early == 0, checker.summary()
    assert checker.longest_send_ms < FAILOVER_WINDOW_BOUND_MS, checker.summary()


def random_topic(rng: random.Random) -> str:
    """A valid topic: 1-64 characters, any but '{', '}' and control characters (':' and
    spaces included), some of them outside ASCII."""
    alphabet = "abcXYZ019_-.:/ @#$%&*()[]+=!?~'\"\\,;<>|" + "äß日本語€😀"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 64)))


def test_ten_thousand_random_topics_touch_one_slot_per_script(redis_cluster):
    """Every topic script declares keys of one slot (else: CROSSSLOT), and the reads that
    span topics pipeline per node: 10k random valid names, a message sent to each, 200 of
    them also pulled and acked, then all read together."""
    rng = random.Random(12)
    topics = list({random_topic(rng) for _ in range(10_000)})
    settings = Settings(redis_url=redis_cluster.url, namespace=unique_namespace(),
                        snapshot_dir="")
    runtime = Runtime(settings)
    queue = runtime.queue
    try:
        # The send script for all, queued as the scheduler queues its scripts (a Cluster
        # pipeline: one round trip per node and chunk), then full requests for 200.
        now = runtime.clock.now_ms()
        for start in range(0, len(topics), 1000):
            chunk = topics[start:start + 1000]
            trip = runtime.scripts.round_trip()
            for topic in chunk:
                runtime.scripts.send_many(queue.topic_keys(topic), now, queue.keys.hint_channel,
                                          queue.defaults, [SendArgs("m", "x", now, -1, -1, "")],
                                          trip=trip)
            assert [reply.outcome for reply in trip.execute()] == [Outcome.OK] * len(chunk)
        register = queue.client.pipeline(transaction=False)
        for topic in topics:   # each in its bookkeeping shard's registry
            register.zadd(queue.keys.registry_of(topic), {topic: now})
        register.execute()
        for topic in topics[:200]:
            [pulled] = queue.pull(topic).messages
            assert queue.ack(topic, "m", pulled.receipt).status == 4
        sizes = queue.queue_sizes()   # every registered topic: one pipeline over all masters
        assert sorted(sizes) == sorted(topics)
        assert sorted(ready for _, ready, *_ in sizes.values()) == \
            [0] * 200 + [1] * (len(topics) - 200)
        infos = queue.topic_infos(topics[:1000])
        assert [i["readyQueueSize"] for i in infos] == [0] * 200 + [1] * 800
        slots = {key_slot(queue.topic_keys(t).base.encode()) for t in topics}
        assert len(slots) > 5000  # the topics spread over the slots (and so the masters)
    finally:
        runtime.client.close()


def test_wait_replicas_answers_after_the_replicas_have_the_write(redis_cluster):
    """Each master has 1 replica: WAIT for 1 answers at once (send, nack, ack); for 2 it
    times out and answers code 500, the write itself being done. (Sentinel's WAIT: the
    serve test below; kill -9 with and without it: bench/ha_campaign.py.)"""
    wait_serving(redis_cluster.client())
    namespace = unique_namespace()
    durable = ServerProcess(redis_cluster.url, settings={
        "namespace": namespace, "redis-wait-replicas": 1})
    too_many = ServerProcess(redis_cluster.url, settings={
        "namespace": namespace, "redis-wait-replicas": 2, "redis-wait-timeout-millis": 200})
    with ThreadPoolExecutor(2) as pool:  # boot both at once
        list(pool.map(ServerProcess.start, [durable, too_many]))
    try:
        assert call(durable, "sendMsg", topic="w", msgId="a", msg="x")["code"] == 200
        pulled = call(durable, "pullMsg", topic="w", batch=1)["delayMsgList"]
        assert [m["msgId"] for m in pulled] == ["a"]
        assert call(durable, "ackMsg", topic="w", msgId="a", ack="false")["code"] == 200
        assert call(durable, "pullMsg", topic="w")["delayMsgList"][0]["retry"] == 2
        assert call(durable, "ackMsg", topic="w", msgId="a")["code"] == 200

        reply = call(too_many, "sendMsg", topic="w", msgId="b", msg="x")
        assert reply["code"] == 500 and "redis-wait-replicas" in reply["msg"], reply
        assert call(too_many, "getMsg", topic="w", msgId="b")["delayMsg"]["status"] == 2
        reply = call(too_many, "ackMsg", topic="w", msgId="a")   # acked again: still waits
        assert reply["code"] == 500 and "only 1 of 2" in reply["msg"], reply
    finally:
        durable.stop()
        too_many.stop()


def test_camellia_application_yml_and_env_override_reach_the_same_fleet(redis_cluster,
                                                                       tmp_path):
    """One node reads camellia's application.yml as pasted (its ``camellia-redis`` resource,
    camellia's ``redis-cluster://@host:port,...`` form); the other gets the URL from
    DELAYQUEUE_REDIS_URL in the ``redis+cluster://`` spelling. They are one fleet."""
    namespace = unique_namespace()
    hosts = redis_cluster.url.split("://", 1)[1]
    application_yml = tmp_path / "application.yml"
    application_yml.write_text(f"""\
server:
  port: 8080
spring:
  application:
    name: camellia-delay-queue-server
camellia-redis:
  type: local
  local:
    resource: redis-cluster://@{hosts}
camellia-delay-queue-server:
  namespace: {namespace}
""")
    from_file = ServerProcess(None, settings={"config": application_yml})
    from_env = ServerProcess(f"redis+cluster://{hosts}", settings={"namespace": namespace})
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(ServerProcess.start, [from_file, from_env]))
    try:
        assert call(from_file, "sendMsg", topic="fleet", msgId="a", msg="x")["code"] == 200
        [pulled] = call(from_env, "pullMsg", topic="fleet")["delayMsgList"]
        assert pulled["msgId"] == "a"
        assert call(from_file, "ackMsg", topic="fleet", msgId="a",
                    receipt=pulled["receipt"])["code"] == 200
        assert call(from_env, "getMsg", topic="fleet", msgId="a")["delayMsg"]["status"] == 4
    finally:
        from_file.stop()
        from_env.stop()


def test_delayqueue_serve_takes_a_sentinel_url(redis_sentinel, tmp_path):
    """``delayqueue serve --redis-url redis-sentinel://...``, the command users run, with
    ``redis-wait-replicas`` 2: both replicas confirm every send, ack and nack."""
    port = free_port()
    env = {**os.environ, "DELAYQUEUE_NAMESPACE": unique_namespace(),
           "DELAYQUEUE_REDIS_WAIT_REPLICAS": "2", "DELAYQUEUE_REDIS_WAIT_TIMEOUT_MILLIS": "5000",
           "DELAYQUEUE_SNAPSHOT_DIR": "", "DELAYQUEUE_LOG_LEVEL": "warning"}
    with open(tmp_path / "serve.log", "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "delayqueue.cli", "serve", "--redis-url", redis_sentinel.url,
             "--port", str(port), "--host", "127.0.0.1", "--workers", "1"],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}/camellia/delayQueue/"
    try:
        def answers() -> bool:
            assert process.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                return requests.post(base + "sendMsg", data={"topic": "s", "msg": "x"},
                                     timeout=2).json()["code"] == 200
            except requests.RequestException:
                return False

        wait_until(answers, 30, interval_s=0.1, message="serve never answered")
        reply = requests.post(base + "pullMsg", data={"topic": "s"}, timeout=10).json()
        assert reply["code"] == 200, reply
        [pulled] = reply["delayMsgList"]
        assert pulled["msg"] == "x"
        assert requests.post(base + "ackMsg", data={"topic": "s", "msgId": pulled["msgId"]},
                             timeout=10).json()["code"] == 200
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(30)


def test_wait_replicas_on_a_lone_redis_times_out_after_writing_and_reloads_scripts(
        redis_db_url):
    """In process, on the session's standalone server (no replicas): the script + WAIT
    pipeline reloads a flushed script (NOSCRIPT: nothing ran, run again), writes, and WAIT
    for 1 replica times out: ReplicaWaitTimeout (code 500), the message stored."""
    runtime = Runtime(Settings(redis_url=redis_db_url, snapshot_dir="", redis_wait_replicas=1,
                               redis_wait_timeout_millis=50))
    try:
        runtime.client.script_flush()
        with pytest.raises(ReplicaWaitTimeout, match=r"only 0 of 1 replicas") as info:
            runtime.queue.send("lone", "x", msg_id="a")
        assert info.value.code == 500
        assert runtime.queue.get("lone", "a").status == 2
    finally:
        runtime.client.close()


def test_wait_replicas_covers_every_write_of_a_batch_with_one_wait(redis_db_url):
    """A batch's one WAIT stands for all its writes: too few replicas, and every entry that
    wrote answers ReplicaWaitTimeout, stored all the same; an entry refused before any call
    keeps its own error."""
    from delayqueue.core.errors import BadRequest
    from delayqueue.core.requests import SendRequest

    runtime = Runtime(Settings(redis_url=redis_db_url, snapshot_dir="", redis_wait_replicas=1,
                               redis_wait_timeout_millis=50))
    try:
        refused = BadRequest("msgs[1].msg: required parameter is missing or empty")
        results = runtime.queue.send_batch("lone-batch", [
            SendRequest("x", "a"), refused, SendRequest("y", "b")])
        assert [type(r).__name__ for r in results] == \
            ["ReplicaWaitTimeout", "BadRequest", "ReplicaWaitTimeout"]
        assert results[1] is refused
        assert all("only 0 of 1 replicas" in r.msg for r in (results[0], results[2]))
        assert [runtime.queue.get("lone-batch", m).status for m in ("a", "b")] == [2, 2]
    finally:
        runtime.client.close()


def test_wait_replicas_on_a_cluster_answers_each_call_of_a_batch_its_own_timeout(
        redis_cluster):
    """On a Cluster a round trip that must WAIT runs call by call: one call's WAIT timing out
    must neither stop the calls after it nor answer the whole batch. Each entry answers its
    own ReplicaWaitTimeout, as on one Redis, its write done. Each master has 1 replica, so
    WAIT for 2 always times out."""
    from delayqueue.core.requests import AckRequest, SendRequest

    wait_serving(redis_cluster.client())
    runtime = Runtime(Settings(redis_url=redis_cluster.url, namespace=unique_namespace(),
                               snapshot_dir="", redis_wait_replicas=2,
                               redis_wait_timeout_millis=200))
    try:
        sent = runtime.queue.send_batch("w", [SendRequest("x", "a"), SendRequest("y", "b")])
        assert sorted(m.msg_id for m in runtime.queue.pull("w", 2).messages) == ["a", "b"]
        nacked = runtime.queue.ack_batch("w", [   # two nacks: two calls, two WAITs
            AckRequest("a", ack=False, delay_ms=0), AckRequest("b", ack=False, delay_ms=0)])
        assert [type(r).__name__ for r in sent + nacked] == ["ReplicaWaitTimeout"] * 4
        assert all("of 2 replicas confirmed" in r.msg for r in sent + nacked)
        assert [runtime.queue.get("w", m).status for m in ("a", "b")] == [2, 2]
    finally:
        runtime.client.close()


# A script that counts its runs, then keeps Redis busy past the client's socket timeout.
SLOW_SCRIPT = """
redis.call('INCR', KEYS[1])
local t = redis.call('TIME')
local start = t[1] * 1000 + t[2] / 1000
repeat t = redis.call('TIME') until t[1] * 1000 + t[2] / 1000 - start > tonumber(ARGV[1])
return 1
"""


def test_a_cluster_command_whose_reply_timed_out_is_never_run_again(redis_cluster):
    """redis-py's Cluster client retried a timed-out command up to its retry count and
    resent a pipeline whole (measured: 5 runs of one slow script each way); a script that
    ran is a transition that must not run twice. Now both fail once (500 to the caller)."""
    client = connect_redis(redis_cluster.url, socket_timeout_ms=200, connect_timeout_ms=1000,
                           max_connections=4)
    admin = redis_cluster.client()
    prefix = f"{{{unique_namespace()}}}"
    with pytest.raises(redis.TimeoutError):
        client.eval(SLOW_SCRIPT, 1, f"{prefix}:single", 500)
    time.sleep(1)     # the script (and any second run queued behind it) has finished
    pipe = client.pipeline(transaction=False)
    pipe.execute_command("EVAL", SLOW_SCRIPT, 1, f"{prefix}:pipeline", 500)
    [answer] = pipe.execute(raise_on_error=False)
    assert isinstance(answer, redis.TimeoutError)
    time.sleep(1)
    assert admin.get(f"{prefix}:single") == "1"
    assert admin.get(f"{prefix}:pipeline") == "1"
    client.close()


COUNT_SCRIPT = "return redis.call('INCR', KEYS[1])"


@pytest.fixture
def proxied_sentinel(redis_sentinel, tmp_path):
    """A master the session's sentinels watch through a ReplyHoldingProxy: (redis-url of the
    master by that name, the proxy, a direct client of the master). The sentinels wait 60 s
    before calling it down, so holding its replies for a moment starts no failover."""
    master = RedisServer(tmp_path / "proxied").start()
    proxy = ReplyHoldingProxy(master.port).start()
    name = unique_namespace("proxied")
    sentinels = [redis.Redis(port=s.port, decode_responses=True, socket_timeout=2)
                 for s in redis_sentinel.sentinels]
    admin = redis.Redis(port=master.port, decode_responses=True)
    try:
        for sentinel in sentinels:
            sentinel.sentinel_monitor(name, "127.0.0.1", proxy.port, 2)
            sentinel.sentinel_set(name, "down-after-milliseconds", 60_000)
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in redis_sentinel.sentinels)
        yield f"redis-sentinel://{hosts}/{name}", proxy, admin
    finally:
        for sentinel in sentinels:
            sentinel.sentinel_remove(name)
            sentinel.close()
        admin.close()
        proxy.close()
        master.stop()


def held_script_call(proxied_sentinel, key: str):
    """A client of the proxied master whose call of COUNT_SCRIPT on ``key`` reached Redis and
    ran, its reply held back past the client's 300 ms socket timeout."""
    url, proxy, _ = proxied_sentinel
    client = connect_redis(url, socket_timeout_ms=300, connect_timeout_ms=1000,
                           max_connections=1)
    wait_until(lambda: client.ping(), 10, message="the sentinels never named the master")
    proxy.hold()                 # the pooled connection's next reply stays in the proxy
    with pytest.raises(redis.TimeoutError):
        client.eval(COUNT_SCRIPT, 1, key)
    return client


def test_a_sentinel_command_whose_reply_timed_out_is_never_run_again(proxied_sentinel):
    """As on a Cluster (above) and a standalone Redis (test_redis_retry.py): the script ran,
    only its reply was lost; running it again would be a second transition."""
    _, proxy, admin = proxied_sentinel
    client = held_script_call(proxied_sentinel, "runs")   # a retry would come before this
    proxy.release()
    assert wait_until(lambda: admin.get("runs"), 5) == "1"
    client.close()


def test_a_sentinel_connection_whose_reply_timed_out_is_not_reused(proxied_sentinel):
    """The late reply must never answer the next command: a connection that timed out is
    closed, not handed out again with a reply still owed (seen before the fix, after a
    Sentinel failover: a pull handed a WAIT's count, a WAIT given a script's SHA)."""
    _, proxy, _ = proxied_sentinel
    client = held_script_call(proxied_sentinel, "owed")
    releasing = threading.Timer(0.1, proxy.release)  # the owed reply arrives, then the next
    releasing.start()
    try:
        assert client.echo("mine") == "mine"
    finally:
        releasing.join()
        client.close()
