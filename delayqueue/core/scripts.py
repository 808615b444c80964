"""Loads the Lua scripts once and gives each a typed method.

Every state transition is one script under ``lua/``. ``--@include NAME`` pastes
``lua/includes/NAME.lua`` in (BullMQ's habit), so shared helpers stay in one file; includes
may include others, each is pasted once (where first needed), and a missing one fails at
load time. Of each include only the top-level statements the script reaches are pasted
(lua_include.py): Redis runs a script's whole top level on every call. redis-py's
``Script`` runs EVALSHA and reloads the script on NOSCRIPT (after a Redis restart or a
failover), so a restarted Redis needs no action from us.

Every topic script takes the same keys in the same order: waiting, ready, ack, expire, dead,
config, msgs, ended, seq, groups, blocked, held of the subscription it works in, then the
topic's msgs, config, subs, fanout, refs, sexpire, due (``TopicKeys.queues`` for the default
subscription, ``SubscriptionKeys.queues`` for a named one; lua/includes/keys.lua);
a message is a record in the topic's msgs hash, read and written only by
lua/includes/message.lua. Each call is checked against
the number of keys its script reads, so a key list that drifts from a script's header fails
loudly here instead of reading the wrong key in Redis. Each method answers its script's typed
reply (replies.py), outcomes as ``outcome.Outcome``; given a ``RoundTrip`` as ``trip``, it
queues the call there instead, and the round trip's ``execute()`` answers the reply.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple, Sequence

import redis
from redis.commands.core import Script

from .keys import NamespaceKeys, SubscriptionKeys, TopicKeys
from .lua_include import ScriptSourceError, assemble_source  # noqa: F401 (re-exported)
from .outcome import Outcome
from .replies import (
    BUILDERS,
    AckReply,
    ChangeVisibilityReply,
    DeadListReply,
    DeadPurgeReply,
    DeadRedriveReply,
    DeleteReply,
    DueClaimReply,
    ExpireReply,
    GetReply,
    ListReply,
    MigrateOrderReply,
    MigrateReply,
    NackReply,
    PauseReply,
    PromoteReply,
    PullReply,
    PurgeReply,
    RescheduleReply,
    ScheduleAdvanceReply,
    ScheduleDeleteReply,
    SchedulePauseReply,
    SchedulePutReply,
    SendReply,
    SubscriptionDropReply,
    SubscriptionPutReply,
    TimeoutReply,
)
from .script_runner import RoundTrip, ScriptCall, ScriptRunner
from .topic_config import TOPIC_SETTING_NAMES, server_defaults

_KEY = re.compile(r"KEYS\[(\d+)\]")
_SLOT_HEX = re.compile(r"^local SLOT_HEX = \d+", re.MULTILINE)


def lua_dir() -> Path:
    """The scripts: shipped inside the wheel, or ``lua/`` beside the package in a checkout."""
    packaged = resources.files("delayqueue") / "lua"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[2] / "lua"


def lua_source(name: str, directory: Path | None = None) -> str:
    """The script ``name`` with every ``--@include`` resolved, each include pasted once."""
    return assemble((directory or lua_dir()) / f"{name}.lua", directory)


def assemble(path: Path, directory: Path | None = None) -> str:
    """The Lua file at ``path`` with every ``--@include`` resolved from ``directory``'s
    includes/, each include's top-level statements the file reaches and no others
    (lua_include.py; tests assemble their own probes of the includes this way)."""
    return assemble_source(path, directory or lua_dir())


def key_count(source: str) -> int:
    """How many keys a script reads: the highest ``KEYS[n]`` it names."""
    return max((int(n) for n in _KEY.findall(source)), default=0)


class SendArgs(NamedTuple):
    """One message of a send call, in send.lua's ARGV order (ttl_ms, max_retry: -1 = the
    topic's setting; attributes: JSON text, '' for none; group: its groupId, '' for none;
    replace: 1 for onDuplicate=replace, 0 for keep)."""
    msg_id: str
    body: str
    trigger_ms: int
    ttl_ms: int
    max_retry: int
    attributes: str
    group: str = ""
    replace: int = 0


class SchedulePlan(NamedTuple):
    """What a schedule script writes (recurrence.Advance, as the scripts take it): the
    occurrences (fireTime, triggerTime) in order, the new cursor, the pending fire time (-1:
    none, finished), the fire times missed and the latest fire time that has come (-1)."""
    occurrences: tuple[tuple[int, int], ...]
    cursor: int
    pending: int
    missed: int = 0
    last_fire: int = -1

    def pairs(self) -> list[int]:
        """n, then the n pairs flat, as the scripts read them."""
        return [len(self.occurrences), *(t for pair in self.occurrences for t in pair)]


class AckArgs(NamedTuple):
    """One ack of an ack call, in ack.lua's ARGV order (receipt '' = none)."""
    msg_id: str
    receipt: str


_BUILT_IN_DEFAULTS: list[str] = []


def built_in_defaults() -> list[str]:
    """The topic settings' built-in server defaults, as ARGV: what ack, delete and purge
    pass when their caller gives no ``defaults`` (tests and tools; the service always passes
    its own, which a node's configuration may change)."""
    if not _BUILT_IN_DEFAULTS:
        from delayqueue.settings.config import Settings
        _BUILT_IN_DEFAULTS.extend(server_defaults(Settings()))
    return _BUILT_IN_DEFAULTS


class Scripts:
    """One explicit method per script; keys passed in the order of each script's header.

    ``defaults`` (where a method takes it) is ``topic_config.server_defaults(settings)``: the
    server's value of every topic setting, which the script uses where the topic has none.
    """

    NAMES = tuple(BUILDERS)   # every script under lua/, by the name of its file

    def __init__(self, client: redis.Redis, directory: Path | None = None,
                 runner: ScriptRunner | None = None, slot_hex: int | None = None) -> None:
        """``slot_hex``: a test's shorter slot digest (includes/message.lua SLOT_HEX), so two
        msgIds share a digest slot; production never passes it."""
        sources = {name: lua_source(name, directory) for name in self.NAMES}
        if slot_hex is not None:
            sources = {name: _SLOT_HEX.sub(f"local SLOT_HEX = {int(slot_hex)}", text)
                       for name, text in sources.items()}
        self.key_counts = {name: key_count(text) for name, text in sources.items()}
        self._scripts: dict[str, Script] = {
            name: client.register_script(text) for name, text in sources.items()
        }
        # How a call reaches Redis (Cluster pipelines, redis-wait-replicas): script_runner.py.
        self.runner = runner or ScriptRunner(client)
        # Whether the topic scripts lower the namespace due index themselves (one Redis); on
        # a Cluster the caller lowers it to the due time a script answers (_keys).
        self.lowers_due_index = not self.runner.cluster

    def _keys(self, tk: TopicKeys | SubscriptionKeys) -> tuple[str, ...]:
        """The KEYS of a topic script: KEYS[19] is the namespace due index on one Redis (the
        script lowers it in the same call), the topic's due record on a Cluster."""
        return tk.direct_queues if self.lowers_due_index else tk.queues

    def script(self, name: str) -> Script:
        return self._scripts[name]

    def round_trip(self, client: redis.Redis | None = None) -> RoundTrip:
        """An empty round trip (on ``client``, else the scripts' own): pass it as ``trip``,
        then ``execute()`` it."""
        return RoundTrip(self.runner, client)

    def _run(self, name: str, keys: Sequence[str], args: Sequence[Any],
             trip: RoundTrip | None = None, entries: int | None = None) -> Any:
        """Run the call now and answer its typed reply, or queue it in ``trip``; ``entries``:
        how many entries a many-entry call carries (its reply is one per entry)."""
        if len(keys) != self.key_counts[name]:
            raise TypeError(f"{name}.lua reads {self.key_counts[name]} keys; "
                            f"called with {len(keys)}")
        call = ScriptCall(name, self._scripts[name], list(keys), list(args), BUILDERS[name],
                          entries)
        if trip is not None:
            trip.add(call)
            return None
        return call.build(self.runner.run(name, call.script, call.keys, call.args))

    # -- topic scripts: KEYS = TopicKeys.queues ---------------------------------------------
    def send_many(self, tk: TopicKeys, now_ms: int, channel: str, defaults: Sequence[str],
                  entries: Sequence[SendArgs], trip: RoundTrip | None = None,
                  atomic: bool = False) -> list[SendReply | Exception]:
        """Accept messages, each on its own, in one script call: a reply per entry, in
        order, or the error an entry's own writes failed with. ``atomic``: all or none
        (send.lua's header)."""
        args: list[Any] = [now_ms, channel, tk.topic, len(entries), 1 if atomic else 0]
        for entry in entries:
            args.extend(entry)
        args.extend(defaults)
        return self._run("send", self._keys(tk), args, trip, entries=len(entries))

    def send(self, tk: TopicKeys, msg_id: str, body: str, now_ms: int, trigger_ms: int,
             ttl_ms: int, max_retry: int, attributes: str, channel: str,
             defaults: Sequence[str], group: str = "", replace: bool = False) -> SendReply:
        """One message (``send_many`` of one)."""
        return _only(self.send_many(tk, now_ms, channel, defaults, [
            SendArgs(msg_id, body, trigger_ms, ttl_ms, max_retry, attributes, group,
                     1 if replace else 0)]))

    def promote(self, tk: TopicKeys, now_ms: int, limit: int, channel: str,
                trip: RoundTrip | None = None) -> PromoteReply:
        return self._run("promote", self._keys(tk), [now_ms, limit, channel, tk.topic], trip)

    def pull(self, tk: TopicKeys, now_ms: int, count: int, ack_timeout_ms: int,
             end_life_ms: int, promote_limit: int, channel: str,
             defaults: Sequence[str], push: str = "",
             trip: RoundTrip | None = None, waiting_hub: str = "") -> PullReply:
        """Hand out up to ``count`` ready messages (the API's ``batch``); ``push``: the push
        delivery loop's "push <concurrency> <timeout_ms>" (lua/pull.lua), '' for a consumer;
        ``waiting_hub``: a long poll's "<hub id> <lease_ms>" ('' for none)."""
        return self._run(
            "pull", self._keys(tk),
            [now_ms, count, ack_timeout_ms, end_life_ms, promote_limit, channel, tk.topic,
             push, waiting_hub, *defaults], trip,
        )

    def ack_many(self, tk: TopicKeys, now_ms: int, end_life_ms: int,
                 entries: Sequence[AckArgs], trip: RoundTrip | None = None,
                 channel: str = "", defaults: Sequence[str] | None = None
                 ) -> list[AckReply | Exception]:
        """Acks, each on its own, in one script call: a reply per entry, in order, or the
        error an entry's own writes failed with. ``channel``: where to publish the groups'
        next messages made ready ('' = nowhere)."""
        args: list[Any] = [now_ms, end_life_ms, channel, tk.topic, len(entries)]
        for entry in entries:
            args.extend(entry)
        args.extend(built_in_defaults() if defaults is None else defaults)
        return self._run("ack", self._keys(tk), args, trip, entries=len(entries))

    def ack(self, tk: TopicKeys, msg_id: str, now_ms: int, end_life_ms: int,
            receipt: str = "", channel: str = "",
            defaults: Sequence[str] | None = None) -> AckReply:
        """One ack (``ack_many`` of one)."""
        return _only(self.ack_many(tk, now_ms, end_life_ms, [AckArgs(msg_id, receipt)],
                                   channel=channel, defaults=defaults))

    def nack(self, tk: TopicKeys, msg_id: str, now_ms: int, end_life_ms: int, channel: str,
             defaults: Sequence[str], receipt: str = "", delay_ms: int = -1,
             trip: RoundTrip | None = None) -> NackReply:
        return self._run("nack", self._keys(tk),
                         [msg_id, now_ms, end_life_ms, receipt, delay_ms, channel, tk.topic,
                          *defaults], trip)

    def change_visibility(self, tk: TopicKeys, msg_id: str, now_ms: int, timeout_ms: int,
                          end_life_ms: int, channel: str, defaults: Sequence[str],
                          receipt: str = "", trip: RoundTrip | None = None
                          ) -> ChangeVisibilityReply:
        return self._run("change_visibility", self._keys(tk),
                         [msg_id, now_ms, timeout_ms, receipt, end_life_ms, channel, tk.topic,
                          *defaults], trip)

    def reschedule(self, tk: TopicKeys, msg_id: str, now_ms: int, trigger_ms: int,
                   channel: str) -> RescheduleReply:
        return self._run("reschedule", self._keys(tk),
                         [msg_id, now_ms, trigger_ms, channel, tk.topic])

    def delete(self, tk: TopicKeys, msg_id: str, now_ms: int, end_life_ms: int, release: bool,
               trip: RoundTrip | None = None, channel: str = "",
               defaults: Sequence[str] | None = None) -> DeleteReply:
        return self._run("delete", self._keys(tk),
                         [msg_id, now_ms, end_life_ms, 1 if release else 0, channel, tk.topic,
                          *(built_in_defaults() if defaults is None else defaults)], trip)

    def get(self, tk: TopicKeys, msg_id: str, now_ms: int | None) -> GetReply:
        """The message, or an empty reply when there is none (``now_ms`` None: an ended one
        past its retention and not yet purged is found too)."""
        return self._run("get", self._keys(tk), [msg_id, "" if now_ms is None else now_ms])

    def timeout(self, tk: TopicKeys, now_ms: int, limit: int, end_life_ms: int,
                channel: str, defaults: Sequence[str],
                trip: RoundTrip | None = None) -> TimeoutReply:
        return self._run("timeout", self._keys(tk),
                         [now_ms, limit, end_life_ms, channel, tk.topic, *defaults], trip)

    def expire(self, tk: TopicKeys, now_ms: int, limit: int, end_life_ms: int,
               defaults: Sequence[str], trip: RoundTrip | None = None,
               channel: str = "") -> ExpireReply:
        return self._run("expire", self._keys(tk),
                         [now_ms, limit, end_life_ms, channel, tk.topic, *defaults], trip)

    def list(self, tk: TopicKeys, now_ms: int, view: str, limit: int, max_bytes: int,
             cursor: tuple[int, str] | None) -> ListReply:
        """A page of the view's live messages ("waiting", "ready", "ack", "blocked") after
        ``cursor`` (score, member), as list.lua's header says."""
        score, member = cursor if cursor is not None else ("", "")
        return self._run("list", self._keys(tk), [now_ms, view, limit, max_bytes, score, member])

    def purge(self, tk: TopicKeys, now_ms: int, end_life_ms: int, cutoff: int, cursor: str,
              count: int, channel: str, budget: int,
              defaults: Sequence[str] | None = None) -> PurgeReply:
        """One slice of a topic's purge (cutoff -1: the topic's sequence now)."""
        return self._run("purge", self._keys(tk),
                         [now_ms, end_life_ms, cutoff, cursor, count, channel, tk.topic,
                          budget, *(built_in_defaults() if defaults is None else defaults)])

    def pause(self, tk: TopicKeys, paused: bool, known: bool, channel: str) -> PauseReply:
        return self._run("pause", self._keys(tk),
                         [1 if paused else 0, 1 if known else 0, channel, tk.topic])

    def dead_list(self, tk: TopicKeys, now_ms: int, limit: int, cursor_time: int | None,
                  cursor_slot: str, defaults: Sequence[str]) -> DeadListReply:
        return self._run("dead_list", self._keys(tk),
                         [now_ms, limit, "" if cursor_time is None else cursor_time,
                          cursor_slot, *defaults])

    def dead_redrive(self, tk: TopicKeys, now_ms: int, msg_id: str, limit: int, channel: str,
                     defaults: Sequence[str]) -> DeadRedriveReply:
        return self._run("dead_redrive", self._keys(tk),
                         [now_ms, msg_id, limit, channel, tk.topic, *defaults])

    def dead_purge(self, tk: TopicKeys, msg_id: str, limit: int) -> DeadPurgeReply:
        return self._run("dead_purge", self._keys(tk), [msg_id, limit])

    def dead_trim(self, tk: TopicKeys, now_ms: int, limit: int,
                  defaults: Sequence[str]) -> int:
        return self._run("dead_trim", self._keys(tk), [now_ms, limit, *defaults])

    def topic_config(self, tk: TopicKeys, reset: bool, pairs: Sequence[str],
                     reset_fields: Sequence[str] = TOPIC_SETTING_NAMES) -> Outcome:
        """Write setting, value ``pairs`` into the context's config hash, after removing
        ``reset_fields`` when ``reset`` (by default every topic setting; never the pause, nor
        a subscription's push settings unless named)."""
        dropped = list(reset_fields) if reset else []
        return self._run("topic_config", self._keys(tk), [len(dropped), *dropped, *pairs])

    def migrate(self, tk: TopicKeys, now_ms: int, msg_ids: Sequence[str]) -> MigrateReply:
        """Convert these messages from the per-message hashes of the older storage format."""
        return self._run("migrate", self._keys(tk), [tk.legacy_msg_prefix, now_ms, *msg_ids])

    def migrate_order(self, tk: TopicKeys, zset: str, members: Sequence[str]
                      ) -> MigrateOrderReply:
        """Give these members of ``zset`` ("waiting" or "ready"; records-1: bare slots) their
        acceptance order."""
        return self._run("migrate_order", self._keys(tk), [zset, *members])

    def drop_sequence(self, tk: TopicKeys) -> Outcome:
        """Drop the acceptance sequence of a topic that holds nothing else (recycling)."""
        return self._run("drop_sequence", self._keys(tk), [])

    # -- schedule scripts: KEYS = TopicKeys.queues + schedules (lua/includes/schedule.lua);
    # put and delete also the ids they keep beside it (schedule_ids) --------------------
    def schedule_put(self, tk: TopicKeys, now_ms: int, channel: str, schedule_id: str,
                     end_life_ms: int, definition: str, plan: "SchedulePlan",
                     defaults: Sequence[str]) -> SchedulePutReply:
        """Create or replace a schedule (``definition``: its JSON) with its first
        occurrences (``plan``: plan_start's)."""
        return self._run("schedule_put", (*self._keys(tk), tk.schedules, tk.schedule_ids),
                         [now_ms, channel, tk.topic, schedule_id, end_life_ms, definition,
                          plan.cursor, plan.pending, *plan.pairs(), *defaults])

    def schedule_advance(self, tk: TopicKeys, now_ms: int, channel: str, schedule_id: str,
                         gen: int, cursor: int, plan: "SchedulePlan | None",
                         defaults: Sequence[str], trip: RoundTrip | None = None
                         ) -> ScheduleAdvanceReply:
        """Write ``plan`` (made from ``gen`` and ``cursor``: a compare-and-set), or, with no
        plan, repair the waiting occurrence."""
        if plan is None:
            head: list[Any] = [-1, -1, 0, -1, 0]
        else:
            head = [plan.cursor, plan.pending, plan.missed, plan.last_fire, *plan.pairs()]
        return self._run("schedule_advance", (*self._keys(tk), tk.schedules),
                         [now_ms, channel, tk.topic, schedule_id, gen, cursor, *head,
                          *defaults], trip)

    def schedule_pause(self, tk: TopicKeys, now_ms: int, channel: str, schedule_id: str,
                       end_life_ms: int, paused: bool, gen: int, plan: "SchedulePlan | None",
                       defaults: Sequence[str]) -> SchedulePauseReply:
        """Pause (``plan`` None), or resume with ``plan`` made from ``gen``."""
        tail: list[Any] = [-1, -1, 0] if plan is None else [plan.cursor, plan.pending,
                                                            *plan.pairs()]
        return self._run("schedule_pause", (*self._keys(tk), tk.schedules),
                         [now_ms, channel, tk.topic, schedule_id, end_life_ms,
                          1 if paused else 0, gen, *tail, *defaults])

    def schedule_delete(self, tk: TopicKeys, now_ms: int, schedule_id: str,
                        end_life_ms: int) -> ScheduleDeleteReply:
        return self._run("schedule_delete", (*self._keys(tk), tk.schedules, tk.schedule_ids),
                         [now_ms, schedule_id, end_life_ms])

    # -- subscription scripts: KEYS = TopicKeys.queues or SubscriptionKeys.queues --------------
    def subscription_put(self, tk: TopicKeys, name: str, now_ms: int,
                         most: int) -> SubscriptionPutReply:
        return self._run("subscription_put", self._keys(tk), [name, now_ms, most])

    def subscription_delete(self, sk: SubscriptionKeys, drop_id: str) -> Outcome:
        return self._run("subscription_delete", self._keys(sk), [drop_id])

    def subscription_drop(self, dk: SubscriptionKeys, limit: int, now_ms: int,
                          cursor: str) -> SubscriptionDropReply:
        return self._run("subscription_drop", self._keys(dk), [limit, now_ms, cursor])

    # -- namespace scripts (bookkeeping: slot {ns}, or a registry and due index shard's) ------
    def schedule_unindex(self, nk: NamespaceKeys, member: str, seen_ms: float) -> Outcome:
        """Drop a schedule's index entry if its score is still ``seen_ms``."""
        return self._run("schedule_unindex", [nk.schedule_index], [member, seen_ms])

    def due_claim(self, nk: NamespaceKeys, now_ms: int, limit: int, claim_ms: int,
                  shard: int = 0, trip: RoundTrip | None = None) -> DueClaimReply:
        """Claim the due topics of one due index shard for a tick: their scores become
        ``claim_ms`` until ``due_set`` writes back each one's next due time (compared with
        ``claim_ms``)."""
        return self._run("due_claim", [nk.due_index(shard)], [now_ms, limit, claim_ms], trip)

    def due_set(self, nk: NamespaceKeys, topic: str, claim_ms: int, next_ms: int,
                trip: RoundTrip | None = None) -> Outcome:
        return self._run("due_set", [nk.due_of(topic)], [topic, claim_ms, next_ms], trip)

    def hint_pass(self, tk: TopicKeys, hub_id: str, leave: bool, channel: str,
                  count: int) -> int:
        """Pass ``count`` of a routed hint on to every process; ``leave``: the hub had no idle
        waiter of the topic, so it leaves the topic's hub set (lua/hint_pass.lua)."""
        return self._run("hint_pass", [tk.hubs],
                         [hub_id, 1 if leave else 0, channel, count, tk.topic])

    def recycle(self, nk: NamespaceKeys, topic: str, seen_ms: float) -> Outcome:
        return self._run("recycle", [nk.registry_of(topic), nk.due_of(topic)],
                         [topic, seen_ms])

    def monitor_flush(self, nk: NamespaceKeys, interval_start_ms: int, ttl_ms: int,
                      groups: Sequence[str], trip: RoundTrip | None = None) -> int:
        """``groups``: flat (field, op, value) triples, as monitor_flush.lua's header says."""
        return self._run("monitor_flush", [nk.monitor(interval_start_ms), nk.monitor_total],
                         [ttl_ms, *groups], trip)


def _only(replies: list) -> Any:
    """The reply of a one-entry call of a script that takes many: raised if an error."""
    [reply] = replies
    if isinstance(reply, Exception):
        raise reply
    return reply
