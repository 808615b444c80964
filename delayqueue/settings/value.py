"""Values written as text: the one rule for yes/no words and whole numbers.

Request parameters, topic settings, the server's configuration, the SDK and the CLI all read
them, and a value one of them takes must not be refused by another. Booleans follow
camellia's rule: true/false, 1/0, yes/no, on/off in any case. This module imports nothing of
the package, so the SDK may use it.
"""

from __future__ import annotations

import math
from typing import Any

# Each pair is a yes and its no, in the order the documents list them.
BOOLEAN_WORDS = (("true", "false"), ("1", "0"), ("yes", "no"), ("on", "off"))
TRUE_WORDS = frozenset(yes for yes, _ in BOOLEAN_WORDS)
FALSE_WORDS = frozenset(no for _, no in BOOLEAN_WORDS)
BOOLEAN_RULE = "a boolean (" + "/".join(w for pair in BOOLEAN_WORDS for w in pair) + ")"
# 100 years: the longest duration anywhere; it keeps every score exact in Lua doubles.
MAX_DURATION_MS = 100 * 365 * 24 * 3600 * 1000


class ValueProblem(ValueError):
    """A value that is not of its kind, or (``out_of_range``) is but breaks its bounds.

    ``str()`` is "must be <rule>, got <value>": each caller puts the name in front and
    chooses its envelope (a request answers an unconvertible value with HTTP 400 and an out
    of range one with code 400 in HTTP 200).
    """

    def __init__(self, rule: str, raw: Any, out_of_range: bool = False) -> None:
        super().__init__(f"must be {rule}, got {raw!r}")
        self.rule = rule
        self.raw = raw
        self.out_of_range = out_of_range


def integer_rule(low: int | None = None, high: int | None = None) -> str:
    if low is not None and high is not None:
        return f"an integer between {low} and {high}"
    if low == 1:
        return "an integer > 0"
    if low is not None:
        return f"an integer >= {low}"
    if high is not None:
        return f"an integer <= {high}"
    return "an integer"


def parse_bool(raw: Any, rule: str = "true or false") -> bool:
    """A bool, or one of the words in any case and with spaces around."""
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in TRUE_WORDS:
        return True
    if text in FALSE_WORDS:
        return False
    raise ValueProblem(rule, raw)


def parse_int(raw: Any, low: int | None = None, high: int | None = None,
              rule: str | None = None) -> int:
    """An int, a float with no fraction (JSON may send 5.0), or the text of an integer."""
    rule = rule or integer_rule(low, high)
    if isinstance(raw, bool):           # True is an int to Python, not to a request
        raise ValueProblem(rule, raw)
    if isinstance(raw, float) and raw.is_integer():
        value = int(raw)
    elif isinstance(raw, int):
        value = raw
    elif isinstance(raw, str):
        try:
            value = int(raw)
        except ValueError:
            raise ValueProblem(rule, raw) from None
    else:
        raise ValueProblem(rule, raw)
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueProblem(rule, raw, out_of_range=True)
    return value


def parse_number(raw: Any, low: float | None = None, high: float | None = None,
                 rule: str | None = None) -> float:
    """A finite float from a number or its text; NaN and infinities are not numbers here."""
    rule = rule or (f"a number >= {low:g}" if low is not None and high is None else
                    f"a number from {low:g} to {high:g}" if low is not None else "a number")
    if isinstance(raw, bool):
        raise ValueProblem(rule, raw)
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ValueProblem(rule, raw) from None
    if not math.isfinite(value):
        raise ValueProblem(rule, raw)
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueProblem(rule, raw, out_of_range=True)
    return value
