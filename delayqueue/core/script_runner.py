"""How script calls reach Redis: the single place that knows Cluster and WAIT.

``Scripts`` hands every call here, one at a time (``ScriptRunner``) or many in one round trip
(``RoundTrip``). One call goes one of three ways:

- the default: redis-py's ``Script`` (EVALSHA, SCRIPT LOAD and again on NOSCRIPT: after a
  restart or a failover, whose new master never saw our SCRIPT LOAD). On a Cluster client
  that also follows MOVED and ASK, and reloads on the node that answered NOSCRIPT.
- several in a Cluster pipeline (a round trip on a Cluster): EVALSHA, each addressed to its
  slot's master, and the calls refused NOSCRIPT again once the script is loaded on every
  master (``RoundTrip._cluster_pipeline``). It used to send EVAL with the whole source (40 to
  57 KB a call, which Redis hashed each time to find its cached script): on a Cluster that
  was most of Redis's CPU per message outside the scripts.
- a write of ``WAITED`` when ``wait_replicas`` > 0: the script and ``WAIT n timeout`` in one
  non-transactional pipeline on one connection (WAIT counts the writes of its own
  connection), on the master that owns the keys' slot. Fewer replicas than ``n`` in time
  raises ``ReplicaWaitTimeout`` (code 500): the write is done on the master but not known to
  be replicated; a retry with the same msgId is safe.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import redis
from redis.cluster import ClusterPipeline, RedisCluster
from redis.commands.core import Script
from redis.exceptions import (
    AskError,
    MovedError,
    NoScriptError,
    RedisClusterException,
    TryAgainError,
)

from .errors import Unavailable

# The transitions whose answer promises a durable write to the client.
WAITED = ("send", "ack", "nack")
# Attempts of a waited call through NOSCRIPT, MOVED and ASK (a resharding moves a slot in
# steps; each answer says where to go next).
WAIT_ATTEMPTS = 5
TRYAGAIN_PAUSE_S = 0.05


class ReplicaWaitTimeout(Unavailable):
    """WAIT saw fewer replicas than redis-wait-replicas acknowledge the write in time."""


# How one call of a round trip run call by call can fail: Redis's answer, the Cluster
# client's, or ScriptRunner's own (ReplicaWaitTimeout; a slot that kept moving).
CALL_FAILURES = (redis.RedisError, RedisClusterException, Unavailable)


class ScriptRunner:
    def __init__(self, client, wait_replicas: int = 0, wait_timeout_ms: int = 1000) -> None:
        self.client = client
        self.wait_replicas = wait_replicas
        self.wait_timeout_ms = wait_timeout_ms
        self.cluster = isinstance(client, RedisCluster)

    def run(self, name: str, script: Script, keys: Sequence[str], args: Sequence[Any],
            client=None) -> Any:
        if isinstance(client, ClusterPipeline):
            return client.execute_command("EVAL", script.script, len(keys), *keys, *args)
        if client is None and self.wait_replicas > 0 and name in WAITED:
            return self._run_and_wait(name, script, keys, args)
        return script(keys=list(keys), args=list(args), client=client)

    # -- script + WAIT on one connection -------------------------------------------------
    def _run_and_wait(self, name: str, script: Script, keys: Sequence[str],
                      args: Sequence[Any]) -> Any:
        asking = None
        for _ in range(WAIT_ATTEMPTS):
            target = self._target(keys[0], asking)
            pipe = target.pipeline(transaction=False)
            if asking is not None:
                pipe.execute_command("ASKING")
            pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
            pipe.execute_command("WAIT", self.wait_replicas, self.wait_timeout_ms)
            try:
                *_, result, acked = pipe.execute(raise_on_error=False)
            except (redis.ConnectionError, redis.TimeoutError):
                # Not retried here (a nack that ran must not run twice): answer 500, and let
                # the next call find the slot's new master (a dead node: a failover).
                if self.cluster:
                    self._refresh()
                raise
            asking = None
            if isinstance(result, NoScriptError):
                target.script_load(script.script)   # nothing ran: load it there, run again
                continue
            if isinstance(result, MovedError):
                self.client.nodes_manager.move_slot(result)
                continue
            if isinstance(result, AskError):
                asking = (result.host, result.port)
                continue
            if isinstance(result, TryAgainError):
                time.sleep(TRYAGAIN_PAUSE_S)  # the slot's keys are mid-migration
                continue
            if isinstance(result, Exception):
                raise result
            if isinstance(acked, Exception):
                raise acked
            if int(acked) < self.wait_replicas:
                raise self.wait_timeout(name, acked)
            return result
        raise Unavailable(f"{name}: the keys' slot kept moving ({WAIT_ATTEMPTS} redirections)")

    def wait_timeout(self, name: str, acked: Any) -> ReplicaWaitTimeout:
        """The error of a write WAIT could not confirm (``acked``: replicas, or WAIT's error)."""
        return ReplicaWaitTimeout(
            f"redis-wait-replicas: {name} is written on the master but only {acked} of "
            f"{self.wait_replicas} replicas confirmed it within {self.wait_timeout_ms} ms "
            f"(redis-wait-timeout-millis); a retry with the same msgId is safe")

    def _refresh(self) -> None:
        try:
            self.client.nodes_manager.initialize()
        except (redis.RedisError, RedisClusterException):
            pass  # the cluster client refreshes again on its own next failure

    def _target(self, key: str, asking: tuple[str, int] | None) -> redis.Redis:
        """A client whose pipeline runs on one connection to the keys' master."""
        if not self.cluster:
            return self.client
        manager = self.client.nodes_manager
        if asking is not None:
            node = manager.get_node(host=asking[0], port=asking[1])
            if node is None:
                manager.initialize()
                node = manager.get_node(host=asking[0], port=asking[1])
        else:
            node = self.client.get_node_from_key(key)
        if node is None or node.redis_connection is None:
            manager.initialize()
            node = self.client.get_node_from_key(key)
        return node.redis_connection


@dataclass(frozen=True)
class ScriptCall:
    """One script call of a round trip, and how its reply is read (``replies.BUILDERS``)."""

    name: str
    script: Script
    keys: list
    args: list
    build: Callable[[Any], Any]
    entries: int | None = None   # a call of many entries (send, ack): how many; else None


class RoundTrip:
    """Script calls (and plain commands after them) sent to Redis in one round trip.

    Pass it as ``trip`` to any ``Scripts`` method (the call is queued, not run), then
    ``execute()``. redis-py's own pipelines check every script with SCRIPT EXISTS first, a
    second round trip per request; here each call is a bare EVALSHA, and a call answered
    NOSCRIPT (Redis restarted or failed over: the script did nothing) is loaded and run again,
    alone. Each call is atomic on its own; a call that fails answers its exception in its
    place and the others stand.

    With ``redis-wait-replicas`` one WAIT ends the round trip and covers every call (WAIT
    counts the writes of its own connection): too few replicas in time, and every write in
    the round trip answers ``ReplicaWaitTimeout``. On a Cluster the calls run as EVAL in a
    Cluster pipeline (redis-py refuses EVALSHA there), and a round trip that must WAIT there
    runs call by call through ``ScriptRunner``, each call answering its own failure (its
    ``ReplicaWaitTimeout`` too) in its place.
    """

    def __init__(self, runner: ScriptRunner, client: Any = None) -> None:
        """``client``: the connection to use, where it is not the runner's own."""
        self.runner = runner
        self.client = client or runner.client
        self._calls: list[ScriptCall] = []
        self._commands: list[tuple[tuple, dict]] = []

    def add(self, call: ScriptCall) -> None:
        self._calls.append(call)

    def command(self, *args: Any, **options: Any) -> None:
        """A plain command sent after the scripts, and sent again after them when some are
        run again (NOSCRIPT), so it sees their writes: an idempotent one (``options``:
        redis-py's parsing, e.g. ``withscores=True``)."""
        self._commands.append((args, options))

    def execute(self, raise_on_error: bool = False) -> list[Any]:
        """One answer per entry of the script calls, then one per plain command, in order.

        An entry's answer is its script's typed reply or the exception it failed with; a call
        of many entries answers one per entry (its exception for each, if the whole call
        failed). ``raise_on_error``: raise the first exception instead, once every call ran.
        """
        if not self._calls and not self._commands:
            return []
        waits = self.runner.wait_replicas > 0 and any(
            call.name in WAITED for call in self._calls)
        if len(self._calls) == 1 and not self._commands:
            raw = [self._alone(self._calls[0])]
        elif self.runner.cluster:
            raw = self._one_by_one() if waits else self._cluster_pipeline()
        else:
            raw = self._pipelined(waits)
        answers: list[Any] = []
        for call, answer in zip(self._calls, raw):
            if isinstance(answer, Exception):
                answers.extend([answer] * (call.entries or 1))
            elif call.entries is None:
                answers.append(call.build(answer))
            else:
                answers.extend(call.build(answer))
        answers.extend(raw[len(self._calls):])
        if raise_on_error:
            for answer in answers:
                if isinstance(answer, Exception):
                    raise answer
        return answers

    def _alone(self, call: ScriptCall) -> Any:
        """A round trip of one script call: a bare EVALSHA, no pipeline around it (redis-py's
        ``Script`` loads the script and runs it again on NOSCRIPT; with WAIT, ScriptRunner's
        one pipeline). A refusal of Redis or of the runner answers in its place, as in a
        pipeline; a lost connection raises, as a pipeline's does."""
        client = None if self.client is self.runner.client else self.client
        try:
            return self.runner.run(call.name, call.script, call.keys, call.args, client)
        except (redis.ResponseError, Unavailable) as exc:
            return exc

    def _pipelined(self, waits: bool) -> list[Any]:
        """Every call as a bare EVALSHA in one pipeline; the calls refused NOSCRIPT again."""
        def send(pending: list[int], attempt: int) -> list[Any]:
            pipe = self.client.pipeline(transaction=False)
            for i in pending:
                call = self._calls[i]
                pipe.execute_command("EVALSHA", call.script.sha, len(call.keys), *call.keys,
                                     *call.args)
            for args, options in self._commands:
                pipe.execute_command(*args, **options)
            if waits:
                pipe.execute_command("WAIT", self.runner.wait_replicas,
                                     self.runner.wait_timeout_ms)
            answers = pipe.execute(raise_on_error=False)
            if waits:
                self._check_wait(answers.pop(), pending, answers)
            return answers

        return self._rerun_noscript(send)

    def _rerun_noscript(self, send: Callable[[list[int], int], list[Any]]) -> list[Any]:
        """``send(pending, attempt)`` runs the calls ``pending`` (indexes into the trip's calls)
        and answers theirs, then the commands' it sent; the calls answered NOSCRIPT (nothing
        of theirs ran) are sent once more after their scripts are loaded. One answer per call,
        then the commands' answers of the last attempt that sent them."""
        replies: list[Any] = [None] * len(self._calls)
        command_answers: list[Any] = []
        pending = list(range(len(self._calls)))
        for attempt in (1, 2):
            answers = send(pending, attempt)
            if len(answers) > len(pending):
                command_answers = answers[len(pending):]
            missing = []
            for i, answer in zip(pending, answers):
                if isinstance(answer, NoScriptError) and attempt == 1:
                    missing.append(i)
                else:
                    replies[i] = answer
            if not missing:
                break
            for script in {id(self._calls[i].script): self._calls[i].script
                           for i in missing}.values():
                script.sha = self.client.script_load(script.script)
            pending = missing
        return replies + command_answers

    def _check_wait(self, acked: Any, pending: list[int], answers: list[Any]) -> None:
        """Too few replicas confirmed: each write of the round trip answers ReplicaWaitTimeout."""
        if not isinstance(acked, Exception) and int(acked) >= self.runner.wait_replicas:
            return
        for position, i in enumerate(pending):
            name = self._calls[i].name
            if name in WAITED and not isinstance(answers[position], Exception):
                answers[position] = self.runner.wait_timeout(name, acked)

    def _cluster_pipeline(self) -> list[Any]:
        """Every call as an EVALSHA in one Cluster pipeline, addressed to the master of its
        keys' slot (``target_nodes``: redis-py would otherwise ask a node for the keys of each
        EVALSHA with COMMAND GETKEYS); the calls refused NOSCRIPT (a master that never loaded
        the script: a new one after a failover) run again in a second pipeline once the script
        is loaded on every master. The other commands run once."""
        def send(pending: list[int], attempt: int) -> list[Any]:
            pipe = self.client.pipeline(transaction=False)
            for i in pending:
                call = self._calls[i]
                pipe.execute_command("EVALSHA", call.script.sha, len(call.keys), *call.keys,
                                     *call.args,
                                     target_nodes=self.client.get_node_from_key(call.keys[0]))
            if attempt == 1:
                for args, options in self._commands:
                    pipe.execute_command(*args, **options)
            return pipe.execute(raise_on_error=False)

        return self._rerun_noscript(send)

    def _one_by_one(self) -> list[Any]:
        """Each call on its own (a Cluster round trip that must WAIT): a call that fails,
        its WAIT included, answers its error in its place and the calls after it still run,
        as in one pipeline."""
        answers: list[Any] = []
        for call in self._calls:
            try:
                answers.append(self.runner.run(call.name, call.script, call.keys, call.args))
            except CALL_FAILURES as exc:
                answers.append(exc)
        for args, options in self._commands:
            try:
                answers.append(self.client.execute_command(*args, **options))
            except CALL_FAILURES as exc:
                answers.append(exc)
        return answers
