"""Message states, with camellia's numbers.

``lua/includes/status.lua`` defines the same names with the same numbers (a test keeps the
two equal), so a script says ``Status.CONSUMING`` where it used to say 3.
"""

from enum import IntEnum


class Status(IntEnum):
    WAITING = 1
    READY = 2
    CONSUMING = 3
    ACKED = 4
    EXPIRED = 5
    RETRY_EXHAUSTED = 6
    DELETED = 7

    @property
    def live(self) -> bool:
        return self <= Status.CONSUMING

    @property
    def ended(self) -> bool:
        return self >= Status.ACKED
