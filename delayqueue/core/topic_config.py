"""Per-topic settings (setTopicConfig / getTopicConfig): requests checked, values stored.

The settings themselves, their rules and their spellings are one table,
``delayqueue.settings.topic_setting.SETTINGS``. A topic's own values live in its config hash
(``TopicKeys.config``); every script that needs a setting reads that hash and falls back to
the server's defaults, which Python passes as the last ARGV of the call in ``SETTINGS``
order. So a setting changed on one node applies on every node at the next script call, with
no cache to go stale.
"""

from __future__ import annotations

from typing import Any, Mapping

from delayqueue.settings.config import Settings
from delayqueue.settings.topic_setting import BY_NAME, SCRIPT_SETTINGS, SETTINGS, TopicSetting
from delayqueue.settings.value import ValueProblem

from .errors import BadRequest, MissingParameter

# What setTopicConfig's reset removes from a topic's config hash: its settings, not its pause
# (state) nor its default subscription's push settings (the subscription's, not the topic's).
TOPIC_SETTING_NAMES = tuple(s.name for s in SETTINGS)


def stored(value: Any) -> str:
    """A value as the config hash and the scripts hold it (booleans as 1 / 0)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def loaded(setting: TopicSetting, text: str) -> Any:
    """A value as the config hash holds it, back to its kind."""
    if setting.kind is bool:
        return text == "1"
    return text if setting.kind is str else setting.parse(text)


def server_defaults(settings: Settings) -> list[str]:
    """The server's value of every setting the scripts read, in ``SCRIPT_SETTINGS`` order:
    the scripts' last ARGV."""
    return [stored(getattr(settings, s.field)) for s in SCRIPT_SETTINGS]


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
        # An empty value is absent, except for free text, where it is the empty text.
        if setting.name not in raw or raw[setting.name] is None or (
                raw[setting.name] == "" and setting.kind is not str):
            continue
        try:
            values[setting.name] = setting.parse(raw[setting.name])
        except ValueProblem as problem:
            # Out of range: code 400 in HTTP 200; not convertible: HTTP 400, as any parameter.
            error = BadRequest if problem.out_of_range else MissingParameter
            raise error(f"{setting.name}: {problem}") from None
    return values


def effective(stored_values: Mapping[str, str], settings: Settings) -> tuple[dict, dict]:
    """(value of every setting, where it comes from: "topic" or "server")."""
    data, source = {}, {}
    for setting in SETTINGS:
        text = stored_values.get(setting.name)
        if text is not None:
            data[setting.name], source[setting.name] = loaded(setting, text), "topic"
        else:
            data[setting.name] = getattr(settings, setting.field)
            source[setting.name] = "server"
    return data, source
