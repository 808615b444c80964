"""The operator's controls of a topic: pause it, purge it, look into it.

- **Pause** (pause.lua): while paused a topic hands nothing out (pull.lua pops nothing), and
  everything else goes on: sends, promotion, ack timeouts, expiry. Resuming announces the
  ready messages on the hint channel, so long polls held meanwhile answer at once.
- **Purge** (purge.lua): every live message accepted before the call ends with status 7, in
  slices of ``PURGE_SCAN`` records (HSCAN), at most ``limit`` a call; a message sent during
  the purge is left alone (its acceptance sequence is after the cutoff).
- **List** (list.lua): a page of one queue's messages in its own order, after a cursor that
  is the last entry of the previous page, so pages have no gaps or repeats among the
  messages that stayed where they were while the pages were read.

Neither pause nor purge creates a topic: a topic that holds nothing, has no settings and is
not in the registry answers 404.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from .cursor import decode_pair, encode_pair
from .errors import BadRequest, redis_errors
from .message import DelayMsg
from .outcome import Outcome
from .queue import DelayQueue
from .refusal import refusal
from .status import Status

PURGE_SCAN = 100             # records one purge slice visits (HSCAN COUNT: ~5 ms in Redis)
PURGE_LIMIT = 10_000         # most messages one purgeTopic call ends, by default
PURGE_MAX = 1_000_000        # the highest limit a call may ask for
PAGE_BYTES = 4 * 1024 * 1024  # most bytes of delayMsg JSON one listMsg page answers
VIEWS = {Status.WAITING: "waiting", Status.READY: "ready", Status.CONSUMING: "ack"}
BLOCKED = "blocked"          # the view of the messages waiting behind their group's head


@dataclass(frozen=True)
class PurgeResult:
    count: int        # messages ended (status 7) by this call
    remaining: int    # 0 when every message accepted before the call has ended; else the
    #                   topic's live messages when the call stopped at its limit


@dataclass(frozen=True)
class MessagePage:
    messages: list[DelayMsg]
    next_cursor: str | None


def encode_cursor(score: int, member: str) -> str:
    """An entry's place in its view, opaque to clients (URL-safe)."""
    return encode_pair(score, member)


def decode_cursor(cursor: str) -> tuple[int, str]:
    try:
        score, member = decode_pair(cursor)
        if isinstance(score, bool) or not isinstance(score, int) or not isinstance(member, str):
            raise ValueError
    except ValueError:
        raise BadRequest(f"cursor: not a nextCursor of a listMsg page, got {cursor[:64]!r}"
                         ) from None
    return score, member


class TopicControls:
    def __init__(self, queue: DelayQueue) -> None:
        self.queue = queue
        self.scripts = queue.scripts
        self.clock = queue.clock
        self.monitor = queue.monitor

    # -- pause ---------------------------------------------------------------------------
    def pause(self, topic: str, subscription: str | None = None) -> bool:
        """Pause the topic (every subscription), or one named subscription; True when it was
        not paused before."""
        return self._set_paused(topic, True, subscription)

    def resume(self, topic: str, subscription: str | None = None) -> bool:
        """Resume the topic, or one named subscription; True when it was paused."""
        return self._set_paused(topic, False, subscription)

    def _set_paused(self, topic: str, paused: bool, subscription: str | None) -> bool:
        with redis_errors():
            reply = self.scripts.pause(self.queue.context_keys(topic, subscription), paused,
                                       self._registered(topic), self.queue.keys.hint_channel)
        error = refusal("pause", reply.outcome, topic, None)
        if error:
            raise error
        if reply.changed == 1:
            self.monitor.touch(topic)   # no counter records a pause: the size caches' signal
        return reply.changed == 1

    def _registered(self, topic: str) -> bool:
        return self.queue.client.zscore(self.queue.keys.registry_of(topic), topic) is not None

    def known(self, topic: str) -> bool:
        """The topic exists: registered, or holding a record, a sequence or settings (what
        pause.lua calls known). Reads only, one round trip: a console page asking about a
        topic nobody sent to creates nothing."""
        tk = self.queue.topic_keys(topic)
        with redis_errors():
            pipe = self.queue.client.pipeline(transaction=False)
            pipe.zscore(self.queue.keys.registry_of(topic), topic)
            pipe.exists(tk.msgs, tk.seq, tk.config)
            score, held = pipe.execute()
        return score is not None or held > 0

    # -- purge ---------------------------------------------------------------------------
    def purge(self, topic: str, limit: int = PURGE_LIMIT) -> PurgeResult:
        """End every live message accepted before this call (at most ``limit``)."""
        tk = self.queue.topic_keys(topic)
        total, cutoff, cursor = 0, -1, "0"
        with redis_errors():
            if not self._registered(topic) and not self.queue.client.exists(
                    tk.msgs, tk.seq, tk.config):
                raise refusal("pause", Outcome.NO_TOPIC, topic, None)
            while True:
                now = self.clock.now_ms()
                reply = self.scripts.purge(tk, now, self.queue.end_life_ms, cutoff, cursor,
                                           PURGE_SCAN, self.queue.keys.hint_channel,
                                           limit - total, self.queue.defaults)
                total += reply.ended
                cutoff, cursor = reply.cutoff, reply.next_cursor
                self.queue.bookkeep(topic, now, reply.lowered_due)
                if cursor == "0" or total >= limit:
                    break
        self.monitor.incr(topic, "purged", total)
        # Stopped by its limit (perhaps in the scan's last slice, the rest of that slice
        # unvisited): what may remain is the topic's live messages.
        return PurgeResult(total, 0 if total < limit else reply.live)

    # -- list ----------------------------------------------------------------------------
    def list(self, topic: str, view: str, limit: int = 100,
             cursor: str | None = None, subscription: str | None = None) -> MessagePage:
        """A page of the view's messages ("waiting", "ready", "ack" or "blocked"), in the
        default subscription or the named ``subscription``."""
        now = self.clock.now_ms()
        with redis_errors():
            reply = self.scripts.list(self.queue.context_keys(topic, subscription), now, view,
                                      limit, PAGE_BYTES,
                                      decode_cursor(cursor) if cursor else None)
        messages, size = [], 0
        next_cursor = encode_cursor(int(reply.next_score), reply.next_member) \
            if int(reply.next_score) != -1 else None
        for entry in reply.entries:
            message = DelayMsg.from_fields(topic, entry.msg_id, entry.fields,
                                           with_receipt=True)
            message = message.with_place(int(entry.score) if view == "ack" else -1, -1)
            size += len(orjson.dumps(message.to_json())) + 1
            if messages and size > PAGE_BYTES:
                # The page is full: it ends with the entry before, and the next starts here.
                last = reply.entries[len(messages) - 1]
                next_cursor = encode_cursor(int(last.score), last.member)
                break
            messages.append(message)
        return MessagePage(messages, next_cursor)
