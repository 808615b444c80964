"""Topic controls: what a purge, a listMsg page, a backlog limit and a pause cost.

No bars in the issue; the figures say what an operator's action costs Redis and how long it
holds it. Each phase on a fresh redis-server, in-process (``Runtime``: the service layer the
HTTP views call and its Lua scripts; no node, no HTTP), one thread:

A. purge: ``--purge`` messages on one topic (a third waiting an hour, a third ready, a third
   grouped: ten per group, nine of them blocked), then ``purgeTopic`` (limit: all of them).
   Wall time, messages/s, HSCAN slices, and the longest slice in Redis (SLOWLOG): how long a
   purge ever holds Redis at once.
B. listMsg: ``--listed`` messages waiting; ``--pages`` pages of 100 walked from the start
   with the cursor, and as many pages started from cursors spread over the whole queue
   (the bisection of a cursor whose entry left). Latency per page (client) and Redis
   commands per page.
C. a backlog limit on sends: single sends to a topic with ``maxBacklog`` set (never reached)
   and to one without, in alternating slices (ABBA); Redis commands per send and the
   scripts' time in Redis per send, and the ratio.
D. a paused topic: pulls of one from a paused topic holding ``--listed`` ready messages, and
   from an empty topic; Redis commands per pull (a paused pull pops nothing).

    PYTHONPATH=. .venv/bin/python bench/controls_bench.py           # 50,000 purged, 100,000 listed
    PYTHONPATH=. .venv/bin/python bench/controls_bench.py --quick   # scaled down, seconds
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from typing import Any

from delayqueue.background.runtime import Runtime
from delayqueue.core.requests import SendRequest
from delayqueue.core.topic_controls import PURGE_SCAN
from delayqueue.settings.config import Settings

from common import print_table, progress, stack, summary, write_result

HOUR_MS = 3_600_000
DEFAULTS: dict[str, Any] = {"purge": 50_000, "listed": 100_000, "pages": 200, "sends": 4000,
                            "slice": 250}
QUICK: dict[str, Any] = {"purge": 6_000, "listed": 10_000, "pages": 50, "sends": 1000,
                         "slice": 100}


def runtime(redis_url: str) -> Runtime:
    return Runtime(dataclasses.replace(Settings(), redis_url=redis_url, snapshot_dir=""))


def send_all(rt: Runtime, topic: str, requests: list[SendRequest]) -> None:
    for start in range(0, len(requests), 1000):
        for answer in rt.queue.send_batch(topic, requests[start:start + 1000]):
            if not hasattr(answer, "duplicate") or answer.duplicate:
                raise RuntimeError(f"{topic}: a send was not accepted: {answer!r}")


def commands(s, skip=("config", "info", "slowlog", "time")) -> tuple[int, float]:
    """Redis commands since the last reset (the bench's own left out), and EVALSHA's usec."""
    stats = s.commandstats()
    calls = sum(int(v["calls"]) for k, v in stats.items() if not k.startswith(skip))
    return calls, float(stats.get("evalsha", {}).get("usec", 0.0))


def phase_purge(p: dict[str, Any]) -> dict[str, Any]:
    with stack(with_node=False) as s:
        rt = runtime(s.redis.url)
        third = p["purge"] // 3
        send_all(rt, "purged", [SendRequest("x" * 64, f"w{i}", delay_ms=HOUR_MS)
                                for i in range(third)])
        send_all(rt, "purged", [SendRequest("x" * 64, f"r{i}") for i in range(third)])
        send_all(rt, "purged", [SendRequest("x" * 64, f"g{i}", group_id=f"g{i // 10}")
                                for i in range(p["purge"] - 2 * third)])
        progress(f"A: {p['purge']:,} messages sent; purging")
        s.client.config_set("slowlog-log-slower-than", 0)
        s.client.config_set("slowlog-max-len", 100_000)
        s.client.slowlog_reset()
        s.client.config_resetstat()
        started = time.perf_counter()
        result = rt.controls.purge("purged", limit=p["purge"])
        took = time.perf_counter() - started
        slices = [e["duration"] / 1000.0 for e in s.client.slowlog_get(100_000)
                  if e["command"][:8].upper() in (b"EVALSHA ", "EVALSHA ")]
        calls, usec = commands(s)
        info = rt.queue.topic_info("purged")
    if result.count != p["purge"] or result.remaining or info["readyQueueSize"] \
            or info["waitingQueueSize"] or info["groupBlockedSize"]:
        raise RuntimeError(f"the purge left messages: {result}, {info}")
    return {"messages": result.count, "seconds": round(took, 2),
            "messages_per_s": round(result.count / took), "slices": len(slices),
            "slice_in_redis_ms": summary(slices),
            "redis_us_per_message": round(usec / result.count, 1),
            "commands_per_message": round(calls / result.count, 1)}


def phase_list(p: dict[str, Any]) -> dict[str, Any]:
    with stack(with_node=False) as s:
        rt = runtime(s.redis.url)
        send_all(rt, "listed", [SendRequest("x" * 64, f"m{i:08d}", delay_ms=HOUR_MS + i % 500)
                                for i in range(p["listed"])])
        progress(f"B: {p['listed']:,} messages waiting; paging")
        walked, jumped, cursors = [], [], []
        cursor = None
        s.client.config_resetstat()
        for _ in range(p["pages"]):
            t0 = time.perf_counter()
            page = rt.controls.list("listed", "waiting", 100, cursor)
            walked.append((time.perf_counter() - t0) * 1000.0)
            cursor = page.next_cursor
            if len(page.messages) != 100 or cursor is None:
                raise RuntimeError("a page short of 100 in the middle of the queue")
        walk_calls, _ = commands(s)
        # Cursors spread over the queue (the last entry of pages of `step`), then those
        # entries deleted: each page from such a cursor bisects its score's entries.
        step = max(1, p["listed"] // (p["pages"] + 1))
        cursor, last_ids = None, []
        for _ in range(p["pages"]):
            page = rt.controls.list("listed", "waiting", step, cursor)
            cursor = page.next_cursor
            cursors.append(cursor)
            last_ids.append(page.messages[-1].msg_id)
        for msg_id in last_ids:
            rt.queue.delete("listed", msg_id)
        s.client.config_resetstat()
        for cursor in cursors:
            t0 = time.perf_counter()
            rt.controls.list("listed", "waiting", 100, cursor)
            jumped.append((time.perf_counter() - t0) * 1000.0)
        jump_calls, _ = commands(s)
    return {"walked_ms": summary(walked), "walked_commands_per_page":
            round(walk_calls / len(walked), 1),
            "from_cursors_ms": summary(jumped),
            "from_cursors_commands_per_page": round(jump_calls / len(jumped), 1)}


def phase_backlog(p: dict[str, Any]) -> dict[str, Any]:
    with stack(with_node=False) as s:
        rt = runtime(s.redis.url)
        rt.admin.set_config("limited", {"maxBacklog": 10 * p["sends"]})
        calls = {"limited": 0, "plain": 0}
        usec = {"limited": 0.0, "plain": 0.0}
        sent = {"limited": 0, "plain": 0}
        slices = max(2, p["sends"] // p["slice"] // 2 * 2)
        for r in range(slices):
            for topic in (("limited", "plain") if r % 2 == 0 else ("plain", "limited")):
                s.client.config_resetstat()
                for i in range(p["slice"]):
                    rt.queue.send(topic, "x" * 64, msg_id=f"{r}-{i}")
                c, u = commands(s)
                calls[topic] += c
                usec[topic] += u
                sent[topic] += p["slice"]
    per = {t: {"commands_per_send": round(calls[t] / sent[t], 2),
               "redis_us_per_send": round(usec[t] / sent[t], 2)} for t in calls}
    return {**per, "ratio_redis_us": round(per["limited"]["redis_us_per_send"]
                                           / per["plain"]["redis_us_per_send"], 2)}


def phase_paused(p: dict[str, Any]) -> dict[str, Any]:
    with stack(with_node=False) as s:
        rt = runtime(s.redis.url)
        send_all(rt, "paused", [SendRequest("x" * 64, f"m{i}") for i in range(p["listed"])])
        rt.controls.pause("paused")
        out = {}
        for topic in ("paused", "empty"):
            s.client.config_resetstat()
            for _ in range(p["slice"]):
                if rt.queue.pull(topic, 1).messages:
                    raise RuntimeError(f"{topic}: a pull handed a message out")
            c, u = commands(s)
            out[topic] = {"commands_per_pull": round(c / p["slice"], 2),
                          "redis_us_per_pull": round(u / p["slice"], 2)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="scaled down")
    for name, value in DEFAULTS.items():
        parser.add_argument(f"--{name}", type=int, default=None, help=f"(default {value})")
    args = parser.parse_args()
    p = {**DEFAULTS, **(QUICK if args.quick else {}),
         **{k: v for k, v in vars(args).items() if k in DEFAULTS and v is not None}}
    figures = {"purge": phase_purge(p), "list": phase_list(p), "backlog": phase_backlog(p),
               "paused": phase_paused(p)}
    a, b, c, d = figures["purge"], figures["list"], figures["backlog"], figures["paused"]
    print_table(f"A. purgeTopic of {a['messages']:,} (HSCAN COUNT {PURGE_SCAN})", [
        ("seconds", a["seconds"]), ("messages/s", a["messages_per_s"]),
        ("slices", a["slices"]), ("slice in Redis p50 ms", a["slice_in_redis_ms"]["p50"]),
        ("slice in Redis max ms", a["slice_in_redis_ms"]["max"]),
        ("Redis us / message", a["redis_us_per_message"]),
        ("commands / message", a["commands_per_message"])])
    print_table(f"B. listMsg pages of 100 over {p['listed']:,} waiting", [
        ("walked p50 / p99 ms", f"{b['walked_ms']['p50']} / {b['walked_ms']['p99']}"),
        ("walked commands / page", b["walked_commands_per_page"]),
        ("from a left cursor p50 / p99 ms",
         f"{b['from_cursors_ms']['p50']} / {b['from_cursors_ms']['p99']}"),
        ("from a left cursor commands / page", b["from_cursors_commands_per_page"])])
    print_table("C. single sends, maxBacklog set vs none", [
        ("commands / send (limit, none)",
         f"{c['limited']['commands_per_send']}, {c['plain']['commands_per_send']}"),
        ("Redis us / send (limit, none)",
         f"{c['limited']['redis_us_per_send']}, {c['plain']['redis_us_per_send']}"),
        ("ratio", c["ratio_redis_us"])])
    print_table("D. pulls of one: paused topic with messages ready vs empty topic", [
        ("commands / pull (paused, empty)",
         f"{d['paused']['commands_per_pull']}, {d['empty']['commands_per_pull']}"),
        ("Redis us / pull (paused, empty)",
         f"{d['paused']['redis_us_per_pull']}, {d['empty']['redis_us_per_pull']}")])
    write_result("controls", figures, p)


if __name__ == "__main__":
    main()
