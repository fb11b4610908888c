"""ShadowMessageAutoDiscardInterval and SafetyNetHoldTime + MessageExpirationTimeout."""

from schemas.events import AlertType
from state.replay import replay
from tests.state.scenario import DAY, Org, at


def test_discard_events_are_dropped_when_the_shadow_does_not_ask_for_two_days():
    org = Org()
    events = [
        *org.received("mbx01", "m1", 0), *org.shadowed("mbx01", "mbx02", "m1", 0),
        *org.query_ok("mbx02", "mbx01", 1),
        *org.delivered("mbx01", "m1", "mbx03", 2),
        *org.tick(3 * 24 * 60),
    ]
    result = replay(events)
    dropped = [a for a in result.alerts if a.type is AlertType.DISCARD_EVENTS_DROPPED]
    assert len(dropped) == 1 and dropped[0].decided_at_ms == at(1) + 2 * DAY
    assert result.settles("mbx01")


def test_unacknowledged_shadow_expires_after_hold_time_plus_expiration_timeout():
    org = Org()
    events = [*org.received("mbx01", "m1", 0), *org.shadowed("mbx01", "mbx02", "m1", 0)]
    for minute in range(2, 5 * 24 * 60, 2):  # the primary answers, but never with a discard for m1
        events += org.query_ok("mbx02", "mbx01", minute)
    result = replay(events)
    assert [(a.type, a.decided_at_ms) for a in result.alerts if a.type is AlertType.SHADOW_EXPIRED] == [
        (AlertType.SHADOW_EXPIRED, at(0) + 4 * DAY)]
    assert result.settles("mbx01")


def test_every_message_is_forgotten_by_its_expiry_whatever_happened():
    org = Org()
    events = [*org.received("mbx01", "m1", 0), *org.sent("mbx01", "m1", "x", 1), *org.tick(5 * 24 * 60)]
    result = replay(events)
    assert result.settles("mbx01")
    assert [o.result for o in result.outcomes] == ["expired"]
