"""Node liveness: state folds event times, the deadline follows the latest, expiry alerts."""

import pytest

from state.liveness import Liveness, on_deadline, on_events


def test_latest_event_time_wins_whatever_the_order():
    assert on_events(None, [5_000, 9_000, 7_000]) == Liveness(9_000)


def test_event_time_never_goes_backwards():
    assert on_events(Liveness(9_000), [3_000]) == Liveness(9_000)


def test_no_events_and_no_state_is_refused():
    with pytest.raises(ValueError):
        on_events(None, [])


def test_deadline_is_last_seen_plus_timeout():
    assert Liveness(9_000).deadline_ms(6_000) == 15_000


def test_alert_is_decided_at_the_deadline_not_at_the_wall_clock():
    alert = on_deadline("mbx03", Liveness(9_000), 6_000)
    assert (alert.node, alert.last_seen_ms, alert.decided_at_ms) == ("mbx03", 9_000, 15_000)
    assert "6s" in alert.reason
