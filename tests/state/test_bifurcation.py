"""Bifurcation and side-effect messages: the copy goes only when every fork is processed."""

from schemas.events import AlertType
from state.parameters import ModelConfig, parameters_from
from state.replay import replay
from tests.state.scenario import Org
from tests.state.timelines import crash_with_a_fork_pending


def forked(org):
    return [
        *org.received("mbx01", "m1", 0, recipients=["a@contoso.com", "b@contoso.com"]),
        *org.shadowed("mbx01", "mbx02", "m1", 0),
        *org.sent("mbx01", "m1", "mbx03", 1, fork="f1", recipients=["a@contoso.com"]),
        *org.sent("mbx01", "m1", "mbx04", 1, fork="f2", recipients=["b@contoso.com"]),
        *org.acked("mbx01", "m1", "mbx03", 2, fork="f1"),
    ]


def test_one_fork_done_keeps_the_shadow():
    org = Org()
    state = replay([*forked(org), *org.query_ok("mbx02", "mbx01", 3)]).states["mbx01"]
    assert state.messages["m1"].primary_done_ms is None
    assert state.pairs["mbx02"].pending_discards == set()


def test_every_fork_done_releases():
    org = Org()
    events = [*forked(org), *org.acked("mbx01", "m1", "mbx04", 3, fork="f2"),
              *org.query_ok("mbx02", "mbx01", 4, discarded=["m1"])]
    assert replay(events).settles("mbx01")


def test_promotion_resubmits_only_the_unfinished_fork():
    org = Org()
    events = [*forked(org), *org.heartbeats_failing("mbx02", "mbx01", 4, 4 * 60)]
    commands = replay(events).commands
    assert [(c.message.fork_id, c.next_hop) for c in commands] == [("f2", "mbx04")]


def test_dsn_holds_its_parent_until_it_is_processed_too():
    org = Org()
    events = [
        *org.received("mbx01", "m1", 0), *org.shadowed("mbx01", "mbx02", "m1", 0),
        *org.dsn("mbx01", "d1", parent="m1", at=1),
        *org.delivered("mbx01", "m1", "mbx03", 2),
    ]
    state = replay(events).states["mbx01"]
    assert state.messages["m1"].primary_done_ms is None, "the DSN is still pending"
    events += [*org.delivered("mbx01", "d1", "smtp.fabrikam.com", 3)]
    state = replay(events).states["mbx01"]
    assert state.messages["m1"].primary_done_ms is not None
    events += [*org.query_ok("mbx02", "mbx01", 4, discarded=["m1"])]
    assert replay(events).settles("mbx01")


def test_boundary_crossing_ends_tracking_of_that_fork():
    org = Org()
    events = [
        *org.received("mbx01", "m1", 0), *org.shadowed("mbx01", "mbx02", "m1", 0),
        *org.sent("mbx01", "m1", "smtp.fabrikam.com", 1, outside=True),
        *org.crossed("mbx01", "m1", "smtp.fabrikam.com", 2),
        *org.query_ok("mbx02", "mbx01", 3, discarded=["m1"]),
    ]
    result = replay(events)
    assert result.settles("mbx01")
    assert result.alerts == []


def test_an_answer_from_a_new_queue_database_brings_no_discard_notification_of_a_fork():
    """mbx01 hands f1 of m1 (a@fabrikam.com) to gw-fabrikam at 2, after mbx02's last answered query at 1, and comes
    back with a new queue database before mbx02 asks again; mbx02's answer at 5 names it (the feed shows no
    restart). "Discard notifications are stored on disk" (003), in the database that is gone: the answer has none
    for f1, whose next hop's shadow queue still holds the copy, and mbx02, which "promotes the shadow messages as
    primary messages, and transmits the messages to the next hop" (003), resends f1 too: a@ gets m1 twice. Before,
    the twin took the answer to bring f1's notification and forecast no duplicate."""
    from schemas.events import AlertType
    from tests.state.scenario import at
    org = Org()
    events = [*org.received("mbx01", "m1", 0, recipients=(), external=("a@fabrikam.com", "b@tailspin.com")),
              *org.shadowed("mbx01", "mbx02", "m1", 0), *org.query_ok("mbx02", "mbx01", 1),
              *org.sent("mbx01", "m1", "gw-fabrikam", 2, fork="f1", recipients=("a@fabrikam.com",), outside=True),
              *org.acked("mbx01", "m1", "gw-fabrikam", 2, fork="f1"),
              *org.sent("mbx01", "m1", "gw-tailspin", 2, fork="f2", recipients=("b@tailspin.com",), outside=True),
              *org.query_ok("mbx02", "mbx01", 5, db="dbP2")]
    result = replay(events)
    assert [(a.decided_at_ms, [(m.message.internal_id, m.recipients) for m in a.messages]) for a in result.alerts
            if a.type is AlertType.DUPLICATE_DELIVERY_EXPECTED] == [(at(5), [("m1", ("a@fabrikam.com",))])]


def _duplicates(result):
    from schemas.events import AlertType
    return [(a.decided_at_ms, [(m.message.internal_id, m.recipients) for m in a.messages]) for a in result.alerts
            if a.type is AlertType.DUPLICATE_DELIVERY_EXPECTED]


def test_a_fork_delivered_again_after_its_discard_notification_is_resubmitted_with_its_new_recipients():
    """f1 of m1 reaches a@contoso.com's mailbox on mbx03 at 2, and mbx02's answered query at 3 brings its discard
    notification; at 4 f1 reaches b@contoso.com's mailbox on mbx03's other database, after the last answer, while
    f2 (c@contoso.com) waits. mbx01 back with a new queue database at 6: mbx02 promotes m1, and f1's queue on it
    ("each next hop for the primary message requires separate shadow queues", 003) is no longer empty, since no
    notification of b's delivery reached it: it resubmits f1, which arrives twice. Before, the notification of 3
    still counted for the fork as it was at 4, and the twin forecast no duplicate."""
    from tests.state.scenario import at
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0),
              *org.received("mbx01", "m1", 1, recipients=("a@contoso.com", "b@contoso.com", "c@contoso.com")),
              *org.shadowed("mbx01", "mbx02", "m1", 1),
              *org.delivered_to_mailbox("mbx01", "m1", "mbx03", 2, recipients=("a@contoso.com",), fork="f1"),
              *org.sent("mbx01", "m1", "mbx04", 2, fork="f2", recipients=("c@contoso.com",)),
              *org.query_ok("mbx02", "mbx01", 3),
              *org.delivered_to_mailbox("mbx01", "m1", "mbx03", 4, recipients=("b@contoso.com",), fork="f1"),
              *org.query_failed("mbx02", "mbx01", 5), *org.started("mbx01", "dbP2", 6)]
    result = replay(events)
    assert _duplicates(result) == [(at(6), [("m1", ())])]  # mailbox users: duplicate detection hides it
    assert [(c.message.fork_id, c.recipients) for c in result.commands] == [("f2", ("c@contoso.com",))]


def _served_in_part(org, fork=None):
    """mbx01 sends m1 to gw-fabrikam for a@ and b@fabrikam.com at 2 (as `fork`), which takes a@ and defers b@; mbx02's
    query at 3 is answered, and mbx01 is back with a new queue database at 6."""
    return [*org.started("mbx01", "dbP1", 0),
            *org.received("mbx01", "m1", 1, recipients=(), external=("a@fabrikam.com", "b@fabrikam.com")),
            *org.shadowed("mbx01", "mbx02", "m1", 1),
            *org.sent("mbx01", "m1", "gw-fabrikam", 2, fork=fork, recipients=("a@fabrikam.com", "b@fabrikam.com"),
                      outside=True),
            *org.delivered_to_mailbox("mbx01", "m1", "gw-fabrikam", 2, recipients=("a@fabrikam.com",), fork=fork),
            *org.deferred("mbx01", "m1", "gw-fabrikam", 2, fork=fork, recipients=("b@fabrikam.com",)),
            *org.query_ok("mbx02", "mbx01", 3),
            *org.query_failed("mbx02", "mbx01", 5), *org.started("mbx01", "dbP2", 6)]


def test_a_fork_known_by_its_hop_alone_and_served_in_part_is_resubmitted_whatever_the_answer_after_it():
    """mbx01 hands m1 to gw-fabrikam for a@ and b@fabrikam.com at 2 (no fork id: a log's SEND, the lab's relay);
    gw-fabrikam takes a@ and defers b@. That next hop's fork is not fully processed, so mbx02's answered query at 3
    brings no discard notification of it ("Removing the shadow messages from the shadow queues after all expected
    discard notifications are received", 003): promoting m1 when mbx01 is back with a new queue database at 6, mbx02
    resends the whole fork, and a@ gets m1 twice. A fork known by its hop alone may always be such a part (a DEFER
    names no hop), so the twin counts it as not notified, as it does for a processed message. Before, an unprocessed
    message's fork known by its hop was left out of the forecast, and the twin forecast no duplicate."""
    from tests.state.scenario import at
    result = replay(_served_in_part(Org()))
    assert _duplicates(result) == [(at(6), [("m1", ("a@fabrikam.com",))])]
    assert [c.recipients for c in result.commands] == [("b@fabrikam.com",)]


def test_a_fork_served_in_part_brings_no_discard_notification_until_its_other_recipients_are_served():
    """mbx01 sends f1 of m1 to gw-fabrikam for a@ and b@fabrikam.com at 2; gw-fabrikam takes a@ and defers b@. That
    next hop's fork is not fully processed, so mbx02's answered query at 3 brings no discard notification of it
    ("Removing the shadow messages from the shadow queues after all expected discard notifications are received",
    003): promoting m1 when mbx01 is back with a new queue database at 6, mbx02 resends f1 whole, and a@ gets m1
    twice. Before, the answer at 3 counted as f1's notification and the twin forecast no duplicate."""
    from tests.state.scenario import at
    org = Org()
    events = _served_in_part(org, fork="f1")
    result = replay(events)
    assert _duplicates(result) == [(at(6), [("m1", ("a@fabrikam.com",))])]
    assert [c.recipients for c in result.commands] == [("b@fabrikam.com",)]
    served = [*events[:-3], *org.delivered_to_mailbox("mbx01", "m1", "gw-fabrikam", 2.5,
                                                       recipients=("b@fabrikam.com",), fork="f1")]
    again = replay([*served, *org.query_ok("mbx02", "mbx01", 3, discarded=("m1",))])
    assert again.settles("mbx01"), "served whole, f1's notification comes and the copy goes"


def test_a_fork_served_in_part_and_deferred_before_brings_no_discard_notification_either():
    """As above, the deferral of b@ logged before the delivery to a@, and f1 first named by that deferral."""
    from tests.state.scenario import at
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0),
              *org.received("mbx01", "m1", 1, recipients=(), external=("a@fabrikam.com", "b@fabrikam.com")),
              *org.shadowed("mbx01", "mbx02", "m1", 1),
              *org.deferred("mbx01", "m1", "gw-fabrikam", 2, fork="f1", recipients=("b@fabrikam.com",)),
              *org.delivered_to_mailbox("mbx01", "m1", "gw-fabrikam", 2.1, recipients=("a@fabrikam.com",), fork="f1"),
              *org.query_ok("mbx02", "mbx01", 3),
              *org.query_failed("mbx02", "mbx01", 5), *org.started("mbx01", "dbP2", 6)]
    assert _duplicates(replay(events)) == [(at(6), [("m1", ("a@fabrikam.com",))])]


def test_a_fork_resubmitted_within_the_duplicate_detection_window_is_hidden_from_its_mailbox_user():
    """timelines.crash_with_a_fork_pending with a ShadowResubmitTimeSpan of 30 minutes: f1, delivered to a@ after
    mbx02's last answer (1), comes again when mbx02 resubmits it at 31, within her mailbox's duplicate detection
    (1 hour, 004): the alert names nobody. At the 3-hour default it names her (the timeline)."""
    short = ModelConfig(defaults=parameters_from({"shadow_resubmit_time_span": "30m"}))
    duplicates = [a for a in replay(crash_with_a_fork_pending().events, short).alerts
                  if a.type is AlertType.DUPLICATE_DELIVERY_EXPECTED]
    assert [(m.message.internal_id, m.recipients) for m in duplicates[0].messages] == [("m1", ())]
    assert duplicates[0].reason.endswith("mailbox users see none (duplicate detection) and no recipient is outside the"
                                         " organisation"), "not 'the listed recipients outside the organisation"\
                                                           " (0 message(s)) may receive them twice'"
