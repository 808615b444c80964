"""The topic's due time as the request scripts keep it (includes/message.lua due_lowered):
no queue head is read; each call lowers KEYS[19] to the lowest due-time score it wrote when
that is below what is on record. On one Redis KEYS[19] is the namespace due index itself; on
a Cluster (driven here by passing the Cluster's keys) it is the topic's own due record, which
the scheduler's visits set to the exact due time and the caller copies to the index."""

from __future__ import annotations

import pytest

from delayqueue.core.scripts import Scripts

from support.lua import CHANNEL, DEFAULTS, END_LIFE, HOUR, NS, T0, pull, pulled_ids, send


@pytest.fixture
def cluster_scripts(redis_client):
    """The scripts with the keys a Cluster gets: KEYS[19] is the topic's due record."""
    scripts = Scripts(redis_client)
    scripts.lowers_due_index = False
    return scripts


def lowered(reply) -> int:
    return reply.lowered_due


def test_on_a_cluster_a_send_lowers_the_record_only_below_what_it_holds(
        cluster_scripts, tk, redis_client):
    assert lowered(send(cluster_scripts, tk, "a", T0, T0 + 5000)) == T0 + 5000
    assert redis_client.get(tk.due) == str(T0 + 5000)
    assert lowered(send(cluster_scripts, tk, "b", T0, T0 + 6000)) == -1
    assert lowered(send(cluster_scripts, tk, "c", T0, T0 + 1000)) == T0 + 1000
    assert redis_client.get(tk.due) == str(T0 + 1000)
    # the index is the caller's to lower (another Cluster slot): never written here
    assert redis_client.zscore(tk.namespace_due, tk.topic) is None


def test_on_a_cluster_the_scheduler_visit_sets_the_exact_due_time_and_drops_it_when_empty(
        cluster_scripts, tk, redis_client):
    send(cluster_scripts, tk, "a", T0, T0 + 1000)
    send(cluster_scripts, tk, "b", T0, T0 + 5000)
    visit = cluster_scripts.promote(tk, T0 + 1000, 1000, CHANNEL)
    assert redis_client.get(tk.due) == str(visit.due) == str(T0 + 5000)
    # a delivery's ack deadline (T0 + 31 s) is later than the record: nothing to lower
    reply = pull(cluster_scripts, tk, T0 + 1000)
    assert pulled_ids(reply) == ["a"] and reply.lowered_due == -1
    cluster_scripts.ack(tk, "a", T0 + 1001, END_LIFE)
    cluster_scripts.delete(tk, "b", T0 + 1002, END_LIFE, True)
    # nothing live, nothing retained past its purge: the visit drops the record
    cluster_scripts.expire(tk, T0 + 10 * HOUR, 1000, END_LIFE, DEFAULTS)
    assert redis_client.exists(tk.due) == 0


def test_on_one_redis_the_scripts_lower_the_namespace_due_index_themselves(
        scripts, tk, redis_client):
    assert lowered(send(scripts, tk, "a", T0, T0 + 5000)) == T0 + 5000
    assert redis_client.zscore(tk.namespace_due, tk.topic) == T0 + 5000
    assert lowered(send(scripts, tk, "b", T0, T0 + 6000)) == -1
    assert lowered(send(scripts, tk, "c", T0, T0 + 1000)) == T0 + 1000
    assert redis_client.zscore(tk.namespace_due, tk.topic) == T0 + 1000
    assert redis_client.exists(tk.due) == 0          # no record of its own
    # a claimed topic (due_claim.lua's score, beyond any real time) is lowered as well
    redis_client.zadd(tk.namespace_due, {tk.topic: 2**53 - 1})
    assert lowered(send(scripts, tk, "d", T0, T0 + 7000)) == T0 + 7000


@pytest.mark.parametrize("topic", ["orders:eu/1", "a b", "é", "x" * 200])
def test_the_topic_is_found_in_its_key_whatever_its_name(scripts, redis_client, topic):
    tk = NS.topic(topic)
    send(scripts, tk, "a", T0, T0 + 5000)
    assert redis_client.zscore(tk.namespace_due, topic) == T0 + 5000


def head_reads(redis_client, call) -> int:
    """ZRANGE calls: how the scripts read a set's head (ranges by score are other work)."""
    redis_client.config_resetstat()
    call()
    return redis_client.info("commandstats").get("cmdstat_zrange", {}).get("calls", 0)


def test_the_single_message_path_reads_no_queue_head_but_the_next_trigger(
        scripts, tk, redis_client):
    """sendMsg, a pull of one and its ack: no set head is read for the due time; a pull reads
    the waiting head once (what to promote, and its answer's next trigger time)."""
    assert head_reads(redis_client, lambda: send(scripts, tk, "a", T0, T0)) == 0
    assert head_reads(redis_client, lambda: pull(scripts, tk, T0)) == 1
    assert head_reads(redis_client, lambda: scripts.ack(tk, "a", T0 + 1, END_LIFE)) == 0
