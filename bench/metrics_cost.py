"""What /metrics costs: the request counting every answer pays, and a scrape by topic count.

A fresh redis-server, in-process (``Runtime``; no node), one thread:

A. the hot path: ``Monitor.record_request`` (what ``http/request_metrics.py`` calls as each
   answer leaves the app: the fleet clock's reading and three dict updates under the
   monitor's lock) and ``answer_code`` (the envelope code read off a sendMsg answer), in µs
   per call, the median of ``--rounds`` rounds of ``--calls`` calls; then whole requests:
   CPU µs per ``check`` request (no Redis: nothing but the app) through the app with its
   request metrics and through one with the timer and the hook taken out, alternating (ABAB) over
   ``--rounds`` x 2 rounds, and the difference of the medians.
B. a scrape: ``--topics`` registered topics (each with every counter and both time-gap
   histograms in the totals), then ``render_metrics`` as /metrics runs it, without a cap and
   with ``metrics-max-topics`` 1000: the time (median of 3), the series and the bytes.

    PYTHONPATH=. .venv/bin/python bench/metrics_cost.py
    PYTHONPATH=. .venv/bin/python bench/metrics_cost.py --topics 1000 --calls 20000
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import statistics
import sys
import time
from typing import Any, Callable

from flask import Flask

from delayqueue.background.runtime import Runtime
from delayqueue.core.monitor_hash import COUNTERS, HISTOGRAMS
from delayqueue.http.app import create_app
from delayqueue.http.request_metrics import answer_code
from delayqueue.monitoring.metrics import render_metrics
from delayqueue.settings.config import Settings

from common import print_table, progress, stack, write_result


def per_call_us(fn: Any, calls: int, rounds: int) -> float:
    """CPU µs per call (process time: steadier than the wall clock on a shared machine)."""
    samples = []
    for _ in range(rounds):
        started = time.process_time()
        for _ in range(calls):
            fn()
        samples.append((time.process_time() - started) / calls * 1e6)
    return round(statistics.median(samples), 2)


def hot_path(rt: Runtime, calls: int, rounds: int) -> dict[str, float]:
    for _ in range(5):                     # past the clock's warm-up, as in a running worker
        rt.clock.sync()
    record = per_call_us(lambda: rt.monitor.record_request("sendMsg", "200", 0.42),
                         calls, rounds)
    rt.monitor.flush()
    app = Flask(__name__)
    with app.app_context():
        answer = app.response_class(
            b'{"code":200,"msg":"success","delayMsg":{"msgId":"0123456789abcdef"}}\n',
            mimetype="application/json")
    code = per_call_us(lambda: answer_code(answer), calls, rounds)
    empty = per_call_us(lambda: None, calls, rounds)     # the loop and the call themselves
    return {"record_request_us": record, "answer_code_us": code,
            "hook_total_us": round(record + code, 2), "empty_call_us": empty}


def in_requests(redis_url: str, calls: int, rounds: int) -> dict[str, float]:
    """CPU µs per check request with the request metrics and without (ABAB), and the
    counting hook's own time in those requests."""
    apps = {}
    spent = [0.0, 0]
    for counted in (True, False):
        app = create_app({"redis_url": redis_url, "snapshot_dir": ""})
        for _ in range(5):    # past the clock's warm-up, as in a running worker
            app.extensions["delayqueue"].clock.sync()
        if not counted:       # the timer middleware and the after_request hook taken out
            app.wsgi_app = app.wsgi_app.wsgi_app  # type: ignore[attr-defined]
            app.after_request_funcs[None] = [f for f in app.after_request_funcs[None]
                                             if f.__name__ != "count_request"]
        else:                 # the hook timed where it runs, among the request's other work
            hooks = app.after_request_funcs[None]
            hook = next(f for f in hooks if f.__name__ == "count_request")
            hooks[hooks.index(hook)] = in_place(hook, spent)
        apps[counted] = app

    def run(app: Flask) -> float:
        started = time.process_time()
        for _ in range(calls):
            environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/camellia/health/check",
                       "QUERY_STRING": "", "SERVER_NAME": "bench", "SERVER_PORT": "80",
                       "wsgi.input": io.BytesIO(), "wsgi.url_scheme": "http",
                       "SERVER_PROTOCOL": "HTTP/1.1", "wsgi.errors": sys.stderr}
            b"".join(app(environ, lambda status, headers, exc=None: None))
        return (time.process_time() - started) / calls * 1e6

    samples: dict[bool, list[float]] = {True: [], False: []}
    for r in range(2 * rounds):
        for counted in ((True, False) if r % 2 == 0 else (False, True)):
            samples[counted].append(run(apps[counted]))
    with_us, without_us = (statistics.median(samples[c]) for c in (True, False))
    return {"check_with_us": round(with_us, 1), "check_without_us": round(without_us, 1),
            "added_us": round(with_us - without_us, 1),
            "hook_in_place_us": round(spent[0] / spent[1] * 1e6, 2)}


def in_place(hook: Callable[[Any], Any], spent: list) -> Callable[[Any], Any]:
    """``hook`` adding its wall time and calls to ``spent``: what it costs in a request, where
    the caches are cold from the rest of the request (called alone in a loop, its pieces
    take a third of that)."""
    def timed(response: Any) -> Any:
        started = time.perf_counter()
        try:
            return hook(response)
        finally:
            spent[0] += time.perf_counter() - started
            spent[1] += 1
    timed.__name__ = hook.__name__
    return timed


def fill(rt: Runtime, topics: int) -> None:
    """Register ``topics`` topics and give each every counter and both histograms."""
    now = rt.clock.now_ms()
    names = [f"topic-{i:05d}" for i in range(topics)]
    for start in range(0, topics, 1000):
        rt.client.zadd(rt.keys.topics, {name: now for name in names[start:start + 1000]})
        for name in names[start:start + 1000]:
            for counter in COUNTERS:
                rt.monitor.incr(name, counter)
            for histogram in HISTOGRAMS:
                rt.monitor.observe(histogram=histogram, topic=name, gaps_ms=[3])
        rt.monitor.flush()


def scrape(rt: Runtime, max_topics: int) -> dict[str, Any]:
    timings = []
    for _ in range(3):
        started = time.perf_counter()
        body, _ = render_metrics(rt.monitor, rt.queue.queue_sizes, max_topics=max_topics)
        timings.append(time.perf_counter() - started)
    series = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
    return {"seconds": round(statistics.median(timings), 3), "series": series,
            "bytes": len(body)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--topics", default="1000,10000")
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    figures: dict[str, Any] = {}
    with stack(with_node=False) as s:
        rt = Runtime(dataclasses.replace(Settings(), redis_url=s.redis.url, snapshot_dir=""))
        progress("A. the hot path")
        figures["hot_path"] = hot_path(rt, args.calls, args.rounds)
        figures["hot_path"].update(in_requests(s.redis.url, args.calls // 20, args.rounds))
        print_table("A. per answered request (µs)", list(figures["hot_path"].items()))
        for count in (int(n) for n in args.topics.split(",")):
            s.client.flushall()
            progress(f"B. {count} topics")
            fill(rt, count)
            for cap in (0, 1000):
                figures[f"scrape_{count}_cap_{cap}"] = found = scrape(rt, cap)
                print_table(f"B. scrape of {count} topics, metrics-max-topics {cap}",
                            list(found.items()))
    write_result("metrics_cost", figures, vars(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
