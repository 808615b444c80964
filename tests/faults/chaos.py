"""The long fault campaign (``make chaos``): every nemesis many times under 100 sends/s over
10 topics on two nodes, then the "## Fault campaign" section of docs/reliability.md.

    python tests/faults/chaos.py [--scale 0.25] [--output docs/reliability.md]

``--scale`` multiplies every fault count (and SCRIPT FLUSH's length); the document says which
scale produced it.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))   # tests/: the support and faults packages

from faults.campaign import Run, run  # noqa: E402
from faults.nemesis import (  # noqa: E402
    ClientPause,
    LeaseHolderStop,
    NodeKill,
    OverMaxmemory,
    PubsubKill,
    RedisKill,
    ScriptFlush,
    TopicPause,
)
from faults.world import World  # noqa: E402

REPO = HERE.parent.parent
SECTION = "## Fault campaign"
RATE = 100
PRODUCERS = 8
TOPICS = 10
SCRIPT_FLUSH_PERIOD_S = 2.0
# nemesis, cycles at scale 1, seconds between two faults
PLAN = [
    (NodeKill, 60, 2.0),
    (RedisKill, 30, 2.0),
    (LeaseHolderStop, 20, 1.0),
    (ScriptFlush, 300, SCRIPT_FLUSH_PERIOD_S),      # 10 minutes, one every 2 s
    (PubsubKill, 30, 2.0),
    (ClientPause, 20, 2.0),
    (OverMaxmemory, 10, 2.0),
    (TopicPause, 20, 4.5),          # held 1.5 s: longer than a long poll (1 s)
]

PAUSE = """\
The topic pause nemesis is the server's own control, not a failure: each cycle calls
`pauseTopic` on every topic through the nodes' HTTP API, holds the pause a third of the
period (1.5 s, longer than a consumer's 1 s long poll, so polls are sent while paused), then
calls `resumeTopic`. The history keeps each topic's pause from the pause call's 200 answer to
the start of the resume call, when the server promises to hand nothing out; the checker's
*delivered while paused* counts deliveries by a pull sent within that span and answered
before it ended (a pull already in flight when the pause was called, or answered after the
resume was sent, may deliver); a pause call that paused nothing (tried by hand: the nemesis
calling getTopicInfo instead) gave 108 such deliveries in the short tier's two cycles. The
usual verdicts hold the rest: what was due during a pause
is delivered after the resume (its lag is the pause), never lost, early or again after its
ack. "-" in that column: the run paused nothing."""

SUBSCRIPTIONS = """\
Every run gives each topic two named subscriptions, `s1` and `s2`, created (each
`createSubscription` retried until it answers 200) before the first send, so every message
of the run fans out to three subscriptions: the default one and the two named ones, each
consumed by its own long-poll consumers, which pull, ack and nack with `subscription=`. The
history records the subscription of every delivery, ack and nack, and the checker holds each
named subscription to its own verdict: *never delivered in it*, a send answered 200 after the
subscription's creation answered (so accepted after it) that was never delivered in that
subscription, whatever the other subscriptions did (the subscriptions column: delivered / never
delivered, per subscription); *unexpected*, a delivery in it of a message nobody sent, or sent
before its creation; *early* and *again after ack* against its own acks only (an ack in `s1`
ends the message in `s1`, nowhere else); and the two group verdicts within it (groups hold in
each subscription on its own). The drain waits until every acked send was delivered in every
subscription and nothing is left in any subscription's queues or group structures, nor in the
topic's fan-out. The default subscription keeps every verdict it had; a topic pause holds all
three subscriptions, so *delivered while paused* reads the deliveries of all of them."""

PUSH = """\
Every run also has a push scenario (tests/faults/push.py) on a topic of its own: its default
subscription off (`defaultSubscription=false`), one named push subscription `push`
(`pushTimeoutMillis` 500, `pushConcurrency` 8, a `pushSecret`, `redeliveryDelayMillis` 200;
messages sent with `maxRetry` 4) POSTing to a receiver in the test process, which flaps
every 0.2 to 0.8 s between answering 200 (half of the time), 500, slow (200 after twice the
push timeout: the push times out) and down (not listening: connection refused), while a
producer sends about 8 messages/s (0 to 1 s delay) and the run's nemesis works; during the
drain the receiver answers 200. The checker holds it to: every send answered 200 was
answered 2xx by the receiver at least once, or is a dead letter after exactly maxRetry + 1 =
5 deliveries (`getMsg` after the drain), or acked after a slow 200 that its pusher, stalled
past its own timeout, still read (counted in the 2xx figure); no message POSTed more than 5
times (a node killed between its pull and its POST counts a delivery the receiver never saw,
so at most); none POSTed before its `triggerTime`, none with a signature that does not
verify, none never sent; and none POSTed again after the receiver answered it 2xx unless a
fault came between that answer and the new POST (an ack lost with a killed or stopped node,
or with Redis down: at least once at work, counted apart in the push column, not a
violation). A 2xx counts for that only when answered within 250 ms (half the push timeout)
of the signature's `t=` (when the pusher signed the POST): the receiver's thread shares the
test process with every client thread, and a 200 it writes later may come after its pusher
timed out and nacked (the scale-0.25 run before this rule had 6 such re-POSTs, 72 ms to 1 s
after a 200, none near a fault); re-POSTs after such a late 200 are counted apart too. Push
column: messages answered 2xx / dead letters (5 failed deliveries) / violations (missing,
too many, early, unexpected, bad signature, again after a timely 2xx without a fault) /
again after 2xx with a fault between + again after a late 2xx; then the receiver's answers,
200 / 500 / slow. `make test` runs the same scenario in each fault's short run
(tests/faults/test_faults.py), and holds its checker to hand-written histories
(tests/faults/test_push_checker.py). Below the HTTP and the processes,
tests/core/test_push_model.py drives pull.lua's push mode, ack, nack and the scheduler's ack
timeouts on a real Redis against a model (Hypothesis, the default and a named subscription,
settings and pushUrl changed at random): no push pull ever raises the deliveries in flight
above the pushConcurrency in force, each delivery's ack deadline is max(ackTimeoutMillis,
pushTimeoutMillis + 1 s) from its pull, none is early, a consumer's pull of a push
subscription is refused, and a dead letter has exactly maxRetry + 1 deliveries."""

FINDINGS = """\
### What the campaign found

- **A send re-run after its message was acked** (SIGSTOP of a worker: 1 message in 20
  cycles, in each of two runs; none in 60 cycles since the fix). The worker was stopped
  while it read the reply of a `sendMsg` script that Redis had already run; the message
  was delivered and acked meanwhile; on SIGCONT the read timed out and redis-py retried
  the command (its default retry covers timeouts), so the script ran again and re-created
  the ended message, which was delivered again after its 200 ack. Fixed in
  `delayqueue/settings/redis_connection.py`: retry on connection errors only; a timed-out command
  answers 500 (its outcome unknown to the caller), never runs twice. Held by
  `tests/settings/test_redis_retry.py` (a proxy holds one reply back; the old code answered
  `duplicate: true` to the send's own first run). redis-py's Cluster client had the same
  habit, worse: a slow script that outlived the socket timeout ran 5 times, and a Cluster
  pipeline was resent whole. Its retried errors are narrowed to exclude timeouts too
  (`never_rerun_after_a_timeout`; in `tests/settings/test_redis_failover.py`,
  `test_a_cluster_command_whose_reply_timed_out_is_never_run_again` counts one run each
  way, five before); redirections, `CLUSTERDOWN` and connection errors
  are still retried, so failovers and resharding behave as below.
- Lag under SIGSTOP of the lease holder is mostly the stop itself: each topic has one
  consumer, and a consumer whose long poll (or ack) sits on the stopped worker waits for
  SIGCONT. Another worker takes the schedule lease over within its TTL (1.5 s) in every
  cycle, so promotion and ack timeouts carry on. (A harness bug first stopped a worker that
  was only trying to take the lease in 14 of 20 cycles: its SET NX names the lease key in
  MONITOR too; the nemesis now picks the connection that renews it.)
- Lag under kill -9 of Redis is the restart: loading the AOF took 6 to 13 s under that load
  (each note gives it), and nothing is served meanwhile (sends answer code 500, "unknown" to
  the checker). Nothing acked was lost and nothing came back after its ack.

"""

PROMISES = """\
### What we promise

- **No acked send is lost** across kill -9 of whole nodes, kill -9 of Redis restarted from its
  AOF, script cache flushes, pub/sub connection kills, a stopped lease holder, CLIENT PAUSE,
  Redis over maxmemory and topic pauses: a `sendMsg` answered code 200 is delivered.
- **Never early**: no message is delivered before its `triggerTime`, under any of these faults.
- **A paused topic hands nothing out**: a pull sent after `pauseTopic` answered and answered
  before `resumeTopic` was sent delivers nothing; what the pause held is delivered after the
  resume.
- **Nothing comes back after a 200 ack**: an ack answered 200 ended the message.
- **A push subscription delivers every acked send, at least once, or dead-letters it**: under
  every fault above, with its receiver flapping between 200, 500, slow and down, a send
  answered 200 is POSTed until the receiver answers 2xx, or after maxRetry + 1 failed
  deliveries becomes a dead letter (never more POSTs than that); never before its
  `triggerTime`, always signed. After a 2xx it comes again only when a fault lost the ack
  (the receiver must be idempotent, as any consumer).
- **Every subscription gets every acked send, on its own**: a send answered 200 after a named
  subscription was created is delivered in that subscription too, under every fault above;
  an ack ends the message in its own subscription only, and within it nothing comes back
  after the ack, nothing is early, and groups hold.
- **Message groups hold under every fault**: a group never has two deliveries outstanding at
  once (from the pull to the ack, nack or ack deadline), and never delivers a message before
  an earlier one of the group (by `triggerTime`, then acceptance) ended; once drained, no
  group structure is left behind.
- **No HTTP 5xx, no hang**: a request that cannot reach Redis is answered with the
  camellia error envelope (code 500, HTTP 200) within the Redis socket timeout; a send refused
  over maxmemory says so and wrote nothing.
- **At least once, not exactly once**: a delivery whose ack was lost (the consumer's node was
  killed, Redis was down) comes again after its ack timeout; consumers must be idempotent.
  A call that got no answer (unknown) may or may not have taken effect: resend with the same
  `msgId` (a repeat of a live message is answered with the stored one and `duplicate:
  true`, not enqueued twice).

### What Redis does not let us promise

- **Power loss** (or a kernel crash) with `appendfsync everysec` can lose the last second of
  writes, acked sends among them: Redis answers before it fsyncs. Kill -9 of the Redis
  *process* loses nothing (the AOF write is in the page cache before the answer goes out),
  which is what this campaign tests. `appendfsync always` closes the gap at a cost in
  throughput.
- **Crash failovers without `WAIT`**: Redis replication is asynchronous. A primary that dies
  after answering a write and before its replica got it loses that write when the replica is
  promoted (Sentinel or Cluster). We do not call `WAIT` on every transition, so a failover
  after a crash can lose the last acked sends, or bring back a message whose ack was lost
  with it (a redelivery, which at-least-once allows).
- **Redis out of memory** refuses writes: sends answer code 500 ("Redis is out of memory")
  and nothing is stored until memory is freed or `maxmemory` raised; an `allkeys-*` eviction
  policy would silently drop messages, so Redis must run with `noeviction`.
"""


def lag(values: dict) -> str:
    return " / ".join(str(values.get(k, "-")) for k in ("p50", "p99", "max")) if values else "-"


def subscriptions(v) -> str:
    """Per named subscription: messages delivered / acked sends never delivered in it."""
    return ", ".join(f"{name} {sv.delivered} / {len(sv.missing)}"
                     for name, sv in sorted(v.subscriptions.items())) or "-"


def pushed(result: Run) -> str:
    """The push scenario: 2xx / dead / violations / again after 2xx in a fault (receiver's
    200 / 500 / slow)."""
    p = result.push
    if p is None:
        return "-"
    bad = sum(len(values) for values in p.violations.values())
    answered = p.answered_2xx + p.answered_late
    return (f"{answered} / {p.dead} / {bad} / {len(p.again_after_2xx_in_fault)} + "
            f"{len(p.again_after_late_2xx)} "
            f"({p.posts.get('ok', 0)} / {p.posts.get('error', 0)} / {p.posts.get('slow', 0)})")


def row(result: Run) -> str:
    v = result.verdict
    named = v.subscriptions.values()

    def anywhere(default: list, of) -> int:
        """A verdict's count in the default subscription and every named one."""
        return len(default) + sum(len(of(sv)) for sv in named)

    sends = f"{v.sends.get('ok', 0)} / {v.sends.get('fail', 0)} / {v.sends.get('unknown', 0)}"
    counts = [len(v.lost), anywhere(v.unexpected, lambda sv: sv.unexpected),
              anywhere(v.early, lambda sv: sv.early),
              anywhere(v.again_after_ack, lambda sv: sv.again_after_ack),
              anywhere(v.two_outstanding, lambda sv: sv.two_outstanding),
              anywhere(v.out_of_order, lambda sv: sv.out_of_order),
              len(v.delivered_while_paused) if v.pauses else "-",
              f"{v.occurrences} / {len(v.schedule_missing)} / {len(v.schedule_off_grid)}",
              subscriptions(v), pushed(result), len(v.http_5xx), len(v.hangs)]
    per_s = sum(v.sends.values()) / max(result.seconds, 1)
    return (f"| {result.nemesis} | {result.cycles} | {result.seconds:.0f} | {per_s:.0f} | "
            f"{sends} | {v.delivered} ({v.grouped}) | {v.redelivered} | "
            + " | ".join(map(str, counts)) +
            f" | {lag(v.lag_ms)} | {lag(v.lag_in_fault_ms)} |")


def section(results: list[Run], scale: float, seconds: float) -> str:
    head = [
        SECTION, "",
        f"Written by `make chaos` (tests/faults/chaos.py) on {time.strftime('%Y-%m-%d')}, "
        f"{platform.machine()} with {_cores()} cores shared with other work, at scale {scale:g}"
        + (" (the full campaign)" if scale >= 1 else
           " (a scaled-down run: counts are that fraction of the full campaign's)")
        + f", {seconds / 60:.0f} minutes (load average {os.getloadavg()[2]:.1f} over the last "
        f"15 minutes: lag figures are this machine's under that load). Two nodes (gunicorn, "
        f"one gevent worker each) on one "
        f"redis-server with AOF (`appendfsync everysec`); {PRODUCERS} producer threads aiming "
        f"at {RATE} sends/s over {TOPICS} topics (sends/s is what they achieved), "
        "due 0 to 1 s after sending, half of them in one of three message groups per topic "
        "(due on a 250 ms grid, so a group's ties rest on acceptance order); every topic has "
        "two named subscriptions (s1, s2, created before the first send) besides its default "
        "one; two long-poll consumers per topic in each of the three subscriptions, acking "
        "every delivery but a tenth of first deliveries, nacked; "
        "ack timeout 2 s, lease TTL 1.5 s. Every call is recorded as ok, fail or unknown, the "
        "faults run one at a time, then the clients drain and the checker "
        "(tests/faults/checker.py) reads the history. `make test` runs each fault briefly "
        "(tests/faults/test_faults.py).", "",
        "Sends are ok / refused / unknown (no answer, or Redis unreachable). Lag is receive "
        "time minus `triggerTime` of each message's first delivery, ms, p50 / p99 / max; "
        "\"under fault\" counts messages due while the fault was on. Delivered, "
        "redelivered, lost and lag are the default subscription's; delivered counts "
        "distinct messages (grouped ones in brackets). Unexpected, early, again after ack "
        "and the two group columns count in every subscription, each held to its own "
        "deliveries and acks: group: 2 out counts two deliveries of one group outstanding "
        "at once, group: order a message delivered before an earlier one of its group "
        "ended. Schedule: the run's recurring schedule (every second on the first topic, "
        "created before the faults, deleted before the drain): occurrences delivered / fire "
        "times due before the delete never delivered / occurrences off its grid or after its "
        "delete. Subscriptions: per named subscription, messages delivered in it / sends "
        "answered 200 never delivered in it (its lost).", "",
        "| fault | count | s | sends/s | sends ok / refused / unknown | delivered "
        "| redelivered | lost | unexpected | early | again after ack | group: 2 out "
        "| group: order | delivered while paused | schedule | subscriptions | push | HTTP 5xx "
        "| hangs | lag | lag under fault |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    notes = ["", "What each fault did (first and last cycle): " + "; ".join(
        f"{r.nemesis}: {r.notes[0] if r.notes else '-'}"
        + (f" ... {r.notes[-1]}" if len(r.notes) > 1 else "") for r in results) + ".", ""]
    paused = "".join(f" {r.nemesis}: {r.verdict.pauses} topic pauses, "
                     f"{r.verdict.pulls_in_pause} pulls sent while paused."
                     for r in results if r.verdict.pauses)
    return ("\n".join(head + [row(r) for r in results] + notes) + "\n" + PAUSE + paused
            + "\n\n" + SUBSCRIPTIONS + "\n\n" + PUSH + "\n\n" + FINDINGS + PROMISES)


def _cores() -> int:
    return os.cpu_count() or 1


def write(output: Path, text: str) -> None:
    """Replace the campaign's section of ``output``, keeping every other section."""
    old = output.read_text() if output.exists() else "# Reliability\n\n"
    start = old.find(SECTION)
    if start < 0:
        new = old.rstrip("\n") + "\n\n" + text
    else:
        end = old.find("\n## ", start + len(SECTION))
        new = old[:start] + text + (old[end + 1:] if end >= 0 else "")
    output.write_text(new)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--output", type=Path, default=REPO / "docs" / "reliability.md")
    parser.add_argument("--only", default="", help="comma-separated nemesis class names")
    args = parser.parse_args(argv)
    only = {name for name in args.only.split(",") if name}
    began = time.monotonic()
    results: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="dq-chaos-") as tmp, World(Path(tmp)) as world:
        for cls, cycles, period_s in PLAN:
            if only and cls.__name__ not in only:
                continue
            count = max(1, round(cycles * args.scale))
            result = run(world, cls(world), cycles=count, period_s=period_s, rate=RATE,
                         topics=TOPICS, drain_s=60, producers=PRODUCERS)
            results.append(result)
            print(row(result), flush=True)
            if result.left:
                print(f"  left after the drain: {result.left}", flush=True)
            for name, values in result.verdict.violations.items():
                print(f"  {name}: {values[:10]}", flush=True)
            if result.push is not None:
                for name, values in result.push.violations.items():
                    print(f"  {name}: {values[:10]}", flush=True)
            for msg_id, rows in result.verdict.traces.items():
                print(f"  trace {msg_id}:\n    " + "\n    ".join(rows), flush=True)
    write(args.output, section(results, args.scale, time.monotonic() - began))
    print(f"wrote {args.output}")
    bad = [r for r in results if r.verdict.violations or not r.drained
           or (r.push is not None and r.push.violations)]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
