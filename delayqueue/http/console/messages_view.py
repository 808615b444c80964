"""The "Messages" section of the topic page and of a subscription's page: one queue of the
topic's default subscription or of a named one, a page at a time.

Each tab is one view of ``TopicControls.list`` (listMsg's pages): the waiting messages by
triggerTime, the ready ones in delivery order, the consuming ones by ack deadline, the ones
blocked behind their group's head in group order. Pages go forward by listMsg's cursor (the
page's ``msgCursor``), so a page costs one script call however deep it is; there is no
"previous" but the first page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from delayqueue.core.errors import BadRequest
from delayqueue.core.topic_controls import BLOCKED, MessagePage, decode_cursor
from delayqueue.http.params import Params
from delayqueue.http.request import runtime


@dataclass(frozen=True)
class Tab:
    name: str        # the page's ``view`` parameter
    label: str
    view: str        # TopicControls.list's view
    size_field: str  # the getTopicInfo field counting its messages


TABS = (
    Tab("waiting", "Waiting", "waiting", "waitingQueueSize"),
    Tab("ready", "Ready", "ready", "readyQueueSize"),
    Tab("consuming", "Consuming", "ack", "ackQueueSize"),
    Tab("blocked", "Group-blocked", BLOCKED, "groupBlockedSize"),
)
BY_TAB = {t.name: t for t in TABS}
MSG_PAGE_SIZES = (25, 50, 100)
DEFAULT_SIZE = 25


@dataclass(frozen=True)
class MessagesSection:
    tab: Tab
    size: int
    cursor: str | None     # the cursor this page starts after (None: the first page)
    page: MessagePage


def default_tab(info: dict[str, Any]) -> Tab:
    """Without ``view``: the first tab with messages (getTopicInfo's sizes), else waiting."""
    return next((t for t in TABS if info[t.size_field]), TABS[0])


def read_section(p: Params, topic: str, info: dict[str, Any],
                 subscription: str | None = None) -> MessagesSection:
    """The page's ``view``, ``size`` and ``msgCursor``, checked, and the page they ask for:
    of the topic's default subscription, or of ``subscription`` (``info``: its sizes)."""
    name = p.string("view") or default_tab(info).name
    if name not in BY_TAB:
        raise BadRequest(f"view: must be one of {', '.join(BY_TAB)}, got {name[:64]!r}")
    size = p.integer("size")
    if size is None:
        size = DEFAULT_SIZE
    elif size not in MSG_PAGE_SIZES:
        raise BadRequest(f"size: must be one of {', '.join(map(str, MSG_PAGE_SIZES))}, "
                         f"got {size}")
    cursor = p.string("msgCursor") or None
    if cursor is not None:
        try:
            decode_cursor(cursor)
        except BadRequest as exc:     # the core names listMsg's parameter; this page's is
            raise BadRequest("msgCursor" + exc.msg.removeprefix("cursor")) from None
    tab = BY_TAB[name]
    return MessagesSection(tab, size, cursor,
                           runtime().controls.list(topic, tab.view, size, cursor,
                                                   subscription=subscription))
