"""The request parameters no log line may carry: their names, and a query string with their
values masked.

``pushSecret`` (a push subscription's signing key) is write-only. The views refuse it in a
query string (subscription_api.py), but the access log writes the request line before any
view could: server/logs.py masks it there with ``redact_query``; the audit line says only
SET or CLEARED (audit.py). Standard library only: gunicorn's master imports this with its logger.
"""

from __future__ import annotations

from urllib.parse import unquote_plus

SECRETS = frozenset({"pushSecret"})
MASK = "***"            # a secret's value in a URL
# A secret in an audit line: whether it was given or emptied, nothing more (the console's
# push form notes the same words).
SET, CLEARED = "(set)", "(cleared)"


def redact_query(text: str) -> str:
    """``text`` (a query string, or a request line or URL holding one) with the value of
    every parameter in SECRETS replaced by MASK; anything else unchanged. A name is compared
    once percent-decoded, as the server reads it (``push%53ecret`` is ``pushSecret``)."""
    head, mark, query = text.partition("?")
    if not mark:
        if "=" not in text:
            return text
        head, query = "", text          # a bare query string (gunicorn's %(q)s)
    tail = ""
    if " " in query:                    # a request line: "GET /path?query HTTP/1.1"
        query, space, rest = query.partition(" ")
        tail = space + rest
    pairs = query.split("&")
    changed = False
    for i, pair in enumerate(pairs):
        name, equals, _ = pair.partition("=")
        if unquote_plus(name) in SECRETS:
            pairs[i] = name + "=" + MASK if equals else pair
            changed = changed or bool(equals)
    if not changed:
        return text
    return head + mark + "&".join(pairs) + tail
