"""Python SDK for delayqueue (and any camellia-delay-queue server).

    from delayqueue.client import DelayQueueClient
    client = DelayQueueClient("http://127.0.0.1:8080")
    client.send("orders", "order 42 timed out?", delay_ms=60_000)
    with client.listen("orders", lambda m: print(m.msg) or True):
        ...

Deliveries carry a receipt (``DelayMsg.receipt``): ``client.ack(msg)`` / ``client.nack(msg)``
send it, and a stale one raises StaleReceiptError (code 409).
"""

from delayqueue.status import Status

from .backoff import Backoff
from .consumer import Consumer
from .delay_queue_client import DelayQueueClient
from .errors import (
    AccessDeniedError,
    BadRequestError,
    DelayQueueError,
    NotFoundError,
    RateLimitedError,
    ServerError,
    StaleReceiptError,
    UnavailableError,
)
from .model import TOPIC_SETTINGS, DeadLetterPage, DelayMsg, MonitorData, TopicConfig, TopicInfo

__all__ = [
    "AccessDeniedError", "RateLimitedError",
    "Backoff", "BadRequestError", "Consumer", "DeadLetterPage", "DelayMsg", "DelayQueueClient",
    "DelayQueueError", "MonitorData", "NotFoundError", "ServerError", "StaleReceiptError",
    "Status", "TOPIC_SETTINGS", "TopicConfig", "TopicInfo", "UnavailableError",
]
