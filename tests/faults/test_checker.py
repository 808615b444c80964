"""The checker's group, pause, schedule and subscription verdicts on histories written by hand:
each violation it must find, and each history it must not blame (an unknown outcome counts both
ways; a deadline passed ends a delivery; acceptance order is known only for sends that did not
overlap; a pull in flight when a pause was called, or answered after the resume was sent, may
deliver; a send that overlapped a subscription's creation may or may not be in it)."""

from __future__ import annotations

from faults.checker import check
from faults.history import FAIL, OK, UNKNOWN, Delivery, History, Op, Pause, SubscriptionRun

ACK_TIMEOUT_MS = 2000
TOPIC = "t"


def history(*items) -> History:
    h = History()
    for item in items:
        if isinstance(item, Delivery):
            h.deliver(item)
        elif isinstance(item, Pause):
            h.pause(item)
        else:
            h.add(item)
    return h


def sent(msg_id, start, end, trigger, group="g", outcome=OK) -> Op:
    return Op("send", TOPIC, msg_id, start, end, outcome, 200, "", group,
              trigger if outcome == OK else None)


def acked(msg_id, start, end, outcome=OK, kind="ack") -> Op:
    return Op(kind, TOPIC, msg_id, start, end, outcome, 200)


def delivered(msg_id, pulled, received, trigger, retry=1, group="g") -> Delivery:
    return Delivery(TOPIC, msg_id, retry, trigger, pulled, received, group)


def verdicts(*items) -> tuple[list, list]:
    v = check(history(*items), ACK_TIMEOUT_MS)
    return v.two_outstanding, v.out_of_order


# -- two deliveries of one group outstanding at once ---------------------------------------------
def test_a_groups_next_delivered_while_its_head_is_unacked_is_two_outstanding():
    two, _ = verdicts(sent("a", 0, 5, 10), sent("b", 6, 8, 10),
                      delivered("a", 10, 12, 10), delivered("b", 300, 302, 10),
                      acked("a", 500, 510), acked("b", 600, 610))
    assert two == [(TOPIC, "g", "a", "b", 302)]


def test_one_pull_with_two_messages_of_a_group_is_two_outstanding():
    two, _ = verdicts(sent("a", 0, 5, 10), sent("b", 6, 8, 10),
                      delivered("a", 10, 12, 10), delivered("b", 10, 12, 10),
                      acked("a", 20, 30), acked("b", 20, 30))
    assert [(first, second) for _, _, first, second, _ in two] == [("a", "b")]


def test_a_redelivery_before_the_ack_deadline_is_two_outstanding_but_not_after_it():
    early = verdicts(sent("a", 0, 5, 10), delivered("a", 10, 12, 10),
                     delivered("a", 10 + ACK_TIMEOUT_MS - 50, 10 + ACK_TIMEOUT_MS - 40, 10, 2))
    late = verdicts(sent("a", 0, 5, 10), delivered("a", 10, 12, 10),
                    delivered("a", 10 + ACK_TIMEOUT_MS, 10 + ACK_TIMEOUT_MS + 5, 10, 2))
    assert [(p[2], p[3]) for p in early[0]] == [("a", "a")]
    assert late == ([], [])


def test_an_ack_or_nack_that_may_have_acted_ends_the_delivery_a_refused_one_does_not():
    for ending, blamed in ((acked("a", 100, 400, UNKNOWN), False),
                           (acked("a", 100, 110, OK, kind="nack"), False),
                           (acked("a", 100, 110, FAIL), True)):
        two, _ = verdicts(sent("a", 0, 5, 10), sent("b", 6, 8, 10),
                          delivered("a", 10, 12, 10), ending,
                          delivered("b", 200, 202, 10))
        assert bool(two) == blamed, ending


def test_ungrouped_deliveries_are_not_a_groups():
    assert verdicts(sent("a", 0, 5, 10, None), sent("b", 6, 8, 10, None),
                    delivered("a", 10, 12, 10, group=None),
                    delivered("b", 10, 12, 10, group=None)) == ([], [])


# -- delivered before an earlier message of its group ended ---------------------------------------
def test_a_message_delivered_while_an_earlier_one_of_its_group_lives_is_out_of_order():
    _, order = verdicts(sent("a", 0, 5, 100), sent("b", 6, 8, 100),    # tie: acceptance
                        delivered("b", 100, 103, 100), acked("b", 110, 115))
    assert order == [(TOPIC, "g", "a", "b", 103)]


def test_the_earlier_trigger_time_comes_first_even_from_overlapping_sends():
    _, order = verdicts(sent("a", 0, 9, 90), sent("b", 5, 8, 100),
                        delivered("b", 100, 103, 100))
    assert [(p[2], p[3]) for p in order] == [("a", "b")]


def test_nothing_is_blamed_where_the_history_does_not_prove_the_order():
    cases = {
        "overlapping sends of one triggerTime": (
            sent("a", 0, 7, 100), sent("b", 5, 8, 100), delivered("b", 100, 103, 100)),
        "the earlier one acked (may have acted) before": (
            sent("a", 0, 5, 100), sent("b", 6, 8, 100), delivered("a", 100, 101, 100),
            acked("a", 101, 150, UNKNOWN), delivered("b", 102, 160, 100)),
        "the earlier one sent after the pull began": (
            sent("b", 0, 5, 100), sent("a", 95, 101, 50), delivered("b", 100, 103, 100)),
        "the earlier one's send unknown": (
            sent("a", 0, 5, 100, outcome=UNKNOWN), sent("b", 6, 8, 100),
            delivered("b", 100, 103, 100)),
        "a redelivery: the head was delivered before": (
            sent("a", 0, 5, 100), sent("b", 6, 8, 100), delivered("b", 100, 103, 100, 2)),
        "another group": (
            sent("a", 0, 5, 100, "h"), sent("b", 6, 8, 100), delivered("b", 100, 103, 100)),
    }
    for name, items in cases.items():
        assert verdicts(*items)[1] == [], name


def test_a_group_delivered_in_order_one_at_a_time_is_clean():
    v = check(history(sent("a", 0, 5, 100), sent("b", 6, 8, 100), sent("c", 9, 10, 50),
                      delivered("c", 100, 102, 50), acked("c", 103, 104),
                      delivered("a", 105, 106, 100), acked("a", 107, 108, kind="nack"),
                      delivered("a", 109, 110, 100, 2), acked("a", 111, 112),
                      delivered("b", 113, 114, 100), acked("b", 115, 116)), ACK_TIMEOUT_MS)
    assert (v.two_outstanding, v.out_of_order, v.grouped) == ([], [], 3)
    assert "group: two outstanding at once" not in v.violations


# -- delivered while its topic was paused ---------------------------------------------------------
# The topic is paused from 100 (pauseTopic answered) to 500 (resumeTopic sent).
PAUSED = Pause(TOPIC, 100, 500)


def pulled(start, end, topic=TOPIC) -> Op:
    return Op("pull", topic, None, start, end, OK, 200)


def paused_verdict(*items):
    v = check(history(sent("a", 0, 5, 10, None), PAUSED, *items), ACK_TIMEOUT_MS)
    return v.delivered_while_paused, v.pulls_in_pause


def test_a_pause_held_and_its_messages_delivered_after_the_resume_is_clean():
    v = check(history(sent("a", 0, 5, 10, None), PAUSED,
                      pulled(150, 520), pulled(300, 450),     # held, then empty at its timeout
                      delivered("a", 150, 520, 10, group=None), acked("a", 521, 525)),
              ACK_TIMEOUT_MS)
    assert (v.delivered_while_paused, v.pauses, v.pulls_in_pause) == ([], 1, 2)
    assert not v.violations, v.summary()


def test_a_delivery_by_a_pull_sent_and_answered_within_the_pause_is_a_violation():
    found, tested = paused_verdict(pulled(200, 210), delivered("a", 200, 210, 10, group=None))
    assert found == [(TOPIC, "a", 200, 210, 100, 500)]
    assert tested == 1


def test_a_pull_in_flight_when_the_pause_was_called_may_deliver_within_it():
    # Sent at 90, before pauseTopic answered (at 100): its script may have run first.
    for start in (90, 100):
        found, tested = paused_verdict(pulled(start, 200),
                                       delivered("a", start, 200, 10, group=None))
        assert (found, tested) == ([], 0), start


def test_a_pull_answered_after_the_resume_was_sent_may_deliver():
    for end in (500, 510):
        found, tested = paused_verdict(pulled(400, end),
                                       delivered("a", 400, end, 10, group=None))
        assert (found, tested) == ([], 1), end


def test_a_pause_of_one_topic_does_not_hold_another():
    v = check(history(Op("send", "u", "a", 0, 5, OK, 200, "", None, 10), PAUSED,
                      pulled(200, 210, "u"), Delivery("u", "a", 1, 10, 200, 210)),
              ACK_TIMEOUT_MS)
    assert (v.delivered_while_paused, v.pulls_in_pause) == ([], 0)


# -- recurring schedules ----------------------------------------------------------------------
def schedule_run(first=1000, every=1000, deleted_from=6000, deleted=6010):
    from faults.history import ScheduleRun
    return ScheduleRun(TOPIC, "s", every, first, deleted_from, deleted)


def schedule_verdicts(run, *fires, allowance=1500):
    h = history(*(delivered(f"s:{fire}", fire, fire + 5, fire, group=None) for fire in fires))
    h.schedules.append(run)
    v = check(h, ACK_TIMEOUT_MS, promotion_allowance_ms=allowance)
    return v.schedule_missing, v.schedule_off_grid, v.unexpected, v.occurrences


def test_every_fire_time_due_before_the_delete_delivered_is_clean():
    # 1000..4000 are due before 6000 - 1500; 5000 may have been deleted while it waited
    missing, off, unexpected, count = schedule_verdicts(schedule_run(), 1000, 2000, 3000, 4000)
    assert (missing, off, unexpected, count) == ([], [], [], 4)
    assert schedule_verdicts(schedule_run(), 1000, 2000, 3000, 4000, 5000)[:3] == ([], [], [])


def test_a_fire_time_never_delivered_is_missing():
    missing, off, _, _ = schedule_verdicts(schedule_run(), 1000, 3000, 4000)
    assert missing == [("s", 2000)] and off == []


def test_an_occurrence_off_the_grid_or_after_the_delete_is_off_grid():
    _, off, unexpected, _ = schedule_verdicts(schedule_run(), 1000, 2000, 2500, 3000, 4000,
                                              7000)
    assert off == [("s", 2500), ("s", 7000)] and unexpected == []


def test_an_occurrence_received_before_its_fire_time_is_early():
    h = history(delivered("s:1000", 990, 995, 1000, group=None))
    h.schedules.append(schedule_run(deleted_from=1500, deleted=1510))
    assert [e[0] for e in check(h, ACK_TIMEOUT_MS).early] == ["s:1000"]


# -- named subscriptions ------------------------------------------------------------------------
# s1 and s2 were created by calls sent at 40 and answered at 50.
SUBSCRIPTIONS = [SubscriptionRun(TOPIC, "s1", 40, 50), SubscriptionRun(TOPIC, "s2", 40, 50)]


def got(msg_id, pulled, received, trigger=100, subscription=None, retry=1, group=None
        ) -> Delivery:
    return Delivery(TOPIC, msg_id, retry, trigger, pulled, received, group, subscription)


def acked_in(subscription, msg_id, start, end, outcome=OK, kind="ack") -> Op:
    return Op(kind, TOPIC, msg_id, start, end, outcome, 200, subscription=subscription)


def subscribed(*items):
    h = history(*items)
    h.subscriptions.extend(SUBSCRIPTIONS)
    return check(h, ACK_TIMEOUT_MS)


def everywhere(msg_id, at, trigger=100):
    """Delivered and acked in the default subscription, s1 and s2, one after the other."""
    items = []
    for k, name in enumerate((None, "s1", "s2")):
        start = at + 10 * k
        items += [got(msg_id, start, start + 2, trigger, name),
                  acked_in(name, msg_id, start + 3, start + 5)]
    return items


def test_every_acked_send_delivered_in_every_subscription_is_clean():
    v = subscribed(sent("a", 60, 65, 100, None), sent("b", 70, 75, 100, None),
                   *everywhere("a", 100), *everywhere("b", 200))
    assert not v.violations, v.summary()
    assert {name: sv.delivered for name, sv in v.subscriptions.items()} == {"s1": 2, "s2": 2}
    assert v.delivered == 2 and v.lost == []


def test_an_acked_send_never_delivered_in_one_subscription_fails_in_that_one():
    v = subscribed(sent("a", 60, 65, 100, None), sent("b", 70, 75, 100, None),
                   *everywhere("a", 100), *everywhere("b", 200)[:4])     # b: not in s2
    assert v.violations == {"subscription: acked send never delivered in s2": ["b"]}
    assert v.lost == [] and v.subscriptions["s1"].missing == []
    assert "delivered in s1" in " ".join(v.traces["b"])


def test_an_ack_in_one_subscription_ends_the_message_there_only():
    base = (sent("a", 60, 65, 100, None), got("a", 100, 102),
            got("a", 100, 102, subscription="s2"),
            got("a", 100, 102, subscription="s1"), acked_in("s1", "a", 103, 105))
    # s1 acked it (answered at 105); s2 and the default get it again later: no verdict.
    clean = subscribed(*base, got("a", 400, 402, subscription="s2", retry=2),
                       got("a", 500, 502, retry=2))
    assert not clean.violations, clean.summary()
    assert clean.subscriptions["s2"].redelivered == 1 and clean.redelivered == 1
    again = subscribed(*base, got("a", 400, 402, subscription="s1", retry=2))
    assert again.violations == {"subscription: again after ack in s1": ["a"]}


def test_early_or_unsent_in_a_subscription_is_a_violation():
    v = subscribed(sent("a", 60, 65, 100, None), *everywhere("a", 100)[:2],
                   got("a", 90, 95, subscription="s1"), acked_in("s1", "a", 96, 97),
                   got("a", 110, 112, subscription="s2"), acked_in("s2", "a", 113, 114),
                   got("x", 120, 122, subscription="s2"))
    assert v.violations == {"subscription: early in s1": [("a", 95, 100)],
                            "subscription: unexpected in s2": ["x"]}


def test_a_send_answered_before_the_creation_is_not_the_subscriptions():
    before = sent("a", 0, 30, 100, None)        # answered before the create was sent (40)
    v = subscribed(before, got("a", 100, 102), acked_in(None, "a", 103, 104),
                   got("a", 100, 102, subscription="s1"))
    assert v.violations == {"subscription: unexpected in s1": ["a"]}
    # ... and is owed to no subscription: only the default must deliver it.
    owed = subscribed(before, got("a", 100, 102), acked_in(None, "a", 103, 104))
    assert not owed.violations, owed.summary()


def test_nothing_is_blamed_where_the_creation_or_the_send_is_uncertain():
    cases = {
        "a send overlapping the creation, delivered only in the default": (
            sent("a", 45, 55, 100, None), got("a", 100, 102)),
        "a send overlapping the creation, delivered in s1": (
            sent("a", 30, 45, 100, None), got("a", 100, 102),
            got("a", 100, 102, subscription="s1")),
        "a send whose outcome is unknown, delivered nowhere": (
            sent("a", 60, 65, 100, None, outcome=UNKNOWN),),
        "a send whose outcome is unknown, delivered in s2 only": (
            sent("a", 60, 65, 100, None, outcome=UNKNOWN),
            got("a", 100, 102, subscription="s2")),
    }
    for name, items in cases.items():
        v = subscribed(*items)
        assert not v.violations, (name, v.violations)


def test_groups_hold_within_each_subscription_on_its_own():
    # The default has a's head outstanding while s1 delivers b: another subscription, fine.
    items = (sent("a", 60, 65, 100), sent("b", 66, 68, 100),
             got("a", 100, 102, group="g"),
             got("a", 100, 102, subscription="s1", group="g"),
             acked_in("s1", "a", 103, 104), got("b", 110, 112, subscription="s1", group="g"),
             acked_in("s1", "b", 113, 114), acked_in(None, "a", 200, 210),
             got("b", 220, 222, group="g"), acked_in(None, "b", 223, 224))
    v = subscribed(*items)
    assert v.two_outstanding == [] and v.subscriptions["s1"].two_outstanding == []
    # Within s2, b delivered while a is outstanding and unacked: two at once, out of order.
    v = subscribed(*items, got("a", 300, 302, subscription="s2", group="g"),
                   got("b", 310, 312, subscription="s2", group="g"))
    s2 = v.subscriptions["s2"]
    assert s2.two_outstanding == [(TOPIC, "g", "a", "b", 312)]
    assert s2.out_of_order == [(TOPIC, "g", "a", "b", 312)]
    assert set(v.violations) == {"subscription: group two outstanding at once in s2",
                                 "subscription: group delivered before an earlier one ended "
                                 "in s2"}
