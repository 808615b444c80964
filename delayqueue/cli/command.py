"""CommandHandler: a Consumer handler that runs a command per message, body on stdin."""

from __future__ import annotations

import json
import logging
import os
import subprocess
from typing import Mapping, Sequence

from delayqueue.client.model import DelayMsg

logger = logging.getLogger(__name__)


class CommandHandler:
    """Run ``argv`` with the body on stdin: exit 0 acks, anything else (or a timeout) nacks.

    The command also gets the message's metadata in its environment:
    ``DELAYQUEUE_MSG_TOPIC``, ``DELAYQUEUE_MSG_ID``, ``DELAYQUEUE_MSG_RETRY`` (1 on the first
    delivery), ``DELAYQUEUE_MSG_MAX_RETRY``, ``DELAYQUEUE_MSG_TRIGGER_TIME`` (epoch ms),
    ``DELAYQUEUE_MSG_GROUP_ID`` when it is in a group, and ``DELAYQUEUE_MSG_SUBSCRIPTION``
    when the consumer consumes a named subscription.
    Its stdout and stderr are the consumer's own.
    """

    def __init__(self, argv: Sequence[str], timeout_s: float | None = None,
                 env: Mapping[str, str] | None = None, subscription: str | None = None) -> None:
        if not argv:
            raise ValueError("a command is required")
        self.argv = list(argv)
        self.timeout_s = timeout_s
        self.env = dict(os.environ if env is None else env)
        if subscription:
            self.env["DELAYQUEUE_MSG_SUBSCRIPTION"] = subscription

    def __call__(self, m: DelayMsg) -> bool:
        env = {**self.env, "DELAYQUEUE_MSG_TOPIC": m.topic, "DELAYQUEUE_MSG_ID": m.msg_id,
               "DELAYQUEUE_MSG_RETRY": str(m.retry), "DELAYQUEUE_MSG_MAX_RETRY": str(m.max_retry),
               "DELAYQUEUE_MSG_TRIGGER_TIME": str(m.trigger_time)}
        if m.group_id:
            env["DELAYQUEUE_MSG_GROUP_ID"] = m.group_id
        if m.attributes:
            env["DELAYQUEUE_MSG_ATTRIBUTES"] = json.dumps(dict(m.attributes), ensure_ascii=False)
        try:
            done = subprocess.run(self.argv, input=m.msg.encode(), env=env,
                                  timeout=self.timeout_s, check=False)
        except subprocess.TimeoutExpired:
            logger.warning("%s/%s: command ran over %.1fs; killed, nacking", m.topic, m.msg_id,
                           self.timeout_s)
            return False
        except OSError as exc:
            logger.warning("%s/%s: command could not run: %s; nacking", m.topic, m.msg_id, exc)
            return False
        if done.returncode != 0:
            logger.warning("%s/%s: command exited %d; nacking", m.topic, m.msg_id,
                           done.returncode)
            return False
        logger.info("%s/%s: command exited 0; acking", m.topic, m.msg_id)
        return True
