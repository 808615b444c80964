"""One fault run: a workload, a nemesis cycling under it, a drain, and the checker's verdict.

The drain waits until every send answered 200 was delivered in every subscription and the
topics hold nothing live: every message ended in every subscription, so no queue and no group
structure (groups, blocked, held) of any subscription may hold an entry, nor the topic's
fan-out (a due message not yet handed to the named subscriptions); what is left when the drain
times out is the run's ``left``. With ``push`` (the default), the push scenario (push.py) runs
beside the workload on a topic of its own, under the same nemesis; the drain waits for its
subscription to empty too, and ``Run.push`` is its verdict."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

import redis

from delayqueue.core.keys import NamespaceKeys

from faults.checker import Verdict, check
from faults.history import OK, History, now_ms
from faults.nemesis import Nemesis
from faults.push import PushScenario, PushVerdict
from faults.workload import SUBSCRIPTIONS, Workload
from faults.world import World

KEYS = NamespaceKeys("dq", "default")
STRUCTURES = ("waiting", "ready", "ack", "blocked", "held", "groups")


@dataclass
class Run:
    nemesis: str
    cycles: int
    seconds: float
    drained: bool
    sent_after_last_fault: int       # sends answered 200 after the last heal: it recovered
    verdict: Verdict
    notes: list[str]
    left: dict[str, int] = field(default_factory=dict)   # "topic structure" -> entries
    push: PushVerdict | None = None                      # the push scenario's, if it ran


def leftovers(world: World, topics: list[str]) -> dict[str, int] | None:
    """Each topic's non-empty queue or group structure, in each subscription, and its
    non-empty fan-out (None: Redis cannot answer)."""
    places: list[str] = []
    client = world.client()
    try:
        pipe = client.pipeline(transaction=False)
        for topic in topics:
            tk = KEYS.topic(topic)
            for subscription in (None, *SUBSCRIPTIONS):
                keys = tk if subscription is None else tk.subscription(subscription)
                for name in STRUCTURES:
                    places.append(f"{topic} {subscription or 'default'} {name}")
                    if name == "groups":
                        pipe.hlen(keys.groups)
                    else:
                        pipe.zcard(getattr(keys, name))
            places.append(f"{topic} fanout")
            pipe.zcard(tk.fanout)
        counts = pipe.execute()
    except redis.RedisError:
        return None
    finally:
        client.close()
    return {place: n for place, n in zip(places, counts) if n}


def run(world: World, nemesis: Nemesis, *, cycles: int, period_s: float, rate: float = 40,
        topics: int = 4, drain_s: float = 30.0, max_delay_ms: int = 1000,
        producers: int = 2, push: bool = True, push_rate: float = 8) -> Run:
    """``cycles`` faults, one every ``period_s`` seconds, under ``rate`` sends/s (and
    ``push_rate`` more to the push scenario's topic)."""
    history = History()
    tag = uuid.uuid4().hex[:6]
    names = [f"fault-{tag}-{i}" for i in range(topics)]
    workload = Workload(history, world.bases, names, rate=rate, max_delay_ms=max_delay_ms,
                        producers=producers)
    ack_timeout_ms = world.settings["ack-timeout-millis"]
    began = time.monotonic()
    notes: list[str] = []
    scenario = PushScenario(world.bases, tag, rate=push_rate, max_delay_ms=max_delay_ms) \
        if push else None
    nemesis.attach(history, names, period_s)
    if scenario:
        scenario.start()
    workload.start()
    last_heal = now_ms()
    try:
        for _ in range(cycles):
            workload.stopping.wait(period_s)      # the workload runs fault-free meanwhile
            start = now_ms()
            notes.append(nemesis.cycle())
            last_heal = now_ms()
            history.fault(start, last_heal, nemesis.name)
        workload.stopping.wait(period_s)
        workload.stop_producing()
        if scenario:
            scenario.stop_producing()
        drained = workload.drain(drain_s, lambda: leftovers(world, names) == {} and (
            scenario is None or scenario.settled(world)))
    finally:
        workload.stop()
        if scenario:
            scenario.stop()
    after = sum(1 for op in history.of("send") if op.outcome == OK and op.start_ms > last_heal)
    left = leftovers(world, names) or {}
    pushed = None
    if scenario:
        pushed = scenario.verdict(history.faults)
        if not scenario.settled(world):
            client = world.client()
            try:
                left.update(scenario.left(client))
            except redis.RedisError:
                pass
            finally:
                client.close()
    return Run(nemesis.name, nemesis.cycles, time.monotonic() - began, drained, after,
               check(history, ack_timeout_ms), notes, left, pushed)
