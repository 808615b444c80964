"""How a request with a wrong parameter is answered: the one rule, by what is wrong and by
whose endpoint it is (the endpoint table's ``origin``; the batch endpoints apart).

camellia's server reads a parameter with Spring's ``@RequestParam String``, which takes an
empty text as a value: ``msg=`` reaches camellia's own check and is answered HTTP 200 with
code 400. A parameter that is not sent, or that does not convert to its type, is Spring's
HTTP 400. camellia's SDK sends every parameter and throws on any status other than 200,
taking the node out of its list for a while; so on camellia's endpoints an empty required
text parameter is answered as camellia answers it. Our endpoints keep our rule: empty counts
as absent, HTTP 400. A JSON body that is not an object of parameters is HTTP 400 on every
endpoint: camellia's server reads no JSON body, so to it such a request's parameters are absent.

params.py answers the empty case from this table; docs/api.md ("Parameter errors") is
``markdown_table()``, and /openapi.json describes each operation's answers from ``CASES``.
tests/http/test_param_rules.py holds the server and /openapi.json to the table, endpoint by
endpoint; tests/test_docs.py holds docs/api.md's copy to ``markdown_table()``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .endpoints import BATCH, CAMELLIA, OURS, Endpoint

BATCH_BODY = "batch"    # the third column: our batch endpoints' body (topic, entry list)


@dataclass(frozen=True)
class Answer:
    http: int           # the HTTP status
    code: int           # the envelope's code

    def __str__(self) -> str:
        return f"HTTP {self.http}, code {self.code}"


REFUSED = Answer(400, 400)          # HTTP 400: the request is not one the endpoint takes
BROKEN = Answer(200, 400)           # code 400 in an HTTP 200 envelope: a value breaks a rule


@dataclass(frozen=True)
class Case:
    name: str
    when: str                       # markdown: what the request did, with examples
    answers: dict[str, Answer]      # by column: CAMELLIA, OURS, BATCH_BODY


def _case(name: str, when: str, camellia: Answer, ours: Answer, batch: Answer) -> Case:
    return Case(name, when, {CAMELLIA: camellia, OURS: ours, BATCH_BODY: batch})


CASES: tuple[Case, ...] = (
    _case("absent", "a required parameter not sent (or JSON `null`): `sendMsg` without `msg`",
          REFUSED, REFUSED, REFUSED),
    _case("empty", "a required text parameter (`topic`, `msgId`, `msg`) sent empty: `msg=`",
          BROKEN, REFUSED, REFUSED),
    _case("unconvertible", "a value that is not of its type: `delayMillis=abc`, "
          "`ack=perhaps`, a JSON list for a string", REFUSED, REFUSED, REFUSED),
    _case("out of range", "a value that breaks its rule: `batch=5000`, a `topic` with `{`, "
          "`msgId` over 256 characters", BROKEN, BROKEN, REFUSED),
    _case("malformed body", "a `Content-Type: application/json` body that is not JSON, or "
          "not a JSON object", REFUSED, REFUSED, REFUSED),
)
BY_CASE = {c.name: c for c in CASES}
COLUMNS = {CAMELLIA: "camellia's endpoints", OURS: "our endpoints",
           BATCH_BODY: "our batch endpoints"}


def column(endpoint: Endpoint) -> str:
    """The table's column an endpoint answers by."""
    return BATCH_BODY if endpoint.kind == BATCH else endpoint.origin


def answer(case: str, of: str) -> Answer:
    """What ``case`` answers in column ``of``."""
    return BY_CASE[case].answers[of]


def cases_answered(of: str, answered: Answer) -> list[str]:
    """The cases column ``of`` answers with ``answered``, in the table's order."""
    return [c.name for c in CASES if c.answers[of] == answered]


def markdown_table() -> str:
    """The table as docs/api.md writes it."""
    lines = ["| parameter | when | " + " | ".join(COLUMNS.values()) + " |",
             "|---" * (2 + len(COLUMNS)) + "|"]
    for c in CASES:
        lines.append(f"| {c.name} | {c.when} | "
                     + " | ".join(str(c.answers[k]) for k in COLUMNS) + " |")
    return "\n".join(lines)
