"""Request parameters: one place that reads, converts and validates them.

Parameters come from the query string, a form body, or (ours) a JSON object body. A missing
or unconvertible required parameter is HTTP 400 (as camellia); a value that breaks a rule is
code 400 in an HTTP 200 envelope. A required text parameter sent empty answers by whose
endpoint it is (param_rules.py): on camellia's, as camellia does (code 400, HTTP 200); on
ours, as a missing one. Every message names the parameter and the rule.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

from delayqueue.core.errors import BadRequest, DelayQueueError, MissingParameter
from delayqueue.core.requests import ON_DUPLICATE
from delayqueue.core.subscriptions import subscription_name
from delayqueue.settings.value import (
    BOOLEAN_RULE,
    MAX_DURATION_MS,
    ValueProblem,
    parse_bool,
    parse_int,
)

from .endpoints import OURS
from .param_rules import BROKEN, answer

MAX_ATTRIBUTES = 32               # keys of a message's attributes
MAX_ATTRIBUTES_BYTES = 8192       # their keys and values in all, UTF-8


# Unicode's control characters (category Cc) are exactly these two ranges; one regex search
# is ~20x cheaper than asking unicodedata about every character of every msgId and topic.
CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# A receipt as the scripts make it (lua/includes/message.lua): string.format('%x.%x') of the
# delivery's time in ms and of the deliveries, lowercase hex (16 digits each hold any int64),
# then in a named subscription ".<6 hex digits>" naming it (a receipt is no other's).
RECEIPT_FORM = re.compile(r"[0-9a-f]{1,16}\.[0-9a-f]{1,16}(\.[0-9a-f]{6})?")


def has_control_chars(text: str) -> bool:
    return CONTROL_CHARS.search(text) is not None


class Params:
    def __init__(self, values: Mapping[str, Any], *, max_topic_length: int,
                 max_msg_id_length: int, max_msg_bytes: int, max_batch: int,
                 max_long_polling_timeout_ms: int, origin: str = OURS) -> None:
        self.values = values
        # Whose endpoint reads them (endpoints.py): an empty required text parameter is a
        # value that breaks a rule where the table answers it so (camellia's), else missing.
        self.empty_is_a_value = answer("empty", origin) == BROKEN
        self.max_topic_length = max_topic_length
        self.max_msg_id_length = max_msg_id_length
        self.max_msg_bytes = max_msg_bytes
        self.max_batch = max_batch
        self.max_long_polling_timeout_ms = max_long_polling_timeout_ms

    def _raw(self, name: str) -> Any:
        value = self.values.get(name)
        if isinstance(value, str) and value == "":
            return None
        return value

    def string(self, name: str, required: bool = False) -> str | None:
        value = self._raw(name)
        if value is None:
            if required:
                raise self.required_error(name)
            return None
        if not isinstance(value, str):
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return str(value)
            raise MissingParameter(f"{name}: must be a string")
        return value

    def required_error(self, name: str) -> DelayQueueError:
        """A required text parameter not sent, or sent empty (param_rules.py)."""
        if not self.empty_is_a_value:
            return MissingParameter(f"{name}: required parameter is missing or empty")
        if self.values.get(name) == "":
            return BadRequest(f"{name}: must not be empty")
        return MissingParameter(f"{name}: required parameter is missing")

    def integer(self, name: str) -> int | None:
        value = self._raw(name)
        if value is None:
            return None
        try:
            return parse_int(value)
        except ValueProblem as problem:
            raise MissingParameter(f"{name}: {problem}") from None

    def boolean(self, name: str, default: bool) -> bool:
        value = self._raw(name)
        if value is None:
            return default
        try:
            return parse_bool(value, BOOLEAN_RULE)
        except ValueProblem as problem:
            raise MissingParameter(f"{name}: {problem}") from None

    # -- named parameters ----------------------------------------------------------------
    def topic(self) -> str:
        topic = self.string("topic", required=True)
        if len(topic) > self.max_topic_length:
            raise BadRequest(f"topic: must be at most {self.max_topic_length} characters, "
                             f"got {len(topic)}")
        if "{" in topic or "}" in topic:
            raise BadRequest("topic: must not contain '{' or '}' (they would break Redis "
                             "Cluster hash tags)")
        if has_control_chars(topic):
            raise BadRequest("topic: must not contain control characters")
        return topic

    def msg_id(self, required: bool = True) -> str | None:
        return self.identifier("msgId", required)

    def group_id(self) -> str | None:
        """A message's group (optional): the msgId rules."""
        return self.identifier("groupId", required=False)

    def identifier(self, name: str, required: bool) -> str | None:
        """An id the client chooses (msgId, groupId): at most max_msg_id_length characters,
        no control characters; empty counts as absent."""
        value = self.string(name, required=required)
        if value is None:
            return None
        if len(value) > self.max_msg_id_length:
            raise BadRequest(f"{name}: must be at most {self.max_msg_id_length} characters, "
                             f"got {len(value)}")
        if has_control_chars(value):
            raise BadRequest(f"{name}: must not contain control characters")
        return value

    def on_duplicate(self) -> str:
        """sendMsg's ``onDuplicate``: "keep" (absent or empty) or "replace"."""
        value = self.string("onDuplicate")
        if value is None:
            return "keep"
        if value not in ON_DUPLICATE:
            shown = value if len(value) <= 40 else value[:40] + "…"
            raise BadRequest(f"onDuplicate: must be keep or replace, got {shown!r}")
        return value

    def subscription(self) -> str | None:
        """The subscription a request addresses (ours): None, the topic's default one, when
        ``subscription`` is absent, empty or ``default``; else a name of 1-64 characters of
        [A-Za-z0-9._-] (code 400 naming ``subscription``). Whether it exists is the core's
        to say (404)."""
        return subscription_name(self.string("subscription"))

    def named_subscription(self, default_allowed: bool = False) -> str | None:
        """A subscription route's own ``subscription``: required (absent or empty: missing,
        as any required parameter of ours); ``default`` only where ``default_allowed``
        (getSubscriptionConfig), answered as None, else code 400."""
        value = self.string("subscription", required=True)
        return subscription_name(value, named=not default_allowed)

    def body(self) -> str:
        body = self.string("msg", required=True)
        size = len(body.encode("utf-8"))
        if size > self.max_msg_bytes:
            raise BadRequest(f"msg: must be at most {self.max_msg_bytes} bytes, got {size}")
        return body

    def duration(self, name: str) -> int | None:
        value = self.integer(name)
        if value is not None and value > MAX_DURATION_MS:
            raise BadRequest(f"{name}: must be at most {MAX_DURATION_MS} ms (100 years), "
                             f"got {value}")
        return value

    def trigger_time(self) -> int | None:
        value = self.integer("triggerTime")
        if value is not None and not 0 <= value <= MAX_DURATION_MS * 3:
            raise BadRequest(f"triggerTime: must be milliseconds since the epoch "
                             f"(0..{MAX_DURATION_MS * 3}), got {value}")
        return value

    def max_retry(self) -> int | None:
        value = self.integer("maxRetry")
        if value is not None and value > 1_000_000:
            raise BadRequest(f"maxRetry: must be at most 1000000, got {value}")
        return value

    def pull_count(self) -> int:
        """camellia's ``batch`` of a pull: the most messages it hands out (1 when absent)."""
        value = self.integer("batch")
        if value is None or value <= 0:
            return 1
        if value > self.max_batch:
            raise BadRequest(f"batch: must be at most {self.max_batch}, got {value}")
        return value

    def long_polling_timeout(self, default_ms: int) -> int:
        value = self.integer("longPollingTimeoutMillis")
        if value is None or value <= 0:
            return default_ms
        if value > self.max_long_polling_timeout_ms:
            raise BadRequest(f"longPollingTimeoutMillis: must be at most "
                             f"{self.max_long_polling_timeout_ms}, got {value}")
        return value

    # -- failure handling and topic settings (ours) ----------------------------------------
    def receipt(self) -> str | None:
        """A receipt of the form the scripts make (hex.hex, in a named subscription
        hex.hex.hex): one that is not the latest
        delivery's answers 409 (stale). A string of another form cannot be any delivery's
        receipt, so calling it stale would send the caller looking for a redelivery that never
        happened (a truncated paste, the msgId given in its place): that is code 400."""
        value = self.string("receipt")
        if value is not None and not RECEIPT_FORM.fullmatch(value):
            shown = value if len(value) <= 40 else value[:40] + "…"
            raise BadRequest(f"receipt: malformed: {shown!r} is not a receipt (two lowercase "
                             "hex numbers joined by a dot, a third in a named subscription, "
                             "as pullMsg hands them out)")
        return value

    def non_negative(self, name: str, required: bool = False) -> int | None:
        value = self.duration(name)
        if value is None and required:
            raise MissingParameter(f"{name}: required parameter is missing or empty")
        if value is not None and value < 0:
            raise BadRequest(f"{name}: must be >= 0, got {value}")
        return value

    def limit(self, default: int) -> int:
        value = self.integer("limit")
        if value is None:
            return default
        if not 1 <= value <= self.max_batch:
            raise BadRequest(f"limit: must be between 1 and {self.max_batch}, got {value}")
        return value

    def attributes(self) -> dict[str, str] | None:
        """``attributes``: a JSON object of string keys to string values (JSON text in a form)."""
        value = self._raw("attributes")
        if value is None:
            return None
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                raise BadRequest("attributes: must be a JSON object of strings to strings, "
                                 "and this is not valid JSON") from None
        if not isinstance(value, dict):
            raise BadRequest(f"attributes: must be a JSON object of strings to strings, got "
                             f"a {type(value).__name__}")
        if len(value) > MAX_ATTRIBUTES:
            raise BadRequest(f"attributes: at most {MAX_ATTRIBUTES} keys, got {len(value)}")
        size = 0
        for key, text in value.items():
            if not isinstance(text, str):
                raise BadRequest(f"attributes: the value of {key!r} must be a string, got a "
                                 f"{type(text).__name__}")
            if not key or has_control_chars(key):
                raise BadRequest("attributes: keys must be non-empty, without control "
                                 "characters")
            size += len(key.encode("utf-8")) + len(text.encode("utf-8"))
        if size > MAX_ATTRIBUTES_BYTES:
            raise BadRequest(f"attributes: keys and values must be at most "
                             f"{MAX_ATTRIBUTES_BYTES} bytes in all (UTF-8), got {size}")
        return value or None
