"""A silent feed is not a dead shadow: the rule in state/README.md, "The rule for a silent feed"."""

from schemas.events import AlertType
from state.replay import replay
from tests.state import timelines
from tests.state.scenario import HOUR, Org, at


def test_when_every_server_falls_silent_the_twin_forecasts_the_promotion_and_says_the_feed_stopped():
    timeline = timelines.silent_feed()
    result = replay(timeline.events)
    stopped = [a for a in result.alerts if a.type is AlertType.EVENTS_STOPPED]
    assert len(stopped) == 1
    assert stopped[0].servers == ("mbx01", "mbx02", "mbx03")
    assert "mbx03 2026-01-01T00:08:00Z" in stopped[0].reason, "each server's last event time"
    assert AlertType.MESSAGE_AT_RISK not in {a.type for a in result.alerts}
    assert AlertType.SHADOW_SERVER_UNREACHABLE not in {a.type for a in result.alerts}


def test_one_events_stopped_alert_for_the_whole_topology_however_many_groups_notice():
    org = Org()
    events = [*org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *org.received("mbx02", "m2", 1), *org.shadowed("mbx02", "mbx01", "m2", 1, db="dbP2"),
              *org.tick(5 * 60)]
    result = replay(events)
    assert [a.type for a in result.alerts].count(AlertType.EVENTS_STOPPED) == 1
    assert {(c.holder, c.decided_at_ms) for c in result.commands} == {("mbx02", at(1) + 3 * HOUR),
                                                                      ("mbx01", at(1) + 3 * HOUR)}


def test_while_another_server_publishes_the_silent_shadow_is_down_and_the_message_at_risk():
    timeline = timelines.silent_shadow_and_primary_while_others_publish()
    result = replay(timeline.events)
    assert [a.type for a in result.alerts] == [AlertType.SHADOW_SERVER_UNREACHABLE, AlertType.MESSAGE_AT_RISK]
    assert result.commands == []
    assert AlertType.EVENTS_STOPPED not in {a.type for a in result.alerts}
