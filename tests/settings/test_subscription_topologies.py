"""Subscriptions on every Redis topology: every key of a topic and of its named subscriptions
hashes to the topic's one Cluster slot (the fan-out builds the subscriptions' key names inside
its script, in that slot), and a Cluster, a Sentinel master and a standalone Redis fan out
alike."""

from __future__ import annotations

import pytest
from redis.cluster import key_slot

from delayqueue.background.runtime import Runtime
from delayqueue.core.keys import NamespaceKeys
from delayqueue.core.requests import SendRequest
from delayqueue.settings.config import Settings

from support.topologies import TOPOLOGIES, backend_named


def test_every_key_of_a_topic_and_its_subscriptions_is_in_one_slot():
    tk = NamespaceKeys("dq", "default").topic("orders")
    keys = [*tk.queues, tk.schedules, tk.schedule_ids,
            *tk.subscription("billing").queues, *tk.dropping("0123abcd").queues]
    assert {key_slot(key.encode()) for key in keys} == {key_slot(tk.msgs.encode())}


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_every_subscription_gets_every_message_on_every_topology(request, topology):
    backend = backend_named(request, topology)
    with backend.place() as (url, extra):
        runtime = Runtime(Settings(redis_url=url, snapshot_dir="", **extra))
        try:
            topic = f"fan-{topology}"
            for name in ("s1", "s2"):
                runtime.subscriptions.create(topic, name)
            ids = [f"m{i:03d}" for i in range(60)]
            runtime.queue.send_batch(topic, [SendRequest("x", m, group_id=None if i % 3
                                                         else "g") for i, m in enumerate(ids)])
            for sub in (None, "s1", "s2"):
                got: list[str] = []
                for _ in range(200):
                    pulled = runtime.queue.pull(topic, 50, subscription=sub).messages
                    if not pulled and len(got) == len(ids):
                        break
                    for message in pulled:
                        got.append(message.msg_id)
                        runtime.queue.ack(topic, message.msg_id, message.receipt,
                                          subscription=sub)
                assert sorted(got) == ids, (sub, len(got))
            runtime.subscriptions.delete(topic, "s1")
            assert [i["subscription"] for i in runtime.subscriptions.list(topic)] == \
                ["default", "s2"]
        finally:
            runtime.client.close()
