"""Refusals: every refusing outcome a script can answer maps to one error, with a code and a
text naming the parameter, and every transition answers through that one table."""

from __future__ import annotations

import re

import pytest
from test_bounded_work import make_runtime

from delayqueue.core.clock import ManualClock
from delayqueue.core.errors import DelayQueueError, Unavailable
from delayqueue.core.outcome import Outcome
from delayqueue.core.refusal import REFUSALS, refusal
from delayqueue.core.requests import SendRequest
from delayqueue.core.scripts import lua_dir

# A caller's bug, never a client's request: answered 500 like any script failure.
NOT_A_REFUSAL = {Outcome.BAD_ARGUMENT}
REFUSING = [o for o in Outcome if o < 0 and o not in NOT_A_REFUSAL]


def refusing_outcomes_in_header(script: str) -> set[Outcome]:
    if script == "get":
        return {Outcome.NO_MESSAGE}      # get.lua answers an empty reply for it
    header = (lua_dir() / f"{script}.lua").read_text().split("]]", 1)[0]
    return {o for o in REFUSING if re.search(rf"\b{o.name}\b", header)}


def test_every_refusal_a_script_header_names_has_one_row_and_no_row_is_dead():
    scripts = {path.stem for path in lua_dir().glob("*.lua")}
    named = {(script, outcome) for script in scripts
             for outcome in refusing_outcomes_in_header(script)}
    assert set(REFUSALS) == named


@pytest.mark.parametrize("script, outcome", sorted(REFUSALS))
def test_each_refusal_has_a_client_error_code_and_names_its_parameter(script, outcome):
    row = REFUSALS[(script, outcome)]
    assert row.error.code in (400, 404, 409, 429)
    error = refusal(script, outcome, "orders", "m1")
    assert type(error) is row.error
    if outcome == Outcome.NOT_WRITTEN:    # about the batch, not the entry: it was fine
        assert error.msg.startswith("not written: ")
        return
    if script.startswith("schedule_"):     # the schedule scripts: msg_id is the scheduleId
        assert error.msg.startswith("scheduleId: ") and "'m1'" in error.msg
        return
    if script.startswith("subscription_") or outcome == Outcome.NO_SUBSCRIPTION:
        assert error.msg.split(":")[0] in ("subscription", "defaultSubscription")
        assert "'orders'" in error.msg
        return
    about_topic = outcome in (Outcome.BACKLOG, Outcome.NO_TOPIC)
    about_group = outcome == Outcome.OTHER_GROUP
    assert error.msg.split(":")[0] in (("topic",) if about_topic else ("groupId",)
                                       if about_group else ("msgId", "receipt"))
    assert ("'orders'" if about_topic else "'m1'") in error.msg


def test_an_outcome_that_is_not_a_refusal_answers_no_error():
    assert all(refusal("ack", outcome, "t", "m") is None
               for outcome in Outcome if outcome >= 0)


def test_a_refusal_without_a_row_answers_500_never_a_success():
    error = refusal("delete", Outcome.NOT_DELIVERED, "t", "m")
    assert isinstance(error, Unavailable) and error.code == 500
    assert "NOT_DELIVERED" in error.msg


@pytest.fixture
def queue(redis_url):
    """A topic 't' holding 'w' (waiting) and 'c' (consuming: delivered once)."""
    rt = make_runtime(redis_url, ManualClock())
    rt.queue.send("t", "body", msg_id="w", delay_ms=60_000)
    rt.queue.send("t", "body", msg_id="c")
    [consuming] = rt.queue.pull("t").messages
    assert consuming.msg_id == "c"
    return rt


STALE = "receipt: stale receipt: message 'c' was delivered again since (status 3, retry 1)"
NOT_LIVE = "msgId: no live message 'ghost' in topic 't'"
NO_SCHEDULE = "scheduleId: no schedule 'ghost' in topic 't'"
# (script, outcome) -> the request that meets it, and the exact text it answers.
TRANSITIONS = {
    ("ack", Outcome.NO_MESSAGE): (
        lambda rt: rt.queue.ack("t", "ghost"),
        "msgId: no live or acked message 'ghost' in topic 't'"),
    ("ack", Outcome.NOT_DELIVERED): (
        lambda rt: rt.queue.ack("t", "w"),
        "msgId: message 'w' has not been delivered yet (status 1); use deleteMsg to drop it"),
    ("ack", Outcome.STALE_RECEIPT): (lambda rt: rt.queue.ack("t", "c", "0.1"), STALE),
    ("nack", Outcome.NO_MESSAGE): (lambda rt: rt.queue.nack("t", "ghost"), NOT_LIVE),
    ("nack", Outcome.NOT_CONSUMING): (
        lambda rt: rt.queue.nack("t", "w"),
        "msgId: message 'w' is not being consumed (status 1); only status 3 can be nacked"),
    ("nack", Outcome.STALE_RECEIPT): (lambda rt: rt.queue.nack("t", "c", "0.1"), STALE),
    ("change_visibility", Outcome.NO_MESSAGE): (
        lambda rt: rt.queue.change_visibility("t", "ghost", 1000), NOT_LIVE),
    ("change_visibility", Outcome.NOT_CONSUMING): (
        lambda rt: rt.queue.change_visibility("t", "w", 1000),
        "msgId: message 'w' is not being consumed (status 1); only status 3 has an ack "
        "deadline"),
    ("change_visibility", Outcome.STALE_RECEIPT): (
        lambda rt: rt.queue.change_visibility("t", "c", 1000, "0.1"), STALE),
    ("reschedule", Outcome.NO_MESSAGE): (
        lambda rt: rt.queue.reschedule("t", "ghost", delay_ms=5), NOT_LIVE),
    ("reschedule", Outcome.CONSUMING): (
        lambda rt: rt.queue.reschedule("t", "c", delay_ms=5),
        "msgId: message 'c' is being consumed (status 3); only waiting or ready messages can "
        "be rescheduled"),
    ("delete", Outcome.NO_MESSAGE): (lambda rt: rt.queue.delete("t", "ghost"), NOT_LIVE),
    ("get", Outcome.NO_MESSAGE): (
        lambda rt: rt.queue.get("t", "ghost"), "msgId: no message 'ghost' in topic 't'"),
    ("dead_redrive", Outcome.NO_MESSAGE): (
        lambda rt: rt.admin.redrive("t", "c"), "msgId: no dead letter 'c' in topic 't'"),
    ("dead_purge", Outcome.NO_MESSAGE): (
        lambda rt: rt.admin.purge("t", "c"), "msgId: no dead letter 'c' in topic 't'"),
    ("send", Outcome.BACKLOG): (
        lambda rt: (rt.admin.set_config("t", {"maxBacklog": "2"}),
                    rt.queue.send("t", "body")),
        "topic: backlog quota exceeded: topic 't' holds its maxBacklog live messages; nothing "
        "was written"),
    ("send", Outcome.CONSUMING): (
        lambda rt: rt.queue.send("t", "new body", msg_id="c", on_duplicate="replace"),
        "msgId: message 'c' is being consumed (status 3); onDuplicate=replace replaces only a "
        "waiting or ready message; nothing was written"),
    ("send", Outcome.OTHER_GROUP): (
        lambda rt: rt.queue.send("t", "new body", msg_id="w", group_id="g",
                                 on_duplicate="replace"),
        "groupId: onDuplicate=replace must keep the groupId of message 'w' in topic 't'; "
        "nothing was written"),
    ("send", Outcome.NO_SUBSCRIPTION): (
        lambda rt: (rt.admin.set_config("t", {"defaultSubscription": "false"}),
                    rt.queue.send("t", "body")),
        "defaultSubscription: topic 't' has defaultSubscription=false and no named "
        "subscription: nobody would receive the message; nothing was written"),
    ("subscription_put", Outcome.BACKLOG): (
        lambda rt: [rt.subscriptions.create("t", f"s{i}") for i in range(33)],
        "subscription: topic 't' has the most named subscriptions max-subscriptions-per-topic "
        "allows; nothing was written"),
    ("send", Outcome.NOT_WRITTEN): (
        lambda rt: (rt.admin.set_config("t", {"maxBacklog": "3"}), _raise_first(
            rt.queue.send_batch("t", [SendRequest("a"), SendRequest("b")], atomic=True))),
        "not written: another entry of this atomic batch was refused"),
    ("schedule_delete", Outcome.NO_MESSAGE): (
        lambda rt: rt.schedules.delete("t", "ghost"), NO_SCHEDULE),
    ("schedule_pause", Outcome.NO_MESSAGE): (
        lambda rt: rt.schedules.pause("t", "ghost"), NO_SCHEDULE),
    ("schedule_advance", Outcome.NO_MESSAGE): (
        lambda rt: _advance_gone(rt), NO_SCHEDULE),
    ("pause", Outcome.NO_TOPIC): (
        lambda rt: rt.controls.pause("ghost-topic"),
        "topic: no topic 'ghost-topic': it holds no message and has no settings"),
}


def _advance_gone(rt):
    """The loop's advance of a schedule deleted since it was read: the script's refusal."""
    reply = rt.scripts.schedule_advance(rt.queue.topic_keys("t"), 0, "", "ghost", 1, 0, None,
                                        rt.queue.defaults)
    raise refusal("schedule_advance", reply.outcome, "t", "ghost")


def _raise_first(results):
    """The first entry's error, raised (an atomic batch answers one per entry)."""
    raise results[0]


def test_every_refusal_is_met_by_a_transition_below():
    assert set(TRANSITIONS) == set(REFUSALS)


@pytest.mark.parametrize("script, outcome", sorted(TRANSITIONS))
def test_a_transition_answers_its_refusal_from_the_table(queue, script, outcome):
    request, text = TRANSITIONS[(script, outcome)]
    with pytest.raises(DelayQueueError) as refused:
        request(queue)
    assert type(refused.value) is REFUSALS[(script, outcome)].error
    assert refused.value.msg == text
