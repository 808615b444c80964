"""Per-topic settings (setTopicConfig / getTopicConfig): names, rules and server defaults.

A topic's own values live in its config hash (``TopicKeys.config``); every script that needs
a setting reads that hash and falls back to the server's defaults, which Python passes as
the last ARGV of the call in ``SETTINGS`` order (``lua/includes/settings.lua`` has the same
list; a test keeps the two equal). So a setting changed on one node applies on every node at
the next script call, with no cache to go stale.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from delayqueue.settings.config import Settings

from .errors import BadRequest, MissingParameter

MAX_DURATION_MS = 100 * 365 * 24 * 3600 * 1000   # as for the request parameters: 100 years


class OutOfRange(ValueError):
    """A value that converts but breaks the setting's rule (code 400, HTTP 200)."""


@dataclass(frozen=True)
class TopicSetting:
    name: str          # the API's name, and the field in the config hash
    server_key: str    # the Settings attribute giving the server default
    rule: str          # what a valid value is, for the 400 message
    parse: Callable[[Any], Any]


def _integer(low: int, high: int) -> Callable[[Any], int]:
    def parse(raw: Any) -> int:
        if isinstance(raw, bool):
            raise ValueError
        if isinstance(raw, float) and raw.is_integer():
            raw = int(raw)
        value = int(raw) if isinstance(raw, int) else int(str(raw).strip())
        if not low <= value <= high:
            raise OutOfRange
        return value
    return parse


def _multiplier(raw: Any) -> float:
    if isinstance(raw, bool):
        raise ValueError
    value = float(raw)
    if not math.isfinite(value):
        raise ValueError
    if not 1 <= value <= 1000:
        raise OutOfRange
    return value


def _boolean(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise ValueError


_MS_RULE = f"an integer from {{}} to {MAX_DURATION_MS} (100 years)"
SETTINGS: tuple[TopicSetting, ...] = (
    TopicSetting("ttlMillis", "ttl_millis", _MS_RULE.format(1), _integer(1, MAX_DURATION_MS)),
    TopicSetting("maxRetry", "max_retry", "an integer from 0 to 1000000",
                 _integer(0, 1_000_000)),
    TopicSetting("ackTimeoutMillis", "ack_timeout_millis", _MS_RULE.format(1),
                 _integer(1, MAX_DURATION_MS)),
    TopicSetting("redeliveryDelayMillis", "redelivery_delay_millis", _MS_RULE.format(0),
                 _integer(0, MAX_DURATION_MS)),
    TopicSetting("redeliveryBackoffMultiplier", "redelivery_backoff_multiplier",
                 "a number from 1 to 1000", _multiplier),
    TopicSetting("redeliveryMaxDelayMillis", "redelivery_max_delay_millis", _MS_RULE.format(0),
                 _integer(0, MAX_DURATION_MS)),
    TopicSetting("deadLetter", "dead_letter", "true or false", _boolean),
    TopicSetting("deadLetterRetentionMillis", "dead_letter_retention_millis",
                 _MS_RULE.format(1), _integer(1, MAX_DURATION_MS)),
    TopicSetting("deadLetterMaxSize", "dead_letter_max_size", "an integer from 1 to 10000000",
                 _integer(1, 10_000_000)),
)
BY_NAME = {s.name: s for s in SETTINGS}


def stored(value: Any) -> str:
    """A value as the config hash and the scripts hold it (booleans as 1 / 0)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def loaded(setting: TopicSetting, text: str) -> Any:
    if setting.parse is _boolean:
        return text == "1"
    return setting.parse(float(text) if setting.parse is _multiplier else text)


def server_defaults(settings: Settings) -> list[str]:
    """The server's value of every setting, in ``SETTINGS`` order: the scripts' last ARGV."""
    return [stored(getattr(settings, s.server_key)) for s in SETTINGS]


def parse_values(raw: Mapping[str, Any], others: tuple[str, ...] = ()) -> dict[str, Any]:
    """Validate the settings a request gives (absent ones are skipped), all before any write.
    A name that is neither a setting nor one of ``others`` is refused: a typo must not pass
    silently.

    Raises:
        BadRequest: naming the first unknown or invalid setting and its rule.
    """
    unknown = sorted(set(raw) - set(BY_NAME) - set(others))
    if unknown:
        raise BadRequest(f"{unknown[0]}: not a topic setting; the settings are "
                         f"{', '.join(BY_NAME)}")
    values = {}
    for setting in SETTINGS:
        if setting.name not in raw or raw[setting.name] in (None, ""):
            continue
        try:
            values[setting.name] = setting.parse(raw[setting.name])
        except OutOfRange:
            raise BadRequest(f"{setting.name}: must be {setting.rule}, "
                             f"got {raw[setting.name]!r}") from None
        except (TypeError, ValueError):   # not convertible: HTTP 400, as for any parameter
            raise MissingParameter(f"{setting.name}: must be {setting.rule}, "
                                   f"got {raw[setting.name]!r}") from None
    return values


def effective(stored_values: Mapping[str, str], settings: Settings) -> tuple[dict, dict]:
    """(value of every setting, where it comes from: "topic" or "server")."""
    data, source = {}, {}
    for setting in SETTINGS:
        text = stored_values.get(setting.name)
        if text is not None:
            data[setting.name], source[setting.name] = loaded(setting, text), "topic"
        else:
            data[setting.name] = getattr(settings, setting.server_key)
            source[setting.name] = "server"
    return data, source
