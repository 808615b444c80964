"""Benchmark the monitoring report job end to end: input lines per second vs input size.

For each size, writes synthetic snapshots once (200 topics, one-minute intervals; 4 days is
about 1.1M lines, 35 days about 10M) and runs ``python -m spark_jobs.monitor_report`` in a fresh
process (JVM start-up included), timing the whole job. Prints one row per size and the
time ratio against the line ratio, to show time grows linearly with input.

Usage: python bench/spark_report_bench.py --work /tmp/spark-bench [--days 4 35] [--topics 200]
"""

from __future__ import annotations

import argparse
import json
import os
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
    print(f"generated {stats['lines']:,} lines in {time.monotonic() - started:.0f}s", file=sys.stderr)
    return directory, stats["lines"]


def run_job(input_dir: Path, output_dir: Path, extra: list[str]) -> float:
    """Run the job in a fresh process; return wall seconds. Raises on failure."""
    command = [sys.executable, "-m", "spark_jobs.monitor_report", "--input", str(input_dir),
               "--output", str(output_dir), *extra]  # fmt: skip
    started = time.monotonic()
    subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/spark-bench"))
    parser.add_argument("--topics", type=int, default=200)
    parser.add_argument("--days", type=int, nargs="+", default=[4, 35])
    parser.add_argument("--job-arg", action="append", default=[], help="extra argument for the job")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    results = []
    for days in args.days:
        input_dir, lines = _ensure_input(args.work, args.topics, days)
        size = sum(p.stat().st_size for p in input_dir.rglob("*.jsonl"))
        seconds = run_job(input_dir, args.work / f"output-{days}d", args.job_arg)
        results.append({"days": days, "lines": lines, "bytes": size, "seconds": round(seconds, 1),
                        "lines_per_s": round(lines / seconds)})  # fmt: skip
        print(f"{lines:>12,} lines {size / 1e9:6.2f} GB {seconds:8.1f} s {lines / seconds:>10,.0f} lines/s", flush=True)
    if len(results) > 1:
        first, last = results[0], results[-1]
        print(
            f"lines x{last['lines'] / first['lines']:.2f} -> time x{last['seconds'] / first['seconds']:.2f}",
            flush=True,
        )
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
