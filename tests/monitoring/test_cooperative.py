"""cooperative: a loop over every topic lets the worker's other greenlets run as it goes."""

from __future__ import annotations

import time

from delayqueue.monitoring import cooperative as module
from delayqueue.monitoring.cooperative import cooperative


def test_every_item_comes_in_order_with_a_yield_after_each_every_th(monkeypatch):
    sleeps = []
    monkeypatch.setattr(module.time, "sleep", lambda s: sleeps.append(s))
    seen = []
    for item in cooperative(range(1, 1201), every=500):
        seen.append((item, len(sleeps)))
    assert [item for item, _ in seen] == list(range(1, 1201))
    assert sleeps == [0, 0]
    # the yield comes after the 500th and the 1,000th item were handed on
    assert seen[499] == (500, 0) and seen[500] == (501, 1) and seen[1000] == (1001, 2)


def test_under_gevent_another_greenlet_runs_in_the_middle_of_a_long_loop(monkeypatch):
    """The point of it: a greenlet folding 100,000 topics lets a ticking one in. (A gevent
    worker runs with time.sleep patched to gevent.sleep, as here.)"""
    gevent = __import__("gevent")
    monkeypatch.setattr(module.time, "sleep", gevent.sleep)
    ticks = []

    def ticker():
        while len(ticks) < 3:
            ticks.append(time.perf_counter())
            gevent.sleep(0)

    def loop():
        positions = []
        for i in cooperative(range(5000), every=500):
            if i % 500 == 0:
                positions.append(len(ticks))
        return positions

    other = gevent.spawn(ticker)
    looping = gevent.spawn(loop)
    positions = looping.get(timeout=10)
    other.join(timeout=10)
    assert positions[-1] >= 3 > positions[0], positions   # ticks happened mid-loop
