"""The push scenario of a fault run: a dedicated topic whose only subscription is a push one
("push": the topic's default subscription is off), POSTing to a receiver in this process that
flaps between answering 200, answering 500, answering after the push timeout (slow) and not
listening at all (down), while a producer sends to the topic and the run's nemesis works.

The receiver records every POST it got (msgId, retry, triggerTime, when it came, what it
answered, whether its signature held); the producer's sends go into a History of their own
(the run's checker reads only the pull topics). After the drain, ``verdict`` holds the run to
push delivery's promises:

- missing: a send answered 200 that the receiver never answered 2xx, and that is not a dead
  letter after exactly maxRetry + 1 deliveries (read with getMsg after the drain); a slow
  answer is a 200 too, which a pusher whose process stalled past its own timeout may still
  read: a message acked whose only 200s were slow ones is not missing (``answered_late``),
  but a slow 200 is not taken for a 2xx by "again after 2xx" (its push mostly timed out);
- too many: a message POSTed more than maxRetry + 1 times (a node killed between its pull
  and its POST counts a delivery the receiver never saw: so at most, never exactly);
- early: a POST received before its send's triggerTime (or the triggerTime it carries);
- unexpected: a POST of an id no client sent, or whose send was refused;
- bad signature: a POST whose X-DelayQueue-Signature does not verify with the secret;
- again after 2xx: a POST received after the receiver answered an earlier POST of the same
  message 2xx in time (within TIMELY_MS of the signature's t=, when the pusher signed it),
  with no fault between that answer and the new POST. One with a fault between (a node
  killed or stopped before its ack, Redis down when it acked) is at-least-once at work:
  counted apart (``again_after_2xx_in_fault``), not a violation; so is one after a 200 that
  came later than that (``again_after_late_2xx``: the receiver runs in the test process,
  beside every client thread, and its thread may start after the pusher timed out).
"""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

import redis

from delayqueue.client import verify_signature
from delayqueue.core.keys import NamespaceKeys

from faults.history import FAIL, OK, History, Op, now_ms
from faults.workload import ADMIN_CALLS_S, CALL_TIMEOUT_S, Client

KEYS = NamespaceKeys("dq", "default")
SUBSCRIPTION = "push"
PUSH_TIMEOUT_MS = 500            # slow answers come after twice this
PUSH_CONCURRENCY = 8
PUSH_MAX_RETRY = 4               # 5 deliveries, then a dead letter
REDELIVERY_DELAY_MS = 200        # the backoff after a nack (a 500, a timeout, down)
SECRET = "fault-run-secret"
# How the receiver spends its time: weights of each mode, and how long one lasts (s).
MODES = {"ok": 0.5, "error": 0.2, "slow": 0.15, "down": 0.15}
FLAP_S = (0.2, 0.8)
ACKED, DEAD = 4, 6                 # Status.ACKED, RETRY_EXHAUSTED, as getMsg answers them
FAULT_MARGIN_MS = 500            # a fault this close to a 2xx answer may have lost its ack
TIMELY_MS = PUSH_TIMEOUT_MS / 2  # a 200 this soon after the POST was sent reached its pusher


@dataclass(frozen=True)
class Post:
    """One POST the receiver got."""

    msg_id: str
    retry: int
    trigger_ms: int
    received_ms: float
    answered_ms: float
    mode: str                    # what the receiver did: ok (200), error (500), slow
    signed: bool
    sent_ms: float = 0           # when the pusher signed it, just before POSTing (t=)

    def timely(self) -> bool:
        """A 200 ("ok") answered well within the push timeout of its sending: its pusher read
        it, unless that process stalled. A later one (the receiver's thread starved in this
        busy test process) may have come after the pusher gave up on it."""
        return self.mode == "ok" and self.answered_ms - self.sent_ms <= TIMELY_MS


def _signed_at(headers, default: float) -> float:
    """The t= of X-DelayQueue-Signature (the pusher's clock, this machine's)."""
    for part in (headers.get("X-DelayQueue-Signature") or "").split(","):
        name, _, value = part.partition("=")
        if name.strip() == "t" and value.strip().isdigit():
            return float(value)
    return default


class Receiver:
    """A local HTTP server on a fixed port, flapping between MODES until ``steady()``."""

    def __init__(self, port: int = 0) -> None:
        self.mode = "ok"
        self.posts: list[Post] = []
        self.modes_seen: dict[str, int] = {}
        self.lock = threading.Lock()
        self.server: ThreadingHTTPServer | None = None
        self.port = port
        self._open()
        self._flapping = threading.Event()
        self._flapper: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def _open(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                received = now_ms()
                # "down" is set once the listener is closed: a request that got in before it
                # closed is answered 200, as in "ok".
                mode = "ok" if receiver.mode == "down" else receiver.mode
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                signed = verify_signature(SECRET, dict(self.headers.items()), body)
                try:
                    message = json.loads(body)["delayMsg"]
                except (ValueError, KeyError):
                    message = {"msgId": "?", "retry": -1, "triggerTime": 0}
                if mode == "slow":
                    time.sleep(2 * PUSH_TIMEOUT_MS / 1000)
                status = 500 if mode == "error" else 200
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                except OSError:
                    pass          # the pusher gave up (slow) or its node died
                with receiver.lock:
                    receiver.posts.append(Post(message["msgId"], int(message["retry"]),
                                               int(message["triggerTime"]), received,
                                               now_ms(), mode, signed, _signed_at(
                                                   self.headers, received)))

            def log_message(self, *args) -> None:
                pass

        for attempt in range(50):
            try:
                self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
                break
            except OSError:       # the port is not free again yet after "down"
                if attempt == 49:
                    raise
                time.sleep(0.1)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()

    def _close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def flap(self) -> None:
        self._flapping.set()
        self._flapper = threading.Thread(target=self._flap, daemon=True)
        self._flapper.start()

    def _flap(self) -> None:
        """Modes in their MODES shares, dealt from a shuffled deck (each share in tenths), so
        that every failing mode comes within a deck's flaps (independent draws once gave
        eleven flaps without a 500)."""
        rng = random.Random()
        deck: list[str] = []
        while self._flapping.is_set():
            if not deck:
                deck = [mode for mode, share in MODES.items() for _ in range(round(share * 10))]
                rng.shuffle(deck)
            mode = deck.pop()
            with self.lock:
                self.modes_seen[mode] = self.modes_seen.get(mode, 0) + 1
            if mode == "down":
                self._close()
            self.mode = mode
            time.sleep(rng.uniform(*FLAP_S))
            if self.server is None:
                self._open()

    def steady(self) -> None:
        """Answer 200 from now on (the drain)."""
        self._flapping.clear()
        if self._flapper is not None:
            self._flapper.join()
        if self.server is None:
            self._open()
        self.mode = "ok"

    def stop(self) -> None:
        self._flapping.clear()
        if self._flapper is not None:
            self._flapper.join()
        self._close()


@dataclass
class PushVerdict:
    sends: dict[str, int] = field(default_factory=dict)      # outcome -> count
    posts: dict[str, int] = field(default_factory=dict)      # the receiver's answers
    modes: dict[str, int] = field(default_factory=dict)      # how often it entered each
    answered_2xx: int = 0        # distinct messages the receiver answered 200 in time
    dead: int = 0                # dead letters after exactly maxRetry + 1 deliveries
    answered_late: int = 0       # acked on a slow 200 only (the pusher read it in time)
    again_after_2xx_in_fault: list[tuple] = field(default_factory=list)
    again_after_late_2xx: list[tuple] = field(default_factory=list)   # 200 past TIMELY_MS
    missing: list[tuple] = field(default_factory=list)       # (msgId, status, retry)
    too_many: list[tuple] = field(default_factory=list)      # (msgId, POSTs)
    early: list[tuple] = field(default_factory=list)         # (msgId, received, trigger)
    unexpected: list[str] = field(default_factory=list)
    bad_signature: list[str] = field(default_factory=list)
    again_after_2xx: list[tuple] = field(default_factory=list)   # (msgId, 2xx at, again at)

    @property
    def violations(self) -> dict[str, list]:
        return {f"push: {name}": values for name, values in (
            ("acked send never answered 2xx nor a dead letter", self.missing),
            ("pushed more than maxRetry + 1 times", self.too_many),
            ("pushed before its triggerTime", self.early),
            ("pushed but never sent", self.unexpected),
            ("bad signature", self.bad_signature),
            ("pushed again after a 2xx, no fault between", self.again_after_2xx)) if values}

    def summary(self) -> str:
        return (f"push: sends {self.sends}, POSTs {self.posts}, receiver modes {self.modes}, "
                f"answered 2xx {self.answered_2xx} (+{self.answered_late} on a slow 200), dead "
                f"letters {self.dead}, again after 2xx in a fault "
                f"{len(self.again_after_2xx_in_fault)}, after a late 2xx "
                f"{len(self.again_after_late_2xx)}, violations "
                f"{ {k: v[:5] for k, v in self.violations.items()} }")


class PushScenario:
    """The push topic's producer and receiver; ``start`` before the nemesis, ``stop_producing``
    with the workload's, ``settled`` in the drain, ``verdict`` after it."""

    def __init__(self, bases, tag: str, rate: float = 8, max_delay_ms: int = 1000) -> None:
        self.bases = bases
        self.topic = f"fault-{tag}-push"
        self.rate = rate
        self.max_delay_ms = max_delay_ms
        self.sends = History()            # the push topic's own calls
        self.receiver = Receiver()
        self.producing = threading.Event()
        self._producer: threading.Thread | None = None

    def start(self) -> "PushScenario":
        client = Client(self.sends, self.bases)
        self._admin(client, "config", "setTopicConfig", defaultSubscription="false")
        self._admin(client, "subscribe", "createSubscription", subscription=SUBSCRIPTION,
                    pushUrl=self.receiver.url, pushTimeoutMillis=PUSH_TIMEOUT_MS,
                    pushConcurrency=PUSH_CONCURRENCY, pushSecret=SECRET,
                    redeliveryDelayMillis=REDELIVERY_DELAY_MS)
        self.receiver.flap()
        self.producing.set()
        self._producer = threading.Thread(target=self._produce, daemon=True)
        self._producer.start()
        return self

    def _admin(self, client: Client, kind: str, endpoint: str, **params) -> None:
        deadline = time.monotonic() + ADMIN_CALLS_S
        while time.monotonic() < deadline:
            op, answer = client.call(kind, endpoint, self.topic, None, CALL_TIMEOUT_S,
                                     **params)
            if op.outcome == OK:
                return
            if op.outcome == FAIL:
                raise AssertionError(f"{endpoint} refused: {answer}")
            time.sleep(0.2)
        raise AssertionError(f"{endpoint} never answered 200")

    def _produce(self) -> None:
        client = Client(self.sends, self.bases, offset=1)
        rng = random.Random(7)
        next_at = time.monotonic()
        while self.producing.is_set():
            msg_id = uuid.uuid4().hex
            client.call("send", "sendMsg", self.topic, msg_id, CALL_TIMEOUT_S, msgId=msg_id,
                        msg="p", delayMillis=rng.randint(0, self.max_delay_ms),
                        maxRetry=PUSH_MAX_RETRY)
            next_at += 1 / self.rate
            time.sleep(max(0.0, next_at - time.monotonic()))
            next_at = max(next_at, time.monotonic() - 1.0)

    def stop_producing(self) -> None:
        """No more sends; the receiver answers 200 from now on."""
        self.producing.clear()
        if self._producer is not None:
            self._producer.join(timeout=CALL_TIMEOUT_S + 15)
        self.receiver.steady()

    def left(self, client: redis.Redis) -> dict[str, int]:
        """The push subscription's non-empty queues, and the topic's fan-out."""
        tk = KEYS.topic(self.topic)
        sk = tk.subscription(SUBSCRIPTION)
        pipe = client.pipeline(transaction=False)
        for name in ("waiting", "ready", "ack"):
            pipe.zcard(getattr(sk, name))
        pipe.zcard(tk.fanout)
        counts = pipe.execute()
        return {f"{self.topic} {name}": n for name, n in
                zip(("push waiting", "push ready", "push ack", "fanout"), counts) if n}

    def settled(self, world) -> bool:
        client = world.client()
        try:
            return self.left(client) == {}
        except redis.RedisError:
            return False
        finally:
            client.close()

    def stop(self) -> None:
        self.producing.clear()
        self.receiver.stop()

    # -- the verdict -----------------------------------------------------------------------
    def verdict(self, faults: list[tuple[float, float, str]]) -> PushVerdict:
        """The verdict on this run (``faults``: the run's History.faults); a message never
        answered 2xx is read back with getMsg in the push subscription."""
        client = Client(History(), self.bases)

        def read_back(msg_id: str) -> tuple[int | None, int | None]:
            op, answer = client.call("get", "getMsg", self.topic, msg_id, CALL_TIMEOUT_S,
                                     subscription=SUBSCRIPTION, msgId=msg_id)
            message = (answer or {}).get("delayMsg") or {} if op.outcome == OK else {}
            return message.get("status"), message.get("retry")

        with self.receiver.lock:
            posts, modes = list(self.receiver.posts), dict(self.receiver.modes_seen)
        v = push_verdict(self.sends.of("send"), posts, faults, read_back)
        v.modes = modes
        return v


def push_verdict(sends: list[Op], posts: list[Post], faults: list[tuple[float, float, str]],
                 read_back: Callable[[str], tuple[int | None, int | None]]) -> PushVerdict:
    """What the push topic's sends and the receiver's POSTs prove (the module's docstring);
    ``read_back(msgId)``: (status, retry) of a message never answered 2xx, after the drain."""
    v = PushVerdict()
    for op in sends:
        v.sends[op.outcome] = v.sends.get(op.outcome, 0) + 1
    for post in posts:
        v.posts[post.mode] = v.posts.get(post.mode, 0) + 1
    sent = {op.msg_id: op for op in sends if op.outcome == OK}
    maybe = {op.msg_id for op in sends if op.outcome != FAIL}
    by_id: dict[str, list[Post]] = {}
    for post in sorted(posts, key=lambda p: p.received_ms):
        by_id.setdefault(post.msg_id, []).append(post)
    for msg_id, got in by_id.items():
        if msg_id not in maybe:
            v.unexpected.append(msg_id)
        if len(got) > PUSH_MAX_RETRY + 1:
            v.too_many.append((msg_id, len(got)))
        v.bad_signature += [msg_id for post in got if not post.signed]
        trigger = sent[msg_id].trigger_ms if msg_id in sent else 0
        v.early += [(msg_id, round(p.received_ms), max(trigger, p.trigger_ms))
                    for p in got if p.received_ms < max(trigger, p.trigger_ms)]
        first_2xx = next((p for p in got if p.mode == "ok"), None)
        if first_2xx is None:
            continue
        for post in got:
            if post.received_ms > first_2xx.answered_ms:
                again = (msg_id, round(first_2xx.answered_ms), round(post.received_ms))
                in_fault = any(start <= post.received_ms and
                               end >= first_2xx.answered_ms - FAULT_MARGIN_MS
                               for start, end, _ in faults)
                timely = any(p.timely() and p.answered_ms < post.received_ms for p in got)
                (v.again_after_2xx_in_fault if in_fault else v.again_after_2xx if timely
                 else v.again_after_late_2xx).append(again)
    answered = {msg_id for msg_id, got in by_id.items() if any(p.mode == "ok" for p in got)}
    v.answered_2xx = len(answered & set(sent))
    for msg_id in sorted(set(sent) - answered):
        status, retry = read_back(msg_id)
        modes = [p.mode for p in by_id.get(msg_id, ())]
        if status == DEAD and retry == PUSH_MAX_RETRY + 1:
            v.dead += 1
        elif status == ACKED and "slow" in modes:
            v.answered_late += 1   # its pusher read a slow 200 (a stalled process's timeout)
        else:
            v.missing.append((msg_id, status, retry, modes))
    return v
