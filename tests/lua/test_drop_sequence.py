"""lua/drop_sequence.lua: the recycler drops a topic's acceptance sequence only while the topic
holds nothing else."""

from __future__ import annotations

from delayqueue.core.outcome import Outcome

from support.lua import DEFAULTS, END_LIFE, T0, configure, pull, send


def test_the_sequence_of_an_empty_topic_is_dropped_and_a_new_send_starts_again(
        scripts, tk, redis_client):
    send(scripts, tk, "a", T0, T0)
    assert redis_client.get(tk.seq) == "1"
    assert scripts.drop_sequence(tk) == Outcome.KEPT               # it holds "a"
    pull(scripts, tk, T0)
    scripts.ack(tk, "a", T0, END_LIFE, "", "")
    scripts.expire(tk, T0 + END_LIFE, 1000, END_LIFE, DEFAULTS)     # purges the ended record
    assert redis_client.exists(*tk.holdings) == 0
    assert scripts.drop_sequence(tk) == Outcome.OK
    assert redis_client.exists(tk.seq) == 0
    send(scripts, tk, "b", T0 + END_LIFE, T0 + END_LIFE)
    assert redis_client.get(tk.seq) == "1"


def test_a_topic_with_settings_keeps_its_sequence(scripts, tk, redis_client):
    configure(scripts, tk, maxRetry=3)
    redis_client.set(tk.seq, 7)
    assert scripts.drop_sequence(tk) == Outcome.KEPT
    assert redis_client.get(tk.seq) == "7"
