"""Discard status, XQDISCARD answers, release into Safety Net: nothing is left behind."""

from schemas.events import AlertType
from state.replay import replay
from tests.state.scenario import Org, at


def test_happy_path_releases_every_copy_and_leaves_no_state_or_deadline():
    org = Org()
    events = [
        *org.started("mbx01", "dbP1", 0),
        *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
        *org.delivered("mbx01", "m1", "mbx03", 2),
        *org.query_ok("mbx02", "mbx01", 3, discarded=["m1"]),
    ]
    result = replay(events)
    assert result.alerts == [] and result.commands == []
    assert result.settles("mbx01")
    assert [(o.result, o.redundant) for o in result.outcomes] == [("delivered", True)]


def test_copy_is_kept_until_the_shadow_collects_the_discard_notification():
    org = Org()
    events = [
        *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
        *org.delivered("mbx01", "m1", "mbx03", 2),
        *org.query_ok("mbx02", "mbx01", 3, discarded=[]),  # answered, but not yet for m1
    ]
    state = replay(events).states["mbx01"]
    assert "m1" in state.messages and state.pairs["mbx02"].pending_discards == {"m1"}
    assert replay([*events, *org.query_ok("mbx02", "mbx01", 5, discarded=["m1"])]).settles("mbx01")


def test_shadow_discarded_event_alone_releases_the_copy():
    org = Org()
    events = [
        *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
        *org.delivered("mbx01", "m1", "mbx03", 2),
    ]
    from schemas import events as ev
    from tests.state.scenario import ref
    discarded = ev.ShadowDiscarded(event_id="x", event_time_ms=at(3), node="mbx02", primary_server="mbx01",
                                   message=ref("m1"))
    assert replay([*events, discarded]).settles("mbx01")


def test_message_without_shadow_is_released_when_delivered():
    org = Org()
    events = [*org.received("mbx01", "m1", 1), *org.delivered("mbx01", "m1", "mbx03", 2)]
    result = replay(events)
    assert result.settles("mbx01")
    assert [o.result for o in result.outcomes] == ["delivered"]


def test_no_alert_while_heartbeats_succeed_for_a_long_time():
    org = Org()
    events = [*org.received("mbx01", "m1", 0), *org.shadowed("mbx01", "mbx02", "m1", 0)]
    for minute in range(2, 600, 2):
        events += org.query_ok("mbx02", "mbx01", minute)
    result = replay(events)
    assert [a.type for a in result.alerts] == []
    assert result.commands == []
    assert AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED not in {a.type for a in result.alerts}


def test_an_answer_given_before_the_copy_was_stored_brings_no_notification_though_applied_after_it():
    """The timeline `a_copy_a_fast_shadow_stored_after_its_answer_had_no_discard_notification` (hunt seed 1617:
    mbx02's clock ahead; its answer at 1.2 by that clock came before it stored m1's copy at 1.25, so it brought no
    discard notification of m1, delivered at 1.1), with the answer in a later micro-batch than the copy's report, as
    the streaming twin may read them (a watermark delay of a minute lets it in): m1 is resubmitted at
    ShadowResubmitTimeSpan and arrives twice, as the reference decides from the events in time order. Before, the
    report undid only the notifications applied before it, and the answer applied after it still counted."""
    from tests.state import timelines
    from tests.streaming.harness import OperatorHarness
    timeline = timelines.a_copy_a_fast_shadow_stored_after_its_answer_had_no_discard_notification()
    events = sorted(timeline.events, key=lambda e: e.event_time_ms)
    answer = [e for e in events if e.event_time_ms == at(1.2)]
    first = [e for e in events if e.event_time_ms <= at(1.25) and e not in answer]
    rest = [e for e in events if e.event_time_ms > at(1.25)]
    expected = replay(events)
    assert [a.type for a in expected.alerts] == [AlertType.DUPLICATE_DELIVERY_EXPECTED]
    harness = OperatorHarness(watermark_delay_ms=60_000, servers=("mbx01", "mbx02", "mbx09"))
    for batch in (first, answer, rest):
        harness.events(batch)
    harness.advance(events[-1].event_time_ms)
    assert harness.late_rows == 0
    assert [a.alert_id for a in harness.alerts] == [a.alert_id for a in expected.alerts]
