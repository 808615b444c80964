"""Python SDK for delayqueue (and any camellia-delay-queue server).

    from delayqueue.client import DelayQueueClient
    client = DelayQueueClient("http://127.0.0.1:8080")
    client.send("orders", "order 42 timed out?", delay_ms=60_000)
    with client.listen("orders", lambda m: print(m.msg) or True):
        ...

Deliveries carry a receipt (``DelayMsg.receipt``): ``client.ack(msg)`` / ``client.nack(msg)``
send it, and a stale one raises StaleReceiptError (code 409). ``send_batch``, ``ack_batch``,
``delete_batch`` and ``change_visibility_batch`` take up to 1000 entries a request and answer
per entry. A topic is paused and resumed (``pause_topic``), purged (``purge_topic_all``) and
listed by status (``iter_messages``). A recurring schedule (``create_schedule``) sends a
message at each fire time of a cron expression or every N ms. A named subscription
(``create_subscription``) receives its own copy of every message of its topic: consume it with
``subscription=`` on every consuming call, and ``listen(topic, handler, subscription=...)``.
A subscription with a ``push_url`` is pushed instead: the server POSTs each delivery to it
(``push_status`` shows how that fares), and the receiver checks the POST with
``verify_signature`` and reads it with ``PushDelivery.from_body``.
"""

from delayqueue.core.signature import verify_signature
from delayqueue.core.status import Status

from .backoff import Backoff
from .consumer import Consumer
from .delay_queue_client import DelayQueueClient
from .entries import AckEntry, BatchResult, SendEntry, SendResult, VisibilityEntry
from .errors import (
    AccessDeniedError,
    BacklogExceededError,
    BadRequestError,
    DelayQueueError,
    MessageConsumingError,
    NotFoundError,
    RateLimitedError,
    ServerError,
    StaleReceiptError,
    SubscriptionNotFoundError,
    UnavailableError,
    UnsupportedError,
)
from .model import (
    PUSH_SETTINGS,
    TOPIC_SETTINGS,
    DeadLetterPage,
    DelayMsg,
    MessagePage,
    MonitorData,
    PurgeResult,
    Schedule,
    SchedulePage,
    SubscriptionConfig,
    SubscriptionInfo,
    TopicConfig,
    TopicInfo,
)
from .push import PushDelivery, PushFailure, PushStatus

__all__ = [
    "AccessDeniedError", "AckEntry", "Backoff", "BacklogExceededError", "BadRequestError",
    "BatchResult", "Consumer", "DeadLetterPage", "DelayMsg", "DelayQueueClient",
    "DelayQueueError", "MessageConsumingError", "MessagePage", "MonitorData",
    "NotFoundError", "PUSH_SETTINGS", "PurgeResult", "PushDelivery", "PushFailure",
    "PushStatus", "RateLimitedError", "Schedule", "SchedulePage",
    "SendEntry", "SendResult", "ServerError",
    "StaleReceiptError", "Status", "SubscriptionConfig", "SubscriptionInfo",
    "SubscriptionNotFoundError", "TOPIC_SETTINGS", "TopicConfig", "TopicInfo",
    "UnavailableError", "UnsupportedError", "VisibilityEntry", "verify_signature",
]
