"""Typed script replies: each names the values its script's header returns, in order, and
stays the list Redis answered."""

from __future__ import annotations

import re

import pytest

from delayqueue.core import replies
from delayqueue.core.outcome import Outcome
from delayqueue.core.replies import BUILDERS, Reply
from delayqueue.core.scripts import Scripts, lua_dir

# The scripts whose reply is a list of named values (the others answer one number; get.lua
# a message's flat fields and slot). A many-entry script's header names one entry's values.
NAMED = {
    "send": replies.SendReply, "promote": replies.PromoteReply, "pull": replies.PullReply,
    "ack": replies.AckReply, "nack": replies.NackReply, "delete": replies.DeleteReply,
    "timeout": replies.TimeoutReply, "expire": replies.ExpireReply,
    "change_visibility": replies.ChangeVisibilityReply,
    "reschedule": replies.RescheduleReply, "dead_list": replies.DeadListReply,
    "dead_redrive": replies.DeadRedriveReply, "dead_purge": replies.DeadPurgeReply,
    "migrate": replies.MigrateReply, "due_claim": replies.DueClaimReply,
    "schedule_put": replies.SchedulePutReply, "schedule_advance": replies.ScheduleAdvanceReply,
    "schedule_pause": replies.SchedulePauseReply,
    "schedule_delete": replies.ScheduleDeleteReply,
}


def header_names(script: str) -> list[str]:
    """The names in the first ``{...}`` after "Returns" in the script's header."""
    header = (lua_dir() / f"{script}.lua").read_text().split("]]", 1)[0]
    returns = header[header.index("Returns"):]
    return [name.strip() for name in re.search(r"\{([^}]*)\}", returns).group(1).split(",")]


def test_every_script_has_one_reply_builder():
    assert set(BUILDERS) == set(Scripts.NAMES) == {path.stem for path in lua_dir().glob("*.lua")}


@pytest.mark.parametrize("script", sorted(NAMED))
def test_a_reply_names_the_values_of_its_scripts_header_in_order(script):
    assert list(NAMED[script].names) == header_names(script)


def test_a_reply_reads_by_name_and_stays_the_list_redis_answered():
    reply = BUILDERS["nack"]([-3, ["b", "1"], -1, 0])
    assert reply == [Outcome.NOT_CONSUMING, ["b", "1"], -1, 0]
    assert reply.outcome is Outcome.NOT_CONSUMING
    assert (reply.fields, reply.lowered_due, reply.dead) == (["b", "1"], -1, 0)
    assert repr(reply) == ("NackReply(outcome=<Outcome.NOT_CONSUMING: -3>, fields=['b', '1'], "
                           "lowered_due=-1, dead=0)")


def test_nested_values_read_by_name_too():
    pulled = BUILDERS["pull"]([[["m1", "body", "7"]], 1, [5], 0, -1, 0, 99, 0])
    [delivery] = pulled.messages
    assert (delivery.msg_id, delivery.fields, pulled.lowered_due) == ("m1", ["body", "7"], 99)
    page = BUILDERS["dead_list"]([[["d", 123, "body"]], -1, ""])
    assert [(e.msg_id, e.death_time, e.fields) for e in page.entries] == [("d", 123, ["body"])]
    found = BUILDERS["get"](["body", "3", "slot-1", 1500, -1, ["s1", 3, 1]])
    assert (found.fields, found.slot, found.ack_deadline, found.dead_time, found.held) == \
        (["body", "3"], "slot-1", 1500, -1, {"s1": {"status": 3, "retry": 1}})
    listed = BUILDERS["list"]([[["m1", 99, "0001slot", "body"]], 99, "0001slot"])
    assert [(e.msg_id, e.score, e.member, e.fields) for e in listed.entries] == \
        [("m1", 99, "0001slot", ["body"])]
    assert (listed.next_score, listed.next_member) == (99, "0001slot")
    assert not BUILDERS["get"]([])                        # no such message


def test_a_many_entry_reply_keeps_an_entrys_error_in_its_place():
    error = RuntimeError("an entry's own writes failed")
    sent = BUILDERS["send"]([[1, ["a"], -1], error, [4, ["c"], 7]])
    assert sent[1] is error
    assert [(r.outcome, r.lowered_due) for r in (sent[0], sent[2])] == [
        (Outcome.OK, -1), (Outcome.DUPLICATE, 7)]


def test_a_reply_class_names_its_values_in_declaration_order():
    class Pair(Reply):
        first: int
        second: str

    assert Pair.names == ("first", "second")
    assert Pair([1, "x"]).second == "x"
