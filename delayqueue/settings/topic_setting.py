"""The topic settings: one table that every place naming them reads.

A topic setting has three spellings: its name in the API and in the topic's config hash
(``ttlMillis``), its keyword in the SDK (``ttl_ms``), and the key of the server's
configuration whose value is the default of every topic (``ttl-millis``, the Settings field
``ttl_millis``). core/topic_config.py checks requests by this table, settings/config.py
declares the defaults by it, the SDK and the CLI name settings by it. Lua cannot import it:
lua/includes/settings.lua lists the names of the scripts' settings (``SCRIPT_SETTINGS``: all
but ``description``, which no script reads) again, in this order (the order of the defaults
the scripts receive as their last ARGV), and tests/core/test_lua_contract.py keeps the two
equal. Like value.py, this module imports nothing of the package but value.py, so the SDK
may use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .value import MAX_DURATION_MS, ValueProblem, parse_bool, parse_int, parse_number


@dataclass(frozen=True)
class TopicSetting:
    name: str                    # the API's name, and the field of the topic's config hash
    sdk: str                     # the SDK's keyword (snake_case, ``_ms`` for milliseconds)
    key: str                     # the configuration key giving the server's default
    kind: type                   # int, float, bool or str: what a value is once parsed
    low: int | None = None       # the bounds of a number, both inclusive
    high: int | None = None      # (str: the most UTF-8 bytes)

    @property
    def field(self) -> str:
        """The Settings attribute of the server's default."""
        return self.key.replace("-", "_")

    @property
    def rule(self) -> str:
        """What a valid value is, as a request's 400 message and the OpenAPI document say."""
        if self.kind is bool:
            return "true or false"
        if self.kind is str:
            return f"text of at most {self.high} bytes (UTF-8) without control characters " \
                   "other than tab and newline"
        if self.kind is float:
            return f"a number from {self.low:g} to {self.high:g}"
        years = " (100 years)" if self.high == MAX_DURATION_MS else ""
        return f"an integer from {self.low} to {self.high}{years}"

    def parse(self, raw: Any) -> Any:
        """The value of ``raw`` by the setting's rule.

        Raises:
            ValueProblem: ``out_of_range`` when it converts but breaks the bounds.
        """
        if self.kind is bool:
            return parse_bool(raw, self.rule)
        if self.kind is str:
            return self._parse_text(raw)
        if self.kind is float:
            return parse_number(raw, self.low, self.high, self.rule)
        return parse_int(raw, self.low, self.high, self.rule)

    def _parse_text(self, raw: Any) -> str:
        if not isinstance(raw, str):
            raise ValueProblem(self.rule, raw)
        if len(raw.encode("utf-8", "surrogatepass")) > (self.high or 0) or any(
                (ord(c) < 32 and c not in "\t\n\r") or ord(c) == 127 for c in raw):
            raise ValueProblem(self.rule, raw if len(raw) <= 40 else raw[:40] + "...",
                               out_of_range=True)
        return raw

    @property
    def in_scripts(self) -> bool:
        """Whether the Lua scripts read it (every setting but the free text)."""
        return self.kind is not str


SETTINGS: tuple[TopicSetting, ...] = (
    TopicSetting("ttlMillis", "ttl_ms", "ttl-millis", int, 1, MAX_DURATION_MS),
    TopicSetting("maxRetry", "max_retry", "max-retry", int, 0, 1_000_000),
    TopicSetting("ackTimeoutMillis", "ack_timeout_ms", "ack-timeout-millis", int,
                 1, MAX_DURATION_MS),
    TopicSetting("redeliveryDelayMillis", "redelivery_delay_ms", "redelivery-delay-millis", int,
                 0, MAX_DURATION_MS),
    TopicSetting("redeliveryBackoffMultiplier", "redelivery_backoff_multiplier",
                 "redelivery-backoff-multiplier", float, 1, 1000),
    TopicSetting("redeliveryMaxDelayMillis", "redelivery_max_delay_ms",
                 "redelivery-max-delay-millis", int, 0, MAX_DURATION_MS),
    TopicSetting("deadLetter", "dead_letter", "dead-letter", bool),
    TopicSetting("deadLetterRetentionMillis", "dead_letter_retention_ms",
                 "dead-letter-retention-millis", int, 1, MAX_DURATION_MS),
    TopicSetting("deadLetterMaxSize", "dead_letter_max_size", "dead-letter-max-size", int,
                 1, 10_000_000),
    # The delay of a send that gives neither delayMillis nor triggerTime (EMQ's queue delay).
    TopicSetting("delayMillis", "delay_ms", "delay-millis", int, 0, MAX_DURATION_MS),
    # Most live messages (1..3) of the topic; a send over it is refused (429). 0: no limit.
    TopicSetting("maxBacklog", "max_backlog", "max-backlog", int, 0, 1_000_000_000),
    # How long after a message ended a re-send of its msgId answers the ended message as a
    # duplicate and enqueues nothing (its record is kept at least this long). 0: no window.
    TopicSetting("dedupWindowMillis", "dedup_window_ms", "dedup-window-millis", int,
                 0, MAX_DURATION_MS),
    # false: the default subscription holds nothing; only named subscriptions receive
    # (a send to a topic with neither is refused).
    TopicSetting("defaultSubscription", "default_subscription", "default-subscription", bool),
    # Free text for operators (the console shows it); no script reads it.
    TopicSetting("description", "description", "topic-description", str, 0, 1024),
)
BY_NAME = {s.name: s for s in SETTINGS}

# A subscription's push delivery (the default subscription's too): its own values only, never
# inherited from the topic; the scripts read them from the subscription's config hash, not
# from SETTING_NAMES. ``key`` names the server's default where there is one.
PUSH_URL_MAX_BYTES = 2048
PUSH_SETTINGS: tuple[TopicSetting, ...] = (
    # Where each delivery is POSTed (http or https; core/push_target.py checks it). Empty: the
    # subscription is pulled, not pushed.
    TopicSetting("pushUrl", "push_url", "push-url", str, 0, PUSH_URL_MAX_BYTES),
    # Connect and read timeout of one POST.
    TopicSetting("pushTimeoutMillis", "push_timeout_ms", "push-timeout-millis", int,
                 100, 600_000),
    # Deliveries in flight for the subscription across the fleet.
    TopicSetting("pushConcurrency", "push_concurrency", "push-concurrency", int, 1, 10_000),
    # The HMAC-SHA256 key of X-DelayQueue-Signature: write-only, never answered or logged.
    TopicSetting("pushSecret", "push_secret", "push-secret", str, 0, 256),
)
PUSH_BY_NAME = {s.name: s for s in PUSH_SETTINGS}
SCRIPT_SETTINGS: tuple[TopicSetting, ...] = tuple(s for s in SETTINGS if s.in_scripts)
