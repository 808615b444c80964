"""Push delivery in the console: a subscription's push panel and its push settings form.

A push subscription (one with a ``pushUrl``, the default subscription included) is shown
with a "push" badge and its URL wherever the console lists the topic's subscriptions, and its
page (the topic page for the default) has a push panel: the URL, timeout, concurrency,
whether pushes are signed (``pushSecretSet``: the secret itself is never read back), whether
it is paused, its deliveries in flight fleet-wide, and its last failures newest first
(core/subscriptions.py ``push_status``; background/push.py writes them). A pull subscription
has no panel, only the form that makes it a push one.

The push settings form posts to the settings form's route (``console.settings``) with the
push fields only; ``push_form`` tells it apart by its ``pushUrl`` field, which it always
carries:

- ``pushUrl`` holds the current URL: written when it differs (an emptied field stops pushing);
- ``pushTimeoutMillis`` and ``pushConcurrency``: empty is unchanged;
- ``pushSecret`` is a password field, empty is unchanged: the secret is write-only. The
  separate "Forget the secret" form sends ``pushSecret`` empty and no ``pushUrl``: that
  clears it (unsigned pushes from then on).
"""

from __future__ import annotations

from typing import Any, Mapping

from delayqueue.core.subscriptions import PUSH_NAMES, Subscriptions

PUSH_URL = "pushUrl"
PUSH_SECRET = "pushSecret"
ERRORS_SHOWN = 20              # the core keeps at most 20: the table never grows past it
ERROR_CHARS = 160              # an error's excerpt in the table (its title holds the rest)


def push_panel(subs: Subscriptions, topic: str, name: str | None) -> dict[str, Any] | None:
    """The subscription's push status for its panel, None for a pull subscription (no
    panel)."""
    status = subs.push_status(topic, name)
    if not status["pushUrl"]:
        return None
    return {**status, "lastErrors": status["lastErrors"][:ERRORS_SHOWN]}


def is_push_form(values: Mapping[str, Any]) -> bool:
    """A post of the push form (or its "Forget the secret" form): it carries a push field."""
    return any(k in values for k in PUSH_NAMES)


def push_form(values: Mapping[str, Any], current_url: str | None) -> dict[str, Any]:
    """The push settings a push form's post writes (see the module's docstring)."""
    written = {k: v for k, v in values.items()
               if k in PUSH_NAMES and k not in (PUSH_URL, PUSH_SECRET) and v != ""}
    if PUSH_URL in values:
        url = values[PUSH_URL]
        if isinstance(url, str):
            url = url.strip()
        if url != (current_url or ""):
            written[PUSH_URL] = url
        if values.get(PUSH_SECRET) not in (None, ""):
            written[PUSH_SECRET] = values[PUSH_SECRET]
    elif PUSH_SECRET in values:
        written[PUSH_SECRET] = values[PUSH_SECRET]     # "": forget it
    return written


def audited(values: Mapping[str, Any]) -> dict[str, Any]:
    """The push settings for the audit line: the secret as whether it was set or cleared,
    never its value."""
    return {k: (("(cleared)" if v == "" else "(set)") if k == PUSH_SECRET else v)
            for k, v in values.items()}


def saved(values: Mapping[str, Any]) -> str:
    """What the form did, in words, for the page's ``done``."""
    if not values:
        return "push settings unchanged"
    if values.get(PUSH_URL) == "":
        return "push settings saved: push stopped (consumers pull it again)"
    if list(values) == [PUSH_SECRET] and values[PUSH_SECRET] == "":
        return "push secret forgotten: pushes are unsigned"
    return "push settings saved"
