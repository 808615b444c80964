"""One fault run: a workload, a nemesis cycling under it, a drain, and the checker's verdict."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from faults.checker import Verdict, check
from faults.history import OK, History, now_ms
from faults.nemesis import Nemesis
from faults.workload import Workload
from faults.world import World


@dataclass
class Run:
    nemesis: str
    cycles: int
    seconds: float
    drained: bool
    sent_after_last_fault: int       # sends answered 200 after the last heal: it recovered
    verdict: Verdict
    notes: list[str]


def run(world: World, nemesis: Nemesis, *, cycles: int, period_s: float, rate: float = 40,
        topics: int = 4, drain_s: float = 30.0, max_delay_ms: int = 1000,
        producers: int = 2) -> Run:
    """``cycles`` faults, one every ``period_s`` seconds, under ``rate`` sends/s."""
    history = History()
    tag = uuid.uuid4().hex[:6]
    names = [f"fault-{tag}-{i}" for i in range(topics)]
    workload = Workload(history, world.bases, names, rate=rate, max_delay_ms=max_delay_ms,
                        producers=producers)
    began = time.monotonic()
    notes: list[str] = []
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
        drained = workload.drain(drain_s)
    finally:
        workload.stop()
    after = sum(1 for op in history.of("send") if op.outcome == OK and op.start_ms > last_heal)
    return Run(nemesis.name, nemesis.cycles, time.monotonic() - began, drained, after,
               check(history), notes)
