"""Python SDK for delayqueue (and any camellia-delay-queue server).

    from delayqueue.client import DelayQueueClient
    client = DelayQueueClient("http://127.0.0.1:8080")
    client.send("orders", "order 42 timed out?", delay_ms=60_000)
    with client.listen("orders", lambda m: print(m.msg) or True):
        ...
"""

from delayqueue.status import Status

from .backoff import Backoff
from .delay_queue_client import DelayQueueClient
from .consumer import Consumer
from .errors import (
    BadRequestError,
    DelayQueueError,
    NotFoundError,
    ServerError,
    UnavailableError,
)
from .model import DelayMsg, MonitorData, TopicInfo

__all__ = [
    "Backoff", "BadRequestError", "Consumer", "DelayMsg", "DelayQueueClient",
    "DelayQueueError", "MonitorData", "NotFoundError", "ServerError", "Status", "TopicInfo",
    "UnavailableError",
]
