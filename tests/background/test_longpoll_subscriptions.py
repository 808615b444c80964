"""The long-poll hub keeps held polls by (topic, subscription): a hint names a topic only and
wakes waiters of each of its subscriptions; a pull's own wake-up (more ready behind it) stays
in its subscription; each subscription has its own leader and its own memory of a quiet
pull. The hub alone, its subscriber not started: hints are delivered by ``dispatch``, as
the subscriber would."""

from __future__ import annotations

import redis

from delayqueue.background.longpoll import Hub

T = "orders"


def hub_of(redis_client: redis.Redis) -> Hub:
    return Hub(redis_client, "unused")


def test_a_hint_wakes_up_to_count_waiters_of_each_subscription(redis_client):
    hub = hub_of(redis_client)
    default = [hub.register(T) for _ in range(2)]
    billing = [hub.register(T, "billing") for _ in range(2)]
    audit = hub.register(T, "audit")
    other = hub.register("other", "billing")
    hub.dispatch(f"1 {T}")
    assert [w.event.is_set() for w in default] == [True, False]
    assert [w.event.is_set() for w in billing] == [True, False]
    assert audit.event.is_set()
    assert not other.event.is_set()                  # another topic's subscription
    hub.dispatch(f"2 {T}")
    assert all(w.event.is_set() for w in default + billing)


def test_a_wake_up_of_one_subscription_leaves_the_others_asleep(redis_client):
    hub = hub_of(redis_client)
    default, billing = hub.register(T), hub.register(T, "billing")
    hub.wake(T, 1, "billing")
    assert billing.event.is_set() and not default.event.is_set()
    hub.wake(T, 1)
    assert default.event.is_set()


def test_each_subscription_has_its_own_leader(redis_client):
    hub = hub_of(redis_client)
    first, second = hub.register(T, "billing"), hub.register(T, "billing")
    default = hub.register(T)
    assert hub.is_leader(first) and not hub.is_leader(second) and hub.is_leader(default)
    hub.unregister(first)
    assert hub.is_leader(second) and second.event.is_set()     # told to look for itself
    assert hub.held() == 2


def test_the_memory_of_a_quiet_pull_is_the_subscriptions_and_a_hint_ends_all_of_them(
        redis_client):
    hub = hub_of(redis_client)
    hub.register(T)
    hub.register(T, "billing")
    seq = hub.seq(T)
    hub.note_quiet(T, seq, None, "billing")
    assert hub.quiet(T, 0, 60, "billing") is not None
    assert hub.quiet(T, 0, 60) is None                # the default's pull saw nothing yet
    hub.note_quiet(T, seq, None)
    assert hub.quiet(T, 0, 60) is not None
    hub.dispatch(f"1 {T}")
    assert hub.quiet(T, 0, 60) is None and hub.quiet(T, 0, 60, "billing") is None


def test_the_last_waiter_of_a_topic_takes_its_state_with_it(redis_client):
    hub = hub_of(redis_client)
    a, b = hub.register(T), hub.register(T, "billing")
    hub.note_quiet(T, hub.seq(T), None, "billing")
    hub.unregister(b)
    assert hub.quiet(T, 0, 60, "billing") is None
    hub.unregister(a)
    assert hub.held() == 0 and hub._waiters == {} and hub._subscriptions == {}
    assert hub._seq == {} and hub._quiet == {}
