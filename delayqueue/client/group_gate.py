"""GroupGate: a Consumer runs at most one message of a group at a time, the rest in order.

The server already hands out one message of a group at a time, but a consumer can still get
a second while one runs: the running message's ack deadline passed (a heartbeat that did not
get through, ``heartbeat=False``) and it was delivered again, or the server does not know
groups (camellia, an older delayqueue). The gate keeps such a message back until the running
one of its group (its head) has returned, then lets the next through, in the order they
arrived. Ungrouped messages (no groupId) and other groups pass at once.

Not thread-safe on its own: the Consumer calls it with its lock held. What it holds back is
at most what the consumer pulled (each held message keeps the consume thread it was pulled
for), so its memory is bounded by the consume threads.
"""

from __future__ import annotations

from collections import deque
from typing import Generic, TypeVar

T = TypeVar("T")


class GroupGate(Generic[T]):
    """Groups with a message running, each with the messages blocked behind it (FIFO)."""

    def __init__(self) -> None:
        self._blocked: dict[str, deque[T]] = {}

    def enter(self, group_id: str | None, item: T) -> bool:
        """True: run ``item`` now (it is its group's head); False: it waits behind the head."""
        if not group_id:
            return True
        waiting = self._blocked.get(group_id)
        if waiting is None:
            self._blocked[group_id] = deque()
            return True
        waiting.append(item)
        return False

    def leave(self, group_id: str | None) -> T | None:
        """The head of ``group_id`` returned: the next to run (the new head), or None when
        none waits (the group has nothing running any more)."""
        if not group_id or group_id not in self._blocked:
            return None
        waiting = self._blocked[group_id]
        if waiting:
            return waiting.popleft()
        del self._blocked[group_id]
        return None

    def drain(self) -> list[T]:
        """Take every blocked message (the consumer is stopping); heads stay running."""
        items = [item for waiting in self._blocked.values() for item in waiting]
        for waiting in self._blocked.values():
            waiting.clear()
        return items

    def running(self, group_id: str) -> bool:
        return group_id in self._blocked

    @property
    def blocked(self) -> int:
        """Messages waiting behind their group's head."""
        return sum(len(waiting) for waiting in self._blocked.values())
