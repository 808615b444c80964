"""deleteMsg's script, lua/delete.lua: a live message -> deleted, or its body released."""

from __future__ import annotations

import pytest

from delayqueue.core.outcome import Outcome

from support.lua import END_LIFE, T0, assert_one_place, pull, send


@pytest.mark.parametrize("state", [1, 2, 3])
def test_delete_of_live_message_ends_it_deleted_from_every_state(scripts, tk, redis_client,
                                                                  state):
    send(scripts, tk, "a", T0, T0 if state > 1 else T0 + 100)
    if state == 3:
        pull(scripts, tk, T0)
    assert_one_place(redis_client, tk, "a", state)
    outcome, fields, _ = scripts.delete(tk, "a", T0, END_LIFE, False)
    assert outcome == 1 and fields[6] == "7"
    assert_one_place(redis_client, tk, "a", 7)
    assert scripts.ack(tk, "a", T0, END_LIFE)[0] == Outcome.NO_MESSAGE
    assert pull(scripts, tk, T0 + 1000)[0] == []


def test_delete_with_release_removes_the_body(scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0)
    assert scripts.delete(tk, "a", T0, END_LIFE, True)[0] == Outcome.OK
    assert_one_place(redis_client, tk, "a", None)
    assert redis_client.exists(tk.msgs, tk.ended) == 0


def test_delete_of_ended_message_is_not_found_but_release_drops_its_body(scripts, tk,
                                                                         redis_client):
    send(scripts, tk, "a", T0, T0)
    pull(scripts, tk, T0)
    scripts.ack(tk, "a", T0, END_LIFE)
    assert scripts.delete(tk, "a", T0, END_LIFE, False) == [Outcome.NO_MESSAGE, [], -1]
    assert_one_place(redis_client, tk, "a", 4)
    assert scripts.delete(tk, "a", T0, END_LIFE, True) == [Outcome.NO_MESSAGE, [], -1]
    assert redis_client.exists(tk.msgs, tk.ended) == 0
    assert scripts.delete(tk, "ghost", T0, END_LIFE, False) == [Outcome.NO_MESSAGE, [], -1]
