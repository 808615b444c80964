"""Page cursors: the last place a page reached, as a pair, opaque to clients.

A cursor is the URL-safe base64 (unpadded) of the JSON pair. Each listing keeps its own
typed wrapper (the pair's kinds, and its 400 naming the listing): listMsg's (score,
member) in topic_controls.py, listSchedules' (topic, scheduleId) in schedules.py.
"""

from __future__ import annotations

import base64
import json
from typing import Any


def encode_pair(first: Any, second: Any) -> str:
    text = json.dumps([first, second], ensure_ascii=False, separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode("utf-8")).decode("ascii").rstrip("=")


def decode_pair(cursor: str) -> tuple[Any, Any]:
    """The pair ``encode_pair`` made; ValueError for anything else."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        first, second = json.loads(raw.decode("utf-8"))
    except (ValueError, TypeError, UnicodeDecodeError):
        raise ValueError(f"not a cursor: {cursor[:64]!r}") from None
    return first, second
