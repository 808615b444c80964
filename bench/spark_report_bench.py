"""Benchmark the monitoring report job end to end: input lines per second vs input size.

For each size, writes synthetic snapshots once (200 topics, one-minute intervals; 4 days is
about 1.1M lines, 35 days about 10M) and runs ``python -m spark_jobs.monitor_report --full``
into an empty output directory in a fresh process (JVM start-up included), ``--repeat`` times,
timing the whole job. Prints one row per run with the machine's load average before and after
and a single-core reference time measured just before (the machine is shared and its speed
drifts: figures are noisy), the time ratio against the line ratio (linear
growth), and the figures against the bars: the smallest size in <= 20 s wall, the largest at
>= 150,000 lines/s.

Usage: python bench/spark_report_bench.py --work /tmp/spark-bench [--days 4 35] [--topics 200]
       [--repeat 2] [--verbose]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from spark_jobs.generate_snapshots import Plan, generate  # noqa: E402


def _ensure_input(work: Path, topics: int, days: int) -> tuple[Path, int]:
    directory = work / f"input-{topics}t-{days}d"
    marker = directory / "_lines.json"
    if marker.exists():
        return directory, json.loads(marker.read_text())["lines"]
    started = time.monotonic()
    stats = generate(Plan(output=directory, topics=topics, days=days), workers=os.cpu_count() or 2)
    marker.write_text(json.dumps(stats))
    print(
        f"generated {stats['lines']:,} lines in {time.monotonic() - started:.0f}s", file=sys.stderr
    )
    return directory, stats["lines"]


REFERENCE_LOOP = compile(
    "total = 0\nfor i in range(10_000_000):\n    total += i\n", "<reference>", "exec"
)


def cpu_reference() -> float:
    """Seconds of one core for a fixed pure-Python loop, best of three: 10M additions at
    module level, as ``python -c`` runs them (a loop inside a function runs about twice as
    fast, on local variables).

    The machine is a shared VM whose speed drifts (this loop took 0.47-0.59 s on one
    morning and 0.89-1.28 s in the next session): each run prints it, so runs of different
    days can be compared, roughly (the report's JVM part did not slow down in proportion)."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        exec(REFERENCE_LOOP, {})
        best = min(best, time.perf_counter() - started)
    return best


SMALL_BAR_S = 20.0
LARGE_BAR_LINES_PER_S = 150_000


def run_job(input_dir: Path, output_dir: Path, extra: list[str]) -> tuple[float, str]:
    """Run the job in a fresh process into an empty ``output_dir``; return wall seconds and its
    progress lines. Raises on failure."""
    shutil.rmtree(output_dir, ignore_errors=True)
    command = [
        sys.executable,
        "-m",
        "spark_jobs.monitor_report",
        "--input",
        str(input_dir),
        "--output",
        str(output_dir),
        "--full",
        *extra,
    ]
    started = time.monotonic()
    done = subprocess.run(
        command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise RuntimeError(f"job failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds, done.stderr


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/spark-bench"))
    parser.add_argument("--topics", type=int, default=200)
    parser.add_argument("--days", type=int, nargs="+", default=[4, 35])
    parser.add_argument(
        "--repeat", type=int, default=2, help="runs per size (the machine is shared)"
    )
    parser.add_argument("--verbose", action="store_true", help="print the job's progress lines")
    parser.add_argument("--job-arg", action="append", default=[], help="extra argument for the job")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    results = []
    for days in args.days:
        input_dir, lines = _ensure_input(args.work, args.topics, days)
        size = sum(p.stat().st_size for p in input_dir.rglob("*.jsonl"))
        for attempt in range(1, args.repeat + 1):
            reference = cpu_reference()
            load_before = os.getloadavg()[0]
            seconds, progress = run_job(input_dir, args.work / f"output-{days}d", args.job_arg)
            load_after = os.getloadavg()[0]
            if args.verbose:
                print(progress, end="", flush=True)
            results.append(
                {
                    "days": days,
                    "run": attempt,
                    "lines": lines,
                    "bytes": size,
                    "seconds": round(seconds, 1),
                    "lines_per_s": round(lines / seconds),
                    "load_before": round(load_before, 2),
                    "load_after": round(load_after, 2),
                    "cpu_reference_s": round(reference, 2),
                }
            )
            print(
                f"{lines:>12,} lines {size / 1e9:6.2f} GB run {attempt}: {seconds:8.1f} s "
                f"{lines / seconds:>10,.0f} lines/s  load {load_before:.2f} -> {load_after:.2f}  "
                f"cpu reference {reference:.2f} s",
                flush=True,
            )
    sizes = sorted({r["days"] for r in results})
    best = {
        d: min((r for r in results if r["days"] == d), key=lambda r: r["seconds"]) for d in sizes
    }
    if len(sizes) > 1:
        first, last = best[sizes[0]], best[sizes[-1]]
        print(
            f"lines x{last['lines'] / first['lines']:.2f} -> "
            f"time x{last['seconds'] / first['seconds']:.2f} "
            "(best runs)",
            flush=True,
        )
    small, large = best[sizes[0]], best[sizes[-1]]
    print(
        f"bar: {small['lines']:,} lines in <= {SMALL_BAR_S:.0f} s: best {small['seconds']} s "
        f"({'met' if small['seconds'] <= SMALL_BAR_S else 'missed'})",
        flush=True,
    )
    print(
        f"bar: {large['lines']:,} lines at >= {LARGE_BAR_LINES_PER_S:,} lines/s: "
        f"best {large['lines_per_s']:,} "
        f"({'met' if large['lines_per_s'] >= LARGE_BAR_LINES_PER_S else 'missed'})",
        flush=True,
    )
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
