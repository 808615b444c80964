"""A steady load with a checker, for failovers of a Sentinel or Cluster topology.

``run_under_load`` starts a paced producer (every send retried with its msgId until a code
200, so an answered send is one the client may forget) and long-polling consumers that ack,
runs ``action`` (the failovers) meanwhile, stops producing, and waits for every accepted
message to be delivered. The ``Checker`` it returns counts what matters: accepted sends never
delivered (lost), deliveries before their triggerTime (early), and how long the clients saw
the service unavailable (the longest send, retries included, and the longest gap between
two successful sends). Used by tests/settings/test_redis_failover.py and bench/ha_campaign.py.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable

import requests

from support.fleet import Ledger, consume, post
from support.wait import wait_until

SEND_PACE_S = 0.01           # one send per 10 ms per producer: ~100/s, light on 2 cores
MAX_DELAY_MS = 300           # sends are due 0..300 ms after they are made
DELIVERY_TIMEOUT_S = 60      # an accepted message must be delivered within this after the end


@dataclass
class Checker:
    ledger: Ledger = field(default_factory=Ledger)
    send_latency_ms: list[float] = field(default_factory=list)   # per logical send
    answered_at: list[float] = field(default_factory=list)       # monotonic, successful sends
    failed_requests: int = 0                                     # 5xx or connection errors
    lost: list[str] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)

    @property
    def accepted(self) -> int:
        return len(self.ledger.accepted)

    @property
    def early(self) -> int:
        return len(self.ledger.early)

    @property
    def longest_send_ms(self) -> float:
        return max(self.send_latency_ms, default=0.0)

    @property
    def longest_gap_ms(self) -> float:
        times = sorted(self.answered_at)
        return max((b - a for a, b in zip(times, times[1:])), default=0.0) * 1000

    def summary(self) -> dict:
        return {"accepted": self.accepted, "lost": len(self.lost), "early": self.early,
                "failed_requests": self.failed_requests,
                "longest_send_ms": round(self.longest_send_ms),
                "longest_gap_ms": round(self.longest_gap_ms)}


def _produce(base: str, topics: list[str], checker: Checker, stop: threading.Event) -> None:
    session = requests.Session()
    rng = random.Random()
    while not stop.is_set():
        topic, msg_id = rng.choice(topics), uuid.uuid4().hex
        delay = rng.randint(0, MAX_DELAY_MS)
        started = time.monotonic()
        while True:  # the same msgId until answered: a repeat of a live message is no copy
            try:
                answer = post(session, base, "sendMsg", timeout=10, topic=topic, msgId=msg_id,
                              msg=f"body-{msg_id}", delayMillis=delay)
            except requests.RequestException:
                answer = None
                session = requests.Session()
            if answer is not None and answer.get("code") == 200:
                break
            checker.failed_requests += 1
            time.sleep(0.02)  # pacing a retry of a failed request, not waiting for a state
        now = time.monotonic()
        with checker.ledger.lock:
            checker.ledger.accepted[msg_id] = answer["delayMsg"]
        checker.send_latency_ms.append((now - started) * 1000)
        checker.answered_at.append(now)
        stop.wait(SEND_PACE_S)


def run_under_load(base: str, action: Callable[[], object], *, topics: int = 4,
                   warmup_sends: int = 30, cooldown_sends: int = 30,
                   delivery_timeout_s: float = DELIVERY_TIMEOUT_S) -> Checker:
    """Load ``base`` (a node's URL), run ``action`` once ``warmup_sends`` were accepted,
    keep going for ``cooldown_sends`` more, then check every accepted message arrives."""
    checker = Checker()
    names = checker.topics = [f"ha-{uuid.uuid4().hex[:8]}-{i}" for i in range(topics)]
    stop_producing, stop_consuming = threading.Event(), threading.Event()
    threads = [threading.Thread(target=_produce, args=(base, names, checker, stop_producing),
                                daemon=True)]
    threads += [threading.Thread(target=consume, args=(base, name, checker.ledger,
                                                       stop_consuming),
                                 kwargs={"ack_timeout_ms": 5000, "long_poll_ms": 1000},
                                 daemon=True) for name in names]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: checker.accepted >= warmup_sends, 30,
                   message="the load did not start")
        action()
        target = checker.accepted + cooldown_sends
        wait_until(lambda: checker.accepted >= target, 120,
                   message="sends did not resume after the action")
    finally:
        stop_producing.set()
        threads[0].join(30)
    accepted = set(checker.ledger.accepted)
    try:
        wait_until(lambda: accepted <= set(checker.ledger.deliveries), delivery_timeout_s,
                   interval_s=0.1)
    except AssertionError:
        pass  # counted below: the checker reports losses, the caller decides
    finally:
        stop_consuming.set()
        for thread in threads[1:]:
            thread.join(15)
    checker.lost = sorted(accepted - set(checker.ledger.deliveries))
    return checker
