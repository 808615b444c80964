"""Redis work per message of send, pull and ack, one transition at a time (issue 32).

The core without HTTP (as core_lua.py: the ``DelayQueue`` methods the HTTP views call, from
one thread, on a fresh redis-server), so each phase's Redis work is its own: for the single
path (send, pull of 1, ack, one message per call) and for batches (send_batch, pull and
ack_batch of ``--batch`` messages per call), per message: Redis CPU (the server's, from
/proc), the time INFO commandstats gives the scripts (EVALSHA usec: the script calls' own
time, commands inside included) and the commands by name. Then the floor every call pays:
an EVALSHA of an empty script given the same 19 keys and ARGV a send of one message gets,
and a send of zero messages (send.lua's top level, its includes' included, and nothing
else: what the prelude costs above the floor).

    python bench/redis_work.py --messages 20000 --batch 100
    python bench/redis_work.py --messages 1000 --against /path/to/other/checkout

``--against TREE``: also the prelude of send.lua and ack.lua (a call with no message) as this
checkout and TREE assemble them (includes pasted: TREE's ``lua_source``), loaded into the
same Redis and called in alternating rounds, so the machine's noise falls on both alike;
the median script time per call of each (INFO commandstats), beside an empty script's.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Callable

from delayqueue.background.runtime import Runtime
from delayqueue.core.requests import AckRequest, SendRequest
from delayqueue.core.scripts import lua_source
from delayqueue.settings.config import Settings

from common import RedisMeter, print_table, progress, stack, write_result

BODY = "x" * 64


def _phase(meter: RedisMeter, label: str, messages: int, calls: int,
           step: Callable[[int], int]) -> dict[str, Any]:
    """Run ``step(i)`` for i < calls (each returns how many messages it moved); the Redis
    work per message moved."""
    before = meter.read()
    usec0 = _evalsha_usec(meter)
    started, moved = time.perf_counter(), 0
    for i in range(calls):
        moved += step(i)
    wall = time.perf_counter() - started
    figures = meter.per_message(before, moved)
    figures["script_us_per_message"] = round((_evalsha_usec(meter) - usec0) / max(moved, 1), 1)
    figures["messages"], figures["calls"] = moved, calls
    progress(f"{label}: {moved:,} messages in {calls:,} calls, {moved / wall:,.0f}/s, Redis "
             f"{figures['redis_cpu_us_per_message']} us/msg, "
             f"{figures['redis_commands_per_message']} commands/msg")
    if moved != messages:
        raise SystemExit(f"{label}: moved {moved} of {messages} messages")
    return figures


def _evalsha_usec(meter: RedisMeter) -> float:
    stats = meter.client.info("commandstats")
    return sum(float(stats.get(f"cmdstat_{name}", {}).get("usec", 0))
               for name in ("evalsha", "eval"))


def _round(queue: Any, meter: RedisMeter, topic: str, messages: int,
           batch: int) -> dict[str, Any]:
    """Send, pull and ack ``messages`` in calls of ``batch`` (1: the single path)."""
    ids = [uuid.uuid4().hex for _ in range(messages)]
    calls = messages // batch
    label = "single" if batch == 1 else f"batch {batch}"
    pulled: list[tuple[str, str]] = []

    def send(i: int) -> int:
        chunk = ids[i * batch:(i + 1) * batch]
        if batch == 1:
            queue.send(topic, BODY, msg_id=chunk[0], delay_ms=0)
            return 1
        results = queue.send_batch(topic, [SendRequest(BODY, msg_id, 0) for msg_id in chunk])
        return sum(1 for r in results if not isinstance(r, Exception))

    def pull(i: int) -> int:
        got = queue.pull(topic, batch).messages
        pulled.extend((m.msg_id, m.receipt) for m in got)
        return len(got)

    def ack(i: int) -> int:
        chunk = pulled[i * batch:(i + 1) * batch]
        if batch == 1:
            queue.ack(topic, chunk[0][0], chunk[0][1])
            return 1
        results = queue.ack_batch(topic, [AckRequest(m, r) for m, r in chunk])
        return sum(1 for r in results if not isinstance(r, Exception))

    return {phase: _phase(meter, f"{label} {phase}", messages, calls, fn)
            for phase, fn in (("send", send), ("pull", pull), ("ack", ack))}


def _floor(queue: Any, meter: RedisMeter, topic: str, calls: int) -> dict[str, Any]:
    """An EVALSHA of ``return 1`` with the 19 keys and the ARGV of a one-message send."""
    client = meter.client
    sha = client.script_load("return 1")
    keys = list(queue.topic_keys(topic).direct_queues)
    argv = [0, "hint", topic, 1, 0, uuid.uuid4().hex, BODY, 0, -1, -1, "", "", 0,
            *([1000] * 13)]
    before = meter.read()
    usec0 = _evalsha_usec(meter)
    for _ in range(calls):
        client.evalsha(sha, len(keys), *keys, *argv)
    figures = meter.per_message(before, calls)
    return {"keys": len(keys), "argv": len(argv),
            "redis_cpu_us_per_call": figures["redis_cpu_us_per_message"],
            "script_us_per_call": round((_evalsha_usec(meter) - usec0) / calls, 2)}


def _zero_send(queue: Any, meter: RedisMeter, topic: str, calls: int) -> dict[str, Any]:
    """send.lua called with no message: its prelude and the settings read, per call."""
    tk = queue.topic_keys(topic)
    before = meter.read()
    usec0 = _evalsha_usec(meter)
    for _ in range(calls):
        if queue.scripts.send_many(tk, 0, "hint", queue.defaults, []) != []:
            raise SystemExit("a send of no message answered replies")
    figures = meter.per_message(before, calls)
    return {"redis_cpu_us_per_call": figures["redis_cpu_us_per_message"],
            "script_us_per_call": round((_evalsha_usec(meter) - usec0) / calls, 2),
            "commands_per_call": figures["redis_commands_per_message"]}


def _sources(tree: Path, names: tuple[str, ...]) -> dict[str, str]:
    """The scripts as ``tree``'s loader assembles them (its own lua_source)."""
    code = ("import json, sys; from delayqueue.core.scripts import lua_source; "
            "print(json.dumps({n: lua_source(n) for n in sys.argv[1:]}))")
    out = subprocess.run([sys.executable, "-c", code, *names], cwd=tree, check=True,
                         text=True, capture_output=True,
                         env={**os.environ, "PYTHONPATH": str(tree)})
    return json.loads(out.stdout)


def _prelude(queue: Any, meter: RedisMeter, tree: Path, calls: int,
             rounds: int = 9) -> dict[str, float]:
    """Script time per call of send and ack given no message, this tree's against
    ``tree``'s, and of ``return 1``: the median of ``rounds`` alternating rounds."""
    client, names = meter.client, ("send", "ack")
    tk = queue.topic_keys("rw-prelude")
    keys = list(queue.scripts._keys(tk))
    args = {"send": [0, "hint", tk.topic, 0, 0, *queue.defaults],
            "ack": [0, 0, "hint", tk.topic, 0, *queue.defaults], "empty": []}
    theirs = _sources(tree, names)
    shas = {"empty": client.script_load("return 1")}
    for name in names:
        shas[f"{name} (this tree)"] = client.script_load(lua_source(name))
        shas[f"{name} ({tree.name})"] = client.script_load(theirs[name])
    samples: dict[str, list[float]] = {label: [] for label in shas}
    for _ in range(rounds):
        for label, sha in shas.items():
            argv = args[label.split(" ")[0]]
            usec0 = _evalsha_usec(meter)
            for _ in range(calls):
                client.evalsha(sha, len(keys), *keys, *argv)
            samples[label].append((_evalsha_usec(meter) - usec0) / calls)
    progress("prelude rounds, script us per call: " + "; ".join(
        f"{label} {' '.join(f'{v:.0f}' for v in values)}" for label, values in samples.items()))
    return {label: round(statistics.median(values), 1) for label, values in samples.items()}


def run(*, messages: int = 20_000, batch: int = 100, against: Path | None = None) -> dict:
    messages -= messages % batch
    with stack(with_node=False) as s:
        settings = dataclasses.replace(Settings(), redis_url=s.redis.url, snapshot_dir="")
        rt = Runtime(settings)
        meter = RedisMeter(s.redis.url)
        try:
            figures = {"single": _round(rt.queue, meter, "rw-single", messages, 1),
                       "batch": _round(rt.queue, meter, "rw-batch", messages, batch),
                       "floor": _floor(rt.queue, meter, "rw-floor", messages),
                       "zero_send": _zero_send(rt.queue, meter, "rw-zero", messages)}
            if against is not None:
                figures["prelude"] = _prelude(rt.queue, meter, against, messages)
        finally:
            meter.close()
            rt.client.close()
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--against", type=Path, default=None,
                        help="another checkout: compare its send and ack preludes")
    args = parser.parse_args(argv)
    f = run(messages=args.messages, batch=args.batch, against=args.against)
    rows = []
    for path in ("single", "batch"):
        for phase in ("send", "pull", "ack"):
            p = f[path][phase]
            rows.append((f"{path} {phase}: Redis CPU / script us per msg, commands per msg",
                         f"{p['redis_cpu_us_per_message']} / {p['script_us_per_message']} / "
                         f"{p['redis_commands_per_message']}: " + ", ".join(
                             f"{k} {v:g}" for k, v in p["redis_commands_by_name"].items())))
        rows.append((f"{path} send + pull + ack: Redis CPU us per message", round(sum(
            f[path][phase]["redis_cpu_us_per_message"] for phase in ("send", "pull", "ack")), 1)))
    fl = f["floor"]
    rows.append((f"floor: empty EVALSHA, {fl['keys']} keys, {fl['argv']} ARGV: Redis CPU / "
                 "script us per call", f"{fl['redis_cpu_us_per_call']} / "
                                       f"{fl['script_us_per_call']}"))
    z = f["zero_send"]
    rows.append(("send of zero messages: Redis CPU / script us per call, commands per call",
                 f"{z['redis_cpu_us_per_call']} / {z['script_us_per_call']} / "
                 f"{z['commands_per_call']}"))
    for label, value in f.get("prelude", {}).items():
        rows.append((f"prelude, script us per call (median): {label}", value))
    print_table(f"Redis work per message (core without HTTP, batches of {args.batch})", rows)
    write_result("redis-work", f, {**vars(args), "against": str(args.against or "")})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
