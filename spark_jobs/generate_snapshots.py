"""Write realistic synthetic monitoring snapshots in the server's on-disk layout.

Layout and line format follow docs/design.md ("Monitoring and the snapshot contract"):
``<dir>/date=YYYY-MM-DD/<namespace>-<HH>.jsonl``, one JSON line per topic per interval.
Traffic follows a daily cycle; by topic index:
  * i % 10 == 1  -- messages in groups: a third of each interval's sends wait behind their
                    group's head (groupBlockedSize; 0 on every other topic)
  * i % 10 == 2  -- a recurring schedule writes one occurrence an interval (scheduleSent, not
                    in sendMsg); at 06:00 UTC it catches up 9 fire times missed while the
                    fleet was down, collapsed into one more occurrence (scheduleMissed 9)
  * i % 10 == 3  -- consumers fall behind from 08:00 to 20:00 UTC: the ready backlog grows
  * i % 10 == 4  -- debounced sends: a tenth of the sends replace a waiting namesake (replaced,
                    in sendMsg, no new message) and a twentieth more are re-sends answered
                    duplicate inside the dedup window (deduplicated, not in sendMsg)
  * i % 10 == 5  -- delivery-lag spike from 14:00 to 16:00 UTC (p99 well above 1000 ms)
  * i % 10 == 6  -- paused from 02:00 to 04:00 UTC (paused; nothing delivered, the ready
                    queue grows), then purged at 04:00 (purged: the ready backlog)
  * i % 10 == 7  -- some messages end by expiry / exhausted retries every hour
  * i % 10 == 8  -- at its backlog quota from 10:00 to 12:00 UTC: a fifth of the sends are
                    refused (backlogRefused)
  * i % 10 == 9  -- the topic first appears at 12:00 UTC on the first day
  * the last topic (with 4 or more topics) has no consumer: nothing is ever delivered
Optionally duplicates (a snapshot written twice) and malformed / unsupported (schemaVersion
99) lines are mixed in. With ``schema_version`` 2 the lines carry the failure-handling
counters too (``deadLettered``, ``redriven``: topics with i % 10 == 7 dead-letter what ends).
Days are generated in parallel processes; the output is deterministic for a seed.

Usage: python -m spark_jobs.generate_snapshots --output DIR --topics 20 --days 1
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Sequence

from spark_jobs.histogram import FINITE_BOUNDS_MS

_MIDPOINTS = (1, 2, 4, 8, 15, 35, 75, 150, 350, 750, 1500, 3500, 7500, 20000, 45000, 90000)
_SPREAD = (0.15, 0.5, 0.25, 0.1)  # weights of buckets center-1 .. center+2


@dataclass(frozen=True)
class Plan:
    """What to generate."""

    output: Path
    topics: int = 20
    days: int = 1
    start: date = date(2025, 11, 20)
    interval_s: int = 60
    namespace: str = "default"
    seed: int = 7
    duplicate_rate: float = 0.0
    malformed_rate: float = 0.0
    schema_version: int = 1
    minutes: int | None = None
    """Only the first ``minutes`` of each day (a first day's short input); None: whole days."""


def _histogram(n: int, center: int) -> str:
    counts = [0] * 16
    if n > 0:
        left = n
        for offset, weight in zip(range(-1, 3), _SPREAD):
            bucket = min(15, max(0, center + offset))
            take = min(left, int(n * weight))
            counts[bucket] += take
            left -= take
        counts[min(15, max(0, center))] += left
    total = sum(c * m for c, m in zip(counts, _MIDPOINTS))
    top = max((i for i, c in enumerate(counts) if c), default=-1)
    peak = 0 if top < 0 else (_MIDPOINTS[top] if top == 15 else FINITE_BOUNDS_MS[top])
    return f'{{"count":{n},"sum":{total},"max":{peak},"counts":[{",".join(map(str, counts))}]}}'


def _day_lines(plan: Plan, day_index: int) -> dict[str, dict]:
    """Generate one UTC day; returns file relative path -> lines and counts."""
    day = plan.start + timedelta(days=day_index)
    day_start_ms = int(
        datetime(day.year, day.month, day.day, tzinfo=timezone.utc).timestamp() * 1000
    )
    interval_ms = plan.interval_s * 1000
    per_day = 86_400_000 // interval_ms
    if plan.minutes is not None:
        per_day = min(per_day, max(1, plan.minutes * 60_000 // interval_ms))
    rng = random.Random(plan.seed * 100_003 + day_index)
    no_consumer = plan.topics - 1 if plan.topics >= 4 else -1
    base = [3 + 40 * ((i * 7919) % 97) / 97 for i in range(plan.topics)]
    ready = [0] * plan.topics
    waiting = [int(b * 30) for b in base]
    files: dict[str, dict] = {}
    stats = {"lines": 0, "duplicates": 0, "malformed": 0, "unsupported": 0}
    for k in range(per_day):
        start_ms = day_start_ms + k * interval_ms
        hour = (k * plan.interval_s) // 3600
        name = f"date={day.isoformat()}/{plan.namespace}-{hour:02d}.jsonl"
        out = files.setdefault(name, {"lines": [], "tail": []})
        daily = 1.0 + 0.6 * math.sin(2 * math.pi * (hour - 8) / 24)
        for i in range(plan.topics):
            role = i % 10
            if role == 9 and day_index == 0 and hour < 12:
                continue
            sent = int(base[i] * daily * (0.8 + 0.4 * rng.random()) * plan.interval_s / 60)
            replaced = sent // 10 if role == 4 else 0
            deduplicated = sent // 20 if role == 4 else 0
            missed = 0
            scheduled = 1 if role == 2 else 0
            if role == 2 and (k * plan.interval_s) % 86_400 == 6 * 3600:
                missed, scheduled = 9, 2  # the catch-up of the outage, then this interval's
            arrivals = sent - replaced + scheduled  # new messages: a replace adds none
            promoted = arrivals  # every new message is due at once
            paused = role == 6 and 2 <= hour < 4
            purged = 0
            if role == 6 and (k * plan.interval_s) % 86_400 == 4 * 3600:
                purged, ready[i] = ready[i], 0  # the operator purges what the pause held back
            refused = sent // 5 if role == 8 and 10 <= hour < 12 else 0
            available = ready[i] + promoted
            if i == no_consumer or paused:
                capacity = 0
            elif role == 3 and 8 <= hour < 20:
                capacity = int(promoted * 0.7)
            else:
                capacity = available
            delivered = min(available, capacity)
            ready[i] = available - delivered
            timed_out = delivered // 50
            nacked = delivered // 200
            acked = delivered - timed_out - nacked
            ended = (timed_out // 2 + 1) if role == 7 else 0
            waiting[i] = max(0, waiting[i] + arrivals - promoted + rng.randint(-2, 2))
            lag_center = 10 if role == 5 and 14 <= hour < 16 else 3
            w = waiting[i]
            blocked = sent // 3 if role == 1 else 0
            failure = ""
            if plan.schema_version >= 2:
                # about half of the ended messages go to a dead-letter queue (a lone one every
                # other interval): deadLettered is part of triggerMsgEndLife, as the server counts
                dead = ended // 2 + (ended % 2) * (k % 2)
                failure = f'"deadLettered":{dead},"redriven":{dead // 2},'
            line = (
                f'{{"schemaVersion":{plan.schema_version},"namespace":"{plan.namespace}","topic":"topic-{i:04d}",'
                f'"intervalStart":{start_ms},"intervalEnd":{start_ms + interval_ms},'
                f'"sendMsg":{sent},"pullMsg":{delivered},"ackMsg":{acked},"nackMsg":{nacked},'
                f'"getMsg":{delivered // 20},"deleteMsg":{sent // 100},'
                f'"triggerMsgReady":{promoted},'
                f'"triggerMsgEndLife":{ended},"triggerMsgTimeout":{timed_out},{failure}'
                f'"purged":{purged},"backlogRefused":{refused},'
                f'"replaced":{replaced},"deduplicated":{deduplicated},'
                f'"scheduleSent":{scheduled},"scheduleMissed":{missed},'
                f'"pullMsgTimeGap":{_histogram(delivered, lag_center)},'
                f'"readyQueueTimeGap":{_histogram(promoted, 1)},'
                f'"waitingQueueSize":{w},"readyQueueSize":{ready[i]},'
                f'"ackQueueSize":{timed_out + nacked},"groupBlockedSize":{blocked},'
                f'"paused":{"true" if paused else "false"},'
                f'"waitingQueueInfo":{{"sizeOf0To1min":{w // 2},"sizeOf1minTo10min":{w - w // 2},'
                f'"sizeOf10minTo30min":0,"sizeOf30minTo1hour":0,"sizeOf1hourTo6hour":0,'
                f'"sizeOf6hourTo1day":0,"sizeOf1dayTo7day":0,"sizeOf7dayTo30day":0,'
                f'"sizeOf30dayToInfinite":0}},"node":"gen-{day_index % 3}"}}'
            )
            out["lines"].append(line)
            stats["lines"] += 1
            if plan.duplicate_rate and rng.random() < plan.duplicate_rate:
                out["tail"].append(line)  # the retry rewrites it later in the hour
                stats["duplicates"] += 1
            if plan.malformed_rate and rng.random() < plan.malformed_rate:
                out["tail"].append(line[: len(line) // 2])
                out["tail"].append(
                    line.replace(f'"schemaVersion":{plan.schema_version}', '"schemaVersion":99', 1)
                )
                stats["malformed"] += 1
                stats["unsupported"] += 1
    return {"files": files, "stats": stats}


def _write_day(plan: Plan, day_index: int) -> dict[str, int]:
    result = _day_lines(plan, day_index)
    for name, content in result["files"].items():
        path = plan.output / name
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as handle:
            handle.write("\n".join(content["lines"] + content["tail"]) + "\n")
    return result["stats"]


def generate(plan: Plan, workers: int = 1) -> dict[str, int]:
    """Write the snapshots of ``plan``; return line counts (lines, duplicates, malformed, ...).

    ``lines`` counts distinct topic-intervals; each duplicate adds one more line, and each
    malformed event adds one truncated and one schemaVersion-99 line.
    """
    totals = {"lines": 0, "duplicates": 0, "malformed": 0, "unsupported": 0}
    if workers > 1 and plan.days > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            results = list(pool.map(_write_day, [plan] * plan.days, range(plan.days)))
    else:
        results = [_write_day(plan, d) for d in range(plan.days)]
    for stats in results:
        for key, value in stats.items():
            totals[key] += value
    return totals


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", required=True, type=Path, help="snapshot directory to write")
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--days", type=int, default=1)
    parser.add_argument(
        "--start", type=date.fromisoformat, default=date(2025, 11, 20), help="first UTC day"
    )
    parser.add_argument("--interval-s", type=int, default=60)
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--duplicate-rate", type=float, default=0.0, help="share of lines written twice"
    )
    parser.add_argument(
        "--malformed-rate", type=float, default=0.0, help="share of lines followed by bad ones"
    )
    parser.add_argument(
        "--schema-version",
        type=int,
        choices=(1, 2),
        default=1,
        help="2 adds the deadLettered / redriven counters",
    )
    parser.add_argument(
        "--minutes",
        type=int,
        default=None,
        help="write only the first MINUTES of each day (a server that ran briefly)",
    )
    parser.add_argument("--workers", type=int, default=2, help="parallel processes (one day each)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    plan = Plan(
        output=args.output,
        topics=args.topics,
        days=args.days,
        start=args.start,
        interval_s=args.interval_s,
        namespace=args.namespace,
        seed=args.seed,
        duplicate_rate=args.duplicate_rate,
        malformed_rate=args.malformed_rate,
        schema_version=args.schema_version,
        minutes=args.minutes,
    )
    totals = generate(plan, workers=args.workers)
    print(
        f"wrote {totals['lines']} snapshot lines (+{totals['duplicates']} duplicates, "
        f"{totals['malformed']} malformed, {totals['unsupported']} unsupported) "
        f"under {args.output}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
