"""Which input dates a run processes: the input listing, its fingerprints and the run state.

The server writes ``<dir>/date=YYYY-MM-DD/<namespace>-<HH>.jsonl``; a file's date is the
``date=`` name of its parent directory. Each date's fingerprint is a hash of its files'
relative paths, sizes and modification times. ``<output>/_state/manifest.json`` records,
after every successful run, the fingerprint of each date reported, the settings that shape
the tables and the input they came from.

A run is *full* (every table rebuilt from the whole input) when asked (``--full``), when
there is no state yet, or when the state was made from another input, with other settings
or by another version of the job, or when some input files are outside ``date=``
directories (their lines cannot be attributed to a date before reading them). Otherwise it
is *incremental*: it processes the dates that are new or whose fingerprint changed, plus
every date on or after ``--since``. Dates whose files have gone keep their rows.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from dataclasses import dataclass, field
from urllib.parse import urlparse

STATE_VERSION = 8
"""Bumped whenever the tables' layout or meaning changes: older state forces a full run
(3: the group_blocked_size columns; 4: purged, backlog_refused and the paused columns;
5: ``ended`` without the dead letters; 6: replaced, deduplicated, schedule_sent and
schedule_missed, with their rates; 7: the ``subscription`` column, rows per subscription;
8: the push counters, the push_latency histogram, pushes and push_success_ratio)."""
STATE_PATH = "_state/manifest.json"


@dataclass(frozen=True)
class InputFile:
    path: str  # as given to Spark (URI or local path)
    relative: str  # relative to the input root
    size: int
    mtime_ms: int
    date: str | None  # YYYY-MM-DD of the parent ``date=`` directory, or None


@dataclass
class Listing:
    root: str  # normalised: an absolute local path or a qualified URI
    files: list[InputFile]
    missing: bool = False  # the input root does not exist

    @property
    def by_date(self) -> dict[str, list[InputFile]]:
        groups: dict[str, list[InputFile]] = {}
        for f in self.files:
            if f.date:
                groups.setdefault(f.date, []).append(f)
        return dict(sorted(groups.items()))

    @property
    def undated(self) -> list[InputFile]:
        return [f for f in self.files if not f.date]

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)


@dataclass
class Plan:
    full: bool
    reason: str
    dates: list[str]  # the dates processed (every date with files, in a full run)
    files: list[InputFile]  # the files read
    roots: list[str]  # directories holding exactly those files: the input, or the dates'
    fingerprints: dict[str, str] = field(default_factory=dict)  # of every dated input date


def _date_of(parent_name: str) -> str | None:
    if not parent_name.startswith("date="):
        return None
    text = parent_name[5:]
    try:
        dt.date.fromisoformat(text)
    except ValueError:
        return None
    return text if len(text) == 10 else None


def _hidden(name: str) -> bool:
    # Spark's file listing skips these too (Hadoop's convention for metadata files).
    return name.startswith((".", "_"))


def is_local(uri: str) -> bool:
    """True for a plain path or a ``file:`` URI."""
    return urlparse(uri).scheme in ("", "file")


def _local_path(uri: str) -> str:
    parsed = urlparse(uri)
    return parsed.path if parsed.scheme == "file" else uri


def list_input(spark, root: str) -> Listing:
    """Every ``*.jsonl`` file under ``root`` (recursively; hidden ones skipped)."""
    if is_local(root):
        return _list_local(root)
    return _list_hadoop(spark, root)


def _list_local(root: str) -> Listing:
    base = os.path.abspath(_local_path(root))
    if not os.path.exists(base):
        return Listing(base, [], missing=True)
    files = []
    for directory, dirs, names in os.walk(base):
        dirs[:] = sorted(d for d in dirs if not _hidden(d))
        for name in sorted(names):
            if _hidden(name) or not name.endswith(".jsonl"):
                continue
            path = os.path.join(directory, name)
            stat = os.stat(path)
            files.append(
                InputFile(
                    path,
                    os.path.relpath(path, base),
                    stat.st_size,
                    int(stat.st_mtime * 1000),
                    _date_of(os.path.basename(directory)),
                )
            )
    return Listing(base, files)


def _list_hadoop(spark, root: str) -> Listing:
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(root)
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    if not fs.exists(path):
        return Listing(root, [], missing=True)
    base = fs.makeQualified(path).toString().rstrip("/")
    root = base
    files = []
    iterator = fs.listFiles(path, True)
    while iterator.hasNext():
        status = iterator.next()
        file_path = status.getPath()
        full = file_path.toString()
        relative = full[len(base) + 1 :] if full.startswith(base + "/") else file_path.getName()
        parts = relative.split("/")
        if any(_hidden(p) for p in parts) or not parts[-1].endswith(".jsonl"):
            continue
        parent = parts[-2] if len(parts) > 1 else ""
        files.append(
            InputFile(
                full, relative, status.getLen(), status.getModificationTime(), _date_of(parent)
            )
        )
    files.sort(key=lambda f: f.relative)
    return Listing(root, files)


def fingerprint(files: list[InputFile]) -> str:
    digest = hashlib.sha1()
    for f in sorted(files, key=lambda f: f.relative):
        digest.update(f"{f.relative}\t{f.size}\t{f.mtime_ms}\n".encode())
    return digest.hexdigest()


def settings_of(args) -> dict:
    """The options that shape the tables (the others only change report.html)."""
    return {
        "lag_threshold_ms": args.lag_threshold_ms,
        "growth_min_intervals": args.growth_min_intervals,
    }


def plan_run(listing: Listing, state: dict | None, args) -> Plan:
    """Decide full or incremental, and which dates and files to read (module docstring)."""
    by_date = listing.by_date
    prints = {day: fingerprint(files) for day, files in by_date.items()}
    all_dates = list(by_date)

    def full(reason: str) -> Plan:
        return Plan(True, reason, all_dates, listing.files, [listing.root], prints)

    if args.full:
        return full("--full")
    if state is None:
        return full("first run (no earlier state in the output)")
    if state.get("version") != STATE_VERSION:
        return full("the output was made by another version of the report")
    if state.get("input") != listing.root:
        return full(f"the output was made from another input ({state.get('input')})")
    if state.get("settings") != settings_of(args):
        return full(f"settings changed (were {json.dumps(state.get('settings'))})")
    if listing.undated:
        return full(f"{len(listing.undated)} input file(s) outside date=YYYY-MM-DD directories")
    known = state.get("dates", {})
    since = args.since.isoformat() if args.since else None
    dates = [
        day
        for day in all_dates
        if known.get(day) != prints[day] or (since is not None and day >= since)
    ]
    files = [f for day in dates for f in by_date[day]]
    if since is not None:
        reason = f"--since {since}"
    else:
        reason = "new or changed dates only"
    # An incremental run reads whole date directories (every file of a processed date).
    roots = sorted({f.path.rsplit("/", 1)[0] for f in files})
    return Plan(False, reason, dates, files, roots, prints)


def new_state(listing: Listing, plan: Plan, previous: dict | None, args) -> dict:
    """The state to record after ``plan`` ran: processed dates take their new fingerprint."""
    dates = {} if plan.full or previous is None else dict(previous.get("dates", {}))
    for day in plan.dates:
        dates[day] = plan.fingerprints[day]
    return {
        "version": STATE_VERSION,
        "input": listing.root,
        "settings": settings_of(args),
        "dates": dict(sorted(dates.items())),
    }
