"""ShadowMessageAutoDiscardInterval and SafetyNetHoldTime + MessageExpirationTimeout."""

import dataclasses

import pytest

from schemas.events import AlertType
from state.replay import replay
from tests.state import timelines
from tests.state.scenario import DAY, Org, at


def test_discard_events_are_dropped_when_the_shadow_does_not_ask_for_two_days_and_its_copy_expires_unacknowledged():
    """000: "if the shadow server doesn't query the primary server for the duration specified in this
    parameter, the primary server deletes the queued discard events"; the copy stays on the shadow, and
    "Unacknowledged shadow messages eventually expire from Safety Net after the sum of the SafetyNetHoldTime
    and MessageExpirationTimeout parameter values". mbx02 stops asking after minute 1 and mbx01 delivers m1
    at 2: the events are dropped at 1 + 2 days, the copy expires at receipt + 4 days, then nothing is held."""
    org = Org()
    events = [
        *org.received("mbx01", "m1", 0), *org.shadowed("mbx01", "mbx02", "m1", 0),
        *org.query_ok("mbx02", "mbx01", 1),
        *org.delivered("mbx01", "m1", "mbx03", 2),
        *org.tick(5 * 24 * 60),
    ]
    result = replay(events)
    kinds = (AlertType.DISCARD_EVENTS_DROPPED, AlertType.SHADOW_EXPIRED)
    assert [(a.type, a.decided_at_ms) for a in result.alerts if a.type in kinds] == [
        (AlertType.DISCARD_EVENTS_DROPPED, at(1) + 2 * DAY), (AlertType.SHADOW_EXPIRED, at(0) + 4 * DAY)]
    assert result.settles("mbx01")


def test_a_shadow_back_after_its_discard_events_were_dropped_resubmits_its_copy_and_it_arrives_twice():
    """The copy outlives the dropped discard events (000, as above): mbx02, back after 2 days and an hour,
    past ShadowResubmitTimeSpan since its last contact, takes ownership of it on its own (as the lab's
    returning shadow does): m1, delivered by mbx01 at 2, is delivered twice."""
    org = Org()
    back = 2 * 24 * 60 + 60
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
              *org.received("mbx01", "m1", 0, recipients=(), external=("bob@fabrikam.com",)),
              *org.shadowed("mbx01", "mbx02", "m1", 0), *org.query_ok("mbx02", "mbx01", 1),
              *org.sent("mbx01", "m1", "gw-fabrikam", 2, recipients=("bob@fabrikam.com",), outside=True),
              *org.acked("mbx01", "m1", "gw-fabrikam", 2),
              *org.busy("mbx01", 3, back + 10, every=5),
              *org.started("mbx02", "dbS1", back), *org.promoted("mbx02", "mbx01", "m1", back + 0.2)]
    result = replay(events)
    duplicates = [a for a in result.alerts if a.type is AlertType.DUPLICATE_DELIVERY_EXPECTED]
    assert [(a.decided_at_ms, [(m.message.internal_id, m.recipients) for m in a.messages]) for a in duplicates] == [
        (at(back + 0.2), [("m1", ("bob@fabrikam.com",))])]
    assert result.settles("mbx01")


def test_unacknowledged_shadow_expires_after_hold_time_plus_expiration_timeout():
    """The primary processed m1, but no discard notification for it ever comes (the primary answers
    every query without it): the shadow copy expires from Safety Net, unacknowledged."""
    org = Org()
    events = [*org.received("mbx01", "m1", 0), *org.shadowed("mbx01", "mbx02", "m1", 0),
              *org.delivered("mbx01", "m1", "mbx03", 1)]
    for minute in range(2, 5 * 24 * 60, 2):
        events += org.query_ok("mbx02", "mbx01", minute)
    result = replay(events)
    assert [(a.type, a.decided_at_ms) for a in result.alerts] == [(AlertType.SHADOW_EXPIRED, at(0) + 4 * DAY)]
    assert result.settles("mbx01")


def test_a_message_stuck_in_a_live_primary_expires_after_message_expiration_timeout():
    """The next hop keeps refusing, heartbeats keep succeeding: Exchange expires the message at
    receipt + MessageExpirationTimeout. The twin says so then, never promotes it, keeps nothing."""
    result = replay(timelines.expiry_in_a_live_primary().events)
    expected = timelines.expiry_in_a_live_primary()
    assert [(a.type, a.decided_at_ms, [m.message.internal_id for m in a.messages]) for a in result.alerts] == [
        (AlertType.MESSAGE_EXPIRED, at(0) + 2 * DAY, ["m1"])]
    assert expected.alert_types() == [a.type for a in result.alerts]
    assert result.commands == []
    assert result.settles("mbx01")


def test_the_primarys_own_expiry_event_comes_first():
    org = Org()
    events = [*org.received("mbx01", "m1", 0), *org.shadowed("mbx01", "mbx02", "m1", 0),
              *org.deferred("mbx01", "m1", "mbx03", 1),
              *org.expired("mbx01", "m1", 36 * 60)]  # the primary's own, shorter MessageExpirationTimeout
    for minute in range(2, 3 * 24 * 60, 2):  # the first query after the expiry collects its discard
        events += org.query_ok("mbx02", "mbx01", minute, discarded=("m1",) if minute == 36 * 60 + 2 else ())
    result = replay(events)
    assert [(a.type, a.decided_at_ms) for a in result.alerts] == [(AlertType.MESSAGE_EXPIRED, at(36 * 60))]
    assert result.commands == []
    assert result.settles("mbx01")


def test_the_primarys_own_expiry_after_the_twins_leaves_the_copy_held_until_its_shadow_collects_the_discard():
    """The twin expires m1 at receipt + MessageExpirationTimeout (2 days), as mbx01 would; but mbx01 was down by
    then and expires it itself when it restarts, 15 minutes later. Its shadow mbx02, down since just before
    the expiry, still holds the copy: mbx01 back with a new queue database (its discard status gone with the
    old one), mbx02 back sees the new id and resubmits m1 (000: "a shadow server can also promote itself ...
    when the queue database of the primary server is found to have a different database ID"). Before, the
    primary's own expiry closed m1, and nothing was said at mbx02's return (hunt seed 965: 22 messages)."""
    org = Org()
    expiry = 2 * 24 * 60
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
              *org.received("mbx01", "m1", 0), *org.shadowed("mbx01", "mbx02", "m1", 0),
              *org.deferred("mbx01", "m1", "mbx03", 1)]
    for minute in range(2, expiry - 1, 2):
        events += org.query_ok("mbx02", "mbx01", minute)
    events += [*org.expired("mbx01", "m1", expiry + 15), *org.started("mbx01", "dbP2", expiry + 40),
               *org.started("mbx02", "dbS1", expiry + 90)]
    result = replay(events)
    named = [a for a in result.alerts if a.messages]
    assert [(a.type, a.decided_at_ms) for a in named[:1]] == [(AlertType.MESSAGE_EXPIRED, at(expiry))]
    assert [(a.decided_at_ms, "mbx02" in a.servers) for a in named[1:]] == [(at(expiry + 90), True)]


def test_every_message_is_forgotten_by_its_expiry_whatever_happened():
    org = Org()
    events = [*org.received("mbx01", "m1", 0), *org.sent("mbx01", "m1", "x", 1), *org.tick(5 * 24 * 60)]
    result = replay(events)
    assert result.settles("mbx01")
    assert [o.result for o in result.outcomes] == ["expired"]


def test_a_message_whose_copy_expired_does_not_expire_in_a_primary_its_shadow_cannot_reach():
    """A server that is down expires nothing, also once its message's only copy is the one in its queue.
    mbx02's copy of m1 expires at 31 (its SafetyNetHoldTime 0 + MessageExpirationTimeout 30 minutes), and its
    queries of mbx01 fail from 60 on for three days: mbx01 is down past its MessageExpirationTimeout (2 days),
    and expires m1 when it comes back, with its queue, at 3 days ("How long a message can remain in a queue
    before it expires", 003); before, the twin said MESSAGE_EXPIRED at 2 days, while mbx01 was down."""
    from state.parameters import ModelConfig, parameters_from
    from tests.state.timelines import _heartbeats_ok
    org = Org()
    config = ModelConfig(defaults=parameters_from({"safety_net_hold_time": "00:00:00"}),
                         nodes={"mbx02": parameters_from({"safety_net_hold_time": "00:00:00",
                                                          "message_expiration_timeout": "00:30:00"})})
    back = 3 * 24 * 60
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *_heartbeats_ok(org, "mbx02", "mbx01", 2, 60),
              *org.heartbeats_failing("mbx02", "mbx01", 60, back, every=30),
              *org.started("mbx01", "dbP1", back), *org.expired("mbx01", "m1", back + 0.5)]
    result = replay(events, config)
    assert [(a.type, a.decided_at_ms) for a in result.alerts] == [
        (AlertType.SHADOW_EXPIRED, at(31)), (AlertType.MESSAGE_EXPIRED, at(back + 0.5))]
    assert result.settles("mbx01")


def test_a_shadows_own_promotion_of_an_expired_message_is_no_duplicate_for_its_unserved_recipients():
    """mbx01 expires m1 (for bob@fabrikam.com) at 3 and returns its non-delivery report; mbx02, which never
    collected the discard, promotes its copy on its own at 200: bob gets m1 once, after the NDR (hunt seeds
    965, 1117). Before, the twin forecast DUPLICATE_DELIVERY_EXPECTED for bob."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.received("mbx01", "m1", 1, recipients=(),
                                                              external=("bob@fabrikam.com",)),
              *org.shadowed("mbx01", "mbx02", "m1", 1), *org.query_ok("mbx02", "mbx01", 2),
              *org.expired("mbx01", "m1", 3), *org.query_failed("mbx02", "mbx01", 4),
              *org.promoted("mbx02", "mbx01", "m1", 200)]
    result = replay(events)
    assert [a.type for a in result.alerts if a.messages] == [AlertType.MESSAGE_EXPIRED]
    assert result.settles("mbx01")


def test_a_shadows_own_promotion_of_an_expired_message_ends_it_promoted():
    """As above: mbx02's copy is what reaches bob (after the NDR), so m1 ends 'promoted' at 200, as when the twin
    promotes it (hunt seed 1269: the log twin named none of such messages as taken over). Before, 'delivered'."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.received("mbx01", "m1", 1, recipients=(),
                                                              external=("bob@fabrikam.com",)),
              *org.shadowed("mbx01", "mbx02", "m1", 1), *org.query_ok("mbx02", "mbx01", 2),
              *org.expired("mbx01", "m1", 3), *org.query_failed("mbx02", "mbx01", 4),
              *org.promoted("mbx02", "mbx01", "m1", 200)]
    result = replay(events)
    assert [(o.result, o.closed_ms) for o in result.outcomes] == [("promoted", at(200))]


def test_the_expiry_of_a_message_whose_copy_expired_first_does_not_speak_of_releasing_the_copy():
    """mbx02's copy of m1 expires at 31 (its hold 30 minutes), m1 in mbx01's queue at 2 days: MESSAGE_EXPIRED
    says the copy is gone, not that it is released once mbx02 collects the discard status (it was released at
    31, with SHADOW_EXPIRED)."""
    from state.parameters import ModelConfig, parameters_from
    from tests.state.timelines import _heartbeats_ok
    org = Org()
    config = ModelConfig(nodes={"mbx02": parameters_from({"safety_net_hold_time": "00:00:00",
                                                          "message_expiration_timeout": "00:30:00"})})
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *org.deferred("mbx01", "m1", "mbx03", 2), *_heartbeats_ok(org, "mbx02", "mbx01", 2, 60),
              *org.expired("mbx01", "m1", 2 * 24 * 60)]
    result = replay(events, config)
    expired = [a for a in result.alerts if a.type is AlertType.MESSAGE_EXPIRED]
    assert [a.decided_at_ms for a in expired] == [at(2 * 24 * 60)]
    assert "collects the discard status" not in expired[0].reason
    assert expired[0].reason.endswith("mbx02's shadow copy of it is gone already")


def test_a_message_expired_while_its_copy_was_held_ends_expired_when_the_copy_is_released():
    """mbx01 expires m1 at 3; mbx02 collects its discard at 4: m1's outcome is 'expired' (whatif's delays count
    only what was delivered or promoted). Before, the release closed it 'delivered', processed at its expiry."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.received("mbx01", "m1", 1),
              *org.shadowed("mbx01", "mbx02", "m1", 1), *org.query_ok("mbx02", "mbx01", 2),
              *org.expired("mbx01", "m1", 3), *org.query_ok("mbx02", "mbx01", 4, discarded=("m1",))]
    result = replay(events)
    assert [(o.result, o.closed_ms) for o in result.outcomes] == [("expired", at(4))]
    assert result.settles("mbx01")


def _forked(org, expire: bool):
    """m1 for a@fabrikam.com (fork f1, by gw-fabrikam) and bob@tailspin.com (f2, by gw-tailspin): f1 acknowledged at
    2 and its discard notification collected by mbx02's answered query at 3; f2 deferred (`expire`: mbx01 expires m1
    at 4, bob gets a non-delivery report), or acknowledged at 4; mbx02's query fails at 5."""
    events = [*org.started("mbx01", "dbP1", 0),
              *org.received("mbx01", "m1", 1, recipients=(), external=("a@fabrikam.com", "bob@tailspin.com")),
              *org.shadowed("mbx01", "mbx02", "m1", 1),
              *org.sent("mbx01", "m1", "gw-fabrikam", 2, fork="f1", recipients=("a@fabrikam.com",), outside=True),
              *org.acked("mbx01", "m1", "gw-fabrikam", 2, fork="f1"),
              *org.sent("mbx01", "m1", "gw-tailspin", 2, fork="f2", recipients=("bob@tailspin.com",), outside=True),
              *org.query_ok("mbx02", "mbx01", 3)]
    if expire:
        events += org.expired("mbx01", "m1", 4)
    else:
        events += org.acked("mbx01", "m1", "gw-tailspin", 4, fork="f2")
    return events + org.query_failed("mbx02", "mbx01", 5)


def _duplicates(result):
    return [(a.decided_at_ms, [(m.message.internal_id, m.recipients) for m in a.messages])
            for a in result.alerts if a.type is AlertType.DUPLICATE_DELIVERY_EXPECTED]


def test_an_expired_messages_fork_whose_discard_reached_the_shadow_is_no_duplicate_at_its_promotion():
    """"For messages with multiple recipients, each next hop for the primary message requires separate shadow
    queues", and "once the shadow server knows the primary server has successfully transmitted the message to the
    next hop, the shadow server moves the shadow message from the shadow queue into Safety Net" (003): f1's queue on
    mbx02 is empty since 3. mbx01, back at 6 with a new queue database, has mbx02 promote m1: it resubmits f2's copy
    (bob, once, after his NDR), not f1's, so a@fabrikam.com gets m1 once. Before, the twin forecast her a duplicate."""
    org = Org()
    result = replay([*_forked(org, expire=True), *org.started("mbx01", "dbP2", 6)])
    assert [a.type for a in result.alerts if a.messages] == [
        AlertType.MESSAGE_EXPIRED, AlertType.QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED]
    assert _duplicates(result) == []


def test_an_expired_messages_fork_whose_discard_reached_the_shadow_is_no_duplicate_at_the_shadows_own_promotion():
    """As above, mbx02 promoting m1 on its own at 200: nobody gets it twice."""
    org = Org()
    result = replay([*_forked(org, expire=True), *org.promoted("mbx02", "mbx01", "m1", 200)])
    assert _duplicates(result) == []
    assert [(o.result, o.closed_ms) for o in result.outcomes] == [("promoted", at(200))]


def test_a_processed_message_promoted_by_its_shadow_is_delivered_twice_only_to_the_forks_it_had_no_discard_for():
    """m1 processed at 4 (f2 acknowledged after mbx02's last answer, at 3, which brought f1's notification): mbx02,
    promoting it when mbx01 comes back at 6 with a new queue database, resubmits f2's copy alone: bob gets m1 twice,
    a@fabrikam.com once (003, as above). Before, the twin named both."""
    org = Org()
    result = replay([*_forked(org, expire=False), *org.started("mbx01", "dbP2", 6)])
    assert _duplicates(result) == [(at(6), [("m1", ("bob@tailspin.com",))])]


def _fork_failed_for_good(org, processed: bool):
    """m1 for a@fabrikam.com (f1, by gw-fabrikam) and bob@tailspin.com (f2, by gw-tailspin, which refuses it for
    good at 3: mbx01 expires that fork, bob gets a non-delivery report); f1 acknowledged at 2 (`processed`: m1 is
    fully processed at 3) or still pending; mbx02's query fails at 5 and mbx01 is back with a new queue database at
    6: mbx02 promotes m1."""
    events = [*org.started("mbx01", "dbP1", 0),
              *org.received("mbx01", "m1", 1, recipients=(), external=("a@fabrikam.com", "bob@tailspin.com")),
              *org.shadowed("mbx01", "mbx02", "m1", 1),
              *org.sent("mbx01", "m1", "gw-fabrikam", 2, fork="f1", recipients=("a@fabrikam.com",), outside=True),
              *org.sent("mbx01", "m1", "gw-tailspin", 2, fork="f2", recipients=("bob@tailspin.com",), outside=True),
              *org.expired("mbx01", "m1", 3, fork="f2")]
    if processed:
        events += org.acked("mbx01", "m1", "gw-fabrikam", 2, fork="f1")
    return events + [*org.query_failed("mbx02", "mbx01", 5), *org.started("mbx01", "dbP2", 6)]


def test_a_fork_that_failed_for_good_is_no_duplicate_when_the_shadow_resubmits_a_processed_message():
    """The fork to gw-tailspin failed for good at 3: bob had a non-delivery report and never m1. mbx02's
    resubmission of m1 reaches a@fabrikam.com twice, bob once (as the recipients of a message the primary expired,
    who "get the resubmitted copy once"). Before, the twin named bob a duplicate too."""
    org = Org()
    assert _duplicates(replay(_fork_failed_for_good(org, processed=True))) == [(at(6), [("m1", ("a@fabrikam.com",))])]


def test_a_fork_that_failed_for_good_is_no_duplicate_when_the_shadow_resubmits_an_unprocessed_message():
    """f1 still pending: mbx02's promotion resends f1 (a@, once) and f2's copy reaches bob once, after his
    non-delivery report: no duplicate at all. Before, the twin forecast bob one, as a fork processed without a
    discard notification."""
    org = Org()
    result = replay(_fork_failed_for_good(org, processed=False))
    assert _duplicates(result) == []
    assert [(c.message.fork_id, c.recipients) for c in result.commands] == [("f1", ("a@fabrikam.com",))]


@pytest.mark.parametrize("late_ms, dropped", [(0, False), (1, True)])
def test_a_query_exactly_at_the_auto_discard_interval_collects_the_discard_and_one_ms_later_does_not(late_ms, dropped):
    """The edge of ShadowMessageAutoDiscardInterval ("if the shadow server doesn't query the primary server for
    the duration specified in this parameter, the primary server deletes the queued discard events", 003): mbx02's
    last answer at 2, mbx01 delivers m1 at 3, mbx02 asks again exactly 2 days after its last answer: it collects
    m1's discard and the copy goes to Safety Net; 1 ms later the events were deleted at the interval, the copy
    stays until it expires (receipt + SafetyNetHoldTime + MessageExpirationTimeout)."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *org.query_ok("mbx02", "mbx01", 2), *org.delivered("mbx01", "m1", "mbx09", 3)]
    back = [dataclasses.replace(e, event_time_ms=e.event_time_ms + late_ms)
            for e in org.query_ok("mbx02", "mbx01", 2 + 2 * 24 * 60, discarded=() if late_ms else ("m1",))]
    result = replay([*events, *back, *org.tick(6 * 24 * 60)])
    kinds = (AlertType.DISCARD_EVENTS_DROPPED, AlertType.SHADOW_EXPIRED)
    assert [(a.type, a.decided_at_ms) for a in result.alerts if a.type in kinds] == (
        [(AlertType.DISCARD_EVENTS_DROPPED, at(2) + 2 * DAY), (AlertType.SHADOW_EXPIRED, at(1) + 4 * DAY)]
        if dropped else [])
    assert [(o.ref.internal_id, o.result) for o in result.outcomes] == [("m1", "expired" if dropped else "delivered")]


@pytest.mark.parametrize("late_ms, expired", [(-1, False), (0, False), (1, True)])
def test_a_delivery_exactly_at_message_expiration_timeout_is_a_delivery_and_one_ms_later_comes_too_late(late_ms,
                                                                                                        expired):
    """MessageExpirationTimeout, "How long a message can remain in a queue before it expires" (003): m1, received at
    0 and held by mbx02, is delivered by mbx01 (whose shadow's queries succeed) 2 days later, to the ms or one ms
    either side. At the limit it is still a delivery; 1 ms after, it expired at the limit (MESSAGE_EXPIRED) and the
    delivery changes nothing."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.received("mbx01", "m1", 0), *org.shadowed("mbx01", "mbx02", "m1", 0),
              *[e for minute in range(2, 2 * 24 * 60 + 10, 2) for e in org.query_ok("mbx02", "mbx01", minute)],
              *[dataclasses.replace(e, event_time_ms=e.event_time_ms + late_ms)
                for e in org.delivered("mbx01", "m1", "mbx09", 2 * 24 * 60)],
              *org.query_ok("mbx02", "mbx01", 2 * 24 * 60 + 11, discarded=("m1",))]
    result = replay(sorted(events, key=lambda e: e.event_time_ms))
    assert [(a.type, a.decided_at_ms) for a in result.alerts] == (
        [(AlertType.MESSAGE_EXPIRED, at(0) + 2 * DAY)] if expired else [])
    assert [(o.ref.internal_id, o.result) for o in result.outcomes] == [("m1", "expired" if expired else "delivered")]
