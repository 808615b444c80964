"""What a Lua script reports: one table shared by every script and by Python.

``lua/includes/outcome.lua`` defines the same names with the same numbers (a test keeps the
two equal), so ``-1`` means "no such message" in every script that can say it, and a new
outcome is added in both places or in neither. Positive: the script did something; zero: a
compare-and-set lost to a concurrent write; negative: refused, nothing written.
"""

from __future__ import annotations

from enum import IntEnum


class Outcome(IntEnum):
    OK = 1              # the transition happened
    ACKED_LATE = 2      # ack: accepted after an ack timeout, before the redelivery
    ALREADY_ACKED = 3   # ack: acked before; answered again (idempotent)
    DUPLICATE = 4       # send: a live message has this msgId (or an ended one, inside the
                        # topic's dedupWindowMillis); nothing written
    REPLACED = 5        # send, onDuplicate=replace: the waiting or ready namesake began again
    KEPT = 0            # due_set / recycle: a concurrent write won; the newer value stays
    NO_MESSAGE = -1     # no such message, or it has ended (404)
    NOT_DELIVERED = -2  # ack: waiting, or ready and never delivered (400)
    NOT_CONSUMING = -3  # nack: waiting or ready, not being consumed (400)
    BAD_ARGUMENT = -4   # ARGV malformed: a bug in the caller, never a client's mistake
    STALE_RECEIPT = -5  # the receipt given is not the latest delivery's (409)
    CONSUMING = -6      # reschedule (400), send replace (409): being consumed, cannot change
    BACKLOG = -7        # send: the topic holds maxBacklog live messages (429)
    NOT_WRITTEN = -8    # send, atomic batch: another entry was refused, so none was written
    NO_TOPIC = -9       # pause, purge: the topic holds nothing and has no settings (404)
    OTHER_GROUP = -10   # send, onDuplicate=replace: the replace gives another groupId (400)
    NO_SUBSCRIPTION = -11   # send: defaultSubscription=false and no named subscription (400)
