"""The faults: each ``cycle()`` injects one, holds it, heals it, and returns what it did."""

from __future__ import annotations

import os
import signal
import time

import psutil
import redis

from delayqueue.core.keys import NamespaceKeys

from faults.world import World
from support.wait import wait_until

SCHEDULE_LEASE = NamespaceKeys("dq", "default").lease("schedule")


class Nemesis:
    name = ""
    hold_s = 1.0          # how long the fault stays before it is healed

    def __init__(self, world: World) -> None:
        self.world = world
        self.cycles = 0

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


NEMESES = {cls.__name__: cls for cls in (NodeKill, RedisKill, ScriptFlush, PubsubKill,
                                         LeaseHolderStop, ClientPause, OverMaxmemory)}
