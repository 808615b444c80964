"""Dead letters and topic settings: the operator's side of a topic.

A message that runs out of deliveries (status 6) stays in its topic's dead-letter queue
(``TopicKeys.dead``) when the topic keeps dead letters; from there it can be listed,
redriven (ready again, with a fresh life) or purged. Every change is a Lua script in the
topic's slot; "all" means repeated bounded calls (``SCRIPT_LIMIT`` each), never one long
script. Topic settings live in the topic's config hash and are read by the scripts
themselves (topic_config.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from . import topic_config
from .errors import BadRequest, redis_errors
from .message import DelayMsg
from .outcome import Outcome
from .queue import SCRIPT_LIMIT, DelayQueue
from .refusal import refusal


@dataclass(frozen=True)
class DeadPage:
    messages: list[DelayMsg]
    next_cursor: str | None


def encode_cursor(dead_time_ms: int, slot: str) -> str:
    """The last entry of a page: its death time and its slot in the dead queue (opaque)."""
    return f"{dead_time_ms}:{slot}"


def decode_cursor(cursor: str) -> tuple[int, str]:
    time_text, sep, slot = cursor.partition(":")
    if not sep or not time_text.isdigit():
        raise BadRequest(f"cursor: not a cursor from a previous listDeadMsg page, got "
                         f"{cursor!r}")
    return int(time_text), slot


class TopicAdmin:
    def __init__(self, queue: DelayQueue) -> None:
        self.queue = queue
        self.scripts = queue.scripts
        self.clock = queue.clock
        self.monitor = queue.monitor

    # -- dead letters ------------------------------------------------------------------------
    def list(self, topic: str, limit: int = 100, cursor: str | None = None,
             subscription: str | None = None) -> DeadPage:
        cursor_time, cursor_slot = decode_cursor(cursor) if cursor else (None, "")
        with redis_errors():
            page = self.scripts.dead_list(
                self.queue.context_keys(topic, subscription), self.clock.now_ms(), limit,
                cursor_time, cursor_slot, self.queue.defaults)
        messages = [DelayMsg.from_fields(topic, e.msg_id, e.fields).with_dead_time(e.death_time)
                    for e in page.entries]
        return DeadPage(messages, encode_cursor(page.next_time, page.next_slot)
                        if page.next_time >= 0 else None)

    def redrive(self, topic: str, msg_id: str | None = None,
                limit: int = SCRIPT_LIMIT, subscription: str | None = None) -> int:
        """Dead letters back to ready: the one given, or the oldest ``limit``."""
        with redis_errors():
            now = self.clock.now_ms()
            reply = self.scripts.dead_redrive(
                self.queue.context_keys(topic, subscription), now, msg_id or "", limit,
                self.queue.keys.hint_channel, self.queue.defaults)
            self.queue.bookkeep(topic, now, reply.lowered_due)
        error = refusal("dead_redrive", reply.outcome, topic, msg_id)
        if error:
            raise error
        self.monitor.incr(topic, "redriven", reply.count, subscription=subscription)
        return reply.count

    def purge(self, topic: str, msg_id: str | None = None,
              subscription: str | None = None) -> int:
        """Remove one dead letter, or all of them in bounded slices."""
        tk = self.queue.context_keys(topic, subscription)
        total = 0
        with redis_errors():
            while True:
                reply = self.scripts.dead_purge(tk, msg_id or "", SCRIPT_LIMIT)
                error = refusal("dead_purge", reply.outcome, topic, msg_id)
                if error:
                    raise error
                total += reply.count
                if msg_id or reply.count < SCRIPT_LIMIT:
                    break
        if total:
            self.queue.monitor.touch(topic)   # the size caches' signal: no counter says it
        return total

    def trim(self, topic: str, subscription: str | None = None) -> int:
        """Apply the topic's retention and max size now, in bounded slices."""
        tk = self.queue.context_keys(topic, subscription)
        total = 0
        with redis_errors():
            while True:
                count = self.scripts.dead_trim(tk, self.clock.now_ms(), SCRIPT_LIMIT,
                                               self.queue.defaults)
                total += count
                if count < SCRIPT_LIMIT:
                    break
        if total:
            self.queue.monitor.touch(topic)
        return total

    # -- topic settings ------------------------------------------------------------------------
    def get_config(self, topic: str) -> tuple[dict[str, Any], dict[str, str]]:
        """(effective value of every setting, its source: "topic" or "server")."""
        with redis_errors():
            own = self.queue.client.hgetall(self.queue.topic_keys(topic).config)
        return topic_config.effective(own, self.queue.settings)

    def set_config(self, topic: str, raw: Mapping[str, Any], reset: bool = False
                   ) -> tuple[dict[str, Any], dict[str, str]]:
        """Validate every value first (400, nothing written), then write them in one script."""
        values = topic_config.parse_values(raw, others=("topic", "reset"))
        pairs = [item for name, value in values.items()
                 for item in (name, topic_config.stored(value))]
        with redis_errors():
            outcome = self.scripts.topic_config(self.queue.topic_keys(topic), reset, pairs)
            if outcome != Outcome.OK:
                raise RuntimeError(f"topic_config.lua refused its arguments: {outcome}")
            self.queue.bookkeep(topic, self.clock.now_ms())
        self.trim(topic)
        return self.get_config(topic)
