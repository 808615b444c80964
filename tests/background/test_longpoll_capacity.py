"""One node (2 gevent workers) holds a thousand concurrent long polls and answers them all.

The polls are raw HTTP/1.1 requests on asyncio sockets (no client threads): the server side
is what is measured.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from support.fleet import accepted_connections, now_ms, percentile, post, start_polls
from support.node import ServerProcess

pytestmark = pytest.mark.timeout(240)

POLLS = 1000
# The messages are due this long after the sends start (at least): every send must be in
# before the thousand polls wake together. A loaded machine sends slower (1000 sends took
# more than 5 s under stress-ng --cpu 2), so the lead grows with a measured sample.
MIN_LEAD_MS = 5000
SAMPLE_SENDS = 100
HOLD_MS = 60_000             # the longest hold a request may ask (longer than any lead)
# Waking a thousand polls is the node's work of a thousand pulls and answers; the control is
# the same node's time for the thousand sends, measured in the same run. Worst seen over 20
# runs while other suites loaded the machine: p50 837 ms, max 1224 ms; each bound is 3x that,
# or the control's time if the machine is slower now. Polls not woken at the due time would
# wait for their re-check (HOLD_MS), beyond the wait.
P50_WAKE_BOUND_MS = 2500
WORST_WAKE_BOUND_MS = 3700
TOPICS = [f"cap{i}" for i in range(10)]


async def hold_and_answer(node: ServerProcess) -> dict:
    loop = asyncio.get_running_loop()
    executor = ThreadPoolExecutor(8)
    polls, tasks = start_polls(loop, "127.0.0.1", node.port, TOPICS, POLLS, timeout_ms=HOLD_MS)
    started = time.monotonic()
    while sum(1 for p in polls if p.sent_ms) < POLLS and time.monotonic() - started < 20:
        await asyncio.sleep(0.05)
    workers = node.workers()
    accepted = 0
    while time.monotonic() - started < 30:
        accepted = await loop.run_in_executor(executor, accepted_connections, workers,
                                              node.port)
        if accepted >= POLLS:
            break
        await asyncio.sleep(0.2)
    cpu_before = worker_cpu_s(workers)
    await asyncio.sleep(2.0)  # held: nothing may be answered while no message exists
    idle_cpu = (worker_cpu_s(workers) - cpu_before) / 2.0
    answered_early = [p for p in polls if p.answered_ms is not None]
    held_at_once = accepted

    sessions = threading.local()  # one keep-alive connection per sending thread

    def send(i: int, topic: str | None = None) -> dict:
        if not hasattr(sessions, "session"):
            sessions.session = requests.Session()
        return post(sessions.session, node.url, "sendMsg",
                    topic=topic or TOPICS[i % len(TOPICS)], msgId=f"c{i}", msg="x",
                    triggerTime=trigger)

    # A sample of sends to a topic nobody polls, due far later, times this machine now.
    trigger = int(now_ms()) + 600_000
    sample_started = now_ms()
    await asyncio.gather(*[loop.run_in_executor(executor, send, i, "cap-sample")
                           for i in range(SAMPLE_SENDS)])
    lead_ms = max(MIN_LEAD_MS, 2 * (now_ms() - sample_started) * POLLS / SAMPLE_SENDS)
    assert lead_ms < HOLD_MS / 2, f"the sends would outlast the polls: {lead_ms:.0f} ms"
    # All messages due at one instant: the node wakes its thousand polls together.
    trigger = int(now_ms() + lead_ms)
    sends_started = now_ms()
    sent = await asyncio.gather(*[loop.run_in_executor(executor, send, i)
                                  for i in range(POLLS)])
    sends_done = now_ms()
    done, pending = await asyncio.wait(tasks, timeout=max(5.0, (trigger - now_ms()) / 1000 + 20))
    for task in pending:
        task.cancel()
    executor.shutdown()
    return {"polls": polls, "sent": sent, "trigger": trigger, "sends_done": sends_done,
            "accepted": held_at_once, "answered_early": answered_early,
            "pending": len(pending), "idle_cpu": idle_cpu,
            "sends_ms": sends_done - sends_started}


def worker_cpu_s(workers) -> float:
    return sum(w.cpu_times().user + w.cpu_times().system for w in workers)


def test_one_node_holds_a_thousand_long_polls_and_wakes_each_with_a_message(redis_url):
    # Held polls re-check on their own only as often as they are held (longer than any
    # lead): every wake-up measured below comes from a hint or a topic's due time, never
    # from the safety net.
    with ServerProcess(redis_url, workers=2, worker_class="gevent",
                       settings={"long-polling-safety-millis": HOLD_MS}) as node:
        r = asyncio.run(hold_and_answer(node))
    polls = r["polls"]
    assert not r["answered_early"], \
        f"{len(r['answered_early'])} polls answered before any message existed, e.g. " \
        f"{[(p.status, p.body, p.error) for p in r['answered_early'][:3]]}"
    assert r["accepted"] >= POLLS, f"only {r['accepted']} connections held at once"
    # Held polls cost (almost) nothing: one re-check per topic per safety interval.
    assert r["idle_cpu"] < 0.25, f"idle node with held polls burns {r['idle_cpu']:.0%} of a core"
    assert all(s["code"] == 200 for s in r["sent"])
    assert r["sends_done"] < r["trigger"], "sends were slower than the 5 s lead: no measure"
    assert r["pending"] == 0, f"{r['pending']} polls never answered"
    errors = [(p.status, p.error, p.body) for p in polls
              if p.error or p.status != 200 or p.body.get("code") != 200]
    assert not errors, f"{len(errors)} failed polls, e.g. {errors[:3]}"
    got = [m["msgId"] for p in polls for m in p.body["delayMsgList"]]
    empty = sum(1 for p in polls if not p.body["delayMsgList"])
    assert empty == 0, f"{empty} polls answered empty"
    assert sorted(got) == sorted(f"c{i}" for i in range(POLLS)), "lost or duplicated messages"
    lags = [p.answered_ms - r["trigger"] for p in polls]
    assert min(lags) >= 0, f"answered {-min(lags):.0f} ms before triggerTime"
    p50, p99, worst = percentile(lags, 50), percentile(lags, 99), max(lags)
    print(f"\n{POLLS} long polls held ({r['accepted']} connections); wake-up after "
          f"triggerTime: p50 {p50:.0f} ms, p90 {percentile(lags, 90):.0f} ms, "
          f"p99 {p99:.0f} ms, max {worst:.0f} ms; idle CPU while holding {r['idle_cpu']:.0%}; "
          f"{POLLS} sends took {r['sends_ms']:.0f} ms")
    # A thousand answers from one burst on a shared 2-core box. Worst seen over 20 runs while
    # other suites loaded the machine: p50 837 ms, max 1224 ms; each bound is 3x that.
    assert p50 < max(P50_WAKE_BOUND_MS, r["sends_ms"]), (p50, p99, worst, r["sends_ms"])
    assert worst < max(WORST_WAKE_BOUND_MS, r["sends_ms"]), (p50, p99, worst, r["sends_ms"])
