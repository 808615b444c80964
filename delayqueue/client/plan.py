"""Plans: an API call written once, apart from how its requests travel.

A plan is a generator: it checks its arguments, yields each ``Request`` it needs and is sent
back that request's envelope (or has the request's DelayQueueError thrown in), and returns
the call's result. DelayQueueClient drives plans with its blocking transport (``run``); the
asyncio client (delayqueue.aio) drives the same plans with an awaiting one, so both clients
take the same arguments, refuse the same mistakes and read the answers the same way.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Concatenate, Generator, Mapping, ParamSpec, TypeVar

if TYPE_CHECKING:
    from .transport import Transport

T = TypeVar("T")
P = ParamSpec("P")
Envelope = dict[str, Any]


@dataclass(frozen=True)
class Request:
    """One POST to ``/camellia/delayQueue/<endpoint>``: a form (``params``) or, for the batch
    endpoints, a JSON ``body``. ``idempotent``: safe to send again to another node after an
    answer was lost; ``read_timeout_s``: longer than the client's (a long poll)."""

    endpoint: str
    params: Mapping[str, Any] | None = None
    idempotent: bool = False
    read_timeout_s: float | None = None
    body: bytes | None = None


Plan = Generator[Request, Envelope, T]


def run(plan: Plan[T], transport: "Transport") -> T:
    """Carry a plan out with the blocking transport; its result (or its exception)."""
    try:
        request = next(plan)
        while True:
            try:
                envelope = transport.send(request)
            except Exception as exc:  # noqa: BLE001 - the plan decides what an error means
                request = plan.throw(exc)
            else:
                request = plan.send(envelope)
    except StopIteration as done:
        return done.value


def blocking(plan: Callable[Concatenate[Any, P], Plan[T]]) -> Callable[Concatenate[Any, P], T]:
    """A DelayQueueClient method from a ``Plans`` method: same name, arguments and docstring,
    returning the plan's result."""
    @functools.wraps(plan)
    def method(self: Any, *args: P.args, **kwargs: P.kwargs) -> T:
        return run(plan(self._plans, *args, **kwargs), self._transport)
    method.__signature__ = result_signature(plan)  # type: ignore[attr-defined]
    return method


def result_signature(plan: Callable[..., Any]) -> inspect.Signature:
    """A plan's signature as its client method's: returning the plan's result, not the plan
    (``Plan[DelayMsg]`` shows as ``DelayMsg``)."""
    signature = inspect.signature(plan)
    result = signature.return_annotation
    if isinstance(result, str) and result.startswith("Plan[") and result.endswith("]"):
        signature = signature.replace(return_annotation=result[len("Plan["):-1])
    return signature
