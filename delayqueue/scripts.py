"""Loads the Lua scripts once and gives each a typed method.

Every state transition is one script under ``lua/``. ``--@include NAME`` lines paste
``lua/includes/NAME.lua`` in (BullMQ's habit), so shared helpers stay in one file.
redis-py's ``Script`` runs EVALSHA and reloads the script on NOSCRIPT (after a Redis restart
or a failover), so a restarted Redis needs no action from us.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Any, Sequence

import redis
from redis.commands.core import Script

from .keys import NamespaceKeys, TopicKeys

_INCLUDE = re.compile(r"^--@include (\w+)\s*$", re.MULTILINE)


def lua_dir() -> Path:
    """The scripts: shipped inside the wheel, or ``lua/`` beside the package in a checkout."""
    packaged = resources.files("delayqueue") / "lua"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parent.parent / "lua"


def lua_source(name: str, directory: Path | None = None) -> str:
    directory = directory or lua_dir()
    text = (directory / f"{name}.lua").read_text()
    return _INCLUDE.sub(lambda m: (directory / "includes" / f"{m.group(1)}.lua").read_text(), text)


class Scripts:
    """One explicit method per script; keys passed in the order of each script's header."""

    NAMES = ("send", "promote", "pull", "ack", "nack", "delete", "timeout", "expire",
             "due_set", "recycle", "monitor_flush")

    def __init__(self, client: redis.Redis, directory: Path | None = None) -> None:
        self._scripts: dict[str, Script] = {
            name: client.register_script(lua_source(name, directory)) for name in self.NAMES
        }

    def script(self, name: str) -> Script:
        return self._scripts[name]

    def _run(self, name: str, keys: Sequence[str], args: Sequence[Any], client=None) -> Any:
        return self._scripts[name](keys=list(keys), args=list(args), client=client)

    def send(self, tk: TopicKeys, msg_id: str, body: str, now_ms: int, trigger_ms: int,
             ttl_ms: int, max_retry: int, channel: str, client=None) -> list:
        return self._run(
            "send", [tk.waiting, tk.ready, tk.ack, tk.expire, tk.msg(msg_id)],
            [msg_id, body, now_ms, trigger_ms, ttl_ms, max_retry, channel, tk.topic], client,
        )

    def promote(self, tk: TopicKeys, now_ms: int, limit: int, channel: str, client=None) -> list:
        return self._run(
            "promote", [tk.waiting, tk.ready, tk.ack, tk.expire],
            [tk.msg_prefix, now_ms, limit, channel, tk.topic], client,
        )

    def pull(self, tk: TopicKeys, now_ms: int, batch: int, ack_timeout_ms: int,
             end_life_ms: int, promote_limit: int, channel: str) -> list:
        return self._run(
            "pull", [tk.waiting, tk.ready, tk.ack, tk.expire],
            [tk.msg_prefix, now_ms, batch, ack_timeout_ms, end_life_ms, promote_limit,
             channel, tk.topic],
        )

    def ack(self, tk: TopicKeys, msg_id: str, end_life_ms: int) -> list:
        return self._run(
            "ack", [tk.ready, tk.ack, tk.expire, tk.msg(msg_id)], [msg_id, end_life_ms]
        )

    def nack(self, tk: TopicKeys, msg_id: str, now_ms: int, end_life_ms: int,
             channel: str) -> list:
        return self._run(
            "nack", [tk.ready, tk.ack, tk.expire, tk.msg(msg_id)],
            [msg_id, now_ms, end_life_ms, channel, tk.topic],
        )

    def delete(self, tk: TopicKeys, msg_id: str, end_life_ms: int, release: bool) -> list:
        return self._run(
            "delete", [tk.waiting, tk.ready, tk.ack, tk.expire, tk.msg(msg_id)],
            [msg_id, end_life_ms, 1 if release else 0],
        )

    def timeout(self, tk: TopicKeys, now_ms: int, limit: int, end_life_ms: int,
                channel: str, client=None) -> list:
        return self._run(
            "timeout", [tk.ready, tk.ack, tk.expire, tk.waiting],
            [tk.msg_prefix, now_ms, limit, end_life_ms, channel, tk.topic], client,
        )

    def expire(self, tk: TopicKeys, now_ms: int, limit: int, end_life_ms: int,
               client=None) -> list:
        return self._run(
            "expire", [tk.waiting, tk.ready, tk.ack, tk.expire],
            [tk.msg_prefix, now_ms, limit, end_life_ms], client,
        )

    def due_set(self, nk: NamespaceKeys, topic: str, seen_ms: float, next_ms: int,
                client=None) -> int:
        return self._run("due_set", [nk.due], [topic, seen_ms, next_ms], client)

    def recycle(self, nk: NamespaceKeys, topic: str, seen_ms: float) -> int:
        return self._run("recycle", [nk.topics, nk.due], [topic, seen_ms])
