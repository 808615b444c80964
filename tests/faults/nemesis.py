"""The faults: each ``cycle()`` injects one, holds it, heals it, and returns what it did."""

from __future__ import annotations

import os
import signal
import time

import psutil
import redis

from delayqueue.core.keys import NamespaceKeys

from faults.history import FAIL, OK, UNKNOWN, History, Pause
from faults.workload import CALL_TIMEOUT_S, LONG_POLL_MS, Client
from faults.world import World
from support.wait import wait_until

SCHEDULE_LEASE = NamespaceKeys("dq", "default").lease("schedule")


class Nemesis:
    name = ""
    hold_s = 1.0          # how long the fault stays before it is healed

    def __init__(self, world: World) -> None:
        self.world = world
        self.cycles = 0

    def attach(self, history: History, topics: list[str], period_s: float) -> None:
        """The run's history, workload topics and seconds between two faults, before the
        workload starts: what a nemesis acting through the HTTP API needs (most do not)."""

    def cycle(self) -> str:
        what = self.inject()
        self.cycles += 1
        return what

    def inject(self) -> str:
        raise NotImplementedError


class NodeKill(Nemesis):
    """kill -9 of every process group of one node (gunicorn master and workers), restart."""

    name = "kill -9 of a node"

    def inject(self) -> str:
        node = self.world.nodes[self.cycles % len(self.world.nodes)]
        root = psutil.Process(node.process.pid)
        groups = {os.getpgid(p.pid) for p in [root, *root.children(recursive=True)]}
        for group in groups:
            os.killpg(group, signal.SIGKILL)
        node.process.wait()
        time.sleep(self.hold_s)     # the fault's length, not a wait for a condition
        node.start()
        return f"killed {len(groups)} process group(s) of {node.url}, restarted"


class RedisKill(Nemesis):
    """kill -9 of redis-server, restarted on the same directory (AOF, appendfsync everysec)."""

    name = "kill -9 of Redis (AOF)"

    def inject(self) -> str:
        client = self.world.client()
        try:
            keys_before = client.dbsize()
        finally:
            client.close()
        self.world.redis.stop()     # SIGKILL
        time.sleep(self.hold_s)
        began = time.monotonic()
        self.world.redis.start()
        return (f"killed Redis with {keys_before} keys, restarted from its AOF in "
                f"{time.monotonic() - began:.1f} s")


class ScriptFlush(Nemesis):
    name = "SCRIPT FLUSH"
    hold_s = 0.0

    def inject(self) -> str:
        client = self.world.client()
        try:
            client.script_flush()
        finally:
            client.close()
        return "SCRIPT FLUSH"


class PubsubKill(Nemesis):
    name = "CLIENT KILL TYPE pubsub"
    hold_s = 0.0

    def inject(self) -> str:
        client = self.world.client()
        try:
            killed = client.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
        finally:
            client.close()
        return f"killed {killed} pub/sub connection(s)"


class ClientPause(Nemesis):
    name = "CLIENT PAUSE"
    hold_s = 1.5

    def inject(self) -> str:
        client = self.world.client()
        try:
            client.execute_command("CLIENT", "PAUSE", int(self.hold_s * 1000), "ALL")
        finally:
            client.close()
        time.sleep(self.hold_s)
        return f"CLIENT PAUSE {int(self.hold_s * 1000)} ALL"


class OverMaxmemory(Nemesis):
    """maxmemory set just under what Redis holds: every write is refused until it is lifted."""

    name = "Redis over maxmemory"
    hold_s = 2.0

    def inject(self) -> str:
        client = self.world.client()
        try:
            used = int(client.info("memory")["used_memory"])
            client.config_set("maxmemory", max(used - 1024 * 1024, 1024 * 1024))
            time.sleep(self.hold_s)
        finally:
            client.config_set("maxmemory", 0)
            client.close()
        return f"maxmemory below used_memory {used} for {self.hold_s:g} s"


class LeaseHolderStop(Nemesis):
    """SIGSTOP of the worker holding the schedule lease for twice the lease TTL, then SIGCONT;
    another worker must take the lease over meanwhile."""

    name = "SIGSTOP of the lease holder"

    def __init__(self, world: World) -> None:
        super().__init__(world)
        self.hold_s = 2 * world.settings["lease-ttl-millis"] / 1000.0
        self.takeovers = 0

    def inject(self) -> str:
        pid = self.holder()
        client = self.world.client()
        try:
            token = client.get(SCHEDULE_LEASE)
            os.kill(pid, signal.SIGSTOP)
            try:
                taken = wait_until(lambda: client.get(SCHEDULE_LEASE) not in (None, token),
                                   self.hold_s, interval_s=0.05, message="lease not taken over")
                self.takeovers += bool(taken)
            except AssertionError:
                pass
            time.sleep(max(0.0, self.hold_s / 2))   # the stopped worker stays stopped a while
        finally:
            os.kill(pid, signal.SIGCONT)
            client.close()
        return (f"SIGSTOP of lease holder pid {pid} for ~{self.hold_s:g} s "
                f"(lease taken over {self.takeovers}/{self.cycles + 1})")

    def holder(self) -> int:
        """The worker that renews the lease: its Redis connection, seen through MONITOR
        (the log's "took lease" line would do, but a worker's log may be quiet)."""
        port = wait_until(self._renewing_port, 10, message="no worker renews the lease")
        for pid in self.world.worker_pids():
            try:
                conns = psutil.Process(pid).net_connections(kind="tcp")
            except psutil.Error:
                continue
            if any(c.laddr and c.laddr.port == port for c in conns):
                return pid
        raise AssertionError(f"no worker has the connection from port {port}")

    def _renewing_port(self) -> int | None:
        client = self.world.client(socket_timeout=0.5)
        try:
            with client.monitor() as monitor:
                deadline = time.monotonic() + 2 * self.world.settings["lease-ttl-millis"] / 1e3
                while time.monotonic() < deadline:
                    try:
                        command = monitor.next_command()
                    except redis.TimeoutError:
                        return None     # the connection is dropped after a timeout: again
                    # The holder renews with a script (redis-py Lock.reacquire); the others
                    # keep trying SET NX, which names the key too.
                    if (SCHEDULE_LEASE in command["command"]
                            and command["command"].upper().startswith("EVAL")
                            and command.get("client_type") != "lua"
                            and str(command.get("client_port", "")).isdigit()):
                        return int(command["client_port"])
        finally:
            client.close()
        return None


class TopicPause(Nemesis):
    """pauseTopic on every workload topic through the nodes' HTTP API, held about a third of
    the period, then resumeTopic. Each topic's pause goes into the History, from the pause's
    200 answer to the start of the first resume call: the checker's "delivered while paused"
    holds the server to handing nothing out meanwhile, the usual verdicts to delivering what
    was held once resumed. The hold must outlast a long poll: the consumers' polls in flight at
    the pause are held to their timeout, and only the polls sent after it put the pause to the
    test."""

    name = "pauseTopic / resumeTopic"
    RESUME_WITHIN_S = 30.0    # a resume answered unknown is called again (it must land)

    def __init__(self, world: World) -> None:
        super().__init__(world)
        self.history: History | None = None
        self.topics: list[str] = []
        self.client: Client | None = None

    def attach(self, history: History, topics: list[str], period_s: float) -> None:
        self.history, self.topics = history, topics
        self.hold_s = period_s / 3
        assert self.hold_s > LONG_POLL_MS / 1000, (
            f"a pause of {self.hold_s:g} s ends before a long poll times out: no poll would "
            "be sent while paused")
        self.client = Client(history, self.world.bases)

    def inject(self) -> str:
        assert self.client and self.history, "TopicPause runs attached to a run's history"
        calls = {topic: self.client.call("pause", "pauseTopic", topic, None,
                                         CALL_TIMEOUT_S)[0] for topic in self.topics}
        time.sleep(self.hold_s)     # the fault's length, not a wait for a condition
        refused = []
        for topic, pause in calls.items():
            if pause.outcome == FAIL:   # refused (unknown topic): nothing was paused
                refused.append(topic)
                continue
            resumed_from = self._resume(topic)
            if pause.outcome == OK:
                self.history.pause(Pause(topic, pause.end_ms, resumed_from))
        return (f"paused {len(calls) - len(refused)} topic(s) for {self.hold_s:.1f} s"
                + (f", refused: {refused}" if refused else ""))

    def _resume(self, topic: str) -> float:
        """Resume ``topic`` until an answer says it is done; the first call's start (from
        then on the resume may have acted)."""
        first: float | None = None
        deadline = time.monotonic() + self.RESUME_WITHIN_S
        while True:
            op, answer = self.client.call("resume", "resumeTopic", topic, None, CALL_TIMEOUT_S)
            first = op.start_ms if first is None else first
            if op.outcome != UNKNOWN:
                assert op.outcome == OK, f"resumeTopic {topic} refused: {answer}"
                return first
            if time.monotonic() > deadline:
                raise AssertionError(f"resumeTopic {topic} never answered: {op.detail}")
            time.sleep(0.1)


NEMESES = {cls.__name__: cls for cls in (NodeKill, RedisKill, ScriptFlush, PubsubKill,
                                         LeaseHolderStop, ClientPause, OverMaxmemory,
                                         TopicPause)}
